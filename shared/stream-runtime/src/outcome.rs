//! What a plan reports besides its writes: the records it rejected and the record it stopped at
//! ([`PlanFailures`], built by every plan's loop, [`PlanFailures::plan_each`]), and the records
//! it skipped on purpose ([`Skipped`]). The runtime turns them into the batch's response.

use io_policy::FailureKind;

/// A record a plan could not handle, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFailure<E> {
    /// Its position in the batch.
    pub record: usize,
    /// Why it cannot be processed.
    pub error: E,
}

/// How planning a batch record by record went wrong, if it did: the records rejected as
/// record-permanent (planning went on past them; the runtime parks them) and the record planning
/// stopped at (any other kind of failure: nothing at or after it is planned, and it becomes the
/// batch's checkpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFailures<E> {
    /// Records rejected as record-permanent, in order.
    pub rejected: Vec<PlanFailure<E>>,
    /// The record planning stopped at, if it did.
    pub stopped: Option<PlanFailure<E>>,
}

impl<E> Default for PlanFailures<E> {
    fn default() -> PlanFailures<E> {
        PlanFailures { rejected: Vec::new(), stopped: None }
    }
}

impl<E> PlanFailures<E> {
    /// Plans `records` in order, `step` planning one: a record whose failure `kind` calls
    /// record-permanent is rejected and planning goes on; any other failure stops planning there.
    /// Every plan's loop over its records is this one.
    /// A step may keep what it borrows of a record for as long as the records live.
    pub fn plan_each<'r, R>(
        records: &'r [R],
        kind: impl Fn(&E) -> FailureKind,
        step: impl FnMut(usize, &'r R) -> Result<(), E>,
    ) -> PlanFailures<E> {
        PlanFailures::plan_these(records.iter().enumerate(), kind, step)
    }

    /// [`PlanFailures::plan_each`] of some of a batch's records, each with its position in the
    /// batch, in the batch's order.
    pub fn plan_these<'r, R: 'r>(
        records: impl IntoIterator<Item = (usize, &'r R)>,
        kind: impl Fn(&E) -> FailureKind,
        mut step: impl FnMut(usize, &'r R) -> Result<(), E>,
    ) -> PlanFailures<E> {
        let mut failures = PlanFailures::default();
        for (record, raw) in records {
            if let Err(error) = step(record, raw) {
                if kind(&error) == FailureKind::RecordPermanent {
                    failures.rejected.push(PlanFailure { record, error });
                } else {
                    failures.stopped = Some(PlanFailure { record, error });
                    break;
                }
            }
        }
        failures
    }
}

/// A record a plan deliberately left alone, and why (it is counted, not retried).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped<R> {
    /// Its position in the batch.
    pub record: usize,
    /// Why.
    pub reason: R,
}

#[cfg(test)]
mod tests;
