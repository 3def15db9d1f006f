//! Mending the index under a live stream: every entry put goes through the stream, and every
//! delete is conditioned so that it cannot undo a newer write.
//!
//! The indexer is the one writer that sees an item's changes in order. Anything else that writes
//! index entries from what it read earlier (a scan, a failure record) races it: a verify's repair
//! can put back an entry a later change removed, and a replayed record can put back an entry of
//! an image that is no longer current. So a mend writes entries in two ways only:
//!
//! - **puts by touching**: to make the index hold what an item calls for now, the item is touched
//!   (`crate::backfill::touch_item`: one marker attribute set, conditioned on the item existing).
//!   DynamoDB Streams carries the touch in the item's own order, and the indexer re-puts every
//!   entry of the item's image at that point. A change made before the touch is in its image; a
//!   change made after it is a later record the indexer applies after it. A mend never puts an
//!   entry itself.
//! - **conditioned removals**: an entry can be stale because a record that should have removed it
//!   never ran (given up, parked, or drift), and a touch cannot remove it (a touch only puts what
//!   the current image calls for). Every entry the indexer puts carries its record's sequence
//!   number (`sidestream_seq`, `docs/formats.md`), and a mend removes an entry only on a
//!   condition that any newer put breaks:
//!   - a replayed record `R` puts the tombstones `R` put, as the indexer does, each only if the
//!     key's version is absent or not newer than `R` (`attribute_not_exists(v) OR v <= R`, equal
//!     only for `R`'s own tombstone, put again): an entry
//!     put by a record after `R` stays, and a write older than `R` still in flight (a Kinesis
//!     record delivered late) finds the tombstone and is refused. The tombstone lasts the
//!     longest lifetime (any order's) from the replay;
//!   - a verify's extra entry is deleted only if a consistent read of its base item shows the
//!     item no longer calls for it, and only if its version is still the one the verify saw
//!     (`v = seen`): if the indexer has put it again since, the delete does nothing.
//!
//! Entries written before versions existed have no `sidestream_seq`; their deletes are
//! conditioned on it still being absent, which any put by a versioned indexer breaks.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::AttributeValue;
use formats::{Index, Indexes, VERSION_ATTRIBUTE};
use futures_util::StreamExt as _;
use io_policy::{Budget, Failure, Policy};
use multikey_indexer::Plan;
use multikey_indexer::plan::Order;
use serde::Serialize;
use serde_json::Value;
use stream_runtime::{EventRecord, Op};

use crate::pace::Pacer;
use crate::verify::{Drift, VerifyError};

/// How long a mend may take, retries included.
const MEND_TIME: Duration = Duration::from_secs(3600);

/// What a mend wrote and what it left, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Mended {
    /// Base items touched: the indexer re-puts their entries from the stream.
    pub touched: usize,
    /// Base items not touched because they no longer exist (their REMOVE record deletes their
    /// entries) or this run touched them already.
    pub gone: usize,
    /// Entries removed: deleted, or replaced by a replayed record's tombstone (a removal that
    /// found no entry is not counted).
    pub deleted: usize,
    /// Deletes not made because the base item calls for the entry again (a consistent read).
    pub called_for: usize,
    /// Deletes not made because the entry has been put again since (its version moved on).
    pub newer: usize,
    /// Milliseconds its writes waited for their pace ([`Mender::paced`]).
    pub paced_ms: u64,
}

impl Mended {
    /// Adds `other`'s counts to these.
    fn add(&mut self, other: Mended) {
        self.touched += other.touched;
        self.gone += other.gone;
        self.deleted += other.deleted;
        self.called_for += other.called_for;
        self.newer += other.newer;
        self.paced_ms += other.paced_ms;
    }
}

/// A mender of one base table's index entries.
pub struct Mender {
    client: aws_sdk_dynamodb::Client,
    indexes: Indexes,
    base_table: String,
    run_id: String,
    policy: Policy,
    /// The pace of its writes ([`Mender::paced`]).
    pacer: Pacer,
    /// Its writes so far, and the milliseconds they waited for their pace.
    written: AtomicUsize,
    waited_ms: AtomicU64,
    /// Told the writes so far after each one.
    progress: Option<Box<dyn Fn(usize) + Send + Sync>>,
}

impl std::fmt::Debug for Mender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mender")
            .field("base_table", &self.base_table)
            .field("run_id", &self.run_id)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

/// An entry's version condition for a delete.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unless {
    /// Delete only if the entry's version is still `Some(v)` (or still absent, for `None`).
    Moved(Option<String>),
    /// Delete only if the entry's version is absent or older than this one.
    Newer(String),
}

impl Mender {
    /// A mender of `base_table`'s entries under `indexes`, whose touches carry `run_id`.
    /// `client` must have the SDK's retries off (`io_policy::without_sdk_retries`).
    pub fn new(client: aws_sdk_dynamodb::Client, indexes: Indexes, base_table: &str, run_id: &str) -> Mender {
        Mender {
            client,
            indexes,
            base_table: base_table.to_owned(),
            run_id: run_id.to_owned(),
            policy: Policy::default(),
            pacer: Pacer::new(None),
            written: AtomicUsize::new(0),
            waited_ms: AtomicU64::new(0),
            progress: None,
        }
    }

    /// The same mender, writing at most `write_units` write units a second on average (`None`:
    /// no limit), so that a repair of a production table leaves its capacity to the app. Each
    /// touch and delete is counted as one unit: exact for items and entries under 1 KB, and a
    /// larger item's touch spends more than it is counted.
    #[must_use]
    pub fn paced(mut self, write_units: Option<f64>) -> Mender {
        self.pacer = Pacer::new(write_units);
        self
    }

    /// The same mender, telling `progress` how many writes it has made after each one.
    #[must_use]
    pub fn with_progress(mut self, progress: impl Fn(usize) + Send + Sync + 'static) -> Mender {
        self.progress = Some(Box::new(progress));
        self
    }

    /// Waits until one more write may be made at the mender's pace.
    async fn pace(&self) {
        let wait = self.pacer.reserve(1.0, Instant::now());
        if !wait.is_zero() {
            let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            self.waited_ms.fetch_add(ms, Ordering::Relaxed);
            tokio::time::sleep(wait).await;
        }
    }

    /// Counts one write made, and tells the progress.
    fn wrote(&self) {
        let written = self.written.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(progress) = &self.progress {
            progress(written);
        }
    }

    /// Mends `drift` (found by [`crate::verify::verify`] for `index`): the base items of missing and
    /// stale entries are touched; each extra entry is deleted if its base item no longer calls
    /// for it, on the version the verify saw. Items and entries are independent of one another:
    /// the policy's `concurrency` calls are in flight at once.
    pub async fn drift(&self, index: &Index, drift: &Drift) -> Result<Mended, VerifyError> {
        let budget = self.policy.within(MEND_TIME);
        let mut mended = Mended::default();
        let mut keys = BTreeMap::new();
        for entry in drift.missing.iter().chain(&drift.stale) {
            let key = self.base_key(entry)?;
            keys.insert(key_text(&key), key);
        }
        self.touch_all(&budget, keys.values(), &mut mended).await?;
        let extras: Vec<_> = drift.extra.iter().map(|entry| self.extra(&budget, index, entry)).collect();
        let mut extras = futures_util::stream::iter(extras).buffer_unordered(self.policy.concurrency.max(1));
        while let Some(one) = extras.next().await {
            mended.add(one?);
        }
        mended.paced_ms = self.waited_ms.load(Ordering::Relaxed);
        Ok(mended)
    }

    /// Deletes one extra entry unless its base item calls for it again or it has been put again
    /// since the verification saw it.
    async fn extra(&self, budget: &Budget, index: &Index, entry: &Value) -> Result<Mended, VerifyError> {
        let mut mended = Mended::default();
        let base_key = self.base_key(entry)?;
        if self.calls_for(budget, index, &base_key, entry).await? {
            mended.called_for += 1;
            return Ok(mended);
        }
        let seen = match entry.get(VERSION_ATTRIBUTE) {
            Some(v) => Some(
                v.get("S")
                    .and_then(Value::as_str)
                    .ok_or_else(|| VerifyError::Format(format!("{VERSION_ATTRIBUTE} is not S in {entry}")))?
                    .to_owned(),
            ),
            None => None,
        };
        let key = entry_key(index, entry)?;
        self.delete(budget, index, key, Unless::Moved(seen), &mut mended).await?;
        Ok(mended)
    }

    /// Replays the indexer's `records` (given up or parked) through the stream: each record's
    /// deletes are made only on entries older than the record, and every base item the records
    /// name that still exists is touched, once. No entry of an old image is ever put.
    pub async fn records(&self, records: &[EventRecord]) -> Result<Mended, VerifyError> {
        let budget = self.policy.within(MEND_TIME);
        let mut mended = Mended::default();
        let mut keys = BTreeMap::new();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        for record in records {
            let epoch = self.indexes.version_epoch;
            let version = record
                .change
                .sequence_number
                .as_deref()
                .and_then(|seq| formats::entries::version_in(epoch, seq))
                .ok_or_else(|| {
                    VerifyError::Format(format!(
                        "record {} has no sequence number to order its deletes by",
                        record.event_id
                    ))
                })?;
            // The longest lifetime (any order's), counted from now: the replay comes long after
            // the record, and older records of its item may still be delivered.
            let plan = Plan::in_order(
                &self.indexes,
                &stream_runtime::WireRecord::view_all(std::slice::from_ref(record)),
                Order::Any,
                now,
            );
            if let Some(stopped) = plan.failures.stopped {
                return Err(VerifyError::Format(format!(
                    "record {} cannot be planned: {}",
                    record.event_id, stopped.error
                )));
            }
            for write in plan.writes {
                // A removal: a tombstone's put (a record with a version and a change time, as
                // every replayed one has), guarded as the indexer's, or else a delete, made
                // unless something newer is there. An entry's put is left to the touch.
                let (item, tombstone) = match write.op {
                    Op::Delete(key) => (key, false),
                    Op::Put(item) if item.get(formats::tombstone::EXPIRES_ATTRIBUTE).is_some() => {
                        (item, true)
                    }
                    Op::Put(_) => continue,
                };
                let index = self
                    .indexes
                    .indexes
                    .iter()
                    .find(|i| i.table == write.table)
                    .ok_or_else(|| VerifyError::Index(format!("no index writes to {}", write.table)))?;
                let item: HashMap<String, AttributeValue> = item
                    .into_item()
                    .into_inner()
                    .into_iter()
                    .map(|(name, value)| (name, value.into()))
                    .collect();
                if tombstone {
                    self.bury(&budget, index, item, &version, &mut mended).await?;
                } else {
                    self.delete(&budget, index, item, Unless::Newer(version.clone()), &mut mended).await?;
                }
            }
            let keys_json =
                serde_json::to_value(&record.change.keys).map_err(|e| VerifyError::Format(e.to_string()))?;
            let key = self.base_key(&keys_json)?;
            keys.insert(key_text(&key), key);
        }
        self.touch_all(&budget, keys.values(), &mut mended).await?;
        mended.paced_ms = self.waited_ms.load(Ordering::Relaxed);
        Ok(mended)
    }

    /// The base item's key, from an index entry or a record's `Keys` (both carry the base key's
    /// attributes as they are).
    fn base_key(&self, item: &Value) -> Result<HashMap<String, AttributeValue>, VerifyError> {
        let mut key = HashMap::new();
        for name in &self.indexes.base_key {
            let value = item.get(name).ok_or_else(|| {
                VerifyError::Format(format!("{item} lacks the base key attribute {name:?}"))
            })?;
            key.insert(name.clone(), attribute(value)?);
        }
        Ok(key)
    }

    /// Touches the base items keyed `keys`, the policy's `concurrency` at a time (each item's
    /// touch is independent of the others').
    async fn touch_all(
        &self,
        budget: &Budget,
        keys: impl Iterator<Item = &HashMap<String, AttributeValue>>,
        mended: &mut Mended,
    ) -> Result<(), VerifyError> {
        // The futures made first and then streamed (not made by a stream's `map`): a future
        // that a closure over borrowed items makes cannot be shown `Send` to a boxing caller.
        let touches: Vec<_> = keys
            .map(|key| async move {
                self.pace().await;
                let touched = crate::backfill::touch_item(
                    &self.client,
                    budget,
                    &self.base_table,
                    key,
                    &self.run_id,
                    false,
                )
                .await;
                self.wrote();
                touched
            })
            .collect();
        let mut touches =
            futures_util::stream::iter(touches).buffer_unordered(self.policy.concurrency.max(1));
        while let Some(touched) = touches.next().await {
            if touched.map_err(|failure| failed("UpdateItem", &self.base_table, failure))?.is_some() {
                mended.touched += 1;
            } else {
                mended.gone += 1;
            }
        }
        Ok(())
    }

    /// Whether the base item keyed `base_key`, read consistently now, calls for `entry` (the
    /// same index key), by the independent oracle.
    async fn calls_for(
        &self,
        budget: &Budget,
        index: &Index,
        base_key: &HashMap<String, AttributeValue>,
        entry: &Value,
    ) -> Result<bool, VerifyError> {
        let got = budget
            .call(|| {
                let request = self
                    .client
                    .get_item()
                    .table_name(&self.base_table)
                    .set_key(Some(base_key.clone()))
                    .consistent_read(true);
                async move { request.send().await.map_err(|e| io_policy::classify("GetItem", &e)) }
            })
            .await
            .map_err(|failure| failed("GetItem", &self.base_table, failure))?;
        let Some(item) = got.item else {
            return Ok(false);
        };
        let item = serde_json::to_value(serde_dynamo::Item::from(item))
            .map_err(|e| VerifyError::Format(e.to_string()))?;
        let one = self.indexes.only(index);
        let wanted = (entry.get(&index.partition_key), entry.get(&index.sort_key));
        for line in crate::oracle::expected_index(&one, &[item])? {
            let expected: Value =
                serde_json::from_str(&line).map_err(|e| VerifyError::Format(e.to_string()))?;
            if (expected.get(&index.partition_key), expected.get(&index.sort_key)) == wanted {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn delete(
        &self,
        budget: &Budget,
        index: &Index,
        key: HashMap<String, AttributeValue>,
        unless: Unless,
        mended: &mut Mended,
    ) -> Result<(), VerifyError> {
        self.pace().await;
        let deleted = budget
            .call(|| {
                let mut request = self
                    .client
                    .delete_item()
                    .table_name(index.table.as_ref())
                    .set_key(Some(key.clone()))
                    .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
                    .expression_attribute_names("#v", VERSION_ATTRIBUTE);
                request = match &unless {
                    Unless::Moved(None) => request.condition_expression("attribute_not_exists(#v)"),
                    Unless::Moved(Some(seen)) => request
                        .condition_expression("#v = :v")
                        .expression_attribute_values(":v", AttributeValue::S(seen.clone())),
                    Unless::Newer(version) => request
                        .condition_expression("attribute_not_exists(#v) OR #v < :v")
                        .expression_attribute_values(":v", AttributeValue::S(version.clone())),
                };
                async move {
                    let answer = io_policy::conditional("DeleteItem", request.send().await)?;
                    Ok(answer.map(|a| a.attributes.is_some_and(|a| !a.is_empty())))
                }
            })
            .await
            .map_err(|failure| failed("DeleteItem", &index.table, failure))?;
        self.wrote();
        match deleted {
            Some(true) => mended.deleted += 1,
            Some(false) => {} // nothing was there
            None => mended.newer += 1,
        }
        Ok(())
    }

    /// Puts a replayed record's `tombstone` (its key, `version` and expiry) unless the key holds
    /// a newer version: the indexer's own guard
    /// (`stream_runtime::writer::Writer::write_versioned`), which also lets the record's own
    /// tombstone be put again (a replay retried: the key's version is the record's only if the
    /// record put that tombstone, since a record never both puts and removes a key). An entry
    /// replaced counts as deleted.
    async fn bury(
        &self,
        budget: &Budget,
        index: &Index,
        tombstone: HashMap<String, AttributeValue>,
        version: &str,
        mended: &mut Mended,
    ) -> Result<(), VerifyError> {
        self.pace().await;
        let replaced = budget
            .call(|| {
                let request = self
                    .client
                    .put_item()
                    .table_name(index.table.as_ref())
                    .set_item(Some(tombstone.clone()))
                    .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
                    .condition_expression("attribute_not_exists(#v) OR #v <= :v")
                    .expression_attribute_names("#v", VERSION_ATTRIBUTE)
                    .expression_attribute_values(":v", AttributeValue::S(version.to_owned()));
                async move {
                    let answer = io_policy::conditional("PutItem", request.send().await)?;
                    // An entry, not a tombstone, was there.
                    Ok(answer.map(|a| {
                        a.attributes.is_some_and(|old| {
                            !old.is_empty() && !old.contains_key(formats::tombstone::EXPIRES_ATTRIBUTE)
                        })
                    }))
                }
            })
            .await
            .map_err(|failure| failed("PutItem", &index.table, failure))?;
        self.wrote();
        match replaced {
            Some(true) => mended.deleted += 1,
            Some(false) => {} // no entry was there
            None => mended.newer += 1,
        }
        Ok(())
    }
}

fn failed(operation: &'static str, table: &str, failure: Failure) -> VerifyError {
    io_policy::RequestFailed::new(operation, table, failure).into()
}

/// The table a stream record comes from, by its `eventSourceARN`
/// (`arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>`).
pub(crate) fn table_of(record: &EventRecord) -> Option<&str> {
    record
        .event_source_arn
        .as_deref()?
        .split_once(":table/")
        .and_then(|(_, rest)| rest.split('/').next())
        .filter(|name| !name.is_empty())
}

/// An index entry's key (partition and sort key), from the entry as scanned.
fn entry_key(index: &Index, entry: &Value) -> Result<HashMap<String, AttributeValue>, VerifyError> {
    let mut key = HashMap::new();
    for name in [&index.partition_key, &index.sort_key] {
        let value = entry.get(name).ok_or_else(|| {
            VerifyError::Format(format!("an index item without its key attribute {name}: {entry}"))
        })?;
        key.insert(name.clone(), attribute(value)?);
    }
    Ok(key)
}

fn attribute(value: &Value) -> Result<AttributeValue, VerifyError> {
    serde_json::from_value::<serde_dynamo::AttributeValue>(value.clone())
        .map(Into::into)
        .map_err(|e| VerifyError::Format(format!("{value} is not a DynamoDB JSON value: {e}")))
}

/// A key as text, to touch each item once.
fn key_text(key: &HashMap<String, AttributeValue>) -> String {
    let sorted: BTreeMap<_, _> = key.iter().map(|(k, v)| (k, format!("{v:?}"))).collect();
    format!("{sorted:?}")
}
