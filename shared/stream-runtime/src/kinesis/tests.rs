//! Kinesis events as Kinesis Data Streams for DynamoDB writes them, turned into change records;
//! the change time's unit told from its size; malformed records named; and why the adapter is
//! needed: `aws_lambda_events` misreads the Kinesis time.

use base64::Engine as _;
use chrono::Datelike as _;
use serde_json::{Value, json};

use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use super::{ChangeTime, KinesisError, Precision, decode};

const STREAM: &str = "arn:aws:kinesis:eu-west-1:123456789012:stream/issues-changes";

/// A Kinesis record whose data is `data`, at Kinesis sequence number `seq`.
fn kinesis(seq: &str, data: &Value) -> Value {
    let data = base64::engine::general_purpose::STANDARD.encode(data.to_string());
    json!({
        "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": "ABC", "sequenceNumber": seq,
                    "data": data, "approximateArrivalTimestamp": 1.8e9},
        "eventSource": "aws:kinesis", "eventVersion": "1.0",
        "eventID": format!("shardId-000000000000:{seq}"), "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/r", "awsRegion": "eu-west-1",
        "eventSourceARN": STREAM,
    })
}

/// A change record as Kinesis Data Streams for DynamoDB writes it.
fn change(name: &str, id: &str, at: u64, identity: &Value) -> Value {
    let image = |state: &str| json!({"id": {"S": id}, "state": {"S": state}});
    let mut dynamodb = json!({"ApproximateCreationDateTime": at, "Keys": {"id": {"S": id}}, "SizeBytes": 45});
    if name != "INSERT" {
        dynamodb["OldImage"] = image("open");
    }
    if name != "REMOVE" {
        dynamodb["NewImage"] = image("closed");
    }
    json!({"awsRegion": "eu-west-1", "eventID": format!("ev-{id}"), "eventName": name,
           "userIdentity": identity, "recordFormat": "application/json", "tableName": "issues",
           "dynamodb": dynamodb, "eventSource": "aws:dynamodb"})
}

fn event(records: &[Value]) -> Vec<u8> {
    json!({"Records": records}).to_string().into_bytes()
}

#[test]
fn kinesis_records_become_change_records_with_their_precise_times() {
    let ttl = json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
    let bytes = event(&[
        kinesis("4960000000000000000001", &change("INSERT", "a", 1_795_000_000_123, &Value::Null)),
        kinesis("4960000000000000000002", &change("MODIFY", "a", 1_795_000_000_123_456, &Value::Null)),
        kinesis("4960000000000000000003", &change("REMOVE", "b", 1_795_000_001_000_001, &ttl)),
    ]);
    let batch = decode(&bytes).unwrap();
    assert_eq!(batch.event.records.len(), 3);
    let expected_times = [
        (1_795_000_000_123_000, Precision::Milliseconds),
        (1_795_000_000_123_456, Precision::Microseconds),
        (1_795_000_001_000_001, Precision::Microseconds),
    ];
    for (i, (record, (micros, precision))) in batch.event.records.iter().zip(expected_times).enumerate() {
        let json = serde_json::to_value(record).unwrap();
        // The record's version is its change time in microseconds; its place, the Kinesis
        // sequence number, is kept for the checkpoint.
        assert_eq!(json["dynamodb"]["SequenceNumber"], micros.to_string());
        assert_eq!(
            batch.places.sequence_numbers().nth(i),
            Some(format!("496000000000000000000{}", i + 1).as_str())
        );
        assert_eq!(json["eventSourceARN"], "arn:aws:dynamodb:eu-west-1:123456789012:table/issues");
        assert_eq!(json["eventSource"], "aws:dynamodb");
        assert_eq!(json["dynamodb"]["StreamViewType"], "NEW_AND_OLD_IMAGES");
        assert_eq!(batch.changed_at[i], ChangeTime { micros, precision }, "record {i}");
        // The record's time as precise as it came.
        assert_eq!(
            record.change.approximate_creation_date_time.timestamp_micros(),
            i64::try_from(micros).unwrap()
        );
    }
    let names: Vec<&str> = batch.event.records.iter().map(|r| r.event_name.as_str()).collect();
    assert_eq!(names, ["INSERT", "MODIFY", "REMOVE"]);
    let json = |i: usize| serde_json::to_value(&batch.event.records[i]).unwrap();
    assert_eq!(json(1)["dynamodb"]["OldImage"]["state"]["S"], "open");
    assert_eq!(json(1)["dynamodb"]["NewImage"]["state"]["S"], "closed");
    assert_eq!(json(1)["eventID"], "ev-a");
    // TTL's identity is kept (the archiver's filter and check read it); a null one is absent.
    assert_eq!(json(2)["userIdentity"], ttl);
    assert!(batch.event.records[0].user_identity.is_none());
}

#[test]
fn the_change_times_unit_is_told_from_its_size() {
    let cases = [
        (1_795_000_000, Some((1_795_000_000_000_000, Precision::Seconds))),
        (1_795_000_000_123, Some((1_795_000_000_123_000, Precision::Milliseconds))),
        (1_795_000_000_123_456, Some((1_795_000_000_123_456, Precision::Microseconds))),
        // The edges: 2001-09-09 and 2286-11-20 in each unit.
        (1_000_000_000, Some((1_000_000_000_000_000, Precision::Seconds))),
        (9_999_999_999, Some((9_999_999_999_000_000, Precision::Seconds))),
        (1_000_000_000_000, Some((1_000_000_000_000_000, Precision::Milliseconds))),
        (9_999_999_999_999_999, Some((9_999_999_999_999_999, Precision::Microseconds))),
        // Between the units, and outside them all.
        (999_999_999, None),
        (10_000_000_000, None),
        (999_999_999_999, None),
        (10_000_000_000_000, None),
        (10_000_000_000_000_000, None),
        (0, None),
        (u64::MAX, None),
    ];
    for (raw, expected) in cases {
        let got = ChangeTime::from_raw(raw).map(|t| (t.micros, t.precision));
        assert_eq!(got, expected, "{raw}");
    }
}

#[test]
fn a_record_that_is_no_dynamodb_change_names_itself_and_what_is_wrong() {
    let good = change("INSERT", "a", 1_795_000_000_123, &Value::Null);
    let with = |pointer: &str, value: Value| {
        let mut data = good.clone();
        *data.pointer_mut(pointer).unwrap() = value;
        data
    };
    let mut not_base64 = kinesis("7", &good);
    not_base64["kinesis"]["data"] = json!("%%%");
    let mut wrong_arn = kinesis("7", &good);
    wrong_arn["eventSourceARN"] = json!("arn:aws:dynamodb:eu-west-1:123456789012:table/issues/stream/x");
    let mut no_sequence = kinesis("7", &good);
    no_sequence["kinesis"].as_object_mut().unwrap().remove("sequenceNumber");
    let cases = [
        (not_base64, "Kinesis record 1 (7): kinesis.data is not base64"),
        (kinesis("7", &json!("plain text")), "Kinesis record 1 (7): recordFormat \"\""),
        (
            kinesis("7", &with("/recordFormat", json!("application/x-amz-ion-1.0"))),
            "recordFormat \"application/x-amz-ion-1.0\": not a DynamoDB change record",
        ),
        (kinesis("7", &with("/tableName", Value::Null)), "no tableName string"),
        (
            kinesis("7", &with("/dynamodb/ApproximateCreationDateTime", json!(1.5e9))),
            "dynamodb.ApproximateCreationDateTime is not a whole number",
        ),
        (
            kinesis("7", &with("/dynamodb/ApproximateCreationDateTime", json!(12))),
            "dynamodb.ApproximateCreationDateTime 12 is no time between 2001 and 2286",
        ),
        (wrong_arn, "is not a Kinesis stream's ARN"),
        (no_sequence, "Kinesis record 1 (none): no kinesis.sequenceNumber string"),
        (kinesis("7", &with("/eventName", json!(3))), "not a DynamoDB change record"),
    ];
    for (bad, message) in cases {
        let bytes = event(&[kinesis("6", &good), bad]);
        let error = decode(&bytes).unwrap_err();
        assert!(matches!(error, KinesisError::Record { index: 1, .. }), "{error}");
        assert!(error.to_string().contains(message), "{error} lacks {message:?}");
    }
    let not_an_event = decode(b"{\"Records\": 3}").unwrap_err();
    assert_eq!(not_an_event.to_string(), "not a Kinesis event: no Records list");
}

/// Why the adapter exists: `aws_lambda_events` reads `ApproximateCreationDateTime` as seconds. A
/// Kinesis record's milliseconds become a date 50,000 years ahead, and its microseconds fail.
#[test]
fn aws_lambda_events_misreads_the_kinesis_time() {
    use aws_lambda_events::event::dynamodb::StreamRecord;
    let read = |at: u64| {
        let data = change("INSERT", "a", at, &Value::Null);
        serde_json::from_value::<StreamRecord>(data["dynamodb"].clone())
    };
    let millis = read(1_795_000_000_123).unwrap();
    assert!(millis.approximate_creation_date_time.year() > 50_000);
    assert!(read(1_795_000_000_123_456).is_err());
    // Through the adapter, both are 2026.
    for at in [1_795_000_000_123, 1_795_000_000_123_456] {
        let batch = decode(&event(&[kinesis("1", &change("INSERT", "a", at, &Value::Null))])).unwrap();
        assert_eq!(batch.event.records[0].change.approximate_creation_date_time.year(), 2026);
    }
}

/// One item's changes out of order and one twice, as Kinesis may deliver them: versions order
/// them by change time, a duplicate has the same version, and a checkpoint at a version resumes
/// at the Kinesis sequence number of the first record with it.
#[test]
fn versions_order_one_items_changes_and_checkpoints_name_kinesis_sequence_numbers() {
    let (first, second) = (1_795_000_000_000_100, 1_795_000_000_000_200);
    let bytes = event(&[
        kinesis("11", &change("MODIFY", "a", second, &Value::Null)),
        kinesis("12", &change("INSERT", "a", first, &Value::Null)),
        kinesis("13", &change("MODIFY", "a", second, &Value::Null)),
    ]);
    let batch = decode(&bytes).unwrap();
    let versions: Vec<u128> = batch
        .event
        .records
        .iter()
        .map(|r| r.change.sequence_number.as_deref().unwrap().parse().unwrap())
        .collect();
    assert!(versions[1] < versions[0], "the older change has the lower version");
    assert_eq!(versions[0], versions[2], "a duplicate has the same version");
    let checkpoint_at = |version: &str| {
        let mut response = DynamoDbEventResponse::default();
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(version.to_owned());
        response.batch_item_failures.push(failure);
        batch.places.response(response).batch_item_failures[0].item_identifier.clone()
    };
    // (the runtime's checkpoint, what Lambda is told)
    let cases = [
        (first.to_string(), "12"),
        // The duplicate at 13 resumes at its first copy, 11: more is replayed, safely.
        (second.to_string(), "11"),
        // A version no record has: the batch's start.
        ("42".to_owned(), "11"),
    ];
    for (version, expected) in cases {
        assert_eq!(checkpoint_at(&version).as_deref(), Some(expected), "{version}");
    }
    assert!(batch.places.response(DynamoDbEventResponse::default()).batch_item_failures.is_empty());
}
