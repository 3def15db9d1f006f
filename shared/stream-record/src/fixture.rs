//! Stream records built for tests: one item's change as Lambda delivers it in a DynamoDB stream
//! event, every field AWS sends filled in (DynamoDB JSON keys and images, a sequence number, the
//! stream's ARN, a view type), so that a test says only what it is about.
//!
//! ```
//! use serde_json::json;
//! use stream_record::fixture::{Change, event};
//!
//! let paid = Change::modify(json!({"id": {"S": "a"}}))
//!     .old_image(json!({"id": {"S": "a"}, "state": {"S": "new"}}))
//!     .new_image(json!({"id": {"S": "a"}, "state": {"S": "paid"}}))
//!     .sequence(200);
//! let record = paid.clone().record()?;
//! assert_eq!(record.event_name, "MODIFY");
//! assert_eq!(record.change.sequence_number.as_deref(), Some("200"));
//! // A whole event, as the function's handler is invoked with it.
//! let text = event([paid, Change::remove(json!({"id": {"S": "b"}})).by_ttl()]).to_string();
//! assert!(text.contains(r#""principalId":"dynamodb.amazonaws.com""#));
//! # Ok::<(), serde_json::Error>(())
//! ```

use aws_lambda_events::event::dynamodb::EventRecord;
use serde_json::{Value, json};

/// The Region a built record's stream is in unless [`Change::region`] says otherwise.
pub const REGION: &str = "us-east-1";
/// The account a built record's stream is in.
pub const ACCOUNT: &str = "123456789012";
/// The table a built record's stream is of unless [`Change::table`] says otherwise.
pub const TABLE: &str = "issues";
/// The label of a built record's stream (its creation time, as DynamoDB names streams).
pub const STREAM_LABEL: &str = "2026-11-01T00:00:00.000";

/// One item's change, as a DynamoDB stream record in Lambda's event (module documentation).
/// Each method sets one field and hands the change back.
#[derive(Debug, Clone, PartialEq)]
pub struct Change(Value);

impl Change {
    /// An `INSERT` of the item with `keys` (DynamoDB JSON, e.g. `{"id": {"S": "a"}}`).
    pub fn insert(keys: Value) -> Change {
        Change::named("INSERT", keys)
    }

    /// A `MODIFY` of the item with `keys`.
    pub fn modify(keys: Value) -> Change {
        Change::named("MODIFY", keys)
    }

    /// A `REMOVE` of the item with `keys` (by the application; [`Change::by_ttl`] for TTL's).
    pub fn remove(keys: Value) -> Change {
        Change::named("REMOVE", keys)
    }

    /// A change named `name`, as a record of any `eventName` (one AWS never sends included).
    pub fn named(name: &str, keys: Value) -> Change {
        Change(json!({
            "eventID": "e1",
            "eventName": name,
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": REGION,
            "eventSourceARN": stream_arn(REGION, TABLE),
            "dynamodb": {
                "ApproximateCreationDateTime": 1_795_000_000,
                "SequenceNumber": "1",
                "SizeBytes": 100,
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            },
        }))
        .with("/dynamodb/Keys", keys)
    }

    /// Its new image (DynamoDB JSON).
    #[must_use]
    pub fn new_image(self, image: Value) -> Change {
        self.with("/dynamodb/NewImage", image)
    }

    /// Its old image (DynamoDB JSON).
    #[must_use]
    pub fn old_image(self, image: Value) -> Change {
        self.with("/dynamodb/OldImage", image)
    }

    /// Its `SequenceNumber` (`1` unless set).
    #[must_use]
    pub fn sequence(self, sequence: impl std::fmt::Display) -> Change {
        self.with("/dynamodb/SequenceNumber", json!(sequence.to_string()))
    }

    /// Its `eventID` (`e1` unless set).
    #[must_use]
    pub fn event_id(self, id: impl std::fmt::Display) -> Change {
        self.with("/eventID", json!(id.to_string()))
    }

    /// Its `ApproximateCreationDateTime`, in seconds since the Unix epoch.
    #[must_use]
    pub fn at(self, seconds: impl Into<Value>) -> Change {
        self.with("/dynamodb/ApproximateCreationDateTime", seconds.into())
    }

    /// Its `SizeBytes` (100 unless set).
    #[must_use]
    pub fn size(self, bytes: u64) -> Change {
        self.with("/dynamodb/SizeBytes", json!(bytes))
    }

    /// The table whose stream it comes from ([`TABLE`] unless set), in its ARN.
    #[must_use]
    pub fn table(self, table: &str) -> Change {
        let region = self.0["awsRegion"].as_str().unwrap_or(REGION).to_owned();
        self.with("/eventSourceARN", json!(stream_arn(&region, table)))
    }

    /// The Region it comes from ([`REGION`] unless set), its stream's ARN's included.
    #[must_use]
    pub fn region(self, region: &str) -> Change {
        let arn = self.0["eventSourceARN"].as_str().unwrap_or_default();
        let table = arn.split("table/").nth(1).and_then(|t| t.split('/').next()).unwrap_or(TABLE).to_owned();
        self.with("/awsRegion", json!(region)).with("/eventSourceARN", json!(stream_arn(region, &table)))
    }

    /// Made by DynamoDB's TTL service (its `userIdentity`), as a TTL delete is.
    #[must_use]
    pub fn by_ttl(self) -> Change {
        self.with("/userIdentity", json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"}))
    }

    /// `value` at `pointer` (a JSON pointer into the record, e.g. `/dynamodb/StreamViewType`),
    /// objects on the way made as needed: for a field no other method sets, or a record AWS
    /// would not send.
    #[must_use]
    pub fn with(mut self, pointer: &str, value: Value) -> Change {
        let path: Vec<&str> = pointer.split('/').skip(1).collect();
        put(&mut self.0, &path, value);
        self
    }

    /// Without the field at `pointer` (e.g. `/dynamodb/SequenceNumber`).
    #[must_use]
    pub fn without(mut self, pointer: &str) -> Change {
        if let Some((parent, name)) = pointer.rsplit_once('/')
            && let Some(object) = self.0.pointer_mut(parent).and_then(Value::as_object_mut)
        {
            object.remove(name);
        }
        self
    }

    /// The record as Lambda's event holds it.
    pub fn json(self) -> Value {
        self.0
    }

    /// The record as `aws_lambda_events` reads it.
    pub fn record(self) -> Result<EventRecord, serde_json::Error> {
        serde_json::from_value(self.0)
    }
}

/// A DynamoDB stream event of `changes`, in order, as Lambda invokes a function with it.
pub fn event(changes: impl IntoIterator<Item = Change>) -> Value {
    json!({"Records": changes.into_iter().map(Change::json).collect::<Vec<_>>()})
}

/// `value` at `path` in `at`, objects on the way made as needed.
fn put(at: &mut Value, path: &[&str], value: Value) {
    match path.split_first() {
        None => *at = value,
        Some((name, rest)) => {
            if !at.is_object() {
                *at = json!({});
            }
            if let Value::Object(object) = at {
                put(object.entry(*name).or_insert(Value::Null), rest, value);
            }
        }
    }
}

/// The ARN of `table`'s stream in `region`.
pub fn stream_arn(region: &str, table: &str) -> String {
    format!("arn:aws:dynamodb:{region}:{ACCOUNT}:table/{table}/stream/{STREAM_LABEL}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_record_reads_as_aws_lambda_events_reads_one_from_aws() {
        let record = Change::remove(json!({"id": {"S": "a"}}))
            .old_image(json!({"id": {"S": "a"}}))
            .by_ttl()
            .region("eu-west-1")
            .table("orders")
            .sequence(41)
            .event_id("e41")
            .record()
            .expect("a record");
        assert_eq!(record.event_name, "REMOVE");
        assert_eq!(record.aws_region, "eu-west-1");
        assert_eq!(
            record.event_source_arn.as_deref(),
            Some("arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-11-01T00:00:00.000")
        );
        assert_eq!(record.change.sequence_number.as_deref(), Some("41"));
        assert_eq!(record.user_identity.map(|u| u.principal_id), Some("dynamodb.amazonaws.com".to_owned()));
    }

    #[test]
    fn with_and_without_reach_any_field() {
        let built = Change::insert(json!({"id": {"S": "a"}}))
            .with("/dynamodb/NewImage/n", json!({"N": "1"}))
            .with("/somethingNew/kept", json!(true))
            .without("/dynamodb/SequenceNumber")
            .json();
        assert_eq!(built["dynamodb"]["NewImage"], json!({"n": {"N": "1"}}));
        assert_eq!(built["somethingNew"], json!({"kept": true}));
        assert!(built["dynamodb"].get("SequenceNumber").is_none(), "{built}");
    }
}
