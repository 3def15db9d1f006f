//! A deadline-aware DynamoDB writer for stream processors.
//!
//! [`Writer::write`] applies a batch of planned [`Write`]s with `BatchWriteItem`:
//!
//! - **Chunks of at most 25 writes**, DynamoDB's limit, several tables per request allowed. The
//!   caller guarantees that no two writes in one call share a table and key (a plan that
//!   coalesces by key does); DynamoDB rejects a request that repeats a key, and that rejection is
//!   reported as a failure, never dropped.
//! - **Bounded concurrency**: at most `concurrency` requests in flight. Because each key gets one
//!   write, their order does not matter.
//! - **Retries** of `UnprocessedItems`, throttling and server errors, with exponential backoff and
//!   full jitter (see [`retry`]). Client errors such as a missing table fail at once.
//! - **The invocation deadline.** Work stops `margin` before the deadline: no attempt starts, and no
//!   backoff sleeps, past that point, and an attempt in flight is cut off there. What is left is
//!   reported as failed, so the function can report a checkpoint instead of timing out (a timeout
//!   replays the whole batch).
//!
//! The writer owns retrying: [`Writer::new`] builds its client with the SDK's own retries turned
//! off, so attempts are counted once and the deadline is honoured.
//!
//! [`Report`] says what happened: writes done, requests and retries sent, and the earliest
//! `origin` among failed writes, which is where the batch must resume.

pub mod retry;
mod send;

pub use retry::{ErrorClass, RetryPolicy, WriterConfig};
pub use send::Writer;
pub use stream_kit::{Op, Write};

/// What one call to [`Writer::write`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Item writes DynamoDB applied.
    pub writes: u64,
    /// `BatchWriteItem` requests sent, retries included.
    pub requests: u64,
    /// Requests that were retries.
    pub retries: u64,
    /// Item writes that were given up on.
    pub failed: u64,
    /// The smallest `origin` among the failed writes: the batch resumes from that record.
    pub first_failed_origin: Option<usize>,
    /// Why the first write was given up on, for the log.
    pub first_error: Option<String>,
}

impl Report {
    fn merge(&mut self, other: Report) {
        self.writes += other.writes;
        self.requests += other.requests;
        self.retries += other.retries;
        self.failed += other.failed;
        self.first_failed_origin = match (self.first_failed_origin, other.first_failed_origin) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// DynamoDB's limit on writes per `BatchWriteItem` request.
pub const MAX_BATCH: usize = 25;

/// The number of requests a call with `writes` writes makes when nothing is retried.
pub const fn requests_for(writes: usize) -> usize {
    writes.div_ceil(MAX_BATCH)
}
