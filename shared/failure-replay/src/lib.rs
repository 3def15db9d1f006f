//! failure-replay: what the functions gave up on, listed and replayed.
//!
//! Two kinds of failure leave something to replay:
//!
//! - **Ranges given up** after `MaximumRetryAttempts`: Lambda sends their place (stream, shard,
//!   first and last sequence numbers) to the on-failure destination; the local replayer writes
//!   the same shape to its failure log. [`read_queue`] reads the on-failure SQS queue's messages
//!   (and [`acknowledge`] deletes one once its range is applied); [`read_log`] reads the same
//!   shape from a file: the local failure log, or saved message bodies. A range is replayed by reading it
//!   again from the stream (`GetShardIterator AT_SEQUENCE_NUMBER`) while the stream still holds
//!   it: 24 hours.
//! - **Parked records** (record-permanent failures): whole records in S3 ([`read_parked`]),
//!   replayed as stored, at any age.
//!
//! [`replay`] runs a failure's records through a function again (an [`Invoker`], as the
//! replayer calls it) and says what came of it: applied, still failing, or no longer in the
//! stream. Replayed records are idempotent like any redelivery.

use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use chrono::{DateTime, Utc};
use key_codec::SequenceNumber;
use serde::Serialize;
use serde_json::Value;
use stream_replayer::invoke::{Invoker, event};
use stream_replayer::{Invocation, reader};

/// Parked records' object keys end so (`docs/formats.md`).
const PARKED_SUFFIX: &str = ".json";

/// How long a stream keeps a record.
pub const STREAM_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Why failures cannot be read or replayed.
#[derive(Debug, thiserror::Error)]
pub enum FailureError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line or object is not a failure record.
    #[error("{at}: {reason}")]
    Format {
        /// Where (`file:line`, `s3://bucket/key`).
        at: String,
        /// What is wrong.
        reason: String,
    },
    /// An S3 or DynamoDB Streams request failed.
    #[error("{operation} {target}: {message}")]
    Request {
        /// The operation.
        operation: &'static str,
        /// Its target.
        target: String,
        /// The SDK's error, with its causes.
        message: String,
    },
}

/// One thing a function gave up on.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failed {
    /// The function (its name or ARN's last part).
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

/// Where a failure's records are.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Records {
    /// A range of a stream shard.
    #[serde(rename_all = "camelCase")]
    Range {
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
}

impl Failed {
    /// Whether a range's records are still in the stream at `now` (given up less than 24 hours
    /// ago: they were written before that); parked records are always replayable.
    pub fn replayable(&self, now: DateTime<Utc>) -> bool {
        match &self.records {
            Records::Parked { .. } => true,
            Records::Range { .. } => DateTime::parse_from_rfc3339(&self.at).is_ok_and(|at| {
                now.signed_duration_since(at.with_timezone(&Utc))
                    .to_std()
                    .is_ok_and(|age| age < STREAM_RETENTION)
            }),
        }
    }
}

/// The failures in a file of on-failure destination records, one JSON object per line (the
/// local failure log, or the bodies of the on-failure queue's messages).
pub fn read_log(path: &std::path::Path) -> Result<Vec<Failed>, FailureError> {
    let text = std::fs::read_to_string(path).map_err(|source| FailureError::Io {
        path: path.display().to_string(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            let at = format!("{}:{}", path.display(), n + 1);
            let value: Value = serde_json::from_str(line).map_err(|e| FailureError::Format {
                at: at.clone(),
                reason: e.to_string(),
            })?;
            range_of(&value).ok_or_else(|| FailureError::Format {
                at,
                reason: "not an on-failure record: it needs DDBStreamBatchInfo with streamArn, shardId, startSequenceNumber and endSequenceNumber".to_owned(),
            })
        })
        .collect()
}

fn range_of(value: &Value) -> Option<Failed> {
    let info = value.get("DDBStreamBatchInfo")?;
    let text = |v: &Value, field: &str| v.get(field).and_then(Value::as_str).map(str::to_owned);
    let function_arn = value
        .pointer("/requestContext/functionArn")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(Failed {
        function: function_arn.rsplit(':').next().unwrap_or_default().to_owned(),
        at: text(value, "timestamp").unwrap_or_default(),
        reason: value
            .pointer("/responseContext/reason")
            .or_else(|| value.pointer("/requestContext/condition"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        records: Records::Range {
            stream_arn: text(info, "streamArn")?,
            shard_id: text(info, "shardId")?,
            start_sequence_number: text(info, "startSequenceNumber")?,
            end_sequence_number: text(info, "endSequenceNumber")?,
            batch_size: info.get("batchSize").and_then(Value::as_u64).unwrap_or(0),
        },
        message: None,
    })
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
            .map_err(|e| FailureError::Request {
                operation: "ReceiveMessage",
                target: queue_url.to_owned(),
                message: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
            })?;
        let messages = answer.messages.unwrap_or_default();
        if messages.is_empty() {
            return Ok(failed);
        }
        for message in messages {
            let id = message.message_id.clone().unwrap_or_default();
            let at = format!("{queue_url} message {id}");
            let body = message.body.as_deref().unwrap_or_default();
            let value: Value = serde_json::from_str(body).map_err(|e| FailureError::Format {
                at: at.clone(),
                reason: e.to_string(),
            })?;
            let mut one = range_of(&value).ok_or_else(|| FailureError::Format {
                at,
                reason: "not an on-failure record: it needs DDBStreamBatchInfo with streamArn, shardId, startSequenceNumber and endSequenceNumber".to_owned(),
            })?;
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
        .map_err(|e| FailureError::Request {
            operation: "DeleteMessage",
            target: message.queue_url.clone(),
            message: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
        })?;
    Ok(true)
}

/// The records parked under `s3://bucket/prefix` (format v1), oldest key first.
pub async fn read_parked(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<Failed>, FailureError> {
    let request = |operation, target: String| {
        move |e: String| FailureError::Request {
            operation,
            target,
            message: e,
        }
    };
    let mut keys = Vec::new();
    let mut pages = s3
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| {
            request("ListObjectsV2", format!("s3://{bucket}/{prefix}"))(
                aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
            )
        })?;
        keys.extend(
            page.contents()
                .iter()
                .filter_map(|o| o.key())
                .filter(|k| k.ends_with(PARKED_SUFFIX))
                .map(str::to_owned),
        );
    }
    keys.sort();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let object = format!("s3://{bucket}/{key}");
        let got = s3
            .get_object()
            .bucket(bucket)
            .key(&key)
            .send()
            .await
            .map_err(|e| {
                request("GetObject", object.clone())(aws_sdk_s3::error::DisplayErrorContext(&e).to_string())
            })?;
        let bytes = got
            .body
            .collect()
            .await
            .map_err(|e| request("GetObject", object.clone())(e.to_string()))?
            .into_bytes();
        out.push(parked_of(&bytes, &object)?);
    }
    Ok(out)
}

/// A parked record's body (format v1, `docs/formats.md`).
fn parked_of(bytes: &[u8], object: &str) -> Result<Failed, FailureError> {
    let bad = |reason: String| FailureError::Format {
        at: object.to_owned(),
        reason,
    };
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    if doc.get("v").and_then(Value::as_u64) != Some(1) {
        return Err(bad(format!("parked record version {}, expected 1", doc["v"])));
    }
    let record: EventRecord =
        serde_json::from_value(doc["record"].clone()).map_err(|e| bad(format!("its record: {e}")))?;
    let text = |field: &str| {
        doc.get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
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
}

/// Replays `failed` through `invoker` (the function it belongs to), each invocation with
/// `timeout`; ranges are read again from the stream with `streams`.
pub async fn replay(
    failed: &Failed,
    streams: &aws_sdk_dynamodbstreams::Client,
    invoker: &Invoker,
    timeout: Duration,
) -> Result<Replayed, FailureError> {
    let records = match &failed.records {
        Records::Parked { record, .. } => vec![(**record).clone()],
        Records::Range {
            stream_arn,
            shard_id,
            start_sequence_number,
            end_sequence_number,
            ..
        } => match read_range(
            streams,
            stream_arn,
            shard_id,
            start_sequence_number,
            end_sequence_number,
        )
        .await?
        {
            Ok(records) => records,
            Err(reason) => return Ok(Replayed::NotInStream { reason }),
        },
    };
    let count = records.len();
    let answer = invoker(event(records), Instant::now() + timeout).await;
    Ok(match answer {
        Invocation::Returned(response) => {
            let failures = response
                .get("batchItemFailures")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if failures == 0 {
                Replayed::Applied { records: count }
            } else {
                Replayed::StillFailing {
                    records: count,
                    reason: format!("the function reported batchItemFailures: {response}"),
                }
            }
        }
        Invocation::Failed { error_type, message } => Replayed::StillFailing {
            records: count,
            reason: format!("{error_type}: {message}"),
        },
    })
}

/// The records from `start` to `end` of a shard; the inner error when the stream cannot give
/// them back (trimmed, or the shard unknown).
async fn read_range(
    streams: &aws_sdk_dynamodbstreams::Client,
    arn: &str,
    shard: &str,
    start: &str,
    end: &str,
) -> Result<Result<Vec<EventRecord>, String>, FailureError> {
    let target = format!("{arn} {shard} {start}..{end}");
    let end = SequenceNumber::parse(end).map_err(|e| FailureError::Format {
        at: target.clone(),
        reason: e.to_string(),
    })?;
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
            let message = aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e).to_string();
            if gone {
                return Ok(Err(message));
            }
            return Err(FailureError::Request {
                operation: "GetShardIterator",
                target,
                message,
            });
        }
    };
    let mut out = Vec::new();
    while let Some(at) = iterator.take() {
        let page = streams
            .get_records()
            .shard_iterator(at)
            .send()
            .await
            .map_err(|e| FailureError::Request {
                operation: "GetRecords",
                target: target.clone(),
                message: aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e).to_string(),
            })?;
        if page.records().is_empty() {
            break;
        }
        for record in page.records() {
            let sequence = record
                .dynamodb()
                .and_then(|d| d.sequence_number())
                .and_then(|s| SequenceNumber::parse(s).ok());
            if sequence.is_some_and(|s| s > end) {
                return Ok(Ok(out));
            }
            let record = reader::event_record(record, arn).map_err(|e| FailureError::Format {
                at: target.clone(),
                reason: e.to_string(),
            })?;
            out.push(record);
        }
        iterator = page.next_shard_iterator;
    }
    Ok(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_log_line_reads_as_a_range() {
        let line = serde_json::json!({
            "version": "1.0", "timestamp": "2026-11-23T12:00:00.000Z",
            "requestContext": {"functionArn": "arn:aws:lambda:us-east-1:000000000000:function:multikey-indexer",
                               "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 3},
            "responseContext": {"functionError": "Unhandled", "reason": "function error Poison: cannot index"},
            "DDBStreamBatchInfo": {"shardId": "shardId-1", "startSequenceNumber": "11", "endSequenceNumber": "12",
                                   "batchSize": 2, "streamArn": "arn:aws:dynamodb:us-east-1:1:table/t/stream/s"}
        });
        let failed = range_of(&line).unwrap();
        assert_eq!(failed.function, "multikey-indexer");
        assert_eq!(failed.reason, "function error Poison: cannot index");
        let Records::Range {
            start_sequence_number,
            batch_size,
            ..
        } = &failed.records
        else {
            panic!("a range");
        };
        assert_eq!((start_sequence_number.as_str(), *batch_size), ("11", 2));
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert!(failed.replayable(at("2026-11-24T11:59:00Z")));
        assert!(!failed.replayable(at("2026-11-24T12:01:00Z")));
        assert!(range_of(&serde_json::json!({"timestamp": "x"})).is_none());
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
        let error = parked_of(old.to_string().as_bytes(), "s3://b/k")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("s3://b/k: parked record version 2, expected 1"),
            "{error}"
        );
    }
}
