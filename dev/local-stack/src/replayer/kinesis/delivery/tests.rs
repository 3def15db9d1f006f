//! The emulated Kinesis mapping: every record reaches the function, one item's records cross
//! and some come twice, a change keeps its version however often it is read, and a stop answers
//! with the earliest DynamoDB record still to do.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stream_runtime::delivery::{Invocation, KinesisInvoker};
use stream_runtime::fixture::Change;

use super::{Stream, delivering};

fn change(id: &str, seq: u32) -> aws_lambda_events::event::dynamodb::EventRecord {
    Change::modify(json!({"id": {"S": id}}))
        .new_image(json!({"id": {"S": id}, "n": {"N": seq.to_string()}}))
        .event_id(format!("e{seq}"))
        .sequence(1000 + seq)
        .size(10)
        .record()
        .unwrap()
}

/// Each invocation's change records: (`eventID`, version).
type Seen = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// A function that keeps every invocation's change records (decoded: `eventID`, version) and
/// stops at the `stop_at`th record of the `stop_in`th invocation, if given.
fn recorder(stop: Option<(usize, usize)>) -> (KinesisInvoker, Seen) {
    let seen: Seen = Arc::default();
    let kept = Arc::clone(&seen);
    let invoker: KinesisInvoker = Arc::new(move |event: Value, _| {
        let batch = stream_runtime::kinesis::from_value(&event).unwrap();
        let records: Vec<(String, String)> = batch
            .event
            .records
            .iter()
            .map(|r| (r.event_id.clone(), r.change.sequence_number.clone().unwrap()))
            .collect();
        let mut seen = kept.lock().unwrap();
        let n = seen.len();
        let failures = match stop {
            Some((invocation, at)) if invocation == n && at < records.len() => {
                vec![json!({"itemIdentifier": event["Records"][at]["kinesis"]["sequenceNumber"]})]
            }
            _ => vec![],
        };
        seen.push(records);
        Box::pin(async move { Invocation::Returned(json!({"batchItemFailures": failures})) })
    });
    (invoker, seen)
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

#[tokio::test]
async fn every_record_arrives_crossed_and_some_twice_each_change_with_one_version() {
    let stream = Stream::register("arn:aws:kinesis:us-east-1:123456789012:stream/test-every", "issues");
    let (function, seen) = recorder(None);
    let invoker = delivering(Arc::clone(&stream), Vec::new(), function);
    // 40 batches of 20 changes to 5 items.
    let batches: Vec<Vec<_>> =
        (0..40).map(|b| (0..20).map(|i| change(&format!("i{}", i % 5), b * 20 + i)).collect()).collect();
    for batch in &batches {
        let answer = invoker(stream_runtime::delivery::event(batch.clone()), deadline()).await;
        assert_eq!(answer, Invocation::Returned(json!({"batchItemFailures": []})));
    }
    // The first batch again (a retry, a replay): the same versions.
    invoker(stream_runtime::delivery::event(batches[0].clone()), deadline()).await;
    let seen = seen.lock().unwrap();
    let mut versions = std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
    for (id, version) in seen.iter().flatten() {
        versions.entry(id.clone()).or_default().insert(version.clone());
    }
    assert_eq!(versions.len(), 800, "every change delivered");
    assert!(versions.values().all(|v| v.len() == 1), "one version a change");
    let disorder = stream.disorder();
    assert!(disorder.crossed > 100 && disorder.duplicated > 40, "{disorder:?}");
    // Cut in two: more invocations than batches.
    assert!(stream.invocations() > 60 && seen.len() as u64 == stream.invocations());
    // A later change's version is higher.
    let version = |id: &str| versions[id].iter().next().unwrap().parse::<u64>().unwrap();
    assert!(version("e1") < version("e2") && version("e2") < version("e799"));
}

#[tokio::test]
async fn a_stop_answers_with_the_earliest_record_still_to_do() {
    let stream = Stream::register("arn:aws:kinesis:us-east-1:123456789012:stream/test-stop", "issues");
    let batch: Vec<_> = (0..30).map(|i| change(&format!("i{}", i % 4), i)).collect();
    let mut checked = 0;
    for at in [0, 3, 10] {
        let (function, seen) = recorder(Some((0, at)));
        let answer = delivering(Arc::clone(&stream), Vec::new(), function)(
            stream_runtime::delivery::event(batch.clone()),
            deadline(),
        )
        .await;
        let seen = seen.lock().unwrap();
        // Stopped in the first invocation: the second never ran.
        assert_eq!(seen.len(), 1);
        let first = &seen[0];
        if at >= first.len() {
            continue;
        }
        // Every record before the one named was done (in the first invocation, before the
        // stop): Lambda will not deliver it again. And the one named is at or before the first
        // record the first invocation did not do.
        let done: std::collections::BTreeSet<&str> = first[..at].iter().map(|(id, _)| id.as_str()).collect();
        let Invocation::Returned(answer) = answer else { panic!("{answer:?}") };
        let named: u32 =
            answer["batchItemFailures"][0]["itemIdentifier"].as_str().unwrap().parse::<u32>().unwrap() - 1000;
        assert!((0..named).all(|i| done.contains(format!("e{i}").as_str())), "stopped at {at}: {named}");
        let first_undone = (0..30).find(|i| !done.contains(format!("e{i}").as_str())).unwrap();
        assert!(named <= first_undone, "stopped at {at}: {named} > {first_undone}");
        assert!(
            !done.contains(format!("e{named}").as_str())
                || first[at..].iter().any(|(id, _)| *id == format!("e{named}"))
        );
        checked += 1;
    }
    assert!(checked >= 2, "{checked} stops checked");
}
