//! Tests of the event source mapping's state machine: batches, checkpoints, retries, give-ups.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde_json::{Value, json};
use stream_runtime::fixture::Change;

use super::*;

fn record(sequence: usize) -> EventRecord {
    Change::insert(json!({"id": {"S": format!("i{sequence}")}}))
        .event_id(format!("e{sequence}"))
        .sequence(sequence)
        .at(1_700_000_000 + sequence)
        .size(10)
        .table("t")
        .record()
        .unwrap()
}

fn ok() -> Invocation {
    Invocation::Returned(json!({"batchItemFailures": []}))
}

fn failed_at(sequence: &str) -> Invocation {
    Invocation::Returned(json!({"batchItemFailures": [{"itemIdentifier": sequence}]}))
}

fn returned(response: Value) -> Invocation {
    Invocation::Returned(response)
}

fn error() -> Invocation {
    Invocation::Failed { error_type: "Boom".into(), message: "failed".into() }
}

/// A step, in one line.
fn summary(step: &Step) -> String {
    match step {
        Step::Checkpointed { records, ignored_failures: 0 } => format!("checkpointed {records}"),
        Step::Checkpointed { records, ignored_failures } => {
            format!("checkpointed {records}, ignoring {ignored_failures} failures")
        }
        Step::Retrying { checkpointed, records, retry, .. } => {
            format!("checkpointed {checkpointed}, retrying {records} (retry {retry})")
        }
        Step::Bisected { halves, retry, .. } => {
            format!("bisected {}+{} (retry {retry})", halves.0, halves.1)
        }
        Step::GaveUp(range) => format!(
            "gave up {}..{} ({} records, {} invocations)",
            range.start_sequence_number, range.end_sequence_number, range.batch_size, range.invocations
        ),
    }
}

const BISECTING: Settings = Settings {
    batch_size: 4,
    maximum_retry_attempts: Some(2),
    bisect: true,
    report_batch_item_failures: true,
    parallelization_factor: 1,
};

const PLAIN: Settings = Settings { bisect: false, ..BISECTING };

/// Answers to invocations in turn, each with the step it should cause and the next batch.
type Script = Vec<(Invocation, &'static str, &'static str)>;

/// Each case: settings, records in the shard, then the script.
#[expect(clippy::too_many_lines, reason = "one table of cases reads best whole")]
fn cases() -> Vec<(&'static str, Settings, usize, Script)> {
    vec![
        (
            "batches of BatchSize, in order",
            BISECTING,
            6,
            vec![(ok(), "checkpointed 4", "5 6"), (ok(), "checkpointed 2", "")],
        ),
        (
            "a reported failure checkpoints the records before it and retries the rest",
            BISECTING,
            6,
            vec![
                (failed_at("3"), "checkpointed 2, retrying 2 (retry 1)", "3 4"),
                (ok(), "checkpointed 2", "5 6"),
                (ok(), "checkpointed 2", ""),
            ],
        ),
        (
            "the lowest of several reported failures wins",
            BISECTING,
            4,
            vec![
                (
                    returned(
                        json!({"batchItemFailures": [{"itemIdentifier": "4"}, {"itemIdentifier": "2"}]}),
                    ),
                    "checkpointed 1, retrying 3 (retry 1)",
                    "2 3 4",
                ),
                (ok(), "checkpointed 3", ""),
            ],
        ),
        (
            "a function error bisects, and each half goes in turn",
            BISECTING,
            5,
            vec![
                (error(), "bisected 2+2 (retry 1)", "1 2"),
                (ok(), "checkpointed 2", "3 4"),
                (ok(), "checkpointed 2", "5"),
                (ok(), "checkpointed 1", ""),
            ],
        ),
        (
            "without bisection the batch is retried whole",
            PLAIN,
            4,
            vec![(error(), "checkpointed 0, retrying 4 (retry 1)", "1 2 3 4"), (ok(), "checkpointed 4", "")],
        ),
        (
            "after MaximumRetryAttempts the range is given up and the shard goes on",
            PLAIN,
            5,
            vec![
                (error(), "checkpointed 0, retrying 4 (retry 1)", "1 2 3 4"),
                (failed_at("2"), "checkpointed 1, retrying 3 (retry 2)", "2 3 4"),
                (error(), "gave up 2..4 (3 records, 3 invocations)", "5"),
                (ok(), "checkpointed 1", ""),
            ],
        ),
        (
            "bisection down to the one poisoned record, which alone is given up",
            BISECTING,
            4,
            vec![
                (error(), "bisected 2+2 (retry 1)", "1 2"),
                (error(), "bisected 1+1 (retry 2)", "1"),
                (error(), "gave up 1..1 (1 records, 3 invocations)", "2"),
                (ok(), "checkpointed 1", "3 4"),
                (ok(), "checkpointed 2", ""),
            ],
        ),
        (
            "invalid failure entries fail the whole batch",
            PLAIN,
            2,
            vec![
                (failed_at("9"), "checkpointed 0, retrying 2 (retry 1)", "1 2"),
                (failed_at(""), "checkpointed 0, retrying 2 (retry 2)", "1 2"),
                (
                    returned(json!({"batchItemFailures": [{"id": "1"}]})),
                    "gave up 1..2 (2 records, 3 invocations)",
                    "",
                ),
            ],
        ),
        (
            "a null or missing list, or an empty response, is a success",
            Settings { batch_size: 1, ..PLAIN },
            3,
            vec![
                (returned(json!({"batchItemFailures": null})), "checkpointed 1", "2"),
                (returned(json!({})), "checkpointed 1", "3"),
                (returned(Value::Null), "checkpointed 1", ""),
            ],
        ),
        (
            "without ReportBatchItemFailures, reported failures are ignored (and lost)",
            Settings { report_batch_item_failures: false, ..PLAIN },
            2,
            vec![(failed_at("1"), "checkpointed 2, ignoring 1 failures", "")],
        ),
        (
            "MaximumRetryAttempts -1 retries without end",
            Settings { maximum_retry_attempts: None, ..PLAIN },
            1,
            (1..=12).map(|_| (error(), "", "1")).chain([(ok(), "checkpointed 1", "")]).collect(),
        ),
    ]
}

#[test]
fn responses_move_the_checkpoint_like_lambda() {
    for (name, settings, records, script) in cases() {
        let mut mapping = Mapping::new(settings);
        mapping.push((1..=records).map(record));
        let mut batch = mapping.next_batch();
        for (i, (answer, expected_step, expected_next)) in script.into_iter().enumerate() {
            assert!(batch.is_some(), "{name}: step {i}: no batch to invoke");
            let step = mapping.complete(&answer);
            if !expected_step.is_empty() {
                assert_eq!(summary(&step), expected_step, "{name}: step {i}");
            }
            batch = mapping.next_batch();
            let next: Vec<String> = batch
                .iter()
                .flatten()
                .map(|r| r.change.sequence_number.clone().unwrap_or_default())
                .collect();
            assert_eq!(next.join(" "), expected_next, "{name}: batch after step {i}");
        }
        assert!(mapping.is_idle(), "{name}: records left over");
    }
}

#[test]
fn a_given_up_range_carries_what_the_failure_destination_needs() {
    let mut mapping = Mapping::new(Settings { maximum_retry_attempts: Some(0), ..BISECTING });
    mapping.push((1..=3).map(record));
    mapping.next_batch();
    let Step::GaveUp(range) = mapping.complete(&error()) else {
        panic!("no retries allowed: the batch is given up at once");
    };
    assert_eq!(
        range,
        FailedRange {
            start_sequence_number: "1".into(),
            end_sequence_number: "3".into(),
            approximate_arrival: ("2023-11-14T22:13:21+00:00".into(), "2023-11-14T22:13:23+00:00".into()),
            batch_size: 3,
            invocations: 1,
            reason: "function error Boom: failed".into(),
            records: (1..=3).map(record).collect(),
        }
    );
    // Records pushed later still go.
    mapping.push([record(4)]);
    assert_eq!(mapping.next_batch().map(|b| b.len()), Some(1));
}
