//! Parked records, format version 1: where a record that can never succeed is kept, whole.
//!
//! A record with a record-permanent failure is written to S3 as one JSON object under a key of its
//! own, `{PARKING_PREFIX}{function}/{sequence number, 40 digits}-{eventID}.json`, so parking it
//! again on a redelivery overwrites the same object. The body holds the whole stream record, the
//! function, the error and its kind, and the time. The format is specified, with a vector, in
//! `docs/formats.md` at the repository's root (with why S3 and not SQS); the tests pin it.

use crate::wire::WireRecord;
use chrono::{DateTime, SecondsFormat, Utc};
use io_policy::Failure;
use key_codec::SequenceNumber;
use serde_json::{Value, json};

/// The format version, `v` in every parked record.
pub const VERSION: u32 = 1;

/// The object key of `record`, parked by `function` under `prefix`.
pub fn key(prefix: &str, function: &str, record: &WireRecord<'_>) -> String {
    let seq = record
        .sequence_number
        .as_deref()
        .and_then(|s| SequenceNumber::parse(s).ok())
        .map_or_else(|| "none".to_owned(), |s| s.to_fixed_width());
    let id: String =
        record.event_id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(128).collect();
    let function: String =
        function.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).collect();
    if id.is_empty() {
        format!("{prefix}{function}/{seq}.json")
    } else {
        format!("{prefix}{function}/{seq}-{id}.json")
    }
}

/// The parked object's body: `whole` is the record as Lambda delivered it
/// ([`crate::whole::Opened::json`]), `record` the same record read in place.
pub fn body(
    function: &str,
    record: &WireRecord<'_>,
    whole: Option<Value>,
    failure: &Failure,
    parked_at: DateTime<Utc>,
) -> Vec<u8> {
    let doc = json!({
        "v": VERSION,
        "function": function,
        "kind": failure.kind.as_str(),
        "error": failure.message,
        "parkedAt": parked_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        "eventID": record.event_id,
        "sequenceNumber": record.sequence_number,
        "record": whole.unwrap_or(Value::Null),
    });
    let mut bytes = doc.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests;
