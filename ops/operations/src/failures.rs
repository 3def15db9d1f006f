//! What the functions gave up on, listed and replayed.
//!
//! Two kinds of failure leave something to replay:
//!
//! - **Ranges given up** after `MaximumRetryAttempts`: Lambda sends their place (stream, shard,
//!   first and last sequence numbers: `DDBStreamBatchInfo` from a DynamoDB stream,
//!   `KinesisBatchInfo` from a Kinesis data stream) to the on-failure destination; the local replayer writes
//!   the same shape to its failure log. [`read_queue`] reads the on-failure SQS queue's messages
//!   (and [`acknowledge`] deletes one once its range is applied); [`read_log`] reads the same
//!   shape from a file: the local failure log, or saved message bodies. A range is replayed by reading it
//!   again from the stream (`GetShardIterator AT_SEQUENCE_NUMBER`) while the stream still holds
//!   it: 24 hours.
//! - **Parked records** (record-permanent failures): whole records in S3 ([`read_parked`]),
//!   replayed as stored, at any age.
//!
//! [`read`] gets a failure's records back (a range only when it is read whole), and a
//! [`Replayer`] replays them for the function they belong to and says what came of it. Rerunning
//! through a function's code again ([`rerun`], through an [`Invoker`] as the replayer calls it) is
//! safe only for functions whose writes are ordered by version, so that an old record changes
//! nothing a newer one wrote: the aggregator (per-shard states with their sequence numbers) and
//! the archiver (objects deduplicated by `eventID`). The indexer diffs a record's own images, so
//! its records are replayed through the stream instead (`crate::verify::Mender::records`). A
//! combined function's range is replayed by each of its functions on its own records.
//! `docs/operations.md` argues each.

use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use chrono::{DateTime, Utc};
use io_policy::RequestFailed;
use key_codec::SequenceNumber;
use serde::Serialize;
use serde_json::Value;
use stream_runtime::delivery::{Invocation, Invoker, event, reader};

mod replayer;
pub use replayer::Replayer;

/// Parked records' object keys end so (`docs/formats.md`).
const PARKED_SUFFIX: &str = ".json";

/// How long a stream keeps a record.
pub const STREAM_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Why failures cannot be read or replayed.
#[derive(Debug, thiserror::Error)]
pub enum FailureError {
    /// A file could not be read.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        cause: std::io::Error,
    },
    /// A line or object is not a failure record.
    #[error("{at}: {reason}")]
    Format {
        /// Where (`file:line`, `s3://bucket/key`).
        at: String,
        /// What is wrong.
        reason: String,
    },
    /// A function to replay through cannot be configured from the environment.
    #[error("{function}: {reason}")]
    Config {
        /// The function.
        function: String,
        /// What is wrong, naming the variable.
        reason: String,
    },
    /// An S3, SQS or DynamoDB Streams request failed.
    #[error(transparent)]
    Request(#[from] io_policy::RequestFailed),
    /// Replaying records through the stream (touching their items) failed.
    #[error("cannot replay through the stream: {0}")]
    Mend(#[from] crate::verify::VerifyError),
}

/// One thing a function gave up on.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failed {
    /// The function's name: as deployed for a range (from the on-failure record's
    /// `functionArn`), the runtime's name for a parked record.
    pub function: String,
    /// When it was given up on (RFC 3339).
    pub at: String,
    /// Why.
    pub reason: String,
    /// Where its records are.
    pub records: Records,
    /// The on-failure queue's message it came from, if it was read from the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<QueueMessage>,
    /// The on-failure destination's S3 object it came from (`s3://bucket/key`), if it was read
    /// from an S3 destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
}

/// A message of the on-failure queue, to delete once its range has been replayed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueMessage {
    /// The queue.
    pub queue_url: String,
    /// The message's id.
    pub message_id: String,
    /// The handle that deletes it (valid while the message is invisible).
    #[serde(skip)]
    pub receipt_handle: String,
}

/// The kind of stream a range was read from, as its on-failure record says
/// (`DDBStreamBatchInfo` or `KinesisBatchInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// A DynamoDB stream: sequence numbers are the stream's, and its records stay 24 hours.
    DynamodbStream,
    /// A Kinesis data stream: sequence numbers are Kinesis's; its records are Kinesis records
    /// whose `data` is a DynamoDB change record.
    Kinesis,
}

/// Where a failure's records are.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Records {
    /// A range of a stream shard.
    #[serde(rename_all = "camelCase")]
    Range {
        /// The kind of stream.
        source: Source,
        /// The stream.
        stream_arn: String,
        /// The shard.
        shard_id: String,
        /// The first record's sequence number.
        start_sequence_number: String,
        /// The last record's sequence number.
        end_sequence_number: String,
        /// Records in the range.
        batch_size: u64,
        /// When its first record arrived in the stream (RFC 3339), which starts its 24 hours.
        #[serde(skip_serializing_if = "Option::is_none")]
        first_arrival: Option<String>,
        /// The records themselves, when the destination kept them (an S3 destination keeps the
        /// whole invocation record): replayable after the stream has dropped them.
        #[serde(skip)]
        kept: Option<Vec<EventRecord>>,
    },
    /// One parked record, stored whole.
    #[serde(rename_all = "camelCase")]
    Parked {
        /// `s3://bucket/key`.
        object: String,
        /// Its sequence number.
        sequence_number: String,
        /// The record.
        #[serde(skip)]
        record: Box<EventRecord>,
    },
    /// An object, message or line where a failure was expected that cannot be read as one: it
    /// is listed with why, never replayed, and left where it is.
    Unreadable {
        /// What is wrong with it.
        reason: String,
    },
}

impl Failed {
    /// Whether a range's records are still in the stream at `now`: a record stays 24 hours
    /// from its arrival, so the range's first record (`approximateArrivalOfFirstRecord`, or the
    /// time it was given up when the record lacks it) must have arrived less than 24 hours ago.
    /// Parked records, and ranges whose records an S3 destination kept, are always replayable.
    pub fn replayable(&self, now: DateTime<Utc>) -> bool {
        match &self.records {
            Records::Parked { .. } | Records::Range { kept: Some(_), .. } => true,
            // Read back from the S3 destination's payload only (`read`).
            Records::Range { source: Source::Kinesis, .. } | Records::Unreadable { .. } => false,
            Records::Range { first_arrival, .. } => {
                let since = first_arrival.as_deref().unwrap_or(&self.at);
                DateTime::parse_from_rfc3339(since).is_ok_and(|at| {
                    now.signed_duration_since(at.with_timezone(&Utc))
                        .to_std()
                        .is_ok_and(|age| age < STREAM_RETENTION)
                })
            }
        }
    }
}

/// Which function's failures to take. An on-failure record names the function by its ARN as
/// deployed, and a template that sets no `FunctionName` deploys it as
/// `<stack>-<LogicalId>-<suffix>`; a parked record names it by the runtime's name.
#[derive(Debug, Clone)]
pub struct FunctionMatch {
    /// The runtime's name (its binary's), as parked records and a `FunctionName` equal to it
    /// name it.
    pub binary: String,
    /// Its logical id in the template, as CloudFormation's generated names carry it.
    pub logical_id: String,
    /// Names or ARNs as deployed, when the operator gives them: then only these match ranges.
    pub deployed: Vec<String>,
}

impl FunctionMatch {
    /// Whether `failed` is this function's.
    pub fn matches(&self, failed: &Failed) -> bool {
        let name = failed.function.as_str();
        match &failed.records {
            Records::Unreadable { .. } => false,
            Records::Parked { .. } => name == self.binary,
            Records::Range { .. } if !self.deployed.is_empty() => {
                self.deployed.iter().any(|d| function_name(d) == name)
            }
            Records::Range { .. } => {
                name == self.binary
                    || name.split_once(&format!("-{}-", self.logical_id)).is_some_and(|(stack, suffix)| {
                        !stack.is_empty() && !suffix.is_empty() && !suffix.contains('-')
                    })
            }
        }
    }

    /// What is searched for, in words, for an error that finds nothing.
    pub fn describe(&self) -> String {
        if self.deployed.is_empty() {
            format!(
                "{} (parked), or a range given up by a function named {} or <stack>-{}-<suffix>",
                self.binary, self.binary, self.logical_id
            )
        } else {
            format!("{} (parked), or a range given up by {}", self.binary, self.deployed.join(" or "))
        }
    }
}

/// A function's name from its name or ARN (`arn:aws:lambda:<region>:<account>:function:<name>`,
/// perhaps with a `:<qualifier>` after it, as `$LATEST` or an alias).
pub fn function_name(name_or_arn: &str) -> &str {
    match name_or_arn.split_once(":function:") {
        Some((_, rest)) => rest.split(':').next().unwrap_or(rest),
        None => name_or_arn,
    }
}

/// The failures in a file of on-failure destination records, one JSON object per line (the
/// local failure log, or the bodies of the on-failure queue's messages). A file that does not
/// exist holds none: the local replayer creates its failure log when it first gives a range up.
pub fn read_log(path: &std::path::Path) -> Result<Vec<Failed>, FailureError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(cause) => return Err(FailureError::Io { path: path.display().to_string(), cause }),
    };
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            let at = format!("{}:{}", path.display(), n + 1);
            let read = serde_json::from_str::<Value>(line)
                .map_err(|e| e.to_string())
                .and_then(|value| range_of(&value).ok_or_else(|| NOT_A_RANGE.to_owned()));
            Ok(read.unwrap_or_else(|reason| unreadable(&at, reason)))
        })
        .collect()
}

/// Why an object, message or line is not a range given up.
const NOT_A_RANGE: &str = "not an on-failure record: it needs DDBStreamBatchInfo or KinesisBatchInfo with \
                           streamArn, shardId, startSequenceNumber and endSequenceNumber";

/// The failure listed for what cannot be read as one at `at` (a file's line, an object, a
/// message): one bad object does not hide the others.
fn unreadable(at: &str, reason: String) -> Failed {
    Failed {
        function: String::new(),
        at: String::new(),
        reason: format!("{at}: {reason}"),
        records: Records::Unreadable { reason },
        message: None,
        object: at.starts_with("s3://").then(|| at.to_owned()),
    }
}

fn range_of(value: &Value) -> Option<Failed> {
    let (source, info) = match (value.get("DDBStreamBatchInfo"), value.get("KinesisBatchInfo")) {
        (Some(info), _) => (Source::DynamodbStream, info),
        (None, Some(info)) => (Source::Kinesis, info),
        (None, None) => return None,
    };
    let text = |v: &Value, field: &str| v.get(field).and_then(Value::as_str).map(str::to_owned);
    let function_arn =
        value.pointer("/requestContext/functionArn").and_then(Value::as_str).unwrap_or_default();
    Some(Failed {
        function: function_name(function_arn).to_owned(),
        at: text(value, "timestamp").unwrap_or_default(),
        reason: value
            .pointer("/responseContext/reason")
            .or_else(|| value.pointer("/requestContext/condition"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        records: Records::Range {
            source,
            stream_arn: text(info, "streamArn")?,
            shard_id: text(info, "shardId")?,
            start_sequence_number: text(info, "startSequenceNumber")?,
            end_sequence_number: text(info, "endSequenceNumber")?,
            batch_size: info.get("batchSize").and_then(Value::as_u64).unwrap_or(0),
            first_arrival: text(info, "approximateArrivalOfFirstRecord"),
            kept: None,
        },
        message: None,
        object: None,
    })
}

/// The records of an S3 destination object's `payload`: the invocation's event, as an object or
/// as a string of JSON (`{"Records": [...]}`). A Kinesis mapping's event holds Kinesis records,
/// each a DynamoDB change record in its `data`: they are taken as the functions take them
/// (`stream_runtime::kinesis`), each record's sequence number its change time, after checking
/// that the payload is the range (its first and last Kinesis sequence numbers, at least its
/// `batchSize` records), since the change records no longer carry Kinesis's numbers.
fn payload_records(value: &Value, range: &Records) -> Result<Option<Vec<EventRecord>>, String> {
    let Some(payload) = value.get("payload") else {
        return Ok(None);
    };
    let event: Value = match payload {
        Value::String(text) => serde_json::from_str(text).map_err(|e| format!("its payload: {e}"))?,
        other => other.clone(),
    };
    let Records::Range {
        source: Source::Kinesis,
        start_sequence_number,
        end_sequence_number,
        batch_size,
        ..
    } = range
    else {
        let records = event.get("Records").cloned().ok_or_else(|| "its payload has no Records".to_owned())?;
        return serde_json::from_value(records).map(Some).map_err(|e| format!("its payload's records: {e}"));
    };
    let batch = stream_runtime::kinesis::from_value(&event).map_err(|e| format!("its payload: {e}"))?;
    let numbers: Vec<&str> = batch.places.sequence_numbers().collect();
    let (first, last) = (numbers.first().copied(), numbers.last().copied());
    if first != Some(start_sequence_number.as_str()) || last != Some(end_sequence_number.as_str()) {
        return Err(format!(
            "its payload runs from Kinesis sequence number {first:?} to {last:?}, not the range's \
             {start_sequence_number} to {end_sequence_number}"
        ));
    }
    if (numbers.len() as u64) < *batch_size {
        return Err(format!("its payload holds {} records, the range {batch_size}", numbers.len()));
    }
    Ok(Some(batch.event.records))
}

/// Where Lambda writes on-failure records in an S3 destination: under this prefix, then the
/// event source mapping's UUID and the shard
/// (`aws/lambda/<mapping UUID>/<shard id>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<UUID>`).
pub const DESTINATION_PREFIX: &str = "aws/lambda/";

/// The failures in an S3 on-failure destination under `s3://bucket/prefix` (by default
/// [`DESTINATION_PREFIX`]), oldest key first. Each object is Lambda's invocation record with the
/// invocation's event as `payload`, so its records replay even after the stream has dropped
/// them. Reading deletes nothing; [`acknowledge_object`] deletes an object once its range is
/// replayed.
pub async fn read_destination(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<Failed>, FailureError> {
    read_each(
        s3,
        bucket,
        prefix,
        |_| true,
        |object, bytes| {
            let read = serde_json::from_slice::<Value>(bytes).map_err(|e| e.to_string()).and_then(|value| {
                let mut failed = range_of(&value).ok_or_else(|| NOT_A_RANGE.to_owned())?;
                let found = payload_records(&value, &failed.records)?;
                if let Records::Range { kept, .. } = &mut failed.records {
                    *kept = found;
                }
                Ok(failed)
            });
            let mut failed = read.unwrap_or_else(|reason| unreadable(object, reason));
            failed.object = Some(object.to_owned());
            Ok(failed)
        },
    )
    .await
}

/// Deletes the S3 object `failed` came from, if any, once it is replayed: the S3 destination's
/// object of a range, or a parked record's object (so that the parking bucket holds what is not
/// yet replayed).
pub async fn acknowledge_object(s3: &aws_sdk_s3::Client, failed: &Failed) -> Result<bool, FailureError> {
    let parked = match &failed.records {
        Records::Parked { object, .. } => Some(object.as_str()),
        // Nothing was replayed from it: it stays.
        Records::Unreadable { .. } => return Ok(false),
        Records::Range { .. } => None,
    };
    let Some((bucket, key)) = failed
        .object
        .as_deref()
        .or(parked)
        .and_then(|o| o.strip_prefix("s3://"))
        .and_then(|o| o.split_once('/'))
    else {
        return Ok(false);
    };
    s3.delete_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| RequestFailed::sdk("DeleteObject", format!("s3://{bucket}/{key}"), &e))?;
    Ok(true)
}

/// How long messages read from the on-failure queue stay invisible to other readers: the time a
/// replay has to finish before another reader may see them again. Nothing is deleted by reading.
const QUEUE_VISIBILITY_SECONDS: i32 = 300;

/// The failures in the on-failure queue at `queue_url` (Lambda's `DDBStreamBatchInfo` messages),
/// read until the queue returns none. Reading deletes nothing: the messages become visible again
/// after five minutes, unless [`acknowledge`] deletes them (after a replay applied them).
pub async fn read_queue(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<Vec<Failed>, FailureError> {
    let mut failed = Vec::new();
    loop {
        let answer = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(QUEUE_VISIBILITY_SECONDS)
            .wait_time_seconds(0)
            .send()
            .await
            .map_err(|e| RequestFailed::sdk("ReceiveMessage", queue_url, &e))?;
        let messages = answer.messages.unwrap_or_default();
        if messages.is_empty() {
            return Ok(failed);
        }
        for message in messages {
            let id = message.message_id.clone().unwrap_or_default();
            let at = format!("{queue_url} message {id}");
            let body = message.body.as_deref().unwrap_or_default();
            let read = serde_json::from_str::<Value>(body)
                .map_err(|e| e.to_string())
                .and_then(|value| range_of(&value).ok_or_else(|| NOT_A_RANGE.to_owned()));
            let mut one = read.unwrap_or_else(|reason| unreadable(&at, reason));
            one.message = Some(QueueMessage {
                queue_url: queue_url.to_owned(),
                message_id: id,
                receipt_handle: message.receipt_handle.unwrap_or_default(),
            });
            failed.push(one);
        }
    }
}

/// Deletes the queue message `failed` came from, if any (once its range has been applied).
pub async fn acknowledge(sqs: &aws_sdk_sqs::Client, failed: &Failed) -> Result<bool, FailureError> {
    let Some(message) = &failed.message else {
        return Ok(false);
    };
    sqs.delete_message()
        .queue_url(&message.queue_url)
        .receipt_handle(&message.receipt_handle)
        .send()
        .await
        .map_err(|e| RequestFailed::sdk("DeleteMessage", &message.queue_url, &e))?;
    Ok(true)
}

/// The records parked under `s3://bucket/prefix` (format v1), oldest key first.
pub async fn read_parked(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<Failed>, FailureError> {
    read_each(s3, bucket, prefix, |k| k.ends_with(PARKED_SUFFIX), |object, bytes| parked_of(bytes, object))
        .await
}

/// Each object under `s3://bucket/prefix` whose key `keep` keeps, oldest key first, made a
/// [`Failed`] by `read` from its `s3://` address and its bytes.
async fn read_each(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    keep: impl Fn(&str) -> bool,
    read: impl Fn(&str, &[u8]) -> Result<Failed, FailureError>,
) -> Result<Vec<Failed>, FailureError> {
    let mut out = Vec::new();
    for key in stream_runtime::aws::list_keys(s3, bucket, prefix, keep, &crate::s3_budget()).await? {
        let bytes = get(s3, bucket, &key).await?;
        out.push(read(&format!("s3://{bucket}/{key}"), &bytes)?);
    }
    Ok(out)
}

/// One object's bytes.
async fn get(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<Vec<u8>, FailureError> {
    stream_runtime::aws::get_object(s3, bucket, key, &crate::s3_budget()).await?.ok_or_else(|| {
        RequestFailed::new(
            "GetObject",
            format!("s3://{bucket}/{key}"),
            io_policy::Failure::systemic("no such key"),
        )
        .into()
    })
}

/// A parked record's body (format v1, `docs/formats.md`).
fn parked_of(bytes: &[u8], object: &str) -> Result<Failed, FailureError> {
    let bad = |reason: String| FailureError::Format { at: object.to_owned(), reason };
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    if doc.get("v").and_then(Value::as_u64) != Some(1) {
        return Err(bad(format!("parked record version {}, expected 1", doc["v"])));
    }
    let record: EventRecord =
        serde_json::from_value(doc["record"].clone()).map_err(|e| bad(format!("its record: {e}")))?;
    let text = |field: &str| doc.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
    Ok(Failed {
        function: text("function"),
        at: text("parkedAt"),
        reason: format!("{}: {}", text("kind"), text("error")),
        records: Records::Parked {
            object: object.to_owned(),
            sequence_number: text("sequenceNumber"),
            record: Box::new(record),
        },
        message: None,
        object: None,
    })
}

/// What came of replaying one failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum Replayed {
    /// The function processed every record.
    Applied {
        /// How many.
        records: usize,
    },
    /// The records were replayed through the stream (the indexer's): their items touched, so
    /// the indexer re-puts their entries in order, and their deletes made where nothing newer
    /// has written the entry since.
    Mended {
        /// Records replayed.
        records: usize,
        /// Items touched.
        touched: usize,
        /// Items gone since (their REMOVE record deletes their entries).
        gone: usize,
        /// Entries deleted.
        deleted: usize,
        /// Deletes not made because a newer record has written the entry since.
        newer: usize,
    },
    /// Every record is superseded: the state it would write has been replaced since by a newer
    /// record's (a counter shard written again), so running it again would change nothing, and
    /// it was not run.
    Superseded {
        /// Records superseded.
        records: usize,
        /// Each record's sequence number, and the newer one's.
        by: String,
    },
    /// The function ran the records again and parked some of them again: their content still
    /// cannot succeed. The failure stays where it was (a parked record's object now holds the
    /// new parking), and nothing is deleted.
    ParkedAgain {
        /// Records sent.
        records: usize,
        /// Records parked again.
        parked: u64,
        /// Why: the parked record's error, where it can be read back.
        reason: String,
    },
    /// The function failed again.
    StillFailing {
        /// Records sent.
        records: usize,
        /// How it failed.
        reason: String,
    },
    /// The stream no longer holds the range (past its 24 hours, or the shard is gone): its
    /// records cannot be read back.
    NotInStream {
        /// What the stream said.
        reason: String,
    },
    /// The stream gave back only part of the range: nothing was replayed, and the failure stays.
    ShortRead {
        /// Records read.
        read: usize,
        /// What is missing.
        reason: String,
    },
    /// A combined function's range, replayed by each of its functions on its own records.
    Combined {
        /// Each function's part, in `COMBINED_FUNCTIONS` order.
        functions: Vec<Part>,
    },
}

/// One function's part of a combined function's replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Part {
    /// The function.
    pub function: String,
    /// What came of its records (`Applied` with none when its patterns passed none).
    pub replayed: Replayed,
}

impl Replayed {
    /// Whether every record of the failure has been dealt with, so its record may go: for a
    /// combined function, by every one of its functions.
    pub fn is_done(&self) -> bool {
        match self {
            Replayed::Applied { .. } | Replayed::Mended { .. } | Replayed::Superseded { .. } => true,
            Replayed::Combined { functions } => functions.iter().all(|p| p.replayed.is_done()),
            Replayed::ParkedAgain { .. }
            | Replayed::StillFailing { .. }
            | Replayed::NotInStream { .. }
            | Replayed::ShortRead { .. } => false,
        }
    }
}

/// A failure's records, read back.
#[derive(Debug, Clone)]
pub enum Read {
    /// Every record of the failure, in stream order.
    Records(Vec<EventRecord>),
    /// They cannot be had: the outcome says why.
    Unavailable(Replayed),
}

/// The records of `failed`: a parked record as stored; a range as its S3 destination object kept
/// them, or else read again from the stream with `streams`. A range counts as read only when its
/// first record is its start, its last its end, and there are at least its `batchSize` records (more when the mapping filtered some out):
/// anything less is a [`Replayed::ShortRead`].
pub async fn read(failed: &Failed, streams: &aws_sdk_dynamodbstreams::Client) -> Result<Read, FailureError> {
    let Records::Range {
        source,
        stream_arn,
        shard_id,
        start_sequence_number: start,
        end_sequence_number: end,
        batch_size,
        kept,
        ..
    } = &failed.records
    else {
        if let Records::Unreadable { reason } = &failed.records {
            return Ok(Read::Unavailable(Replayed::NotInStream { reason: format!("unreadable: {reason}") }));
        }
        return Ok(Read::Records(parked_record(&failed.records)));
    };
    // An S3 destination kept the invocation's records: exactly the batch that was given up,
    // whether or not the stream still holds it. A Kinesis payload was checked against the range
    // when it was read (`payload_records`); its records' sequence numbers are change times.
    if let (Source::Kinesis, Some(records)) = (source, kept) {
        return Ok(Read::Records(records.clone()));
    }
    let records = match kept {
        Some(records) => records.clone(),
        None if *source == Source::Kinesis => {
            return Ok(Read::Unavailable(Replayed::NotInStream {
                reason: format!(
                    "a Kinesis range is replayed from the records an S3 on-failure destination keeps, and this \
                     one has none: read {start}..{end} of {shard_id} from {stream_arn} while the stream keeps it"
                ),
            }));
        }
        None => match read_range(streams, stream_arn, shard_id, start, end).await? {
            Ok(records) => records,
            Err(reason) => return Ok(Read::Unavailable(Replayed::NotInStream { reason })),
        },
    };
    let sequence = |r: Option<&EventRecord>| r.and_then(|r| r.change.sequence_number.clone());
    let (first, last) = (sequence(records.first()), sequence(records.last()));
    let short = if first.as_deref() != Some(start.as_str()) {
        Some(format!("the read began at {first:?}, not at the range's start {start}"))
    } else if last.as_deref() != Some(end.as_str()) {
        Some(format!("the read ended at {last:?}, before the range's end {end}"))
    } else if (records.len() as u64) < *batch_size {
        Some(format!("{} records read, the range held {batch_size}", records.len()))
    } else {
        None
    };
    Ok(match short {
        Some(reason) => Read::Unavailable(Replayed::ShortRead { read: records.len(), reason }),
        None => Read::Records(records),
    })
}

/// A parked failure's record (none for a range).
fn parked_record(records: &Records) -> Vec<EventRecord> {
    match records {
        Records::Parked { record, .. } => vec![(**record).clone()],
        Records::Range { .. } | Records::Unreadable { .. } => Vec::new(),
    }
}

/// Runs `records` through `invoker` (the function they belong to) in one invocation with
/// `timeout`, and says what came of it.
pub async fn rerun(records: Vec<EventRecord>, invoker: &Invoker, timeout: Duration) -> Replayed {
    let count = records.len();
    let answer = invoker(event(records), Instant::now() + timeout).await;
    match answer {
        Invocation::Returned(response) => {
            let failures = response.get("batchItemFailures").and_then(Value::as_array).map_or(0, Vec::len);
            if failures == 0 {
                Replayed::Applied { records: count }
            } else {
                Replayed::StillFailing {
                    records: count,
                    reason: format!("the function reported batchItemFailures: {response}"),
                }
            }
        }
        Invocation::Failed { error_type, message } => {
            Replayed::StillFailing { records: count, reason: format!("{error_type}: {message}") }
        }
    }
}

/// The clients a replay reads failures back with, and acknowledges them with.
#[derive(Debug, Clone)]
pub struct ReplayClients {
    /// Reads a range back from its stream.
    pub streams: aws_sdk_dynamodbstreams::Client,
    /// Deletes a replayed range's on-failure queue message.
    pub sqs: aws_sdk_sqs::Client,
    /// Deletes a replayed range's destination object or a replayed parked record.
    pub s3: aws_sdk_s3::Client,
}

/// Replays one failure with `replayer`, each invocation bounded by `timeout`, and says what came
/// of it. Its queue message, or its S3 object (a given-up range's, a parked record's), is
/// deleted only when every record of it was applied ([`Replayed::is_done`]): a record the
/// function failed or parked again stays where it was, so a replay never loses one. A parked
/// record parked again keeps its object, which now holds the new parking (its key is its
/// sequence number and `eventID`), and the outcome gives the new parking's error.
pub async fn replay_one(
    failed: &Failed,
    with: &Replayer,
    clients: &ReplayClients,
    timeout: Duration,
) -> Result<Replayed, FailureError> {
    let outcome = match read(failed, &clients.streams).await? {
        Read::Unavailable(outcome) => outcome,
        Read::Records(records) => with.replay(records, timeout).await?,
    };
    let replayed = match (outcome, &failed.records) {
        (Replayed::ParkedAgain { records, parked, reason }, Records::Parked { object, .. }) => {
            let reason = match reparked(&clients.s3, object).await {
                Some(error) => format!("parked again: {error}"),
                None => reason,
            };
            Replayed::ParkedAgain { records, parked, reason }
        }
        (other, _) => other,
    };
    if replayed.is_done() {
        acknowledge(&clients.sqs, failed).await?;
        acknowledge_object(&clients.s3, failed).await?;
    }
    Ok(replayed)
}

/// The error of the parking now at `object` (`s3://bucket/key`), if it can be read back.
async fn reparked(s3: &aws_sdk_s3::Client, object: &str) -> Option<String> {
    let (bucket, key) = object.strip_prefix("s3://")?.split_once('/')?;
    let bytes = get(s3, bucket, key).await.ok()?;
    parked_of(&bytes, object).ok().map(|again| again.reason)
}

/// How many empty pages in a row a range's read goes through before it stops: the stream may
/// answer several empty pages before the part of the shard that holds records.
pub(crate) const MAX_EMPTY_PAGES: usize = 100;

/// The records from `start` to `end` of a shard, both included, read past empty pages (at most
/// [`MAX_EMPTY_PAGES`] in a row) until the end record, a record past it, or the shard's end;
/// the inner error when the stream cannot give them back (trimmed, or the shard unknown).
async fn read_range(
    streams: &aws_sdk_dynamodbstreams::Client,
    arn: &str,
    shard: &str,
    start: &str,
    end: &str,
) -> Result<Result<Vec<EventRecord>, String>, FailureError> {
    let target = format!("{arn} {shard} {start}..{end}");
    let end = SequenceNumber::parse(end)
        .map_err(|e| FailureError::Format { at: target.clone(), reason: e.to_string() })?;
    let iterator = streams
        .get_shard_iterator()
        .stream_arn(arn)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
        .sequence_number(start)
        .send()
        .await;
    let mut iterator = match iterator {
        Ok(got) => got.shard_iterator,
        Err(e) => {
            let gone = e
                .as_service_error()
                .is_some_and(|s| s.is_trimmed_data_access_exception() || s.is_resource_not_found_exception());
            if gone {
                return Ok(Err(io_policy::describe(&e)));
            }
            return Err(RequestFailed::sdk("GetShardIterator", target, &e).into());
        }
    };
    let mut out = Vec::new();
    let mut empty = 0;
    while let Some(at) = iterator.take() {
        let page = streams
            .get_records()
            .shard_iterator(at)
            .send()
            .await
            .map_err(|e| RequestFailed::sdk("GetRecords", &target, &e))?;
        if page.records().is_empty() {
            empty += 1;
            if empty > MAX_EMPTY_PAGES {
                break;
            }
        } else {
            empty = 0;
        }
        for record in page.records() {
            let sequence = record
                .dynamodb()
                .and_then(|d| d.sequence_number())
                .and_then(|s| SequenceNumber::parse(s).ok());
            if sequence.as_ref().is_some_and(|s| *s > end) {
                return Ok(Ok(out));
            }
            let record = reader::event_record(record, arn)
                .map_err(|e| FailureError::Format { at: target.clone(), reason: e.to_string() })?;
            out.push(record);
            if sequence.as_ref().is_some_and(|s| *s == end) {
                return Ok(Ok(out));
            }
        }
        iterator = page.next_shard_iterator;
    }
    Ok(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Kinesis record of Lambda's Kinesis event, at Kinesis sequence number `seq`, whose data
    /// is a change of item `id` at `micros` (as Kinesis Data Streams for DynamoDB writes it).
    fn kinesis_record(seq: &str, id: &str, micros: u64) -> Value {
        use base64::Engine as _;
        let data = serde_json::json!({
            "awsRegion": "us-east-1", "eventID": format!("ev-{seq}"), "eventName": "INSERT",
            "userIdentity": null, "recordFormat": "application/json", "tableName": "issues",
            "eventSource": "aws:dynamodb",
            "dynamodb": {"ApproximateCreationDateTime": micros, "Keys": {"id": {"S": id}},
                         "NewImage": {"id": {"S": id}}, "SizeBytes": 20}
        });
        serde_json::json!({
            "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": id, "sequenceNumber": seq,
                        "data": base64::engine::general_purpose::STANDARD.encode(data.to_string()),
                        "approximateArrivalTimestamp": 1.8e9},
            "eventSource": "aws:kinesis", "eventVersion": "1.0", "eventID": format!("shardId-000000000001:{seq}"),
            "eventName": "aws:kinesis:record", "awsRegion": "us-east-1",
            "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/issues-changes"
        })
    }

    /// Lambda's on-failure record for a Kinesis mapping (Lambda developer guide, "Retain
    /// discarded batch records for a Kinesis Data Streams event source in Lambda", its example
    /// invocation record), with the invocation's event as `payload`, as an S3 destination keeps it.
    fn kinesis_failure(payload: Option<Value>) -> Value {
        let mut value = serde_json::json!({
            "requestContext": {"requestId": "c9b8fa9f-5a7f-4ad6-8a4a-5e3a1a2b3c4d",
                               "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:prod-IndexerFunction-1A2B3C4D5E6F7",
                               "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 1},
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "version": "1.0", "timestamp": "2026-12-07T00:38:06.021Z",
            "KinesisBatchInfo": {"shardId": "shardId-000000000001",
                                 "startSequenceNumber": "49601189658422359378836298521827638475320189012309704722",
                                 "endSequenceNumber": "49601189658422359378836298522902373528957594348623495186",
                                 "approximateArrivalOfFirstRecord": "2026-12-07T00:38:04.835Z",
                                 "approximateArrivalOfLastRecord": "2026-12-07T00:38:05.580Z",
                                 "batchSize": 2,
                                 "streamArn": "arn:aws:kinesis:us-east-1:123456789012:stream/issues-changes"}
        });
        if let Some(payload) = payload {
            value["payload"] = payload;
        }
        value
    }

    /// Issue 76, finding 2: `failures list` failed on the whole bucket at one Kinesis object.
    #[test]
    fn a_kinesis_on_failure_record_reads_as_a_range_and_its_payload_as_change_records() {
        let (start, end) = (
            "49601189658422359378836298521827638475320189012309704722",
            "49601189658422359378836298522902373528957594348623495186",
        );
        let failed = range_of(&kinesis_failure(None)).expect("a range");
        let Records::Range { source, start_sequence_number, batch_size, kept, .. } = &failed.records else {
            panic!("a range: {failed:?}");
        };
        assert_eq!((*source, start_sequence_number.as_str(), *batch_size), (Source::Kinesis, start, 2));
        assert!(kept.is_none());
        assert_eq!(failed.function, "prod-IndexerFunction-1A2B3C4D5E6F7");
        // Without its records it cannot be replayed here (they are in the Kinesis stream only).
        assert!(!failed.replayable(Utc::now()));

        let payload = serde_json::json!({"Records": [
            kinesis_record(start, "a", 1_795_000_000_000_001),
            kinesis_record(end, "b", 1_795_000_000_000_002),
        ]});
        let value = kinesis_failure(Some(payload.clone()));
        let records = payload_records(&value, &failed.records).unwrap().expect("kept");
        let versions: Vec<Option<&str>> =
            records.iter().map(|r| r.change.sequence_number.as_deref()).collect();
        assert_eq!(
            versions,
            [Some("1795000000000001"), Some("1795000000000002")],
            "change times, as the functions took them"
        );

        // A payload that is not the range is refused, naming why.
        let short = serde_json::json!({"Records": [kinesis_record(start, "a", 1_795_000_000_000_001)]});
        let error = payload_records(&kinesis_failure(Some(short)), &failed.records).unwrap_err();
        assert!(error.contains("not the range's"), "{error}");
    }

    /// A line, message or object that is no on-failure record is listed as unreadable, beside
    /// the others, never replayed, and left where it is.
    #[test]
    fn what_cannot_be_read_is_listed_beside_the_rest() {
        let dir = std::env::temp_dir().join(format!("failures-unreadable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("failures.jsonl");
        let good = kinesis_failure(None).to_string();
        std::fs::write(&log, format!("{good}\n{{\"clicks\": 3}}\nnot json\n{good}\n")).unwrap();
        let read = read_log(&log).unwrap();
        let kinds: Vec<&str> = read
            .iter()
            .map(|f| match f.records {
                Records::Range { .. } => "range",
                Records::Unreadable { .. } => "unreadable",
                Records::Parked { .. } => "parked",
            })
            .collect();
        assert_eq!(kinds, ["range", "unreadable", "unreadable", "range"]);
        assert!(read[1].reason.contains("failures.jsonl:2: not an on-failure record"), "{}", read[1].reason);
        let any =
            FunctionMatch { binary: String::new(), logical_id: "IndexerFunction".into(), deployed: vec![] };
        assert!(!any.matches(&read[1]) && !read[1].replayable(Utc::now()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failure_log_line_reads_as_a_range() {
        let line = serde_json::json!({
            "version": "1.0", "timestamp": "2026-11-23T12:00:00.000Z",
            "requestContext": {"functionArn": "arn:aws:lambda:us-east-1:123456789012:function:prod-IndexerFunction-1A2B3C4D5E6F7",
                               "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 3},
            "responseContext": {"functionError": "Unhandled", "reason": "function error Poison: cannot index"},
            "DDBStreamBatchInfo": {"shardId": "shardId-1", "startSequenceNumber": "11", "endSequenceNumber": "12",
                                   "approximateArrivalOfFirstRecord": "2026-11-23T10:00:00Z",
                                   "approximateArrivalOfLastRecord": "2026-11-23T11:00:00Z",
                                   "batchSize": 2, "streamArn": "arn:aws:dynamodb:us-east-1:1:table/t/stream/s"}
        });
        let failed = range_of(&line).unwrap();
        assert_eq!(failed.function, "prod-IndexerFunction-1A2B3C4D5E6F7");
        assert_eq!(failed.reason, "function error Poison: cannot index");
        let Records::Range { start_sequence_number, batch_size, .. } = &failed.records else {
            panic!("a range");
        };
        assert_eq!((start_sequence_number.as_str(), *batch_size), ("11", 2));
        // 24 hours from the first record's arrival (10:00), not from the give-up (12:00).
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert!(failed.replayable(at("2026-11-24T09:59:00Z")));
        assert!(!failed.replayable(at("2026-11-24T10:01:00Z")));
        assert!(range_of(&serde_json::json!({"timestamp": "x"})).is_none());
    }

    #[test]
    fn failures_match_functions_by_what_aws_writes() {
        let range = |arn: &str| {
            range_of(&serde_json::json!({
                "timestamp": "2026-11-23T12:00:00.000Z", "requestContext": {"functionArn": arn},
                "DDBStreamBatchInfo": {"shardId": "s", "startSequenceNumber": "1", "endSequenceNumber": "2",
                                       "batchSize": 2, "streamArn": "arn"}
            }))
            .unwrap()
        };
        let indexer = FunctionMatch {
            binary: "multikey-indexer".into(),
            logical_id: "IndexerFunction".into(),
            deployed: vec![],
        };
        let arn = "arn:aws:lambda:eu-west-1:123456789012:function:";
        let cases = [
            ("prod-IndexerFunction-1A2B3C4D5E6F7", true),
            ("my-team-prod-IndexerFunction-1A2B3C4D5E6F7", true),
            ("multikey-indexer", true),
            ("prod-IndexerFunction-1A2B3C4D5E6F7:$LATEST", true),
            ("prod-ArchiverFunction-1A2B3C4D5E6F7", false),
            ("prod-IndexerFunctionX-1A2B3C4D5E6F7", false),
            ("IndexerFunction-1A2B3C4D5E6F7", false),
            ("other-multikey-indexer", false),
        ];
        for (name, want) in cases {
            assert_eq!(indexer.matches(&range(&format!("{arn}{name}"))), want, "{name}");
        }
        let explicit = FunctionMatch { deployed: vec![format!("{arn}orders-index")], ..indexer.clone() };
        assert!(explicit.matches(&range(&format!("{arn}orders-index"))));
        assert!(!explicit.matches(&range(&format!("{arn}prod-IndexerFunction-1A2B3C4D5E6F7"))));
        assert!(explicit.describe().contains("orders-index"), "{}", explicit.describe());
        assert_eq!(function_name("plain-name"), "plain-name");
    }

    #[test]
    fn a_parked_body_reads_whole_and_a_wrong_version_is_named() {
        let mut record = EventRecord::default();
        record.event_id = "e1".into();
        record.change.sequence_number = Some("41".into());
        let body = serde_json::json!({
            "v": 1, "function": "counter-aggregator", "kind": "record-permanent", "error": "bad count",
            "parkedAt": "2026-11-23T12:00:00Z", "eventID": "e1", "sequenceNumber": "41",
            "record": serde_json::to_value(&record).unwrap()
        });
        let failed = parked_of(body.to_string().as_bytes(), "s3://b/parked/x.json").unwrap();
        assert_eq!(failed.reason, "record-permanent: bad count");
        let Records::Parked { record, .. } = &failed.records else {
            panic!("parked");
        };
        assert_eq!(record.change.sequence_number.as_deref(), Some("41"));
        let mut old = body;
        old["v"] = serde_json::json!(2);
        let error = parked_of(old.to_string().as_bytes(), "s3://b/k").unwrap_err().to_string();
        assert!(error.contains("s3://b/k: parked record version 2, expected 1"), "{error}");
    }
}
