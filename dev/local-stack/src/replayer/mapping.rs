//! One event source mapping on one shard, as a pure state machine: which records the next
//! invocation gets, and what the function's answer does to the checkpoint.
//!
//! The rules are Lambda's for DynamoDB streams:
//!
//! - Records are delivered in order, at most `BatchSize` at a time, always starting at the
//!   checkpoint (the oldest record not yet processed).
//! - A response is a success when it has no `batchItemFailures` (absent, null or empty). With
//!   `ReportBatchItemFailures`, a failure names the sequence number to retry from: the records
//!   before it are checkpointed and the rest is retried. A failure entry that is empty, null, not
//!   a sequence number of the batch, or under a wrong key fails the whole batch. Without
//!   `ReportBatchItemFailures` the list is ignored and the batch counts as a success, so its
//!   failures are lost; [`Step::Checkpointed`] says so.
//! - A function error (or an unreadable answer) fails the whole batch. With
//!   `BisectBatchOnFunctionError` a batch of two or more records is split in two halves, retried
//!   one after the other; otherwise it is retried whole.
//! - Every retry counts against `MaximumRetryAttempts` (-1: no limit), a bisection included, for
//!   each half. A batch that fails once more after the last retry is given up: its range goes to
//!   the failure destination and the checkpoint moves past it.
//!
//! `MaximumRecordAgeInSeconds` is not modelled: a local stream is read as it is written.

use std::collections::VecDeque;

use stream_runtime::delivery::Invocation;

use crate::template::StreamSource;
use aws_lambda_events::event::dynamodb::EventRecord;
use serde_json::Value;

/// The settings of one mapping, from its `template.yaml` event source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// `BatchSize`: records per invocation, at least 1.
    pub batch_size: usize,
    /// `MaximumRetryAttempts`; `None` for -1 (retry until the record expires: here, forever).
    pub maximum_retry_attempts: Option<u32>,
    /// `BisectBatchOnFunctionError`.
    pub bisect: bool,
    /// `FunctionResponseTypes: [ReportBatchItemFailures]`.
    pub report_batch_item_failures: bool,
    /// `ParallelizationFactor`: batches of one shard in flight at once, 1 to 10. Records are
    /// spread over them by item key, so each item's records stay in order.
    pub parallelization_factor: u8,
}

impl Settings {
    /// The settings of a `template.yaml` stream source, with Lambda's defaults for what it leaves
    /// out (`BatchSize` 100, `MaximumRetryAttempts` -1, no bisection, no partial responses,
    /// `ParallelizationFactor` 1).
    pub(crate) fn from_source(source: &StreamSource) -> Result<Settings, String> {
        let at = &source.name;
        // A setting within Lambda's bounds, or an error naming it.
        let within = |setting: &str, n: i64, low: i64, high: i64, also: &str| {
            if (low..=high).contains(&n) {
                Ok(n)
            } else {
                Err(format!("{at}: {setting} {n} is not {also}between {low} and {high}"))
            }
        };
        let batch_size = match source.batch_size {
            None => 100,
            Some(n) => usize::try_from(within("BatchSize", n, 1, 10_000, "")?).unwrap_or(100),
        };
        let maximum_retry_attempts = match source.maximum_retry_attempts {
            None | Some(-1) => None,
            Some(n) => {
                Some(u32::try_from(within("MaximumRetryAttempts", n, 0, 10_000, "-1 or ")?).unwrap_or(0))
            }
        };
        let parallelization_factor = match source.parallelization_factor {
            None => 1,
            Some(n) => u8::try_from(within("ParallelizationFactor", n, 1, 10, "")?).unwrap_or(1),
        };
        Ok(Settings {
            batch_size,
            parallelization_factor,
            maximum_retry_attempts,
            bisect: source.bisect.unwrap_or(false),
            report_batch_item_failures: source
                .function_response_types
                .iter()
                .any(|t| t == "ReportBatchItemFailures"),
        })
    }
}

/// What the mapping did with a batch's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The batch succeeded; its records are checkpointed.
    Checkpointed {
        /// How many.
        records: usize,
        /// Failures the function reported that were ignored, because the mapping lacks
        /// `ReportBatchItemFailures`: those records are lost, as in Lambda.
        ignored_failures: usize,
    },
    /// The batch is retried, from the first failed record.
    Retrying {
        /// Records checkpointed before the failure.
        checkpointed: usize,
        /// Records to retry.
        records: usize,
        /// The retry number this will be (1 is the first retry).
        retry: u32,
        /// Why.
        reason: String,
    },
    /// The batch was split; its first half goes next.
    Bisected {
        /// The halves' sizes.
        halves: (usize, usize),
        /// The retry number of each half.
        retry: u32,
        /// Why.
        reason: String,
    },
    /// The batch failed after its last retry and was skipped.
    GaveUp(FailedRange),
}

/// A range of records the mapping gave up on, as Lambda reports it to an on-failure destination.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedRange {
    /// The first record's sequence number.
    pub start_sequence_number: String,
    /// The last record's sequence number.
    pub end_sequence_number: String,
    /// `ApproximateCreationDateTime` of the first and last records (RFC 3339).
    pub approximate_arrival: (String, String),
    /// Records in the range.
    pub batch_size: usize,
    /// Invocations of this range, the first one and every retry.
    pub invocations: u32,
    /// The last failure.
    pub reason: String,
    /// The records themselves, which an S3 on-failure destination keeps.
    pub records: Vec<EventRecord>,
}

/// The records of one shard that a mapping still has to deliver, and the batch in flight.
#[derive(Debug)]
pub struct Mapping {
    settings: Settings,
    /// Records from the checkpoint on.
    queue: VecDeque<EventRecord>,
    /// Batches to deliver before taking a fresh one, the next on top: each covers the given
    /// number of records from the checkpoint (after the batches above it are done).
    attempts: Vec<Attempt>,
}

#[derive(Debug, Clone, Copy)]
struct Attempt {
    records: usize,
    retries: u32,
}

impl Mapping {
    /// An idle mapping.
    pub fn new(settings: Settings) -> Mapping {
        Mapping {
            settings: Settings {
                batch_size: settings.batch_size.max(1),
                parallelization_factor: settings.parallelization_factor.clamp(1, 10),
                ..settings
            },
            queue: VecDeque::new(),
            attempts: Vec::new(),
        }
    }

    /// Appends records read from the shard (already filtered).
    pub fn push(&mut self, records: impl IntoIterator<Item = EventRecord>) {
        self.queue.extend(records);
    }

    /// Whether every record has been delivered.
    pub(crate) fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// Records waiting, the batch in flight included.
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// The records of the next invocation; `None` when idle. Asking again before
    /// [`Mapping::complete`] gives the same batch.
    pub(crate) fn next_batch(&mut self) -> Option<Vec<EventRecord>> {
        if self.queue.is_empty() {
            return None;
        }
        if self.attempts.is_empty() {
            self.attempts
                .push(Attempt { records: self.settings.batch_size.min(self.queue.len()), retries: 0 });
        }
        let records = self.attempts.last().map_or(0, |a| a.records);
        Some(self.queue.iter().take(records).cloned().collect())
    }

    /// Applies the outcome of invoking the batch [`Mapping::next_batch`] gave.
    pub fn complete(&mut self, invocation: &Invocation) -> Step {
        let Some(attempt) = self.attempts.pop() else {
            return Step::Checkpointed { records: 0, ignored_failures: 0 };
        };
        let reason = match self.verdict(attempt.records, invocation) {
            Verdict::Success { ignored_failures } => {
                self.queue.drain(..attempt.records);
                return Step::Checkpointed { records: attempt.records, ignored_failures };
            }
            Verdict::FailedFrom { index, sequence } => {
                let reason = format!("the function reported a failure at sequence number {sequence}");
                self.queue.drain(..index);
                let rest = Attempt { records: attempt.records - index, retries: attempt.retries };
                return self.retry(rest, index, reason, false);
            }
            Verdict::Failed(reason) => reason,
        };
        self.retry(attempt, 0, reason, self.settings.bisect)
    }

    fn retry(&mut self, attempt: Attempt, checkpointed: usize, reason: String, bisect: bool) -> Step {
        let exhausted = self.settings.maximum_retry_attempts.is_some_and(|max| attempt.retries >= max);
        if exhausted {
            let range = self.give_up(attempt, reason);
            return Step::GaveUp(range);
        }
        let retry = attempt.retries + 1;
        if bisect && attempt.records > 1 {
            let first = attempt.records / 2;
            let second = attempt.records - first;
            self.attempts.push(Attempt { records: second, retries: retry });
            self.attempts.push(Attempt { records: first, retries: retry });
            return Step::Bisected { halves: (first, second), retry, reason };
        }
        self.attempts.push(Attempt { records: attempt.records, retries: retry });
        Step::Retrying { checkpointed, records: attempt.records, retry, reason }
    }

    fn give_up(&mut self, attempt: Attempt, reason: String) -> FailedRange {
        let records: Vec<EventRecord> = self.queue.drain(..attempt.records).collect();
        let sequence =
            |r: Option<&EventRecord>| r.and_then(|r| r.change.sequence_number.clone()).unwrap_or_default();
        let arrival = |r: Option<&EventRecord>| {
            r.map(|r| r.change.approximate_creation_date_time.to_rfc3339()).unwrap_or_default()
        };
        FailedRange {
            start_sequence_number: sequence(records.first()),
            end_sequence_number: sequence(records.last()),
            approximate_arrival: (arrival(records.first()), arrival(records.last())),
            batch_size: records.len(),
            invocations: attempt.retries + 1,
            reason,
            records,
        }
    }

    /// Reads a response the way Lambda does (see the module docs).
    fn verdict(&self, records: usize, invocation: &Invocation) -> Verdict {
        let response = match invocation {
            Invocation::Failed { error_type, message } => {
                return Verdict::Failed(format!("function error {error_type}: {message}"));
            }
            Invocation::Returned(response) => response,
        };
        let failures = match response.get("batchItemFailures") {
            None | Some(Value::Null) => return Verdict::Success { ignored_failures: 0 },
            Some(Value::Array(failures)) if failures.is_empty() => {
                return Verdict::Success { ignored_failures: 0 };
            }
            Some(Value::Array(failures)) => failures,
            Some(other) => {
                if !self.settings.report_batch_item_failures {
                    return Verdict::Success { ignored_failures: 0 };
                }
                return Verdict::Failed(format!("batchItemFailures is not a list: {other}"));
            }
        };
        if !self.settings.report_batch_item_failures {
            return Verdict::Success { ignored_failures: failures.len() };
        }
        let mut first: Option<(usize, &str)> = None;
        for failure in failures {
            let Some(sequence) =
                failure.get("itemIdentifier").and_then(Value::as_str).filter(|s| !s.is_empty())
            else {
                return Verdict::Failed(format!(
                    "a batchItemFailures entry without an itemIdentifier: {failure}"
                ));
            };
            let position = self
                .queue
                .iter()
                .take(records)
                .position(|r| r.change.sequence_number.as_deref() == Some(sequence));
            let Some(index) = position else {
                return Verdict::Failed(format!(
                    "batchItemFailures names {sequence}, which is not in the batch"
                ));
            };
            if first.is_none_or(|(i, _)| index < i) {
                first = Some((index, sequence));
            }
        }
        match first {
            Some((index, sequence)) => Verdict::FailedFrom { index, sequence: sequence.to_owned() },
            None => Verdict::Success { ignored_failures: 0 },
        }
    }
}

enum Verdict {
    Success { ignored_failures: usize },
    FailedFrom { index: usize, sequence: String },
    Failed(String),
}

#[cfg(test)]
mod tests;
