//! Existing items brought into the multikey index without racing the stream.
//!
//! **The race.** A backfill that scans the base table and writes index entries itself can read
//! an item at version 1, let the indexer apply version 2 from the stream, and then write version
//! 1's entries over it: stale entries come back and removals are lost.
//!
//! **The design: touch, don't write.** The backfill writes nothing to the index. For every item
//! with an index's source attribute it makes one of the item's two marker attributes
//! (`formats::touch::MARKERS`) appear, holding the run id, with an `UpdateItem` conditioned on
//! the item still existing and not already carrying this run id. DynamoDB Streams delivers that change
//! in the item's own order, after every earlier change and before every later one, and the
//! indexer puts every entry of a touched item's new image. So each item's entries are written by
//! the one process that sees its changes in order, and the race cannot happen:
//!
//! - a change made before the touch is in the touch's image;
//! - a change made after it is a later stream record, applied after the touch's entries;
//! - a delete after the scan makes the touch's condition fail: nothing is written, and the
//!   delete's record removes whatever entries the item had.
//!
//! A touch changes only the markers, which no function reads as data: it moves no TTL and changes no
//! count (the aggregator and the archiver skip touches). The cost is one write per item on the
//! base table, and a stream record per item for every consumer. The indexer must be running (its
//! event source mapping enabled) before the backfill starts.
//!
//! **The work.** A parallel scan in `total_segments` segments ([`Backfill::segment`] runs one),
//! paced in read and write capacity units per second ([`crate::pace::Pacer`]), checkpointed after every
//! page ([`checkpoint`]) so that a backfill killed at any point resumes where it was. The CLI
//! runs the segments concurrently in one process ([`Backfill::run`]); the template's optional
//! state machine runs each segment in a Lambda function, resuming from the cursor it returns.

pub mod checkpoint;
pub mod rebuild;
pub mod task;
pub mod untouch;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use formats::Indexes;
use formats::touch::{MARKERS, RETOUCH_ATTRIBUTE, TOUCH_ATTRIBUTE, TOUCH_REQUESTS};
use futures_util::StreamExt;
use io_policy::{Failure, Policy};
use serde_json::Value;
use stream_runtime::limits::item_size;

pub(crate) use crate::pace::Pacer;
pub use checkpoint::{Checkpoint, Counts, Cursor};
pub use task::Task;

/// How long one page (its scan and its touches, retries included) may take.
const PAGE_TIME: Duration = Duration::from_secs(60);

/// Why a backfill stopped.
#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    /// The configuration names no such index.
    #[error("{0}")]
    Index(String),
    /// A scan page failed after its retries.
    #[error("Scan {table} segment {segment}: {failure}")]
    Scan {
        /// The table.
        table: String,
        /// The segment.
        segment: u32,
        /// The last failure.
        failure: Failure,
    },
    /// A touch failed after its retries.
    #[error("touching {key} in {table}: {failure}")]
    Touch {
        /// The table.
        table: String,
        /// The item's key, DynamoDB JSON.
        key: String,
        /// The last failure.
        failure: Failure,
    },
    /// The index table cannot be created.
    #[error("creating {table}: {failure}")]
    Table {
        /// The table.
        table: String,
        /// The last failure.
        failure: Failure,
    },
    /// The checkpoint file cannot be read, written or used.
    #[error("checkpoint {path}: {message}")]
    Checkpoint {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// Which items a backfill touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The base table.
    pub table: String,
    /// Its key attributes, partition key first.
    pub key: Vec<String>,
    /// The attributes whose items are touched: the chosen indexes' sources.
    pub sources: Vec<String>,
}

impl Target {
    /// The items of `table` that index `name` of `indexes` reads (every index's when `None`).
    pub fn new(table: &str, indexes: &Indexes, name: Option<&str>) -> Result<Target, BackfillError> {
        let chosen: Vec<_> = indexes.indexes.iter().filter(|i| name.is_none_or(|n| i.name == n)).collect();
        if chosen.is_empty() {
            let names: Vec<_> = indexes.indexes.iter().map(|i| i.name.as_str()).collect();
            return Err(BackfillError::Index(format!(
                "MULTIKEY_INDEXES has no index {:?} (it has {})",
                name.unwrap_or_default(),
                names.join(", ")
            )));
        }
        let mut sources: Vec<String> = chosen.iter().map(|i| i.source.clone()).collect();
        sources.sort();
        sources.dedup();
        Ok(Target { table: table.to_owned(), key: indexes.base_key.clone(), sources })
    }
}

/// How a backfill works.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Items per scan page (`Limit`).
    pub page_size: i32,
    /// Touches in flight at once, per segment.
    pub touch_concurrency: usize,
    /// Retries, backoff and attempt timeouts for every call.
    pub policy: Policy,
    /// Read capacity units per second, for the whole backfill; `None` for no limit.
    pub read_units_per_second: Option<f64>,
    /// Write capacity units per second, for the whole backfill; `None` for no limit.
    pub write_units_per_second: Option<f64>,
    /// Count what would be touched, and touch nothing.
    pub dry_run: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            page_size: 500,
            touch_concurrency: 8,
            policy: Policy::default(),
            read_units_per_second: None,
            write_units_per_second: None,
            dry_run: false,
        }
    }
}

/// A backfill of one table: its client, target, settings and pacers.
#[derive(Debug)]
pub struct Backfill {
    client: aws_sdk_dynamodb::Client,
    target: Target,
    settings: Settings,
    reads: Pacer,
    writes: Pacer,
}

/// What happened to one item of a page.
enum Touch {
    Touched(f64),
    Already,
    Unindexed,
    /// DynamoDB refused the touch for the item's content: its key (DynamoDB JSON).
    Untouchable(Value),
}

impl Backfill {
    /// A backfill of `target` with `client` (built without the SDK's retries:
    /// `io_policy::without_sdk_retries`).
    pub fn new(client: aws_sdk_dynamodb::Client, target: Target, settings: Settings) -> Backfill {
        Backfill {
            client,
            reads: Pacer::new(settings.read_units_per_second),
            writes: Pacer::new(settings.write_units_per_second),
            target,
            settings,
        }
    }

    /// What it touches.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Runs every unfinished segment of `checkpoint` concurrently, and saves the checkpoint
    /// with `save` after each page (of any segment); `progress` gets the summed counts then.
    /// Returns once every segment has ended: done, or failed. A failed segment does not stop
    /// the others; the first error (in segment order) is returned, and the checkpoint holds
    /// every page any segment finished.
    pub async fn run(
        &self,
        checkpoint: &mut Checkpoint,
        save: &mut (dyn FnMut(&Checkpoint) -> Result<(), BackfillError> + Send),
        progress: &mut (dyn FnMut(&Counts) + Send),
    ) -> Result<(), BackfillError> {
        let run_id = checkpoint.run_id.clone();
        let total = checkpoint.total_segments;
        let pending: Vec<Cursor> = checkpoint.segments.iter().filter(|c| !c.done).cloned().collect();
        let shared = Mutex::new((checkpoint, save, progress));
        let tasks = pending.into_iter().map(|mut cursor| {
            let shared = &shared;
            let run_id = &run_id;
            async move {
                self.segment(run_id, total, &mut cursor, None, &mut |c| {
                    let mut guard = shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let (checkpoint, save, progress) = &mut *guard;
                    checkpoint.segments[c.segment as usize] = c.clone();
                    progress(&checkpoint.counts());
                    save(checkpoint)
                })
                .await
            }
        });
        let results = futures_util::future::join_all(tasks).await;
        results.into_iter().collect()
    }

    /// Scans segment `cursor.segment` of `total_segments` from `cursor.next` to its end, or
    /// until a page ends past `stop`, touching its items with `run_id`; `on_page` gets the
    /// cursor after each page (its error ends the segment).
    pub async fn segment(
        &self,
        run_id: &str,
        total_segments: u32,
        cursor: &mut Cursor,
        stop: Option<Instant>,
        on_page: &mut (dyn FnMut(&Cursor) -> Result<(), BackfillError> + Send),
    ) -> Result<(), BackfillError> {
        while !cursor.done && stop.is_none_or(|s| Instant::now() < s) {
            let (items, next, read_units) = self.scan_page(total_segments, cursor).await?;
            self.reads.spend(read_units).await;
            let outcomes: Vec<Result<Touch, BackfillError>> = futures_util::stream::iter(items)
                .map(|item| self.touch(run_id, item))
                .buffer_unordered(self.settings.touch_concurrency.max(1))
                .collect()
                .await;
            let counts = &mut cursor.counts;
            counts.read_units += read_units;
            for outcome in outcomes {
                counts.scanned += 1;
                match outcome? {
                    Touch::Touched(units) => {
                        counts.touched += 1;
                        counts.write_units += units;
                    }
                    Touch::Already => counts.already += 1,
                    Touch::Unindexed => counts.unindexed += 1,
                    Touch::Untouchable(key) => {
                        counts.untouchable += 1;
                        cursor.untouchable.push(key);
                    }
                }
            }
            cursor.done = next.is_none();
            cursor.next = next;
            on_page(cursor)?;
        }
        Ok(())
    }

    /// One page of the segment: its items, the key to go on after, and the read units spent.
    async fn scan_page(
        &self,
        total_segments: u32,
        cursor: &Cursor,
    ) -> Result<(Vec<HashMap<String, AttributeValue>>, Option<Value>, f64), BackfillError> {
        let failed = |failure: Failure| BackfillError::Scan {
            table: self.target.table.clone(),
            segment: cursor.segment,
            failure,
        };
        let start: Option<HashMap<String, AttributeValue>> = match &cursor.next {
            Some(key) => Some(
                serde_json::from_value::<serde_dynamo::Item>(key.clone())
                    .map_err(|e| failed(Failure::systemic(format!("the checkpoint's key {key}: {e}"))))?
                    .into(),
            ),
            None => None,
        };
        let budget = self.settings.policy.within(PAGE_TIME);
        let page = budget
            .call(|| {
                let request = self
                    .client
                    .scan()
                    .table_name(&self.target.table)
                    .segment(i32::try_from(cursor.segment).unwrap_or(i32::MAX))
                    .total_segments(i32::try_from(total_segments).unwrap_or(i32::MAX))
                    .limit(self.settings.page_size)
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .set_exclusive_start_key(start.clone());
                async move { request.send().await.map_err(|e| io_policy::classify("Scan", &e)) }
            })
            .await
            .map_err(failed)?;
        let items = page.items.unwrap_or_default();
        // Eventually consistent reads: 0.5 units per 4 KB, when DynamoDB does not say.
        let read_units = page.consumed_capacity.and_then(|c| c.capacity_units).unwrap_or_else(|| {
            let bytes: usize = items.iter().map(|i| item_size(&i.clone().into())).sum();
            f64::from(u32::try_from(bytes.div_ceil(4096).max(1)).unwrap_or(u32::MAX)) / 2.0
        });
        let next = match page.last_evaluated_key {
            Some(key) if !key.is_empty() => Some(
                serde_json::to_value(serde_dynamo::Item::from(key))
                    .map_err(|e| failed(Failure::systemic(e.to_string())))?,
            ),
            _ => None,
        };
        Ok((items, next, read_units))
    }

    /// Touches one item, unless it has nothing to index or already carries `run_id`.
    async fn touch(
        &self,
        run_id: &str,
        item: HashMap<String, AttributeValue>,
    ) -> Result<Touch, BackfillError> {
        if !self.target.sources.iter().any(|s| item.contains_key(s)) {
            return Ok(Touch::Unindexed);
        }
        if MARKERS.iter().any(|m| matches!(item.get(*m), Some(AttributeValue::S(r)) if r == run_id)) {
            return Ok(Touch::Already);
        }
        let marked = item.contains_key(TOUCH_ATTRIBUTE);
        let key: HashMap<String, AttributeValue> = self
            .target
            .key
            .iter()
            .filter_map(|name| item.get(name).map(|v| (name.clone(), v.clone())))
            .collect();
        // A write costs one unit per KB of the larger of the item before and after: a touch sets
        // one marker and removes the other (`TOUCH_REQUESTS`; on a marked item it sets the other).
        let added = if marked { RETOUCH_ATTRIBUTE } else { TOUCH_ATTRIBUTE };
        let markers: usize = MARKERS
            .iter()
            .filter_map(|m| match item.get(*m) {
                Some(AttributeValue::S(held)) => Some(m.len() + held.len()),
                _ => None,
            })
            .sum();
        let before = item_size(&item.into());
        let size = before.max(before.saturating_sub(markers) + added.len() + run_id.len());
        let units = f64::from(u32::try_from(size.div_ceil(1024).max(1)).unwrap_or(u32::MAX));
        if self.settings.dry_run {
            return Ok(Touch::Touched(units));
        }
        self.writes.spend(units).await;
        let budget = self.settings.policy.within(PAGE_TIME);
        let answer = touch_item(&self.client, &budget, &self.target.table, &key, run_id, marked).await;
        match answer {
            // What DynamoDB says the touch consumed, its indexes' writes included (an index that
            // projects the markers is written too): the difference from the estimate paid now.
            Ok(Some(consumed)) => {
                let spent = consumed.unwrap_or(units);
                if spent > units {
                    self.writes.spend(spent - units).await;
                }
                Ok(Touch::Touched(spent))
            }
            Ok(None) => Ok(Touch::Already),
            // The item's content can never take the marker (an item at the 400 KB limit): the
            // backfill goes on and lists it, as the functions park what can never succeed.
            Err(failure) if failure.kind == io_policy::FailureKind::RecordPermanent => {
                let key = serde_json::to_value(serde_dynamo::Item::from(key)).unwrap_or_default();
                tracing::error!(table = %self.target.table, %key, error = %failure.message, "cannot touch this item; it is listed as untouchable and the backfill goes on");
                Ok(Touch::Untouchable(key))
            }
            Err(failure) => Err(BackfillError::Touch {
                table: self.target.table.clone(),
                key: serde_json::to_string(&serde_dynamo::Item::from(key)).unwrap_or_default(),
                failure,
            }),
        }
    }
}

/// Touches the item keyed `key` in `table` with `run_id` (docs/formats.md, "Touch marker"), so
/// that the stream carries the item, in its own order, to every function: a marker appears on it,
/// holding `run_id`. `marked` says whether the item carried [`TOUCH_ATTRIBUTE`] when last read
/// (false when unknown): the touch then tries setting [`RETOUCH_ATTRIBUTE`] first, and the
/// other marker after a failed condition. `Ok(None)` when neither condition held (the item is
/// gone, or this run touched it already): nothing was written; else `Ok(Some(units))`, the
/// write units DynamoDB says the touch consumed (`ReturnConsumedCapacity`, the table's indexes
/// included; `None` if it did not say). Backfills, repairs and replays all touch through this
/// one call.
pub(crate) async fn touch_item<S: std::hash::BuildHasher + Clone>(
    client: &aws_sdk_dynamodb::Client,
    budget: &io_policy::Budget,
    table: &str,
    key: &HashMap<String, AttributeValue, S>,
    run_id: &str,
    marked: bool,
) -> Result<Option<Option<f64>>, Failure> {
    // Every key attribute exists on an existing item: any one serves the condition.
    let Some(key_attribute) = key.keys().next() else {
        return Err(Failure::systemic(format!("touching an item of {table} without its key")));
    };
    let order = if marked { [TOUCH_REQUESTS[1], TOUCH_REQUESTS[0]] } else { TOUCH_REQUESTS };
    for (_, update, condition) in order {
        let written = budget
            .call(|| {
                let request = client
                    .update_item()
                    .table_name(table)
                    .set_key(Some(key.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
                    .update_expression(update)
                    .condition_expression(condition)
                    .expression_attribute_names("#t", TOUCH_ATTRIBUTE)
                    .expression_attribute_names("#r", RETOUCH_ATTRIBUTE)
                    .expression_attribute_names("#k", key_attribute)
                    .expression_attribute_values(":run", AttributeValue::S(run_id.to_owned()))
                    .return_consumed_capacity(ReturnConsumedCapacity::Total);
                async move { io_policy::conditional("UpdateItem", request.send().await) }
            })
            .await?;
        if let Some(written) = written {
            return Ok(Some(written.consumed_capacity.and_then(|c| c.capacity_units)));
        }
    }
    Ok(None)
}

/// A run id for a new backfill: `bf-` and the time in seconds since the epoch.
pub fn new_run_id() -> String {
    run_id("bf")
}

/// A run id for a new run of anything that touches (a backfill `bf`, a repair, a replay):
/// `prefix`, `-`, and the time in seconds since the epoch.
pub fn run_id(prefix: &str) -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!("{prefix}-{secs}")
}
