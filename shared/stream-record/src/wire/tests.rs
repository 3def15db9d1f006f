//! The in-place reader against `aws_lambda_events`: the same records, images and errors.

use std::borrow::Cow;

use serde_json::json;

use super::*;
use crate::Record;
use crate::fixture::Change;
use aws_lambda_events::event::dynamodb::Event;

/// Reads `event` both ways and checks that every record agrees, field by field.
fn same_both_ways(event: &serde_json::Value) -> usize {
    let text = event.to_string();
    let owned: Event = serde_json::from_str(&text).expect("aws_lambda_events reads it");
    let batch = Batch::parse(&text).expect("the wire reader reads it");
    assert_eq!(batch.records.len(), owned.records.len());
    for (wire, raw) in batch.records.iter().zip(&owned.records) {
        assert_eq!(wire, &WireRecord::from_event_record(raw));
        assert_eq!(wire.keys.to_item(), raw.change.keys);
        assert_eq!(wire.new_image.to_item(), raw.change.new_image);
        assert_eq!(wire.old_image.to_item(), raw.change.old_image);
        let (checked, record) = (wire.change(), Record::new(wire));
        match (checked, record) {
            (Ok(c), Ok(r)) => {
                assert_eq!(c.kind, r.kind());
                assert_eq!(c.before, r.before().unwrap());
                assert_eq!(c.after, r.after().unwrap());
            }
            (Err(e), Ok(r)) => {
                let expected = r.keys().and_then(|_| r.before()).and_then(|_| r.after()).unwrap_err();
                assert_eq!(e, expected);
            }
            (Ok(_), Err(e)) => panic!("the lazy view rejects what the whole check takes: {e}"),
            (Err(a), Err(b)) => assert_eq!(a, b),
        }
    }
    batch.records.len()
}

/// A record as Lambda writes it, with `change` as its `dynamodb` (`SizeBytes` added).
fn record(name: &str, change: serde_json::Value) -> serde_json::Value {
    Change::named(name, json!({})).with("/dynamodb", change).size(26).region("eu-west-1").json()
}

#[test]
fn every_type_reads_as_aws_lambda_events_reads_it() {
    let image = json!({
        "id": {"S": "a1"},
        "n": {"N": "-1.50E+3"},
        "b": {"B": "AAEC/w=="},
        "t": {"BOOL": true},
        "z": {"NULL": true},
        "m": {"M": {"k": {"S": "v"}, "nested": {"L": [{"N": "1"}, {"S": "x"}, {"M": {}}]}}},
        "ss": {"SS": ["a", "b"]},
        "ns": {"NS": ["1", "2.5"]},
        "bs": {"BS": ["AA==", "AQ=="]},
        "escaped": {"S": "tab\there \"quoted\" \u{e9} \u{1f600}"},
    });
    let event = json!({"Records": [record("MODIFY", json!({
        "Keys": {"id": {"S": "a1"}},
        "NewImage": image,
        "OldImage": {"id": {"S": "a1"}},
        "SequenceNumber": "100",
        "StreamViewType": "NEW_AND_OLD_IMAGES",
        "ApproximateCreationDateTime": 1_700_000_000.25,
    }))]});
    assert_eq!(same_both_ways(&event), 1);
}

#[test]
fn the_change_time_and_source_read_as_aws_lambda_events_reads_them() {
    let keys = json!({"id": {"S": "1"}});
    let times = [json!(1_700_000_000), json!(1_700_000_000.5), json!(-1.5), json!(0)];
    let records: Vec<_> = times
        .iter()
        .map(|t| record("REMOVE", json!({"Keys": keys, "OldImage": keys, "ApproximateCreationDateTime": t})))
        .collect();
    assert_eq!(same_both_ways(&json!({ "Records": records })), 4);
    let text = json!({ "Records": records }).to_string();
    let batch = Batch::parse(&text).unwrap();
    assert_eq!(batch.records[0].approximate_creation_date_time.timestamp(), 1_700_000_000);
    assert_eq!(
        batch.records[0].event_source_arn.as_deref(),
        Some(crate::fixture::stream_arn("eu-west-1", crate::fixture::TABLE).as_str())
    );
    // Absent, it is the epoch, as aws_lambda_events has it.
    let bare = r#"{"Records":[{"eventName":"REMOVE","dynamodb":{"Keys":{"id":{"S":"1"}}}}]}"#;
    assert_eq!(Batch::parse(bare).unwrap().records[0].approximate_creation_date_time, DateTime::UNIX_EPOCH);
    // Out of chrono's range: both decoders refuse the event.
    let far =
        json!({"Records": [record("REMOVE", json!({"Keys": keys, "ApproximateCreationDateTime": 1e300}))]});
    assert!(Batch::parse(&far.to_string()).is_err());
    assert!(serde_json::from_str::<Event>(&far.to_string()).is_err());
}

#[test]
fn strings_are_borrowed_unless_escaped() {
    let text = r#"{"Records":[{"eventName":"INSERT","dynamodb":{"Keys":{"id":{"S":"plain"}},"NewImage":{"id":{"S":"plain"},"e":{"S":"a\nb"}}}}]}"#;
    let batch = Batch::parse(text).unwrap();
    let image = &batch.records[0].new_image;
    assert!(matches!(image.get("id"), Some(Attr::S(Cow::Borrowed("plain")))));
    assert!(matches!(image.get("e"), Some(Attr::S(Cow::Owned(s))) if s == "a\nb"));
}

#[test]
fn an_image_is_sorted_and_a_repeated_name_keeps_its_last_value() {
    let text = r#"{"Records":[{"eventID":"1","eventName":"INSERT","awsRegion":"eu-west-1","dynamodb":{"SizeBytes":9,"Keys":{"id":{"S":"1"}},"NewImage":{"z":{"N":"1"},"a":{"N":"2"},"z":{"N":"3"},"m":{"N":"4"}}}}]}"#;
    let batch = Batch::parse(text).unwrap();
    let image = &batch.records[0].new_image;
    let names: Vec<&str> = image.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a", "m", "z"]);
    assert_eq!(image.get("z"), Some(&Attr::N(Cow::Borrowed("3"))));
    // As serde_json reads a repeated key into a map: the last wins.
    let owned: Event = serde_json::from_str(text).unwrap();
    assert_eq!(image.to_item(), owned.records[0].change.new_image);
}

#[test]
fn the_checks_fail_as_records_checks_do() {
    let keys = json!({"id": {"S": "1"}});
    let cases = [
        record("UPSERT", json!({"Keys": keys, "NewImage": keys})),
        record("INSERT", json!({"NewImage": keys})),
        record("MODIFY", json!({"Keys": keys, "NewImage": keys, "StreamViewType": "NEW_IMAGE"})),
        record("REMOVE", json!({"Keys": keys, "StreamViewType": "KEYS_ONLY"})),
        record("REMOVE", json!({"Keys": keys})),
        record("INSERT", json!({"Keys": keys, "NewImage": null, "OldImage": null})),
        record("REMOVE", json!({"Keys": keys, "OldImage": keys, "SequenceNumber": ""})),
    ];
    let event = json!({"Records": cases});
    assert_eq!(same_both_ways(&event), cases.len());
    let text = event.to_string();
    let batch = Batch::parse(&text).unwrap();
    let errors: Vec<String> = batch
        .records
        .iter()
        .map(|r| r.change().map_or_else(|e| e.to_string(), |_| "ok".to_owned()))
        .collect();
    assert_eq!(errors[0], r#"eventName "UPSERT" is not INSERT, MODIFY or REMOVE"#);
    assert_eq!(errors[1], "INSERT record has no Keys");
    assert!(errors[2].contains("MODIFY record has no OldImage: the stream's view type is NEW_IMAGE"));
    assert!(errors[3].contains("view type is KEYS_ONLY"));
    assert!(errors[4].contains("view type is unstated"));
    assert_eq!(batch.records[6].sequence_number(), None);
}

#[test]
fn a_ttl_deletion_keeps_its_identity() {
    let mut deletion = record("REMOVE", json!({"Keys": {"id": {"S": "1"}}, "OldImage": {"id": {"S": "1"}}}));
    deletion["userIdentity"] = json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
    let event = json!({"Records": [deletion]});
    assert_eq!(same_both_ways(&event), 1);
    let text = event.to_string();
    let batch = Batch::parse(&text).unwrap();
    let id = batch.records[0].user_identity.as_ref().unwrap();
    assert_eq!((id.type_.as_ref(), id.principal_id.as_ref()), ("Service", crate::record::TTL_PRINCIPAL));
}

#[test]
fn a_malformed_value_is_named() {
    let bad = [
        (r#"{"X":"1"}"#, r#""X" is not a DynamoDB type"#),
        (r#"{"S":"1","N":"1"}"#, "more than one type"),
        ("{}", "has no type"),
        (r#"{"B":"not base64!"}"#, "a B value is not base64"),
        (r#"{"S":1}"#, "expected a string"),
        (r#""plain""#, "expected a DynamoDB value"),
    ];
    for (value, message) in bad {
        let text = format!(
            r#"{{"Records":[{{"eventID":"1","eventName":"INSERT","awsRegion":"r","dynamodb":{{"SizeBytes":9,"Keys":{{"id":{value}}}}}}}]}}"#
        );
        let error = Batch::parse(&text).expect_err(value).to_string();
        assert!(error.contains(message), "{value}: {error}");
        assert!(error.starts_with("the event is not a DynamoDB stream event"), "{error}");
        // aws_lambda_events refuses it too, and reads the same record with a good value.
        assert!(serde_json::from_str::<Event>(&text.replace(value, r#"{"S":"1"}"#)).is_ok());
        assert!(serde_json::from_str::<Event>(&text).is_err(), "{value}");
    }
    assert!(Batch::parse("[]").is_err());
    assert!(Batch::parse(r#"{"Records":[{"dynamodb":7}]}"#).is_err());
}

#[test]
fn owned_items_convert_both_ways() {
    let event = json!({"Records": [record("INSERT", json!({
        "Keys": {"id": {"S": "1"}},
        "NewImage": {"id": {"S": "1"}, "m": {"M": {"b": {"N": "2"}, "a": {"L": [{"NULL": true}]}}}},
    }))]});
    let owned: Event = serde_json::from_value(event).unwrap();
    let item = &owned.records[0].change.new_image;
    let image = WireImage::from_item(item);
    assert_eq!(&image.to_item(), item);
    let names: Vec<&str> = match image.get("m") {
        Some(Attr::M(m)) => m.iter().map(|(n, _)| n).collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn a_name_is_found_in_small_images_by_scan_and_in_large_ones_by_halves() {
    // Sizes either side of the switch between the two searches, with names of one length (so the
    // scan compares bytes) and of many (so it skips by length).
    // (Each size gives an image of twice as many attributes.)
    for size in [0, 1, SCAN_UP_TO / 2 - 1, SCAN_UP_TO / 2, SCAN_UP_TO / 2 + 1, 3 * SCAN_UP_TO] {
        let mut item = serde_dynamo::Item::default();
        for i in 0..size {
            item.insert(format!("a{i:03}"), serde_dynamo::AttributeValue::N(i.to_string()));
            item.insert("b".repeat(i + 1), serde_dynamo::AttributeValue::S(i.to_string()));
        }
        let image = WireImage::from_item(&item);
        assert_eq!(image.len(), 2 * size);
        for i in 0..size {
            assert_eq!(image.get(&format!("a{i:03}")), Some(&Attr::N(i.to_string().into())), "size {size}");
            assert_eq!(image.get(&"b".repeat(i + 1)), Some(&Attr::S(i.to_string().into())), "size {size}");
        }
        for absent in ["", "a", "a1000", "c", &"b".repeat(size + 1), "a00"] {
            assert_eq!(image.get(absent), None, "size {size}: {absent:?}");
        }
    }
}

#[test]
fn names_are_ordered_by_their_bytes_whichever_byte_differs() {
    let names = ["", "a", "aa", "ab", "b", "id", "name", "num", "Z", "é", "e\u{301}", "\u{10FFFF}"];
    for a in names {
        for b in names {
            assert_eq!(super::name_order(a, b), a.cmp(b), "{a:?} against {b:?}");
        }
    }
}
