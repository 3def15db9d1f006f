//! Deterministic synthetic counter-table batches, for benchmarks and tests.
//!
//! [`increments`] simulates clients incrementing `counters` counters of `shards` shards each by
//! -2..=6, with an occasional shard removal, and records every change as a stream record with
//! both images, as DynamoDB streams an `ADD`. The same seed always gives the same batch.

use std::collections::HashMap;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use serde_json::json;
use stream_runtime::fixture::Change;

/// A batch of `records` shard changes.
pub fn increments(records: usize, counters: u64, shards: u64, seed: u64) -> Event {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut counts: HashMap<String, i128> = HashMap::new();
    let mut event = Event::default();
    event.records = (0..records)
        .map(|i| {
            let pk = format!("COUNTER#c{}#SHARD#{}", rng.u64(..counters), rng.u64(..shards));
            let old = counts.get(&pk).copied();
            let new = match old {
                Some(_) if rng.u8(..50) == 0 => None,
                _ => Some(old.unwrap_or(0) + i128::from(rng.i8(-2..=6))),
            };
            let name = match (old, new) {
                (None, _) => "INSERT",
                (Some(_), None) => "REMOVE",
                (Some(_), Some(_)) => "MODIFY",
            };
            match new {
                Some(v) => counts.insert(pk.clone(), v),
                None => counts.remove(&pk),
            };
            record(i, name, &pk, old, new)
        })
        .collect();
    event
}

fn record(i: usize, name: &str, pk: &str, old: Option<i128>, new: Option<i128>) -> EventRecord {
    let image = |v: Option<i128>| v.map(|v| json!({"pk": {"S": pk}, "count": {"N": v.to_string()}}));
    let mut change = Change::named(name, json!({"pk": {"S": pk}}))
        .event_id(format!("{:032x}", i + 1))
        .sequence(49_000_000_000_000_000_000_u128 + i as u128)
        .at(1_795_168_800)
        .size(60)
        .table("counters");
    if let Some(old) = image(old) {
        change = change.old_image(old);
    }
    if let Some(new) = image(new) {
        change = change.new_image(new);
    }
    change.record().unwrap_or_default()
}
