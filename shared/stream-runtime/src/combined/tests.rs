//! Tests of the combined mapping's pure parts: each function's filter applied in code as the
//! mapping applies it, the earliest checkpoint, and `COMBINED_FILTERS`.

use std::path::Path;

use serde_json::{Value, json};

use super::*;

/// The archiver's pattern in template.yaml.
const TTL_REMOVE: &str = r#"{"eventName":["REMOVE"],"userIdentity":{"type":["Service"],"principalId":["dynamodb.amazonaws.com"]}}"#;

/// Patterns as the template writes them, and others over every kind of leaf.
const PATTERNS: &[&str] = &[
    TTL_REMOVE,
    r#"{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"COUNTER#"}]}},"NewImage":{"count":{"N":[{"exists":true}]}}}}"#,
    r#"{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"COUNTER#"}]}},"OldImage":{"count":{"N":[{"exists":true}]}}}}"#,
    r#"{"eventName":["REMOVE"],"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"COUNTER#"}]}}}}"#,
    r#"{"dynamodb":{"NewImage":{"tags":{"SS":[{"exists":true}]}}}}"#,
    r#"{"dynamodb":{"OldImage":{"ss":{"SS":["open"]}}}}"#,
    r#"{"dynamodb":{"OldImage":{"n":{"N":[{"numeric":["<",0]}]}}}}"#,
    r#"{"dynamodb":{"OldImage":{"b":{"B":["AAEC/w=="]}}}}"#,
    r#"{"dynamodb":{"OldImage":{"bool":{"BOOL":[true]}}}}"#,
    r#"{"eventName":["INSERT","MODIFY"]}"#,
    r#"{"eventName":[{"anything-but":"REMOVE"}],"dynamodb":{"NewImage":{"state":{"S":[{"exists":false}]}}}}"#,
];

/// Every record of the sample events in `events/`, as Lambda delivers it.
fn delivered() -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events");
    let mut records = Vec::new();
    for function in std::fs::read_dir(&root).expect("events/") {
        for file in std::fs::read_dir(function.expect("entry").path()).expect("a function's events") {
            let path = file.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("an event");
            let event: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            records.extend(event["Records"].as_array().cloned().unwrap_or_default());
        }
    }
    records
}

fn decoded(json: &Value) -> EventRecord {
    serde_json::from_value(json.clone()).expect("a record the runtime decodes")
}

/// A record of `item`, with `fields` (`eventName`, `userIdentity`) and its `dynamodb` part.
fn record(fields: &Value, item: &str, sequence_number: &str) -> EventRecord {
    let mut json = json!({"eventID": format!("e{sequence_number}"), "eventSource": "aws:dynamodb",
        "eventVersion": "1.1", "awsRegion": "us-east-1",
        "dynamodb": {"Keys": {"id": {"S": item}}, "SequenceNumber": sequence_number,
            "SizeBytes": 10, "StreamViewType": "NEW_AND_OLD_IMAGES"}});
    for (name, value) in fields.as_object().expect("an object") {
        json[name] = value.clone();
    }
    decoded(&json)
}

#[test]
fn the_code_filter_agrees_with_the_mappings_on_every_sample_record() {
    let records = delivered();
    assert!(records.len() >= 20, "{} sample records", records.len());
    let mut matched = 0;
    for text in PATTERNS {
        let pattern = Pattern::parse_dynamodb(text).expect("a valid pattern");
        for raw in &records {
            let by_mapping = pattern.matches(raw);
            let in_code = select(&[decoded(raw)], std::slice::from_ref(&pattern)) == [0];
            assert_eq!(in_code, by_mapping, "{text} on {raw}");
            matched += usize::from(by_mapping);
        }
    }
    // The corpus exercises both answers of most patterns, so agreement is not vacuous.
    assert!(matched > 0 && matched < PATTERNS.len() * records.len(), "{matched} matches");
}

#[test]
fn select_keeps_what_any_pattern_matches_and_everything_without_patterns() {
    let ttl = json!({"eventName": "REMOVE",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"}});
    let records = vec![
        record(&ttl, "a", "1"),
        record(&json!({"eventName": "REMOVE"}), "b", "2"),
        record(&json!({"eventName": "INSERT"}), "c", "3"),
    ];
    let archiver = vec![Pattern::parse_dynamodb(TTL_REMOVE).unwrap()];
    let inserts = Pattern::parse_dynamodb(r#"{"eventName":["INSERT"]}"#).unwrap();
    let cases: Vec<(Vec<Pattern>, Vec<usize>)> = vec![
        (vec![], vec![0, 1, 2]),
        (archiver.clone(), vec![0]),
        (vec![inserts.clone()], vec![2]),
        ([archiver, vec![inserts]].concat(), vec![0, 2]),
    ];
    for (patterns, expected) in cases {
        assert_eq!(select(&records, &patterns), expected, "{patterns:?}");
    }
}

fn batch(n: usize) -> Vec<WireRecord<'static>> {
    (0..n)
        .map(|i| WireRecord {
            event_name: "INSERT".into(),
            sequence_number: Some(format!("{}", 100 + i).into()),
            ..WireRecord::default()
        })
        .collect()
}

fn stopped_at(sequence_number: Option<&str>) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    if let Some(id) = sequence_number {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(id.to_owned());
        response.batch_item_failures.push(failure);
    }
    response
}

fn reported(response: &DynamoDbEventResponse) -> Vec<&str> {
    response.batch_item_failures.iter().map(|f| f.item_identifier.as_deref().unwrap_or_default()).collect()
}

#[test]
fn the_batch_resumes_at_the_earliest_record_any_function_stopped_at() {
    let records = batch(5);
    let cases: Vec<(Vec<Option<&str>>, Vec<&str>)> = vec![
        (vec![None, None], vec![]),
        (vec![Some("103"), None], vec!["103"]),
        (vec![None, Some("101")], vec!["101"]),
        // By position in the batch, whichever function stopped first.
        (vec![Some("104"), Some("102")], vec!["102"]),
        (vec![Some("100"), Some("104"), Some("102")], vec!["100"]),
    ];
    for (stops, expected) in cases {
        let responses = stops.iter().map(|s| Ok(stopped_at(*s))).collect();
        let response = earliest(&records, responses).expect("a checkpoint");
        assert_eq!(reported(&response), expected, "{stops:?}");
    }
}

#[test]
fn a_function_without_a_checkpoint_fails_the_whole_batch() {
    let records = batch(3);
    let responses = vec![Ok(stopped_at(Some("101"))), Err(NoCheckpoint { stopped_at: 2 })];
    assert_eq!(earliest(&records, responses), Err(NoCheckpoint { stopped_at: 2 }));
}

#[test]
fn combined_filters_read_each_functions_patterns_and_name_the_variable() {
    let text = format!(r#"{{"ttl-archiver":[{TTL_REMOVE}],"multikey-indexer":[]}}"#);
    assert_eq!(patterns_for(Some(&text), "ttl-archiver").unwrap().len(), 1);
    assert!(patterns_for(Some(&text), "multikey-indexer").unwrap().is_empty());
    assert!(patterns_for(Some(&text), "counter-aggregator").unwrap().is_empty());
    assert!(patterns_for(None, "ttl-archiver").unwrap().is_empty());
    let bad = [
        ("[1]", "expected an object"),
        ("{", "not JSON"),
        (r#"{"ttl-archiver":{"eventName":["REMOVE"]}}"#, "ttl-archiver: expected a list"),
        (
            r#"{"ttl-archiver":[{"eventName":["REMOVE"]},{"dynamodb":{"NewImage":{"a":["x"]}}}]}"#,
            "ttl-archiver[1]: /dynamodb/NewImage/a",
        ),
    ];
    for (text, expected) in bad {
        let error = patterns_for(Some(text), "ttl-archiver").unwrap_err().to_string();
        assert!(error.contains(FILTERS_VAR) && error.contains(expected), "{text}: {error}");
    }
}
