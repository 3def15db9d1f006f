//! The local failure log: one JSON line per range of records a mapping gave up on, in the shape
//! Lambda sends to an on-failure destination (an SQS message body), so the same tooling reads
//! both. Like Lambda's, it holds where the records are, not the records.
//!
//! ```json
//! {"version":"1.0","timestamp":"2026-11-21T12:00:00Z",
//!  "requestContext":{"functionArn":"arn:aws:lambda:us-east-1:123456789012:function:sidestream-local-ArchiverFunction-1KQ8V0ZJ3N5WD",
//!    "condition":"RetryAttemptsExhausted","approximateInvokeCount":11},
//!  "responseContext":{"functionError":"Unhandled","reason":"function error …"},
//!  "DDBStreamBatchInfo":{"shardId":"shardId-…","startSequenceNumber":"…","endSequenceNumber":"…",
//!    "approximateArrivalOfFirstRecord":"…","approximateArrivalOfLastRecord":"…",
//!    "batchSize":3,"streamArn":"arn:aws:dynamodb:…/stream/…"}}
//! ```

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::{FailedRange, ReplayError};

/// Where a failed range came from.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The function's ARN as deployed.
    pub function_arn: &'a str,
    /// The stream.
    pub stream_arn: &'a str,
    /// The shard.
    pub shard_id: &'a str,
}

/// The failure-log line for a range, at `now`.
pub fn entry(range: &FailedRange, origin: Origin<'_>, now: SystemTime) -> Value {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let timestamp = i64::try_from(since.as_secs())
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, since.subsec_nanos()))
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default();
    json!({
        "version": "1.0",
        "timestamp": timestamp,
        "requestContext": {
            "functionArn": origin.function_arn,
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": range.invocations,
        },
        "responseContext": {"functionError": "Unhandled", "reason": range.reason},
        "DDBStreamBatchInfo": {
            "shardId": origin.shard_id,
            "startSequenceNumber": range.start_sequence_number,
            "endSequenceNumber": range.end_sequence_number,
            "approximateArrivalOfFirstRecord": range.approximate_arrival.0,
            "approximateArrivalOfLastRecord": range.approximate_arrival.1,
            "batchSize": range.batch_size,
            "streamArn": origin.stream_arn,
        },
    })
}

/// Appends failure-log lines to a file.
#[derive(Debug, Clone)]
pub struct FailureLog {
    path: PathBuf,
}

impl FailureLog {
    /// A log at `path` (created on the first failure; parent folders too).
    pub fn new(path: impl Into<PathBuf>) -> FailureLog {
        FailureLog { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line.
    pub fn append(&self, line: &Value) -> Result<(), ReplayError> {
        let fail = |source| ReplayError::FailureLog {
            path: self.path.clone(),
            source,
        };
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(fail)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(fail)?;
        writeln!(file, "{line}").map_err(fail)
    }
}
