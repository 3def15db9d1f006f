//! Deterministic synthetic counter-table batches, for benchmarks and tests.
//!
//! [`increments`] simulates clients incrementing `counters` counters of `shards` shards each by
//! -2..=6, with an occasional shard removal, and records every change as a stream record with
//! both images, as DynamoDB streams an `ADD`. The same seed always gives the same batch.

use std::collections::HashMap;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use serde_json::json;

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
    let mut dynamodb = json!({
        "ApproximateCreationDateTime": 1_795_168_800,
        "Keys": {"pk": {"S": pk}},
        "SequenceNumber": (49_000_000_000_000_000_000_u128 + i as u128).to_string(),
        "SizeBytes": 60,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    });
    if let Some(old) = image(old) {
        dynamodb["OldImage"] = old;
    }
    if let Some(new) = image(new) {
        dynamodb["NewImage"] = new;
    }
    serde_json::from_value(json!({
        "eventID": format!("{:032x}", i + 1),
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/counters/stream/2026-11-21T00:00:00.000",
        "dynamodb": dynamodb,
    }))
    .unwrap_or_default()
}
