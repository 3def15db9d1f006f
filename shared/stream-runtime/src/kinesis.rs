//! DynamoDB change records delivered through Kinesis Data Streams for DynamoDB, turned into the
//! records the functions take.
//!
//! With a Kinesis data stream as a table's change source, Lambda delivers a Kinesis event: each
//! record's `kinesis.data` is the base64 of a DynamoDB change record in its own JSON form:
//!
//! ```json
//! {"awsRegion": "us-east-1", "eventID": "5ae0…", "eventName": "MODIFY", "userIdentity": null,
//!  "recordFormat": "application/json", "tableName": "issues", "eventSource": "aws:dynamodb",
//!  "dynamodb": {"ApproximateCreationDateTime": 1627046330199, "Keys": {…}, "NewImage": {…},
//!               "OldImage": {…}, "SizeBytes": 45}}
//! ```
//!
//! It differs from a DynamoDB Streams record in four ways, each handled by [`decode`]:
//!
//! - **No stream sequence number, and no order.** A DynamoDB stream's sequence number orders one
//!   item's changes; the functions use it as the record's *version* (the aggregator's shard
//!   states, the indexer's entry versions). Kinesis gives its own `sequenceNumber` (up to 56
//!   digits, ordered within a Kinesis shard only), and one item's records may come out of order
//!   and more than once. AWS's advice is to order them by `ApproximateCreationDateTime`. So the
//!   record's `SequenceNumber` becomes its version: the change time in microseconds, as a decimal
//!   string (16 digits, parseable as a stream sequence number). A duplicate has the same
//!   version, an older change a lower one. [`Places::response`] turns the runtime's checkpoint back
//!   into the Kinesis sequence number Lambda expects in `batchItemFailures`.
//! - **The time's unit.** `ApproximateCreationDateTime` is in milliseconds, or microseconds when
//!   the table's Kinesis destination is set to (`ApproximateCreationDateTimePrecision`), where
//!   DynamoDB Streams gives whole seconds. `aws_lambda_events` reads it as seconds: a millisecond
//!   value becomes a date some 50,000 years ahead, and a microsecond one fails the whole event
//!   (the tests show both). The unit is known from the value's size (`ChangeTime::from_raw`);
//!   the record's time is set as precise as it came, and [`Batch::changed_at`] says how precise.
//!   Two changes of one item within one unit have the same version; at millisecond precision
//!   that is plausible for a busy item, so `docs/functions.md` asks for microseconds.
//! - **The table by name.** `tableName` instead of the stream's ARN: the record's
//!   `eventSourceARN` becomes the table's ARN, in the Kinesis stream's partition, region and
//!   account.
//! - **No view type.** Kinesis records carry both images; the record says `NEW_AND_OLD_IMAGES`.
//!
//! On Kinesis, AWS documents that one item's records may arrive out of order and more than once;
//! what each function does about that is its own (`docs/functions.md`).

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use base64::Engine as _;
use serde_json::{Value, json};

/// The only `recordFormat` Kinesis Data Streams for DynamoDB writes.
pub(crate) const RECORD_FORMAT: &str = "application/json";

/// Why a Kinesis event cannot be taken as DynamoDB change records.
#[derive(Debug, thiserror::Error)]
pub enum KinesisError {
    /// The event is not a Kinesis event's JSON.
    #[error("not a Kinesis event: {0}")]
    Event(String),
    /// One record is not a DynamoDB change record as Kinesis Data Streams for DynamoDB writes it.
    #[error("Kinesis record {index} ({sequence_number}): {reason}")]
    Record {
        /// Its position in the batch.
        index: usize,
        /// Its Kinesis sequence number, if it has one.
        sequence_number: String,
        /// What is wrong.
        reason: String,
    },
    /// A record's change time is less precise than microseconds (`refuse_coarse_times`).
    #[error(
        "Kinesis record {index} ({sequence_number}): its ApproximateCreationDateTime is in {precision}, \
         and Sidestream orders one item's changes by it: two changes within one {unit} would share a \
         version, and one of them would be lost. Set the table's Kinesis streaming destination's \
         ApproximateCreationDateTimePrecision to MICROSECOND (aws dynamodb update-kinesis-streaming-destination; \
         docs/deploying.md, \"Before you deploy\")"
    )]
    CoarseTime {
        /// Its position in the batch.
        index: usize,
        /// Its Kinesis sequence number.
        sequence_number: String,
        /// Its time's unit, in words (`milliseconds`).
        precision: &'static str,
        /// One of that unit (`millisecond`).
        unit: &'static str,
    },
}

/// When a change was made, as precise as its stream says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ChangeTime {
    /// Microseconds since the Unix epoch.
    pub micros: u64,
    /// The unit the stream gave it in.
    pub precision: Precision,
}

/// The unit of an `ApproximateCreationDateTime`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Precision {
    /// Whole seconds (DynamoDB Streams).
    Seconds,
    /// Milliseconds (Kinesis, by default).
    Milliseconds,
    /// Microseconds (Kinesis, when the destination is set to).
    Microseconds,
}

/// Seconds in the range a change time can have: 2001-09-09 (10⁹ s) to 2286-11-20 (10¹⁰ s). The
/// same range in milliseconds and in microseconds does not overlap it or each other, so a value's
/// size says its unit.
const SECONDS: std::ops::Range<u64> = 1_000_000_000..10_000_000_000;

impl ChangeTime {
    /// The time an `ApproximateCreationDateTime` of `raw` means, its unit known from its size:
    /// seconds, milliseconds or microseconds between 2001 and 2286. `None` outside them all.
    pub(crate) fn from_raw(raw: u64) -> Option<ChangeTime> {
        let within = |scale: u64| (SECONDS.start * scale..SECONDS.end * scale).contains(&raw);
        let (micros, precision) = if within(1) {
            (raw * 1_000_000, Precision::Seconds)
        } else if within(1_000) {
            (raw * 1_000, Precision::Milliseconds)
        } else if within(1_000_000) {
            (raw, Precision::Microseconds)
        } else {
            return None;
        };
        Some(ChangeTime { micros, precision })
    }

    /// Whole seconds since the epoch, as DynamoDB Streams gives the time.
    pub fn seconds(self) -> u64 {
        self.micros / 1_000_000
    }
}

/// A Kinesis batch's records as DynamoDB change records.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// The records, in the batch's order, as a DynamoDB Streams event would hold them, each
    /// `SequenceNumber` its version (the change time in microseconds).
    pub event: Event,
    /// Each record's change time, in the same order.
    pub changed_at: Vec<ChangeTime>,
    /// Each record's version and Kinesis sequence number, to answer Lambda with.
    pub places: Places,
}

impl Batch {
    /// Refuses a batch holding a record whose change time is not in microseconds. A record's
    /// version is its change time ([module documentation](self)): at milliseconds, AWS's default
    /// for a table's Kinesis destination, two changes of one item within a millisecond have the
    /// same version, and the later is refused as no newer (or the batch's order decides). That
    /// is a setting of the table, the same for every record until an operator changes it: a
    /// systemic failure, refused whole rather than indexed or counted wrong.
    pub fn refuse_coarse_times(&self) -> Result<(), KinesisError> {
        let Some(index) = self.changed_at.iter().position(|at| at.precision != Precision::Microseconds)
        else {
            return Ok(());
        };
        let (precision, unit) = match self.changed_at[index].precision {
            Precision::Seconds => ("seconds", "second"),
            Precision::Milliseconds | Precision::Microseconds => ("milliseconds", "millisecond"),
        };
        Err(KinesisError::CoarseTime {
            index,
            sequence_number: self.places.sequence_numbers().nth(index).unwrap_or("none").to_owned(),
            precision,
            unit,
        })
    }
}

/// Each record's version and Kinesis sequence number, in the batch's order.
#[derive(Debug, Clone, Default)]
pub struct Places(Vec<(String, String)>);

impl Places {
    /// The Kinesis sequence numbers, in the batch's order.
    pub fn sequence_numbers(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(_, kinesis)| kinesis.as_str())
    }

    /// The response to Lambda for the runtime's `response` on the batch's event: a checkpoint's
    /// version replaced by the Kinesis sequence number of the first record with that version. A
    /// duplicate earlier in the batch has the same version; resuming at it replays more, which
    /// every function's idempotent writes make safe. A version no record has resumes at the
    /// batch's start, for the same reason.
    pub fn response(&self, mut response: DynamoDbEventResponse) -> DynamoDbEventResponse {
        for failure in &mut response.batch_item_failures {
            let version = failure.item_identifier.as_deref().unwrap_or_default();
            let at = self.0.iter().position(|(v, _)| v == version).unwrap_or(0);
            failure.item_identifier = self.0.get(at).map(|(_, kinesis)| kinesis.clone());
        }
        response
    }
}

/// The DynamoDB change records a Kinesis event (Lambda's JSON) carries. Any record that is not
/// one fails the whole event, naming the record and what is wrong: Lambda then retries the
/// batch, and the configuration error (a stream that is not a table's change source) shows.
pub fn decode(bytes: &[u8]) -> Result<Batch, KinesisError> {
    let event: Value = serde_json::from_slice(bytes).map_err(|e| KinesisError::Event(e.to_string()))?;
    from_value(&event)
}

/// [`decode`], of the event's JSON already parsed.
pub fn from_value(event: &Value) -> Result<Batch, KinesisError> {
    let Some(records) = event["Records"].as_array() else {
        return Err(KinesisError::Event("no Records list".to_owned()));
    };
    let mut batch = Batch::default();
    batch.event.records.reserve(records.len());
    batch.changed_at.reserve(records.len());
    batch.places.0.reserve(records.len());
    for (index, record) in records.iter().enumerate() {
        let (change, at) = change_record(record).map_err(|reason| KinesisError::Record {
            index,
            sequence_number: record["kinesis"]["sequenceNumber"].as_str().unwrap_or("none").to_owned(),
            reason,
        })?;
        batch.places.0.push((
            at.micros.to_string(),
            record["kinesis"]["sequenceNumber"].as_str().unwrap_or_default().to_owned(),
        ));
        batch.event.records.push(change);
        batch.changed_at.push(at);
    }
    Ok(batch)
}

/// One Kinesis record as a DynamoDB change record, with its change time.
fn change_record(record: &Value) -> Result<(EventRecord, ChangeTime), String> {
    text(record, "/kinesis/sequenceNumber")?;
    let source = text(record, "/eventSourceARN")?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(text(record, "/kinesis/data")?)
        .map_err(|e| format!("kinesis.data is not base64: {e}"))?;
    let mut data: Value =
        serde_json::from_slice(&data).map_err(|e| format!("kinesis.data is not JSON: {e}"))?;
    let format = data["recordFormat"].as_str().unwrap_or_default();
    if format != RECORD_FORMAT {
        return Err(format!(
            "recordFormat {format:?}: not a DynamoDB change record ({RECORD_FORMAT:?} expected)"
        ));
    }
    let table = text(&data, "/tableName")?;
    let raw = data["dynamodb"]["ApproximateCreationDateTime"]
        .as_u64()
        .ok_or("dynamodb.ApproximateCreationDateTime is not a whole number")?;
    let at = ChangeTime::from_raw(raw).ok_or_else(|| {
        format!(
            "dynamodb.ApproximateCreationDateTime {raw} is no time between 2001 and 2286 in seconds, milliseconds or microseconds"
        )
    })?;
    let arn = table_arn(source, table)?;
    let Value::Object(dynamodb) = &mut data["dynamodb"] else {
        return Err("no dynamodb object".to_owned());
    };
    dynamodb.insert("ApproximateCreationDateTime".to_owned(), json!(at.seconds()));
    dynamodb.insert("SequenceNumber".to_owned(), json!(at.micros.to_string()));
    dynamodb.entry("StreamViewType").or_insert_with(|| json!("NEW_AND_OLD_IMAGES"));
    let mut change = json!({
        "eventID": data["eventID"],
        "eventName": data["eventName"],
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": data["awsRegion"],
        "eventSourceARN": arn,
        "dynamodb": data["dynamodb"].take(),
    });
    if data["userIdentity"].is_object() {
        change["userIdentity"] = data["userIdentity"].take();
    }
    let mut change: EventRecord =
        serde_json::from_value(change).map_err(|e| format!("not a DynamoDB change record: {e}"))?;
    // Set here, not through the JSON: `aws_lambda_events` reads a fraction of a second wrongly.
    if let Some(precise) =
        chrono::DateTime::from_timestamp_micros(i64::try_from(at.micros).unwrap_or(i64::MAX))
    {
        change.change.approximate_creation_date_time = precise;
    }
    Ok((change, at))
}

/// The string at `pointer`, or an error naming it.
fn text<'a>(value: &'a Value, pointer: &str) -> Result<&'a str, String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no {} string", pointer.trim_start_matches('/').replace('/', ".")))
}

/// `arn:<partition>:dynamodb:<region>:<account>:table/<table>`, from the Kinesis stream's ARN
/// (`arn:<partition>:kinesis:<region>:<account>:stream/<name>`).
fn table_arn(kinesis_arn: &str, table: &str) -> Result<String, String> {
    let parts: Vec<&str> = kinesis_arn.splitn(6, ':').collect();
    match parts.as_slice() {
        ["arn", partition, "kinesis", region, account, _] => {
            Ok(format!("arn:{partition}:dynamodb:{region}:{account}:table/{table}"))
        }
        _ => Err(format!("eventSourceARN {kinesis_arn:?} is not a Kinesis stream's ARN")),
    }
}

#[cfg(test)]
mod tests;
