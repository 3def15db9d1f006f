//! Kinesis Data Streams for DynamoDB, emulated: a table's changes written as Kinesis Data
//! Streams for DynamoDB writes them, and delivered as a Kinesis event source mapping may deliver
//! them, out of order and more than once.
//!
//! moto has no Kinesis destination for a table. [`Writer`] turns the table's DynamoDB stream
//! records (in stream order) into Kinesis records whose `data` is the change record in Kinesis's
//! form (`recordFormat`, `tableName`, `ApproximateCreationDateTime` in microseconds, no
//! `SequenceNumber` or `StreamViewType`), each with its own Kinesis sequence number. The change
//! times it gives keep each item's order: they never go back, and never repeat.
//!
//! [`disorder`] then delivers them as AWS documents Kinesis may: "in a different sequence than
//! the item changes occurred" and "more than once". Each record may move up to `window` places
//! from where it was written, and a share of them come twice; both are seeded, and counted
//! ([`Disorder`]), so that a test can show that one item's records really did cross.
//!
//! [`delivery`] does both for a whole run: the local stack's mappings on a Kinesis stream.

use aws_lambda_events::event::dynamodb::EventRecord;
use base64::Engine as _;
use serde_json::{Value, json};

/// Writes a table's changes as Kinesis records of one Kinesis stream.
#[derive(Debug, Clone)]
pub struct Writer {
    stream_arn: String,
    table: String,
    written: u64,
    /// The change time of the last record written, in microseconds.
    pub(crate) last_micros: u64,
}

impl Writer {
    /// A writer for `table`'s changes into the Kinesis stream `stream_arn`.
    pub fn new(stream_arn: &str, table: &str) -> Writer {
        Writer {
            stream_arn: stream_arn.to_owned(),
            table: table.to_owned(),
            written: 0,
            // A record without a time gets one just after 2001-09-09, the earliest a change time
            // can have (`stream_runtime::kinesis::ChangeTime`).
            last_micros: 1_000_000_000_000_000 - 1,
        }
    }

    /// The Kinesis record (as in Lambda's Kinesis event) for the next change, `record` as the
    /// DynamoDB stream gave it. Its change time is the record's second in microseconds, moved
    /// past the last one given, so that changes keep their order.
    pub fn write(&mut self, record: &EventRecord) -> Value {
        let seconds = u64::try_from(record.change.approximate_creation_date_time.timestamp()).unwrap_or(0);
        let micros = seconds.saturating_mul(1_000_000).max(self.last_micros + 1);
        self.last_micros = micros;
        self.written += 1;
        let mut change = serde_json::to_value(record).unwrap_or(Value::Null);
        let mut data = json!({
            "awsRegion": change["awsRegion"].take(),
            "eventID": change["eventID"].take(),
            "eventName": change["eventName"].take(),
            "userIdentity": change["userIdentity"].take(),
            "recordFormat": "application/json",
            "tableName": self.table,
            "eventSource": "aws:dynamodb",
            "dynamodb": change["dynamodb"].take(),
        });
        if let Value::Object(dynamodb) = &mut data["dynamodb"] {
            dynamodb.remove("SequenceNumber");
            dynamodb.remove("StreamViewType");
            dynamodb.insert("ApproximateCreationDateTime".to_owned(), json!(micros));
        }
        // 56 digits, as Kinesis's are: more than a stream sequence number can have.
        let sequence = format!("496{:053}", self.written);
        json!({
            "kinesis": {
                "kinesisSchemaVersion": "1.0",
                "partitionKey": format!("{:X}", self.written % 0xFFFF),
                "sequenceNumber": sequence,
                "data": base64::engine::general_purpose::STANDARD.encode(data.to_string()),
                "approximateArrivalTimestamp": seconds,
            },
            "eventSource": "aws:kinesis",
            "eventVersion": "1.0",
            "eventID": format!("shardId-000000000000:{sequence}"),
            "eventName": "aws:kinesis:record",
            "awsRegion": data["awsRegion"],
            "eventSourceARN": self.stream_arn,
        })
    }
}

impl Writer {
    /// `record` (a Kinesis record [`Writer::write`] made) written again, as a producer's retry
    /// writes it: the same data under the next sequence number.
    pub fn again(&mut self, record: &Value) -> Value {
        self.written += 1;
        let sequence = format!("496{:053}", self.written);
        let mut copy = record.clone();
        copy["kinesis"]["sequenceNumber"] = json!(sequence);
        copy["eventID"] = json!(format!("shardId-000000000000:{sequence}"));
        copy
    }
}

/// What [`disorder`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Disorder {
    /// Records delivered twice.
    pub duplicated: usize,
    /// Pairs of records of one item delivered in the opposite order to their changes.
    pub crossed: usize,
}

/// `records` (in the order written) in an order Kinesis may deliver them: each moved by up to
/// `window` places, and each delivered twice with probability `duplicate`, from `seed`. `item`
/// names a record's item, to count the crossings.
pub fn disorder<T: Clone>(
    records: &[T],
    window: usize,
    duplicate: f64,
    seed: u64,
    item: impl Fn(&T) -> String,
) -> (Vec<T>, Disorder) {
    let mut rng = fastrand::Rng::with_seed(seed);
    // Each record's place: its position plus a random shift within the window; sorting by it
    // moves no record further than the window.
    let mut placed: Vec<(usize, usize)> = Vec::with_capacity(records.len());
    for i in 0..records.len() {
        placed.push((i + rng.usize(..=window), i));
        if rng.f64() < duplicate {
            placed.push((i + rng.usize(..=window), i));
        }
    }
    placed.sort_unstable();
    let mut counts = Disorder { duplicated: placed.len() - records.len(), crossed: 0 };
    let order: Vec<usize> = placed.into_iter().map(|(_, i)| i).collect();
    // Each item's records in delivery order, by the order they were written: every pair out of
    // order is a crossing.
    let mut by_item: std::collections::HashMap<String, Vec<usize>> = std::collections::HashMap::new();
    for &i in &order {
        by_item.entry(item(&records[i])).or_default().push(i);
    }
    for written in by_item.values() {
        for (a, first) in written.iter().enumerate() {
            counts.crossed += written[a + 1..].iter().filter(|later| *later < first).count();
        }
    }
    (order.into_iter().map(|i| records[i].clone()).collect(), counts)
}

pub mod delivery;

#[cfg(test)]
mod tests;
