//! A deadline-aware DynamoDB writer for stream processors.
//!
//! [`Writer::write`] applies a batch of planned [`ItemWrite`]s with `BatchWriteItem`, under the
//! one I/O policy ([`io_policy::Budget`]); `Writer::write_as_ready` the chunks of a plan still
//! being made, each sent as soon as it is ready and the window admits it:
//!
//! - **Chunks of at most 25 writes**, DynamoDB's limit, several tables per request allowed. The
//!   caller guarantees that no two writes in one call share a table and key (a plan that
//!   coalesces by key does); DynamoDB rejects a request that repeats a key.
//! - **Adaptive concurrency**: at most the budget's window ([`io_policy::Window`]) of requests
//!   in flight; it starts at `policy.concurrency`, grows while answers are clean up to
//!   `policy.max_concurrency`, and halves on throttling and on `UnprocessedItems`. Because each
//!   key gets one write, their order does not matter.
//! - **Retries** of `UnprocessedItems`, throttling and server errors, with jittered exponential
//!   backoff, a per-attempt timeout and the invocation's deadline, all from the budget. Only the
//!   unprocessed writes are sent again.
//! - **Narrowing.** A `ValidationException` says nothing about which of a request's 25 writes
//!   caused it. A chunk that fails with a record-permanent failure is split in halves and each
//!   half sent again, down to single writes, so that only the writes that cause it fail as
//!   record-permanent; the others are applied.
//!
//! [`Writer::write_versioned`] puts items guarded by the version each carries: a put is applied
//! only where the stored item is absent or older, so that a request landing after a newer write
//! of the same key (its invocation superseded) is refused ([`versioned`](crate::writer::VersionedReport)).
//!
//! [`Report`] says what happened: writes done, and each failed write's `origin` (the record it
//! finishes) with its classified failure.

mod send;
mod versioned;

pub use crate::{ItemWrite, Op};
pub use send::Writer;
pub use versioned::{CHUNK, VersionedReport, requests_for_versioned};

use io_policy::{Attempts, Budget, Failure};

/// What one call to [`Writer::write`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Item writes DynamoDB applied.
    pub writes: u64,
    /// Item writes that were given up on.
    pub failed: u64,
    /// For each write given up on, its origin and why, in no particular order.
    pub failures: Vec<(usize, Failure)>,
}

impl From<Report> for crate::Applied {
    /// What a write did, as the runtime takes it: each write given up on fails its record.
    fn from(report: Report) -> crate::Applied {
        crate::Applied {
            failures: report
                .failures
                .into_iter()
                .map(|(origin, f)| crate::RecordFailure::new(origin, f))
                .collect(),
            writes: report.writes,
            failed_writes: report.failed,
            counts: Vec::new(),
        }
    }
}

impl Report {
    fn merge(&mut self, other: Report) {
        self.writes += other.writes;
        self.failed += other.failed;
        self.failures.extend(other.failures);
    }
}

/// The writers' one retry loop, over the writes still pending: [`Retry::next`] waits until the
/// budget allows another attempt ([`Attempts`]: backoff, attempts and time bounded) and hands
/// over what is pending; the attempt hands back what it left and why ([`Retry::left`]).
pub(crate) struct Retry<'b, P> {
    attempts: Attempts<'b>,
    last: Option<Failure>,
    pending: Vec<P>,
}

/// What a [`Retry`] ended with, when it did not end with every write done: the writes left, and
/// the failure that ended it (not transient, or the budget's last).
pub(crate) type Ended<P> = (Vec<P>, Failure);

impl<'b, P> Retry<'b, P> {
    /// A retry of `pending` under `budget`.
    pub(crate) fn new(budget: &'b Budget, pending: Vec<P>) -> Retry<'b, P> {
        Retry { attempts: budget.attempts(), last: None, pending }
    }

    /// The next attempt's writes, with the attempts to send them under; `None` once none is
    /// pending. An `Err` when the budget allows no more (or the last failure was not transient).
    pub(crate) async fn next(&mut self) -> Result<Option<(Vec<P>, &mut Attempts<'b>)>, Ended<P>> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let pending = std::mem::take(&mut self.pending);
        match self.attempts.next(self.last.take()).await {
            Ok(()) => Ok(Some((pending, &mut self.attempts))),
            Err(failure) => Err((pending, failure)),
        }
    }

    /// What the attempt left to send again, and the failure that left it.
    pub(crate) fn left(&mut self, pending: Vec<P>, failure: Failure) {
        (self.pending, self.last) = (pending, Some(failure));
    }
}

/// DynamoDB's limit on writes per `BatchWriteItem` request.
pub(crate) const MAX_BATCH: usize = 25;

/// `writes` cut into chunks of at most `size`, in order.
pub(crate) fn chunks(writes: Vec<ItemWrite>, size: usize) -> Vec<Vec<ItemWrite>> {
    let mut chunks = Vec::with_capacity(writes.len().div_ceil(size.max(1)));
    let mut writes = writes.into_iter();
    loop {
        let chunk: Vec<ItemWrite> = writes.by_ref().take(size.max(1)).collect();
        if chunk.is_empty() {
            return chunks;
        }
        chunks.push(chunk);
    }
}

/// The number of requests a call with `writes` writes makes when nothing is retried.
pub const fn requests_for(writes: usize) -> usize {
    writes.div_ceil(MAX_BATCH)
}
