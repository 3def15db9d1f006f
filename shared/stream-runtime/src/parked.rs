//! Parked records, format version 1: where a record that can never succeed is kept, whole.
//!
//! A record with a record-permanent failure is written to S3 as one JSON object:
//!
//! ```text
//! {PARKING_PREFIX}{function}/{sequence number, 40 digits}-{eventID}.json
//! ```
//!
//! ```json
//! {"v":1,"function":"multikey-indexer","kind":"record-permanent",
//!  "error":"index item … is 512000 bytes; DynamoDB's item limit is 409600 bytes",
//!  "parkedAt":"2026-11-23T12:00:00Z","eventID":"…","sequenceNumber":"…",
//!  "record":{…the stream record exactly as Lambda delivered it…}}
//! ```
//!
//! - The key is the record's own (its sequence number zero-padded to 40 digits, then its
//!   `eventID` with only letters, digits and `-` kept), so parking the same record again, on a
//!   redelivery, overwrites the same object: parking is idempotent. Keys sort in stream order
//!   within a shard. A record without a usable sequence number is named `none`, and one without
//!   an eventID gets no suffix.
//! - `record` is the full stream record, both images included, so it can be replayed once the
//!   cause is fixed.
//!
//! Why S3 and not SQS: a stream record with two images of up to 400 KB each does not fit an SQS
//! message, SQS keeps messages 14 days at most, and a deterministic key makes parking idempotent.
//! Parked records are counted (`ParkedRecords`) and alarmed instead of counted by the queue.

use chrono::{DateTime, SecondsFormat, Utc};
use io_policy::Failure;
use key_codec::SequenceNumber;
use serde_json::{Value, json};
use stream_kit::EventRecord;

/// The format version, `v` in every parked record.
pub const VERSION: u32 = 1;

/// The object key of `record`, parked by `function` under `prefix`.
pub fn key(prefix: &str, function: &str, record: &EventRecord) -> String {
    let seq = record
        .change
        .sequence_number
        .as_deref()
        .and_then(|s| SequenceNumber::parse(s).ok())
        .map_or_else(|| "none".to_owned(), |s| s.to_fixed_width());
    let id: String = record
        .event_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(128)
        .collect();
    let function: String = function
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    if id.is_empty() {
        format!("{prefix}{function}/{seq}.json")
    } else {
        format!("{prefix}{function}/{seq}-{id}.json")
    }
}

/// The parked object's body.
pub fn body(function: &str, record: &EventRecord, failure: &Failure, parked_at: DateTime<Utc>) -> Vec<u8> {
    let doc = json!({
        "v": VERSION,
        "function": function,
        "kind": failure.kind.as_str(),
        "error": failure.message,
        "parkedAt": parked_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        "eventID": record.event_id,
        "sequenceNumber": record.change.sequence_number,
        "record": serde_json::to_value(record).unwrap_or(Value::Null),
    });
    let mut bytes = doc.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests;
