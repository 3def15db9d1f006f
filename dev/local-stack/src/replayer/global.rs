//! Global tables, emulated: two Regions' replicas of a table kept in step as DynamoDB's global
//! tables keep them (docs/global-tables.md), for an emulator that has none.
//!
//! [`Replication`] reads each replica's stream and writes each change to the other replica after
//! a delay: a put as the item's new image, a delete as a delete. So each Region's stream carries
//! every write, wherever it started, as AWS documents: its own writes, and the replicated ones.
//!
//! - **Last writer wins**, item by item: each replica keeps, per item, the time and Region of the
//!   last write it holds; a replicated write older than that is dropped (counted as
//!   [`ReplicationCounts::lost`]). Times are the stream records' change times, Regions break ties;
//!   a Region's own write made on top of what the replication wrote there counts as later.
//!   The decision is made before the write, never mended after it (a put-back would write
//!   records DynamoDB never writes): each replicated write is conditioned on the item still being
//!   as that replica's stream last showed it. A local write that landed after the stream was read
//!   fails the condition ([`ReplicationCounts::raced`]); the stream is read again and the write
//!   decided again, now knowing the local write's time. So the replicas converge.
//! - **TTL deletes are replicated** to the other replica. Whether the replicated delete keeps the
//!   TTL service's identity in that Region's stream is not documented by AWS; [`Replication`]
//!   takes the answer as a setting, so that both can be tested. Kept, the delete is made with the
//!   sweeper's header (`sweeper::TTL_DELETE_HEADER`), which the project's moto launcher writes into
//!   the stream as the service's identity.
//! - **No echo.** A replicated write appears in the other replica's stream, and is not replicated
//!   back: each write this makes is remembered until its record is read.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use serde_json::Value;
use stream_runtime::delivery::StreamReader;
use stream_runtime::delivery::reader::record_json;

use crate::replayer::ReplayError;
use crate::replayer::sweeper::TTL_DELETE_HEADER;
use stream_runtime::delivery::RequestError;

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
        Replica { region: region.to_owned(), client, table: table.to_owned(), reader }
    }

    /// The Region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Puts `image` if `expected` holds: `Some(true)` if it did. moto writes a stream record for
    /// every put, one that changes nothing included (AWS writes none for those), so every put
    /// has a record to read back.
    async fn put(&self, image: &Value, expected: &Expected) -> Result<Option<bool>, ReplayError> {
        let item = dynamodb_item(image, &self.table)?;
        let sent = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .set_condition_expression(expected.expression.clone())
            .set_expression_attribute_names(expected.names())
            .set_expression_attribute_values(expected.values.clone())
            .send()
            .await;
        match sent {
            Ok(_) => Ok(Some(true)),
            Err(e) if e.as_service_error().is_some_and(is_conditional_check_failed) => Ok(None),
            Err(e) => Err(RequestError::request("PutItem", &self.table, &e).into()),
        }
    }

    /// Deletes the item with `key` if `expected` holds, as the TTL service if `ttl_identity`:
    /// `Some(whether there was an item)`, or `None` if `expected` did not hold.
    async fn delete(
        &self,
        key: &Value,
        ttl_identity: bool,
        expected: &Expected,
    ) -> Result<Option<bool>, ReplayError> {
        let sent = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(dynamodb_item(key, &self.table)?))
            .set_condition_expression(expected.expression.clone())
            .set_expression_attribute_names(expected.names())
            .set_expression_attribute_values(expected.values.clone())
            .return_values(ReturnValue::AllOld)
            .customize()
            .mutate_request(move |request| {
                if ttl_identity {
                    request.headers_mut().insert(TTL_DELETE_HEADER, "service");
                }
            })
            .send()
            .await;
        match sent {
            Ok(old) => Ok(Some(old.attributes.is_some_and(|a| !a.is_empty()))),
            Err(e) if e.as_service_error().is_some_and(is_conditional_check_failed) => Ok(None),
            Err(e) => Err(RequestError::request("DeleteItem", &self.table, &e).into()),
        }
    }
}

/// What a replica's stream last showed of an item, as a write's condition: its attributes each
/// equal, and every other attribute name the table's streams have shown absent; or the item
/// absent. `None`: no condition.
#[derive(Debug, Default)]
struct Expected {
    expression: Option<String>,
    names: Vec<(String, String)>,
    values: Option<HashMap<String, AttributeValue>>,
}

impl Expected {
    /// The condition that the item is as `seen` (`Some(None)`: absent), given `key` and every
    /// attribute name seen in the table.
    fn new(
        seen: Option<&Option<Value>>,
        key: &Value,
        all_names: &BTreeSet<String>,
        table: &str,
    ) -> Result<Expected, ReplayError> {
        let Some(seen) = seen else {
            return Ok(Expected::default());
        };
        let mut names = Vec::new();
        let mut clauses = Vec::new();
        let mut values = HashMap::new();
        let name = |attribute: &str, names: &mut Vec<(String, String)>| {
            let placeholder = format!("#a{}", names.len());
            names.push((placeholder.clone(), attribute.to_owned()));
            placeholder
        };
        match seen {
            None => {
                let key_name = key
                    .as_object()
                    .and_then(|k| k.keys().next())
                    .ok_or_else(|| ReplayError::unexpected(table, "a stream record without keys"))?;
                let n = name(key_name, &mut names);
                clauses.push(format!("attribute_not_exists({n})"));
            }
            Some(image) => {
                let item = dynamodb_item(image, table)?;
                for (attribute, value) in item {
                    let n = name(&attribute, &mut names);
                    let v = format!(":v{}", values.len());
                    clauses.push(format!("{n} = {v}"));
                    values.insert(v, value);
                }
                let held = image.as_object().map(|o| o.keys().collect::<BTreeSet<_>>());
                for other in all_names {
                    if !held.as_ref().is_some_and(|h| h.contains(other)) {
                        let n = name(other, &mut names);
                        clauses.push(format!("attribute_not_exists({n})"));
                    }
                }
            }
        }
        Ok(Expected {
            expression: Some(clauses.join(" AND ")),
            names,
            values: (!values.is_empty()).then_some(values),
        })
    }

    fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.iter().cloned().collect())
    }
}

/// What the replication did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
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
    /// Replicated writes whose condition failed: a local write of the item had landed after the
    /// replica's stream was read. Each was decided again once the stream was read again.
    pub raced: u64,
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

/// When a write was made (the change time in ms; then how many writes made on top of a later
/// stamp within it), and in which Region: last writer wins by it.
type Stamp = (i64, u32, usize);

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
    /// Per replica, per item: its image in the last record of that replica's stream (`None`:
    /// deleted).
    seen: [HashMap<String, Option<Value>>; 2],
    /// Every attribute name the streams have shown.
    names: BTreeSet<String>,
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
            seen: [HashMap::new(), HashMap::new()],
            names: BTreeSet::new(),
            counts: ReplicationCounts::default(),
        }
    }

    /// Takes `names` as attribute names the table's items may have, before any stream shows
    /// them. A write's condition requires every name it knows of and the item it expects does
    /// not hold to be absent: so a local write that adds an attribute no stream has shown yet
    /// (the first of a burst of operations' touches, say) is caught only if its name is given
    /// here.
    #[must_use]
    pub fn expecting(mut self, names: &[&str]) -> Replication {
        self.names.extend(names.iter().map(|n| (*n).to_owned()));
        self
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
        let read = self.read().await?;
        self.apply_due().await?;
        Ok(read)
    }

    /// Reads both streams: records read.
    pub async fn read(&mut self) -> Result<usize, ReplayError> {
        Ok(self.read_from(0).await? + self.read_from(1).await?)
    }

    /// Applies the changes whose delay has passed, each decided on what the streams last showed.
    pub async fn apply_due(&mut self) -> Result<(), ReplayError> {
        while self.pending.front().is_some_and(|p| p.due <= Instant::now()) {
            if let Some(change) = self.pending.pop_front() {
                self.apply(change).await?;
            }
        }
        Ok(())
    }

    async fn read_from(&mut self, from: usize) -> Result<usize, ReplayError> {
        let records = self.replicas[from].reader.poll().await?;
        for (_, record) in &records {
            self.observe(from, record);
        }
        Ok(records.len())
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
                    format!("replication still busy after {limit:?}: {} pending", self.pending.len()),
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
        let image = json["dynamodb"].get("NewImage").cloned().filter(|_| record.event_name != "REMOVE");
        if let Some(attributes) = image.as_ref().and_then(Value::as_object) {
            self.names.extend(attributes.keys().cloned());
        }
        if image.is_some() || record.event_name == "REMOVE" {
            self.seen[from].insert(id.clone(), image.clone());
        } else {
            // A stream without new images: what the replica holds is not known.
            self.seen[from].remove(&id);
        }
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
        let stamp = (record.change.approximate_creation_date_time.timestamp_millis(), 0, from);
        // A write made on top of every write this made to the replica (none of them still
        // unread: the stream orders one item's records) is later than what the replica holds,
        // whatever the clock's rounding says, as DynamoDB stamps a write after the version it
        // replaces.
        let on_top = !self.echoes[from].contains_key(&id);
        let held = self.stamps[from].entry(id).or_insert(stamp);
        let stamp = if on_top && *held >= stamp { (held.0, held.1 + 1, from) } else { stamp };
        *held = (*held).max(stamp);
        let ttl_delete = record.event_name == "REMOVE"
            && record.user_identity.as_ref().is_some_and(|u| u.type_ == "Service");
        self.pending.push_back(Pending {
            due: Instant::now() + self.delay,
            to: 1 - from,
            key,
            image,
            ttl_delete,
            stamp,
        });
    }

    /// Applies a change to its replica, unless that replica holds a later write of the item. The
    /// write is conditioned on the item being as the replica's stream last showed it; if it is
    /// not, the stream is read again and the change decided again.
    async fn apply(&mut self, change: Pending) -> Result<(), ReplayError> {
        let id = change.key.to_string();
        let to = change.to;
        let mut raced = false;
        let changed = loop {
            if self.stamps[to].get(&id).is_some_and(|held| *held > change.stamp) {
                self.counts.lost += 1;
                return Ok(());
            }
            let table = &self.replicas[to].table;
            // An item this replica's stream never showed is taken as absent (the tables begin
            // with the replication); if it is there all the same, it predates the replication,
            // and the write goes unconditioned.
            let seen = match self.seen[to].get(&id) {
                Some(seen) => Some(seen),
                None if !raced => Some(&None),
                None => None,
            };
            let expected = Expected::new(seen, &change.key, &self.names, table)?;
            let replica = &self.replicas[to];
            let ttl_identity = self.ttl_identity && change.ttl_delete;
            let written = if let Some(image) = &change.image {
                replica.put(image, &expected).await?
            } else {
                replica.delete(&change.key, ttl_identity, &expected).await?
            };
            if let Some(changed) = written {
                break changed;
            }
            raced = true;
            self.counts.raced += 1;
            self.read_from(to).await?;
        };
        self.stamps[to].insert(id.clone(), change.stamp);
        // What the replica now holds, before its record is read back.
        self.seen[to].insert(id.clone(), change.image.clone());
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

/// Whether a write was refused by its condition.
fn is_conditional_check_failed(error: &impl ProvideErrorMetadata) -> bool {
    error.code() == Some("ConditionalCheckFailedException")
}

/// A DynamoDB JSON item as the SDK's.
fn dynamodb_item(json: &Value, table: &str) -> Result<HashMap<String, AttributeValue>, ReplayError> {
    let item: serde_dynamo::Item = serde_json::from_value(json.clone()).map_err(|e| {
        ReplayError::unexpected(table, format!("a stream image that is not DynamoDB JSON: {e}"))
    })?;
    Ok(item.into())
}
