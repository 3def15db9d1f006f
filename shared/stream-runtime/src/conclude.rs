//! The fail-fast batch response: where Lambda must resume after a batch that did not finish.
//!
//! Records are processed in order. When record `i` is the first that did not finish (its
//! planning failed, or one of its writes did), everything before it is done and the function
//! reports record `i`'s sequence number in `batchItemFailures`. Lambda checkpoints there and
//! redelivers record `i` and everything after it, so the function's writes must be idempotent.
//!
//! An empty or missing identifier would make Lambda retry the whole batch, or worse, be read as
//! success by hand-rolled code; it is never reported. When the record to resume from has no usable
//! sequence number, the checkpoint moves back to the nearest earlier record that has one (replaying
//! more is safe because writes are idempotent). When no earlier record has one, the caller must
//! fail the whole invocation ([`NoCheckpoint`]) so Lambda retries the batch from its start.

use crate::wire::WireRecord;
use crate::{Metric, Metrics};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use key_codec::SequenceNumber;

/// Where a batch resumes: the record and its sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The position of the record in the batch.
    pub index: usize,
    /// Its sequence number, as delivered.
    pub sequence_number: String,
}

/// No record at or before the stopping point has a usable sequence number, so no checkpoint can
/// be reported: the invocation must fail so that Lambda retries the whole batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "record {stopped_at} did not finish, and neither it nor any earlier record has a usable \
     SequenceNumber to report; failing the invocation so the whole batch is retried"
)]
pub struct NoCheckpoint {
    /// The first record that did not finish.
    pub stopped_at: usize,
}

impl Checkpoint {
    /// The checkpoint for a batch whose first unfinished record is `stopped_at`: that record, or
    /// the nearest earlier one with a usable sequence number (numeric, non-empty).
    pub fn at(records: &[WireRecord<'_>], stopped_at: usize) -> Result<Checkpoint, NoCheckpoint> {
        let end = stopped_at.saturating_add(1).min(records.len());
        records[..end]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(index, record)| {
                let seq = record.sequence_number.as_deref()?;
                SequenceNumber::parse(seq).ok()?;
                Some(Checkpoint { index, sequence_number: seq.to_owned() })
            })
            .ok_or(NoCheckpoint { stopped_at })
    }

    /// The response for a batch that stopped at `stopped_at`, or finished (`None`).
    pub fn response(
        records: &[WireRecord<'_>],
        stopped_at: Option<usize>,
    ) -> Result<DynamoDbEventResponse, NoCheckpoint> {
        let mut response = DynamoDbEventResponse::default();
        if let Some(stopped_at) = stopped_at {
            let checkpoint = Checkpoint::at(records, stopped_at)?;
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = Some(checkpoint.sequence_number);
            response.batch_item_failures.push(failure);
        }
        Ok(response)
    }
}

/// Lambda reports a handler error with this `errorType`; the whole batch is then retried.
impl From<NoCheckpoint> for lambda_runtime::Diagnostic {
    fn from(e: NoCheckpoint) -> lambda_runtime::Diagnostic {
        lambda_runtime::Diagnostic { error_type: "NoCheckpoint".to_owned(), error_message: e.to_string() }
    }
}

/// Ends an invocation that stopped at `stopped_at` (`None`: it finished): counts the records
/// done, logs the checkpoint (or why there is none) and returns the response. The caller writes
/// the metrics.
pub(crate) fn conclude(
    records: &[WireRecord<'_>],
    stopped_at: Option<usize>,
    metrics: &mut Metrics,
) -> Result<DynamoDbEventResponse, NoCheckpoint> {
    metrics.add(Metric::RecordsDone, stopped_at.unwrap_or(records.len()) as u64);
    let response = Checkpoint::response(records, stopped_at);
    match (&response, stopped_at) {
        (Ok(r), Some(at)) => tracing::warn!(
            stopped_at = at,
            checkpoint = ?r.batch_item_failures.first().and_then(|f| f.item_identifier.as_deref()),
            "batch stopped early; Lambda resumes from the checkpoint"
        ),
        (Err(e), _) => tracing::error!(error = %e, "failing the invocation"),
        _ => {}
    }
    response
}

#[cfg(test)]
mod tests;
