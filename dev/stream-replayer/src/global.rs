//! Global tables, emulated: two Regions' replicas of a table kept in step as DynamoDB's global
//! tables keep them (docs/global-tables.md), for an emulator that has none.
//!
//! [`Replication`] reads each replica's stream and writes each change to the other replica after
//! a delay: a put as the item's new image, a delete as a delete. So each Region's stream carries
//! every write, wherever it started, as AWS documents: its own writes, and the replicated ones.
//!
//! - **Last writer wins**, item by item: each replica keeps, per item, the time and Region of the
//!   last write it holds; a replicated write older than that is dropped (counted as
//!   [`ReplicationCounts::lost`]). Times are the stream records' change times, Regions break ties.
//! - **TTL deletes are replicated** to the other replica. Whether the replicated delete keeps the
//!   TTL service's identity in that Region's stream is not documented by AWS; [`Replication`]
//!   takes the answer as a setting, so that both can be tested. Kept, the delete is made with the
//!   sweeper's header (`sweeper::TTL_DELETE_HEADER`), which the project's moto launcher writes into
//!   the stream as the service's identity.
//! - **No echo.** A replicated write appears in the other replica's stream, and is not replicated
//!   back: each write this makes is remembered until its record is read.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use serde_json::Value;
use stream_delivery::StreamReader;
use stream_delivery::reader::record_json;

use crate::ReplayError;
use crate::sweeper::TTL_DELETE_HEADER;

/// One Region's replica of the table.
#[derive(Debug)]
pub struct Replica {
    region: String,
    client: Client,
    table: String,
    reader: StreamReader,
}

impl Replica {
    /// The replica `table` in `region`, written with `client` (of that Region) and read through
    /// `reader` (its stream, of that Region).
    pub fn new(region: &str, client: Client, table: &str, reader: StreamReader) -> Replica {
        Replica {
            region: region.to_owned(),
            client,
            table: table.to_owned(),
            reader,
        }
    }

    /// The Region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Puts `image`. moto writes a stream record for every put, one that changes nothing
    /// included (AWS writes none for those), so every put has a record to read back.
    async fn put(&self, image: &Value) -> Result<bool, ReplayError> {
        let item = dynamodb_item(image, &self.table)?;
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| ReplayError::request("PutItem", &self.table, &e))?;
        Ok(true)
    }

    /// Deletes the item with `key`, as the TTL service if `ttl_identity`; whether there was one.
    async fn delete(&self, key: &Value, ttl_identity: bool) -> Result<bool, ReplayError> {
        let old = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(dynamodb_item(key, &self.table)?))
            .return_values(ReturnValue::AllOld)
            .customize()
            .mutate_request(move |request| {
                if ttl_identity {
                    request.headers_mut().insert(TTL_DELETE_HEADER, "service");
                }
            })
            .send()
            .await
            .map_err(|e| ReplayError::request("DeleteItem", &self.table, &e))?;
        Ok(old.attributes.is_some_and(|a| !a.is_empty()))
    }
}

/// What the replication did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicationCounts {
    /// Writes made in one replica and applied to the other.
    pub replicated: u64,
    /// Of those, TTL deletes.
    pub ttl_deletes: u64,
    /// TTL deletes that removed the item from the receiving replica (it had not expired it
    /// there yet), by that replica: those records are in its stream as replicated deletes.
    pub ttl_deletes_into: [u64; 2],
    /// Replicated writes dropped because the replica held a later write of the item.
    pub lost: u64,
    /// Records of the replication's own writes, read back and not replicated again.
    pub echoes: u64,
}

/// A change waiting for its replication delay.
#[derive(Debug)]
struct Pending {
    due: Instant,
    /// The replica it goes to.
    to: usize,
    key: Value,
    /// The new image, or `None` for a delete.
    image: Option<Value>,
    ttl_delete: bool,
    stamp: Stamp,
}

/// When and where a write was made: last writer wins by it.
type Stamp = (i64, usize);

/// Two replicas of one table, replicating.
#[derive(Debug)]
pub struct Replication {
    replicas: [Replica; 2],
    delay: Duration,
    ttl_identity: bool,
    pending: VecDeque<Pending>,
    /// Per replica, per item (its key as JSON): the last write it holds.
    stamps: [HashMap<String, Stamp>; 2],
    /// Per replica, per item: the writes this made there, not yet read back.
    echoes: [HashMap<String, Vec<Option<Value>>>; 2],
    counts: ReplicationCounts,
}

impl Replication {
    /// Replicates between `a` and `b` after `delay`; a replicated TTL delete keeps the service
    /// identity if `ttl_identity`.
    pub fn new(a: Replica, b: Replica, delay: Duration, ttl_identity: bool) -> Replication {
        Replication {
            replicas: [a, b],
            delay,
            ttl_identity,
            pending: VecDeque::new(),
            stamps: [HashMap::new(), HashMap::new()],
            echoes: [HashMap::new(), HashMap::new()],
            counts: ReplicationCounts::default(),
        }
    }

    /// What it did so far.
    pub fn counts(&self) -> ReplicationCounts {
        self.counts
    }

    /// Changes read and not yet applied.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Reads both streams, and applies the changes whose delay has passed. Changes read.
    pub async fn step(&mut self) -> Result<usize, ReplayError> {
        let mut read = 0;
        for from in 0..2 {
            let records = self.replicas[from].reader.poll().await?;
            read += records.len();
            for (_, record) in records {
                self.observe(from, &record);
            }
        }
        while self.pending.front().is_some_and(|p| p.due <= Instant::now()) {
            if let Some(change) = self.pending.pop_front() {
                self.apply(change).await?;
            }
        }
        Ok(read)
    }

    /// Steps until both streams are read to their end and nothing is pending, or `limit` passes.
    pub async fn settle(&mut self, limit: Duration) -> Result<(), ReplayError> {
        let until = Instant::now() + limit;
        loop {
            let read = self.step().await?;
            if read == 0 && self.pending.is_empty() {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(ReplayError::unexpected(
                    &self.replicas[0].table,
                    format!(
                        "replication still busy after {limit:?}: {} pending",
                        self.pending.len()
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A record of replica `from`: its own write, queued for the other; or the echo of one this
    /// made, dropped.
    fn observe(&mut self, from: usize, record: &EventRecord) {
        let json = record_json(record);
        let key = json["dynamodb"]["Keys"].clone();
        let id = key.to_string();
        let image = json["dynamodb"]
            .get("NewImage")
            .cloned()
            .filter(|_| record.event_name != "REMOVE");
        if let Some(made) = self.echoes[from].get_mut(&id)
            && let Some(at) = made.iter().position(|m| *m == image)
        {
            made.remove(at);
            if made.is_empty() {
                self.echoes[from].remove(&id);
            }
            self.counts.echoes += 1;
            return;
        }
        let stamp = (
            record.change.approximate_creation_date_time.timestamp_millis(),
            from,
        );
        let held = self.stamps[from].entry(id).or_insert(stamp);
        *held = (*held).max(stamp);
        let ttl_delete = record.event_name == "REMOVE"
            && record
                .user_identity
                .as_ref()
                .is_some_and(|u| u.type_ == "Service");
        self.pending.push_back(Pending {
            due: Instant::now() + self.delay,
            to: 1 - from,
            key,
            image,
            ttl_delete,
            stamp,
        });
    }

    /// Applies a change to its replica, unless that replica holds a later write of the item.
    async fn apply(&mut self, change: Pending) -> Result<(), ReplayError> {
        let id = change.key.to_string();
        let to = change.to;
        if self.stamps[to].get(&id).is_some_and(|held| *held > change.stamp) {
            self.counts.lost += 1;
            return Ok(());
        }
        self.stamps[to].insert(id.clone(), change.stamp);
        let replica = &self.replicas[to];
        let changed = match &change.image {
            Some(image) => replica.put(image).await?,
            None => {
                replica
                    .delete(&change.key, self.ttl_identity && change.ttl_delete)
                    .await?
            }
        };
        self.counts.replicated += 1;
        self.counts.ttl_deletes += u64::from(change.ttl_delete);
        self.counts.ttl_deletes_into[to] += u64::from(change.ttl_delete && changed);
        // A write with a stream record to read back: a put, or a delete that removed the item.
        if changed {
            self.echoes[to].entry(id).or_default().push(change.image);
        }
        Ok(())
    }
}

/// A DynamoDB JSON item as the SDK's.
fn dynamodb_item(json: &Value, table: &str) -> Result<HashMap<String, AttributeValue>, ReplayError> {
    let item: serde_dynamo::Item = serde_json::from_value(json.clone()).map_err(|e| {
        ReplayError::unexpected(table, format!("a stream image that is not DynamoDB JSON: {e}"))
    })?;
    Ok(item.into())
}
