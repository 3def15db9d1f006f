//! The pure plan: each record becomes one message, grouped by its item and deduplicated by its
//! event, cut into `SendMessageBatch` requests that keep each item's messages in order.

use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use stream_runtime::{Failure, Planned, RecordFailure, WireRecord};

/// SQS's most messages per `SendMessageBatch`.
pub const MAX_BATCH_ENTRIES: usize = 10;
/// SQS's largest `SendMessageBatch`, all bodies together, and its largest message: 1 MiB.
pub const MAX_BATCH_BYTES: usize = 1_048_576;

/// One message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The position of its record in the batch.
    pub origin: usize,
    /// `MessageGroupId`: the SHA-256 of the item's keys, so that each item's messages keep
    /// their order and different items' go in parallel.
    pub group: String,
    /// `MessageDeduplicationId`: the record's `eventID`, so that a redelivered record is sent
    /// again within SQS's five-minute window and delivered once.
    pub dedup: String,
    /// The record as JSON: `eventID`, `eventName`, `sequenceNumber`, `keys` and the images the
    /// stream carries (`newImage`, `oldImage`), in DynamoDB JSON.
    pub body: String,
}

/// The requests a batch makes: each at most [`MAX_BATCH_ENTRIES`] messages and
/// [`MAX_BATCH_BYTES`], in the records' order, with at most one message per group (so that a
/// message refused inside a request never lets a later message of its item pass it).
pub type Requests = Vec<Vec<Message>>;

/// Plans `records` for a queue whose `MaximumMessageSize` is `max_message_bytes`. A record
/// whose message SQS would refuse whatever the time (too large, or characters SQS does not take)
/// is a record-permanent failure: the runtime parks it and the batch goes on.
pub fn plan(records: &[WireRecord<'_>], max_message_bytes: usize) -> Planned<Requests> {
    let mut requests: Requests = Vec::new();
    let mut failures = Vec::new();
    let mut bytes = 0;
    for (origin, record) in records.iter().enumerate() {
        let message = match message(origin, record, max_message_bytes) {
            Ok(message) => message,
            Err(reason) => {
                failures.push(RecordFailure::new(origin, Failure::record_permanent(reason)));
                continue;
            }
        };
        let fits = requests.last().is_some_and(|last| {
            last.len() < MAX_BATCH_ENTRIES
                && bytes + message.body.len() <= MAX_BATCH_BYTES
                && last.iter().all(|m| m.group != message.group)
        });
        if !fits {
            requests.push(Vec::new());
            bytes = 0;
        }
        bytes += message.body.len();
        if let Some(last) = requests.last_mut() {
            last.push(message);
        }
    }
    Planned { plan: requests, failures, counts: Vec::new() }
}

/// The message of one record, or why SQS can never take it.
fn message(origin: usize, record: &WireRecord<'_>, max_message_bytes: usize) -> Result<Message, String> {
    if record.event_id.is_empty() || record.event_id.len() > 128 {
        return Err(format!(
            "eventID {:?} cannot be a MessageDeduplicationId (1 to 128 characters)",
            record.event_id
        ));
    }
    if record.keys.is_empty() {
        return Err("the record has no Keys to group its item's messages by".to_owned());
    }
    let keys = json(&record.keys.to_item())?;
    let mut body = Map::new();
    body.insert("eventID".into(), Value::from(record.event_id.as_ref()));
    body.insert("eventName".into(), Value::from(record.event_name.as_ref()));
    body.insert("sequenceNumber".into(), record.sequence_number().map_or(Value::Null, Value::from));
    body.insert("keys".into(), keys.clone());
    for (name, image) in [("newImage", &record.new_image), ("oldImage", &record.old_image)] {
        if !image.is_empty() {
            body.insert(name.into(), json(&image.to_item())?);
        }
    }
    let body = Value::Object(body).to_string();
    if body.len() > max_message_bytes {
        return Err(format!(
            "its message is {} bytes, over the queue's MaximumMessageSize of {max_message_bytes} (MIRROR_MAX_MESSAGE_BYTES)",
            body.len()
        ));
    }
    if let Some(c) = body.chars().find(|&c| !allowed(c)) {
        return Err(format!(
            "its message holds U+{:04X}, a character SQS refuses (InvalidMessageContents)",
            u32::from(c)
        ));
    }
    let group = hex(&Sha256::digest(keys.to_string().as_bytes()));
    Ok(Message { origin, group, dedup: record.event_id.to_string(), body })
}

fn json(item: &impl serde::Serialize) -> Result<Value, String> {
    serde_json::to_value(item).map_err(|e| format!("the record's image cannot be written as JSON: {e}"))
}

/// Whether SQS takes `c` in a message body: `#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to
/// #xFFFD | #x10000 to #x10FFFF` (the `SendMessage` API reference). A body with another is
/// refused whole with `InvalidMessageContents`, as the reference says today; an earlier edition
/// said SQS would put U+FFFD in its place, and the SDKs' generated docs still differ (some say
/// one, some the other). Refusing it here, before the request, holds either way: the record is
/// parked whole rather than mirrored altered.
fn allowed(c: char) -> bool {
    matches!(u32::from(c), 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x1_0000..=0x10_FFFF)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(text, "{b:02x}");
    }
    text
}

#[cfg(test)]
mod tests;
