//! The plan on fixture events (`events/`) and on generated batches, table-driven.

use serde_json::json;
use stream_runtime::FailureKind;
use stream_runtime::fixture::{Change, event};
use stream_runtime::wire::Batch;

use super::*;

fn fixture(name: &str) -> String {
    let path = format!("{}/events/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Each request's messages as (record, eventID) pairs.
fn shape(requests: &Requests) -> Vec<Vec<(usize, &str)>> {
    requests.iter().map(|r| r.iter().map(|m| (m.origin, m.dedup.as_str())).collect()).collect()
}

#[test]
fn fixtures_plan_their_requests_and_refusals() {
    type Case = (&'static str, usize, Vec<Vec<(usize, &'static str)>>, Vec<usize>);
    let cases: [Case; 4] = [
        // Requests follow the records' order, and a second change of an item starts a new one.
        (
            "changes.json",
            MAX_BATCH_BYTES,
            vec![vec![(0, "e1")], vec![(1, "e2"), (2, "e3")], vec![(3, "e4")]],
            vec![],
        ),
        // The message holding U+FFFF is refused for good; the batch goes on around it.
        ("refused.json", MAX_BATCH_BYTES, vec![vec![(0, "e10"), (2, "e12")]], vec![1]),
        // A queue whose largest message is smaller than every message: all refused, nothing sent.
        ("changes.json", 100, vec![], vec![0, 1, 2, 3]),
        ("refused.json", 100, vec![], vec![0, 1, 2]),
    ];
    for (name, max, requests, refused) in cases {
        let text = fixture(name);
        let batch = Batch::parse(&text).expect("the fixture is an event");
        let planned = plan(&batch.records, max);
        assert_eq!(shape(&planned.plan), requests, "{name} at {max} bytes");
        let failed: Vec<usize> = planned.failures.iter().map(|f| f.record).collect();
        assert_eq!(failed, refused, "{name} at {max} bytes");
        assert!(planned.failures.iter().all(|f| f.failure.kind == FailureKind::RecordPermanent));
    }
}

#[test]
fn a_message_carries_the_record_and_groups_by_the_items_keys() {
    let text = fixture("changes.json");
    let batch = Batch::parse(&text).expect("the fixture is an event");
    let planned = plan(&batch.records, MAX_BATCH_BYTES);
    let all: Vec<&Message> = planned.plan.iter().flatten().collect();
    let by_event = |id: &str| all.iter().find(|m| m.dedup == id).copied().expect("planned");
    let (first, second, other) = (by_event("e1"), by_event("e2"), by_event("e3"));
    assert_eq!(first.group, second.group, "one item, one group");
    assert_ne!(first.group, other.group);
    assert_eq!(first.group.len(), 64);
    let body: Value = serde_json::from_str(&second.body).expect("a message is JSON");
    assert_eq!(body["eventName"], "MODIFY");
    assert_eq!(body["sequenceNumber"], "200");
    assert_eq!(body["keys"], serde_json::json!({"id": {"S": "a"}}));
    assert_eq!(body["newImage"]["state"], serde_json::json!({"S": "paid"}));
    assert_eq!(body["oldImage"]["state"], serde_json::json!({"S": "new"}));
    let removed: Value = serde_json::from_str(&by_event("e4").body).expect("JSON");
    assert!(removed.get("newImage").is_none(), "a REMOVE has no new image");
}

/// Generated batches: every request within SQS's limits, one message per item in each, and
/// every item's messages in their records' order across the requests.
#[test]
fn requests_keep_sqs_limits_and_each_items_order() {
    for (records, items, size) in [(1, 1, 10), (25, 1, 10), (25, 25, 10), (200, 7, 100), (60, 60, 150_000)] {
        let event = generated(records, items, size);
        let batch = Batch::parse(&event).expect("generated events read");
        let planned = plan(&batch.records, MAX_BATCH_BYTES);
        assert!(planned.failures.is_empty());
        let mut sent = Vec::new();
        for request in &planned.plan {
            assert!(!request.is_empty() && request.len() <= MAX_BATCH_ENTRIES);
            assert!(request.iter().map(|m| m.body.len()).sum::<usize>() <= MAX_BATCH_BYTES);
            let mut groups: Vec<&str> = request.iter().map(|m| m.group.as_str()).collect();
            groups.sort_unstable();
            groups.dedup();
            assert_eq!(groups.len(), request.len(), "one message per item in a request");
            sent.extend(request.iter().map(|m| (m.group.clone(), m.origin)));
        }
        assert_eq!(sent.len(), records, "every record sent once");
        for (i, (group, origin)) in sent.iter().enumerate() {
            let later_of_same = sent[i + 1..].iter().filter(|(g, _)| g == group);
            assert!(later_of_same.clone().all(|(_, o)| o > origin), "an item's messages in order");
        }
    }
}

/// `records` MODIFY records over `items` items, each new image holding `size` bytes of text.
fn generated(records: usize, items: usize, size: usize) -> String {
    let changes = (0..records).map(|i| {
        let id = format!("item-{}", i % items);
        Change::modify(json!({"id": {"S": id}}))
            .new_image(json!({"id": {"S": id}, "text": {"S": "x".repeat(size)}}))
            .old_image(json!({"id": {"S": id}}))
            .event_id(format!("ev{i}"))
            .sequence(1000 + i)
    });
    event(changes).to_string()
}
