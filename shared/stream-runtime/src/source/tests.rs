//! `CHANGE_SOURCE` read and named when wrong; a Kinesis event handed to a handler as change
//! records, and its checkpoint answered with the Kinesis sequence number; an event that holds no
//! change record failing the invocation, named.

use std::sync::Mutex;
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

/// Keeps the events it is handed, and stops at the record whose version is `stop_at`.
struct Recorder {
    events: Mutex<Vec<Event>>,
    stop_at: Option<String>,
}

impl Handler for Recorder {
    fn handle(
        &self,
        event: Event,
        _deadline: Deadline,
    ) -> impl Future<Output = Result<DynamoDbEventResponse, NoCheckpoint>> + Send {
        let mut response = DynamoDbEventResponse::default();
        if let Some(version) = &self.stop_at {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = Some(version.clone());
            response.batch_item_failures.push(failure);
        }
        self.events.lock().expect("not poisoned").push(event);
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
    let recorder = Recorder {
        events: Mutex::new(Vec::new()),
        stop_at: Some("1795000000000001".to_owned()),
    };
    let response = kinesis(&recorder, &event, deadline()).await.expect("handled");
    let handed = recorder.events.lock().expect("not poisoned");
    let versions: Vec<Option<&str>> = handed[0]
        .records
        .iter()
        .map(|r| r.change.sequence_number.as_deref())
        .collect();
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
    let recorder = Recorder {
        events: Mutex::new(Vec::new()),
        stop_at: None,
    };
    let error = kinesis(&recorder, &json!({"Records": [foreign]}), deadline())
        .await
        .expect_err("not changes");
    assert_eq!(error.error_type, NOT_CHANGES);
    assert!(
        error.error_message.contains("Kinesis record 0 (7): recordFormat"),
        "{}",
        error.error_message
    );
    assert!(
        recorder.events.lock().expect("not poisoned").is_empty(),
        "nothing handled"
    );
}
