//! The batches the bench hands the functions, as the JSON bytes Lambda would send.
//!
//! The indexer and the archiver get their crates' synthetic batches. Counter batches come from
//! [`CounterSim`], which keeps every shard item's value across batches, so that sequence numbers
//! grow from one batch to the next (a total item ignores anything older than what it holds),
//! and which knows each counter's true sum for the exactness check.

use std::collections::BTreeMap;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use formats::counter::Sharding;
use serde::Serialize;
use serde_json::json;

/// A batch size: a record count (`BatchSize`), or as many records as fit in a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Batch {
    /// `BatchSize` records.
    Records(usize),
    /// As many records as fit in this many bytes of event JSON.
    Bytes(usize),
}

impl Batch {
    /// `BatchSize` 100 and 1,000, and a 6 MB batch (Lambda's payload limit).
    pub const STANDARD: [Batch; 3] = [Batch::Records(100), Batch::Records(1000), Batch::Bytes(6_000_000)];

    /// How the report names it.
    pub fn label(self) -> String {
        match self {
            Batch::Records(n) => format!("BatchSize {n}"),
            Batch::Bytes(n) => format!("{} MB", n / 1_000_000),
        }
    }

    /// `records` of the batch's kind: all of them, or the longest prefix whose event JSON fits.
    pub fn encode(self, records: Vec<EventRecord>) -> (usize, Vec<u8>) {
        let records = match self {
            Batch::Records(n) => records.into_iter().take(n).collect(),
            Batch::Bytes(limit) => {
                // `{"Records":[` … `]}`: 14 bytes, and a comma between records.
                let mut used = 14;
                records
                    .into_iter()
                    .take_while(|r| {
                        used += serde_json::to_vec(r).map_or(usize::MAX / 2, |b| b.len()) + 1;
                        used <= limit
                    })
                    .collect()
            }
        };
        let mut event = Event::default();
        event.records = records;
        let n = event.records.len();
        (n, serde_json::to_vec(&event).unwrap_or_default())
    }

    /// More records than the batch can hold, for [`Batch::encode`] to cut: `per_mb` is about
    /// how many records a megabyte holds.
    pub fn generate(self, per_mb: usize) -> usize {
        match self {
            Batch::Records(n) => n,
            Batch::Bytes(limit) => limit / 1_000_000 * per_mb * 5 / 4,
        }
    }
}

/// The indexer's batch: the synthetic issues' changes, over half as many issues as records.
pub fn issues(batch: Batch, seed: u64) -> (usize, Vec<u8>) {
    let n = batch.generate(1_200);
    let event = multikey_indexer::synthetic::batch(n, (n / 2).max(50), seed);
    batch.encode(event.records)
}

/// The archiver's batch: TTL deletes one second apart.
pub fn ttl_deletes(batch: Batch, seed: u64) -> (usize, Vec<u8>) {
    let n = batch.generate(1_000);
    let event = ttl_archiver::synthetic::ttl_batch(n, seed, 1_795_168_800, 1.0);
    batch.encode(event.records)
}

/// The issues stream as a combined mapping sees it: nine issue changes to one TTL deletion,
/// renumbered into one shard's order under the issues table's stream. The deleted items are the
/// archiver's synthetic ones, keyed as issues (`id`) and without custom fields.
pub(crate) fn issues_stream(batch: Batch, seed: u64) -> (usize, Vec<u8>) {
    let n = batch.generate(1_200);
    let changes = multikey_indexer::synthetic::batch(n, (n / 2).max(50), seed).records;
    let deletions = ttl_archiver::synthetic::ttl_batch(n / 10 + 1, seed, 1_795_168_800, 1.0).records;
    let mut deletions = deletions.into_iter().enumerate().map(|(i, record)| {
        let mut json = serde_json::to_value(record).unwrap_or_default();
        let id = json!({"S": format!("expired-{seed}-{i:08}")});
        json["dynamodb"]["Keys"] = json!({ "id": id });
        json["dynamodb"]["OldImage"]["id"] = id;
        serde_json::from_value(json).unwrap_or_default()
    });
    let mut records = Vec::with_capacity(n + n / 10 + 1);
    for (i, change) in changes.into_iter().enumerate() {
        if i % 9 == 8 {
            records.extend(deletions.next());
        }
        records.push(change);
    }
    let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/issues/stream/2026-11-21T00:00:00.000";
    for (i, record) in records.iter_mut().enumerate() {
        record.event_source_arn = Some(arn.to_owned());
        record.change.sequence_number = Some((49_000_000_000_000_000_000_u128 + i as u128).to_string());
    }
    batch.encode(records)
}

/// Counters whose shards clients increment; each change is a stream record with both images.
#[derive(Debug, Clone)]
pub struct CounterSim {
    sharding: Sharding,
    names: Vec<String>,
    values: BTreeMap<(usize, u32), i128>,
    sequence: u128,
    rng: fastrand::Rng,
}

/// A shard change, with the shard item's key (for lanes).
#[derive(Debug, Clone)]
pub struct Change {
    /// The shard item's partition key.
    pub key: String,
    /// The stream record.
    pub record: EventRecord,
}

impl CounterSim {
    /// `counters` counters named `<prefix>-<n>`, of `sharding.shards` shards each.
    pub fn new(prefix: &str, counters: usize, sharding: Sharding, seed: u64) -> CounterSim {
        CounterSim {
            sharding,
            names: (0..counters.max(1)).map(|n| format!("{prefix}-{n}")).collect(),
            values: BTreeMap::new(),
            sequence: 0,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The counters' names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Counter `name`'s true sum: the sum of its shards' values.
    pub fn sum(&self, counter: usize) -> i128 {
        self.values.range((counter, 0)..=(counter, u32::MAX)).map(|(_, v)| *v).sum()
    }

    /// The next `n` changes: a random counter's random shard incremented by 1 to 5.
    pub fn changes(&mut self, n: usize) -> Vec<Change> {
        (0..n).map(|_| self.change()).collect()
    }

    /// The next batch of changes: `batch`'s records, or as many as fit in its bytes. Only those
    /// are made: none is generated and then left out (a change left out would be a record
    /// never delivered).
    pub fn batch(&mut self, batch: Batch, per_mb: usize) -> (usize, Vec<u8>) {
        let trial = self.clone().changes(batch.generate(per_mb));
        let (n, _) = batch.encode(trial.into_iter().map(|c| c.record).collect());
        batch.encode(self.changes(n).into_iter().map(|c| c.record).collect())
    }

    fn change(&mut self) -> Change {
        let counter = self.rng.usize(..self.names.len());
        let shard = self.rng.u32(..self.sharding.shards);
        let key = self.sharding.shard_key(&self.names[counter], shard).unwrap_or_default();
        let old = self.values.get(&(counter, shard)).copied();
        let new = old.unwrap_or(0) + i128::from(self.rng.u8(1..=5));
        self.values.insert((counter, shard), new);
        self.sequence += 1;
        let image = |v: i128| json!({"pk": {"S": key}, "count": {"N": v.to_string()}});
        let mut dynamodb = json!({
            "ApproximateCreationDateTime": 1_795_168_800,
            "Keys": {"pk": {"S": key}},
            "SequenceNumber": (10_u128.pow(20) + self.sequence).to_string(),
            "SizeBytes": 60,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
            "NewImage": image(new),
        });
        if let Some(old) = old {
            dynamodb["OldImage"] = image(old);
        }
        let name = if old.is_some() { "MODIFY" } else { "INSERT" };
        let record = serde_json::from_value(stream_record(self.sequence, name, "counters", dynamodb))
            .unwrap_or_default();
        Change { key, record }
    }
}

/// A DynamoDB stream record of `table` in us-east-1 (Lambda's event JSON), numbered `sequence`,
/// of the change `name` (`INSERT`, `MODIFY`, `REMOVE`) described by `dynamodb`.
pub(crate) fn stream_record(
    sequence: u128,
    name: &str,
    table: &str,
    dynamodb: serde_json::Value,
) -> serde_json::Value {
    let mut record = json!({
        "eventID": format!("{sequence:032x}"),
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "eventSourceARN": format!("arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/2026-11-21T00:00:00.000"),
    });
    record["dynamodb"] = dynamodb;
    record
}

/// The lane of a shard item among `lanes` concurrent batches, as `ParallelizationFactor` hashes
/// partition keys: one item's records always go to the same lane, in order.
pub(crate) fn lane(key: &str, lanes: usize) -> usize {
    // FNV-1a.
    let hash =
        key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let lanes = u64::try_from(lanes.max(1)).unwrap_or(u64::MAX);
    usize::try_from(hash % lanes).unwrap_or(0)
}
