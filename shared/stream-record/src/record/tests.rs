//! Tests for the typed record view.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde_json::json;

use super::*;
use crate::wire::Attr;

/// The record viewed as the plans read it.
fn wire_of(raw: &EventRecord) -> WireRecord<'_> {
    WireRecord::from_event_record(raw)
}

fn record(event_name: &str, view: &str, old: bool, new: bool) -> EventRecord {
    let mut dynamodb = json!({
        "Keys": {"id": {"S": "020e"}},
        "SequenceNumber": "111",
        "SizeBytes": 26,
        "StreamViewType": view,
    });
    if old {
        dynamodb["OldImage"] = json!({"id": {"S": "020e"}, "num": {"N": "1"}});
    }
    if new {
        dynamodb["NewImage"] = json!({"id": {"S": "020e"}, "num": {"N": "2"}});
    }
    serde_json::from_value(json!({
        "awsRegion": "us-east-1", "eventID": "1", "eventName": event_name, "dynamodb": dynamodb,
    }))
    .unwrap()
}

#[test]
fn change_kinds_parse_and_unknown_names_are_errors() {
    for kind in [ChangeKind::Insert, ChangeKind::Modify, ChangeKind::Remove] {
        assert_eq!(ChangeKind::parse(kind.as_str()), Ok(kind));
    }
    let err = ChangeKind::parse("insert").unwrap_err();
    assert_eq!(err.to_string(), r#"eventName "insert" is not INSERT, MODIFY or REMOVE"#);
}

#[test]
fn images_follow_the_change_kind() {
    let raw = record("INSERT", "NEW_AND_OLD_IMAGES", false, true);
    let wire = WireRecord::from_event_record(&raw);
    let r = Record::new(&wire).unwrap();
    assert_eq!(r.before().unwrap(), None);
    assert_eq!(r.after().unwrap().unwrap().get("num"), Some(&Attr::N("2".into())));

    let raw = record("MODIFY", "NEW_AND_OLD_IMAGES", true, true);
    let wire = WireRecord::from_event_record(&raw);
    let r = Record::new(&wire).unwrap();
    assert!(r.before().unwrap().is_some() && r.after().unwrap().is_some());

    let raw = record("REMOVE", "NEW_AND_OLD_IMAGES", true, false);
    let wire = WireRecord::from_event_record(&raw);
    let r = Record::new(&wire).unwrap();
    assert!(r.before().unwrap().is_some());
    assert_eq!(r.after().unwrap(), None);
    assert_eq!(r.sequence_number(), Some("111"));
}

#[test]
fn a_view_type_without_the_needed_image_is_named_in_the_error() {
    let cases = [
        ("MODIFY", "KEYS_ONLY", false, false, Image::Old, "KEYS_ONLY"),
        ("MODIFY", "NEW_IMAGE", false, true, Image::Old, "NEW_IMAGE"),
        ("REMOVE", "NEW_IMAGE", false, false, Image::Old, "NEW_IMAGE"),
        ("INSERT", "OLD_IMAGE", false, false, Image::New, "OLD_IMAGE"),
    ];
    for (name, view, old, new, image, shown) in cases {
        let raw = record(name, view, old, new);
        let wire = WireRecord::from_event_record(&raw);
        let r = Record::new(&wire).unwrap();
        let err = match image {
            Image::Old => r.before().unwrap_err(),
            Image::New => r.after().unwrap_err(),
        };
        assert_eq!(
            err,
            RecordError::MissingImage { kind: r.kind(), image, view: shown.to_owned() },
            "{name} on {view}"
        );
        assert!(err.to_string().contains(shown), "{err}");
    }
}

#[test]
fn missing_keys_and_sequence_numbers() {
    let mut raw = record("INSERT", "NEW_IMAGE", false, true);
    raw.change.keys = serde_dynamo::Item::default();
    raw.change.sequence_number = Some(String::new());
    let wire = WireRecord::from_event_record(&raw);
    let r = Record::new(&wire).unwrap();
    assert_eq!(r.keys().unwrap_err(), RecordError::MissingKeys(ChangeKind::Insert));
    assert_eq!(r.sequence_number(), None);
}

#[test]
fn only_removes_by_the_dynamodb_service_principal_are_ttl_deletes() {
    let identity = |type_: &str, principal: &str| {
        serde_json::from_value(json!({"type": type_, "principalId": principal})).unwrap()
    };
    let mut ttl = record("REMOVE", "OLD_IMAGE", true, false);
    ttl.user_identity = Some(identity("Service", TTL_PRINCIPAL));
    assert!(Record::new(&wire_of(&ttl)).unwrap().is_ttl_delete());

    let mut user = ttl.clone();
    user.user_identity = None;
    assert!(!Record::new(&wire_of(&user)).unwrap().is_ttl_delete());

    let mut other_service = ttl.clone();
    other_service.user_identity = Some(identity("Service", "lambda.amazonaws.com"));
    assert!(!Record::new(&wire_of(&other_service)).unwrap().is_ttl_delete());

    let mut insert = record("INSERT", "NEW_IMAGE", false, true);
    insert.user_identity = Some(identity("Service", TTL_PRINCIPAL));
    assert!(!Record::new(&wire_of(&insert)).unwrap().is_ttl_delete());
}
