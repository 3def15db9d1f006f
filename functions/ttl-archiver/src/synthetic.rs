//! Deterministic synthetic TTL batches, for benchmarks and tests.
//!
//! [`ttl_batch`] yields REMOVE records made by TTL, each with the deleted item in `OldImage`:
//! session-like items with a string key, numbers, a map of attributes, a list, a string set, a
//! boolean and the TTL attribute itself, about 1 KB of event JSON per record. Deletion times
//! advance by `step_secs` per record from `start_epoch`. The same seed always gives the same batch.

use std::collections::HashMap;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use serde_dynamo::{AttributeValue, Item};
use stream_runtime::fixture::Change;

/// The source table every synthetic record names.
pub const TABLE: &str = "sessions";

const WORDS: [&str; 8] = ["checkout", "browse", "search", "cart", "login", "profile", "support", "settings"];

/// A batch of `records` TTL deletes.
pub fn ttl_batch(records: usize, seed: u64, start_epoch: i64, step_secs: f64) -> Event {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut event = Event::default();
    event.records = (0..records)
        .map(|i| {
            #[allow(clippy::cast_precision_loss, reason = "record counts are far below 2^52")]
            let at = start_epoch as f64 + step_secs * i as f64;
            record(&mut rng, i, at)
        })
        .collect();
    event
}

fn item(rng: &mut fastrand::Rng, i: usize, deleted_at: f64) -> Item {
    let s = |v: String| AttributeValue::S(v);
    let n = |v: String| AttributeValue::N(v);
    let word = |rng: &mut fastrand::Rng| WORDS[rng.usize(..WORDS.len())].to_owned();
    let mut attrs = HashMap::new();
    attrs.insert("page".to_owned(), s(word(rng)));
    attrs.insert("clicks".to_owned(), n(rng.u32(..10_000).to_string()));
    attrs.insert("referrer".to_owned(), s(format!("https://example.com/{}", word(rng))));
    let mut item = HashMap::new();
    item.insert("pk".to_owned(), s(format!("USER#{:06}", rng.u32(..1_000_000))));
    item.insert("sk".to_owned(), s(format!("SESSION#{i:08}")));
    item.insert(
        "started_at".to_owned(),
        s(format!("2026-11-{:02}T{:02}:{:02}:00Z", 1 + rng.u8(..28), rng.u8(..24), rng.u8(..60))),
    );
    item.insert("duration_ms".to_owned(), n(rng.u64(..3_600_000).to_string()));
    item.insert("score".to_owned(), n(format!("{}.{:02}", rng.u16(..1000), rng.u8(..100))));
    item.insert("attributes".to_owned(), AttributeValue::M(attrs));
    item.insert("pages".to_owned(), AttributeValue::L((0..rng.usize(1..5)).map(|_| s(word(rng))).collect()));
    item.insert("tags".to_owned(), AttributeValue::Ss(vec![word(rng), format!("v{}", rng.u8(..9))]));
    item.insert("active".to_owned(), AttributeValue::Bool(rng.bool()));
    #[allow(clippy::cast_possible_truncation, reason = "synthetic epochs fit in i64")]
    item.insert("expires_at".to_owned(), n(format!("{}", deleted_at as i64 - 60)));
    Item::from(item)
}

fn record(rng: &mut fastrand::Rng, i: usize, deleted_at: f64) -> EventRecord {
    let old = item(rng, i, deleted_at);
    let keys: HashMap<&str, &AttributeValue> =
        ["pk", "sk"].into_iter().filter_map(|k| Some((k, old.get(k)?))).collect();
    Change::remove(serde_json::to_value(&keys).unwrap_or_default())
        .old_image(serde_json::to_value(&old).unwrap_or_default())
        .by_ttl()
        .event_id(format!("{:032x}", i + 1))
        .sequence(49_000_000_000_000_000_000_u128 + i as u128)
        .at(deleted_at)
        .size(400)
        .table(TABLE)
        .record()
        .unwrap_or_default()
}
