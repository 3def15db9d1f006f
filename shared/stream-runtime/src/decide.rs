//! The failure model's decision: where the batch resumes, and which records are parked.
//!
//! - The **checkpoint** is the earliest record with a transient or systemic failure: Lambda
//!   redelivers it and everything after it.
//! - Records with a record-permanent failure **before** the checkpoint are parked (once each,
//!   with their first failure). Those at or after it are left alone: they are redelivered, and
//!   parked then if they fail again.

use io_policy::{Failure, FailureKind};

use crate::RecordFailure;

/// What to do with a batch's failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Where the batch resumes, and the failure that put it there.
    pub checkpoint: Option<RecordFailure>,
    /// Records to park, in batch order.
    pub park: Vec<RecordFailure>,
}

/// Decides from every failure of a batch, in any order.
pub(crate) fn decide(failures: &[RecordFailure]) -> Decision {
    let checkpoint = failures
        .iter()
        .filter(|f| f.failure.kind != FailureKind::RecordPermanent)
        .min_by_key(|f| f.record)
        .cloned();
    let before = checkpoint.as_ref().map_or(usize::MAX, |c| c.record);
    let mut park: Vec<RecordFailure> = failures
        .iter()
        .filter(|f| f.failure.kind == FailureKind::RecordPermanent && f.record < before)
        .cloned()
        .collect();
    park.sort_by_key(|f| f.record);
    park.dedup_by_key(|f| f.record);
    Decision { checkpoint, park }
}

impl Decision {
    /// Moves the checkpoint back to `record`, which could not be parked.
    pub(crate) fn unparked(&mut self, record: usize, failure: Failure) {
        if self.checkpoint.as_ref().is_none_or(|c| record < c.record) {
            self.checkpoint = Some(RecordFailure { record, failure });
        }
        self.park.retain(|p| p.record < record);
    }
}

#[cfg(test)]
mod tests;
