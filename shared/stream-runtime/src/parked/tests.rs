//! Tests of parked records: their keys and their pinned version-1 body.

use crate::EventRecord;
use crate::fixture::Change;
use crate::wire::WireRecord;
use chrono::{TimeZone, Utc};
use io_policy::Failure;
use serde_json::{Value, json};

use super::{body, key};

/// A record of the pinned vector in docs/formats.md: as Lambda sends it, but for the fields that
/// vector was written without.
fn record(seq: Option<&str>, event_id: &str) -> EventRecord {
    let change = Change::modify(json!({"id": {"S": "af34"}}))
        .new_image(json!({"id": {"S": "af34"}, "count": {"S": "seven"}}))
        .old_image(json!({"id": {"S": "af34"}}))
        .size(40)
        .event_id(event_id)
        .without("/eventVersion")
        .without("/dynamodb/ApproximateCreationDateTime");
    let change = match seq {
        Some(seq) => change.sequence(seq),
        None => change.without("/dynamodb/SequenceNumber"),
    };
    change.record().unwrap()
}

/// The body of `r` parked by the aggregator, whole as `aws_lambda_events` writes it.
fn parked(r: &EventRecord, failure: &Failure, at: chrono::DateTime<Utc>) -> Vec<u8> {
    let whole = serde_json::to_value(r).ok();
    body("counter-aggregator", &WireRecord::from_event_record(r), whole, failure, at)
}

#[test]
fn keys_are_the_records_own() {
    let cases = [
        (Some("4100000000000001"), "e/1?x", "parked/f/0000000000000000000000004100000000000001-e1x.json"),
        (Some("7"), "", "parked/f/0000000000000000000000000000000000000007.json"),
        (None, "abc", "parked/f/none-abc.json"),
        (Some("not-a-number"), "abc", "parked/f/none-abc.json"),
    ];
    for (seq, id, expected) in cases {
        let r = record(seq, id);
        assert_eq!(key("parked/", "f", &WireRecord::from_event_record(&r)), expected);
    }
}

#[test]
fn the_body_is_version_1_with_the_whole_record() {
    let r = record(Some("4100000000000001"), "e1");
    let at = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    let failure =
        Failure::record_permanent("shard COUNTER#a#SHARD#1 has S \"seven\" where an integer `count` belongs");
    let text = String::from_utf8(parked(&r, &failure, at)).unwrap();
    assert!(text.ends_with('\n'));
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["v"], 1);
    assert_eq!(doc["function"], "counter-aggregator");
    assert_eq!(doc["kind"], "record-permanent");
    assert_eq!(doc["error"], failure.message);
    assert_eq!(doc["parkedAt"], "2026-11-23T12:00:00Z");
    assert_eq!(doc["eventID"], "e1");
    assert_eq!(doc["sequenceNumber"], "4100000000000001");
    // The record round-trips, images and all.
    let back: EventRecord = serde_json::from_value(doc["record"].clone()).unwrap();
    assert_eq!(back, r);
    assert_eq!(doc["record"]["dynamodb"]["NewImage"]["count"], json!({"S": "seven"}));
}

#[test]
fn the_body_bytes_are_pinned() {
    // The vector in docs/formats.md: a change to the layout must come with a new version.
    let at = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    let failure =
        Failure::record_permanent("shard COUNTER#a#SHARD#1 has S \"seven\" where an integer `count` belongs");
    let r = record(Some("4100000000000001"), "e1");
    let text = String::from_utf8(parked(&r, &failure, at)).unwrap();
    let (head, _) = text.split_once(r#","record":"#).unwrap();
    assert_eq!(
        head,
        concat!(
            r#"{"error":"shard COUNTER#a#SHARD#1 has S \"seven\" where an integer `count` belongs","#,
            r#""eventID":"e1","function":"counter-aggregator","kind":"record-permanent","#,
            r#""parkedAt":"2026-11-23T12:00:00Z""#
        )
    );
    assert_eq!(
        key("parked/", "counter-aggregator", &WireRecord::from_event_record(&r)),
        "parked/counter-aggregator/0000000000000000000000004100000000000001-e1.json"
    );
}
