//! `CHANGE_SOURCE` read and named when wrong; a Kinesis event handed to a handler as change
//! records, and its checkpoint answered with the Kinesis sequence number; an event that holds no
//! change record failing the invocation, named.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::event::streams::DynamoDbBatchItemFailure;
use base64::Engine as _;
use serde_json::{Value, json};

use super::*;

#[test]
fn the_source_is_read_from_change_source() {
    let cases = [
        (None, Ok(Source::DynamoDbStreams)),
        (Some("dynamodb-streams"), Ok(Source::DynamoDbStreams)),
        (Some("kinesis"), Ok(Source::Kinesis)),
        (Some("Kinesis"), Err("CHANGE_SOURCE")),
        (Some("sqs"), Err("\"sqs\": expected dynamodb-streams or kinesis")),
    ];
    for (value, expected) in cases {
        let lookup = |name: &str| (name == SOURCE_VAR).then(|| value.map(str::to_owned)).flatten();
        let got = Source::from_vars(&Vars::new(&lookup)).map_err(|e| e.to_string());
        match (got, expected) {
            (Ok(source), Ok(want)) => assert_eq!(source, want, "{value:?}"),
            (Err(error), Err(part)) => assert!(error.contains(part), "{error} lacks {part}"),
            (got, want) => panic!("{value:?}: {got:?}, expected {want:?}"),
        }
    }
}

/// A record as a handler was handed it: its version, and its JSON whole.
type Seen = (Option<String>, Option<Value>);

/// Keeps each batch's records' versions and whole JSON, and stops at the record whose version
/// is `stop_at`.
struct Recorder {
    events: Mutex<Vec<Vec<Seen>>>,
    stop_at: Option<String>,
}

impl Recorder {
    fn new(stop_at: Option<&str>) -> Recorder {
        Recorder { events: Mutex::new(Vec::new()), stop_at: stop_at.map(str::to_owned) }
    }
}

impl Handler for Recorder {
    fn handle_batch<'r>(
        &'r self,
        batch: Delivered<'r>,
    ) -> impl Future<Output = Result<DynamoDbEventResponse, NoCheckpoint>> + Send + 'r {
        let (records, whole) = (batch.records, batch.whole);
        let mut response = DynamoDbEventResponse::default();
        if let Some(version) = &self.stop_at {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = Some(version.clone());
            response.batch_item_failures.push(failure);
        }
        let opened = whole.open();
        let seen = records
            .iter()
            .enumerate()
            .map(|(i, r)| (r.sequence_number.as_ref().map(ToString::to_string), opened.json(i)))
            .collect();
        self.events.lock().expect("not poisoned").push(seen);
        async move { Ok(response) }
    }
}

fn kinesis_record(seq: &str, id: &str, at: u64) -> Value {
    let data = json!({"awsRegion": "us-east-1", "eventID": format!("ev-{seq}"), "eventName": "INSERT",
        "userIdentity": null, "recordFormat": "application/json", "tableName": "counters",
        "eventSource": "aws:dynamodb",
        "dynamodb": {"ApproximateCreationDateTime": at, "Keys": {"pk": {"S": id}},
                     "NewImage": {"pk": {"S": id}, "count": {"N": "1"}}, "SizeBytes": 20}});
    json!({"kinesis": {"sequenceNumber": seq,
                       "data": base64::engine::general_purpose::STANDARD.encode(data.to_string())},
           "eventSource": "aws:kinesis",
           "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/changes"})
}

fn deadline() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

#[tokio::test]
async fn a_kinesis_event_is_handled_as_change_records_and_answered_in_kinesis_terms() {
    let event = json!({"Records": [
        kinesis_record("900000000000000000000000000000000000000000000000000001", "a", 1_795_000_000_000_002),
        kinesis_record("900000000000000000000000000000000000000000000000000002", "b", 1_795_000_000_000_001),
    ]});
    let recorder = Recorder::new(Some("1795000000000001"));
    let response = kinesis(&recorder, &event, deadline()).await.expect("handled");
    let handed = recorder.events.lock().expect("not poisoned");
    let versions: Vec<Option<&str>> = handed[0].iter().map(|(v, _)| v.as_deref()).collect();
    assert_eq!(versions, [Some("1795000000000002"), Some("1795000000000001")]);
    assert_eq!(
        response.batch_item_failures[0].item_identifier.as_deref(),
        Some("900000000000000000000000000000000000000000000000000002"),
        "the checkpoint names the Kinesis sequence number Lambda resumes at"
    );
    assert_eq!(response.batch_item_failures.len(), 1);
}

#[tokio::test]
async fn a_kinesis_event_without_change_records_fails_the_invocation_named() {
    let mut foreign = kinesis_record("7", "a", 1_795_000_000_000_001);
    foreign["kinesis"]["data"] = json!(base64::engine::general_purpose::STANDARD.encode("{\"clicks\": 3}"));
    let recorder = Recorder::new(None);
    let error =
        kinesis(&recorder, &json!({"Records": [foreign]}), deadline()).await.expect_err("not changes");
    assert_eq!(error.error_type, NOT_CHANGES);
    assert!(error.error_message.contains("Kinesis record 0 (7): recordFormat"), "{}", error.error_message);
    assert!(recorder.events.lock().expect("not poisoned").is_empty(), "nothing handled");
}

/// A table's Kinesis destination at milliseconds (AWS's default): the batch is refused whole,
/// naming the first such record and the setting, and nothing is handled (issue 76, finding 4:
/// it used to be indexed, two changes within a millisecond sharing a version).
#[tokio::test]
async fn a_kinesis_event_at_milliseconds_fails_the_invocation_naming_the_setting() {
    let event = json!({"Records": [
        kinesis_record("81", "a", 1_795_000_000_000_001),
        kinesis_record("82", "b", 1_795_000_000_123),
    ]});
    let recorder = Recorder::new(None);
    let error = kinesis(&recorder, &event, deadline()).await.expect_err("milliseconds");
    assert_eq!(error.error_type, COARSE_TIMES);
    for part in
        ["Kinesis record 1 (82)", "in milliseconds", "ApproximateCreationDateTimePrecision to MICROSECOND"]
    {
        assert!(error.error_message.contains(part), "{} lacks {part:?}", error.error_message);
    }
    assert!(recorder.events.lock().expect("not poisoned").is_empty(), "nothing handled");
}

#[tokio::test]
async fn a_dynamodb_event_is_read_in_place_from_the_invocations_bytes() {
    let delivered = json!({"Records": [
        {"eventID": "a", "eventName": "INSERT", "somethingNew": 1,
         "dynamodb": {"Keys": {"pk": {"S": "a"}}, "SequenceNumber": "11", "ApproximateCreationDateTime": 1.5}},
        {"eventID": "b", "eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"S": "b"}}, "SequenceNumber": "12"}},
    ]});
    let recorder = Recorder::new(Some("12"));
    let response = json(&recorder, delivered.to_string().as_bytes(), deadline()).await.expect("handled");
    assert_eq!(response.batch_item_failures[0].item_identifier.as_deref(), Some("12"));
    let handed = recorder.events.lock().expect("not poisoned");
    let versions: Vec<Option<&str>> = handed[0].iter().map(|(v, _)| v.as_deref()).collect();
    assert_eq!(versions, [Some("11"), Some("12")]);
    // Whole, each record is as delivered, fields unknown to any decoder included.
    let wholes: Vec<&Value> = handed[0].iter().filter_map(|(_, w)| w.as_ref()).collect();
    assert_eq!(wholes, [&delivered["Records"][0], &delivered["Records"][1]]);
}

#[tokio::test]
async fn bytes_that_are_no_dynamodb_event_fail_the_invocation_named() {
    let recorder = Recorder::new(None);
    let cases: [(&[u8], &str); 3] = [
        (b"\xff{}", "not UTF-8"),
        (br#"{"Records": 3}"#, "not a DynamoDB stream event"),
        (br#"{"Records": [{"dynamodb": {"Keys": {"pk": {"X": "a"}}}}]}"#, "is not a DynamoDB type"),
    ];
    for (body, part) in cases {
        let error = json(&recorder, body, deadline()).await.expect_err("not an event");
        assert_eq!(error.error_type, NOT_AN_EVENT);
        assert!(error.error_message.contains(part), "{}", error.error_message);
    }
    assert!(recorder.events.lock().expect("not poisoned").is_empty(), "nothing handled");
}

#[tokio::test]
async fn the_outer_layer_keeps_the_body_and_hands_lambda_runtime_null() {
    let bodies = Bodies::default();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let inner = {
        let seen = Arc::clone(&seen);
        service_fn(move |invocation: LambdaInvocation| {
            seen.lock().expect("not poisoned").push(invocation.body);
            async { Ok::<(), lambda_runtime::Error>(()) }
        })
    };
    let mut service = bodies.layer(inner);
    let body = Bytes::from_static(br#"{"Records":[]}"#);
    for id in ["r-1", "r-2"] {
        let mut context = lambda_runtime::Context::default();
        context.request_id = id.to_owned();
        let (parts, ()) = http::Response::new(()).into_parts();
        service.call(LambdaInvocation { parts, body: body.clone(), context }).await.expect("called");
    }
    assert_eq!(*seen.lock().expect("not poisoned"), [const { Bytes::from_static(b"null") }; 2]);
    assert_eq!(bodies.take("r-2"), body);
    assert_eq!(bodies.take("r-1"), body);
    assert!(bodies.take("r-1").is_empty(), "a body is taken once");
}
