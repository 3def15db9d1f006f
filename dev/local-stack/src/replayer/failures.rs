//! The local failure log: one JSON line per range of records a mapping gave up on, in the shape
//! Lambda sends to an on-failure destination (an SQS message body), so the same tooling reads
//! both. Like Lambda's, it holds where the records are, not the records.
//!
//! Given an S3 bucket ([`FailureLog::with_s3_destination`]), the log also writes what Lambda
//! writes to an S3 on-failure destination: the same record with the invocation's event as
//! `payload`, one object per range, named
//! `aws/lambda/<mapping UUID>/<shard>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<random UUID>`.
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

use crate::replayer::{FailedRange, ReplayError};
use stream_runtime::delivery::RequestError;

/// Where Lambda writes S3 on-failure records, under the bucket's root.
pub(crate) const S3_PREFIX: &str = "aws/lambda/";

/// Where a failed range came from.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The function's ARN as deployed.
    pub function_arn: &'a str,
    /// Its event source mapping's UUID.
    pub mapping_uuid: &'a str,
    /// The stream.
    pub stream_arn: &'a str,
    /// The shard.
    pub shard_id: &'a str,
    /// The range as a Kinesis data stream holds it, when the mapping reads one: then the range
    /// is reported as Lambda reports a Kinesis mapping's (`KinesisBatchInfo`, Kinesis sequence
    /// numbers, the Kinesis records as `payload`).
    pub kinesis: Option<&'a KinesisRange>,
}

/// A range of a Kinesis data stream: its ARN, and its records as Lambda's Kinesis event holds
/// them, in the stream's order.
#[derive(Debug, Clone)]
pub struct KinesisRange {
    /// The Kinesis stream.
    pub stream_arn: String,
    /// Its records.
    pub records: Vec<Value>,
}

impl KinesisRange {
    /// The shard (from the first record's `eventID`, `shardId-…:<sequence number>`) and the first
    /// and last records' sequence numbers.
    fn place(&self) -> (String, String, String) {
        let text = |r: Option<&Value>, pointer: &str| {
            r.and_then(|r| r.pointer(pointer)).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let shard = text(self.records.first(), "/eventID").split(':').next().unwrap_or_default().to_owned();
        (
            shard,
            text(self.records.first(), "/kinesis/sequenceNumber"),
            text(self.records.last(), "/kinesis/sequenceNumber"),
        )
    }
}

/// The failure-log line for a range, at `now`.
pub fn entry(range: &FailedRange, origin: Origin<'_>, now: SystemTime) -> Value {
    let timestamp =
        utc(now).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)).unwrap_or_default();
    json!({
        "version": "1.0",
        "timestamp": timestamp,
        "requestContext": {
            "functionArn": origin.function_arn,
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": range.invocations,
        },
        "responseContext": {"functionError": "Unhandled", "reason": range.reason},
        info_key(origin): info(range, origin),
    })
}

fn info_key(origin: Origin<'_>) -> &'static str {
    if origin.kinesis.is_some() { "KinesisBatchInfo" } else { "DDBStreamBatchInfo" }
}

/// Lambda's `DDBStreamBatchInfo`, or `KinesisBatchInfo` for a Kinesis mapping's range.
fn info(range: &FailedRange, origin: Origin<'_>) -> Value {
    let (shard, start, end, stream) = match origin.kinesis {
        Some(kinesis) => {
            let (shard, start, end) = kinesis.place();
            (shard, start, end, kinesis.stream_arn.as_str())
        }
        None => (
            origin.shard_id.to_owned(),
            range.start_sequence_number.clone(),
            range.end_sequence_number.clone(),
            origin.stream_arn,
        ),
    };
    json!({
        "shardId": shard,
        "startSequenceNumber": start,
        "endSequenceNumber": end,
        "approximateArrivalOfFirstRecord": range.approximate_arrival.0,
        "approximateArrivalOfLastRecord": range.approximate_arrival.1,
        "batchSize": range.batch_size,
        "streamArn": stream,
    })
}

fn utc(at: SystemTime) -> Option<chrono::DateTime<chrono::Utc>> {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_secs())
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, since.subsec_nanos()))
}

/// The S3 object Lambda writes for a range given up: its key and its body, the failure-log
/// record with the invocation's event (the range's records) as `payload`.
pub(crate) fn s3_object(range: &FailedRange, origin: Origin<'_>, now: SystemTime) -> (String, Value) {
    let mut body = entry(range, origin, now);
    // The invocation's event, as Lambda sent it: `{"Records": [...]}`.
    body["payload"] = match origin.kinesis {
        Some(kinesis) => json!({ "Records": kinesis.records }),
        None => json!({ "Records": range.records }),
    };
    let shard = body[info_key(origin)]["shardId"].as_str().unwrap_or_default().to_owned();
    let at = utc(now).unwrap_or_default();
    let key = format!(
        "{S3_PREFIX}{mapping}/{shard}/{day}/{second}-{random}",
        mapping = origin.mapping_uuid,
        day = at.format("%Y/%m/%d"),
        second = at.format("%Y-%m-%dT%H.%M.%S"),
        random = uuid(&[&shard, &range.start_sequence_number, &at.to_rfc3339()]),
    );
    (key, body)
}

/// A UUID-shaped name, the same for the same parts (an S3 on-failure object's, or a mapping's
/// on the local stack).
pub fn uuid(parts: &[&str]) -> String {
    let high = crate::replayer::faults::hash(parts.join("\u{0}").as_bytes());
    let low = crate::replayer::faults::hash(parts.join("\u{1}").as_bytes());
    let hex = format!("{high:016x}{low:016x}");
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// An S3 bucket given as the mappings' on-failure destination.
#[derive(Debug, Clone)]
struct S3Destination {
    client: aws_sdk_s3::Client,
    bucket: String,
}

/// An SQS queue given as the mappings' on-failure destination.
#[derive(Debug, Clone)]
struct SqsDestination {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

/// Appends failure-log lines to a file, and sends each range to an SQS destination and writes it
/// to an S3 destination if given them.
#[derive(Debug, Clone)]
pub struct FailureLog {
    path: PathBuf,
    s3: Option<S3Destination>,
    sqs: Option<SqsDestination>,
}

impl FailureLog {
    /// A log at `path` (created on the first failure; parent folders too).
    pub fn new(path: impl Into<PathBuf>) -> FailureLog {
        FailureLog { path: path.into(), s3: None, sqs: None }
    }

    /// Also sends each range given up to the queue at `queue_url`, as Lambda sends to an SQS
    /// on-failure destination: the log's line as the message body.
    #[must_use]
    pub(crate) fn with_sqs_destination(
        mut self,
        client: aws_sdk_sqs::Client,
        queue_url: impl Into<String>,
    ) -> FailureLog {
        self.sqs = Some(SqsDestination { client, queue_url: queue_url.into() });
        self
    }

    /// Also writes each range given up to `bucket`, as Lambda writes to an S3 on-failure
    /// destination (see the module's documentation).
    #[must_use]
    pub fn with_s3_destination(
        mut self,
        client: aws_sdk_s3::Client,
        bucket: impl Into<String>,
    ) -> FailureLog {
        self.s3 = Some(S3Destination { client, bucket: bucket.into() });
        self
    }

    /// Records a range given up at `now`: a line in the log, and an object in the S3 destination.
    pub async fn record(
        &self,
        range: &FailedRange,
        origin: Origin<'_>,
        now: SystemTime,
    ) -> Result<(), ReplayError> {
        let line = entry(range, origin, now);
        self.append(&line)?;
        if let Some(sqs) = &self.sqs {
            sqs.client
                .send_message()
                .queue_url(&sqs.queue_url)
                .message_body(line.to_string())
                .send()
                .await
                .map_err(|e| RequestError::request("SendMessage", &sqs.queue_url, &e))?;
        }
        let Some(s3) = &self.s3 else {
            return Ok(());
        };
        let (key, body) = s3_object(range, origin, now);
        s3.client
            .put_object()
            .bucket(&s3.bucket)
            .key(&key)
            .content_type("application/json")
            .body(body.to_string().into_bytes().into())
            .send()
            .await
            .map_err(|e| RequestError::request("PutObject", &format!("s3://{}/{key}", s3.bucket), &e))?;
        Ok(())
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line.
    pub fn append(&self, line: &Value) -> Result<(), ReplayError> {
        let fail = |source| ReplayError::FailureLog { path: self.path.clone(), cause: source };
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(fail)?;
        }
        let mut file =
            std::fs::OpenOptions::new().create(true).append(true).open(&self.path).map_err(fail)?;
        writeln!(file, "{line}").map_err(fail)
    }
}
