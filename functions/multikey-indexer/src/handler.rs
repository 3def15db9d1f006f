//! The indexer as a stream function: its configuration, its plan and its writes. The runtime
//! (`stream-runtime`) does the rest: the failure model, parking, metrics and the response.
//!
//! With `MULTIKEY_ORDER=any` (order-insensitive indexing, [`crate::plan::any_order`]) a batch is
//! applied in three steps: the heads of the items it touches are read (`BatchGetItem`,
//! consistent), the plan is resolved against them, and the entry writes are sent, then the heads
//! of the records whose entry writes all succeeded.

use std::collections::{HashMap, HashSet};

use aws_sdk_dynamodb::types::KeysAndAttributes;
use ddb_writer::Writer;
use io_policy::Failure;
use multikey_schema::head::Head;
use serde_dynamo::{AttributeValue, Item};
use stream_kit::ItemWrite;
use stream_runtime::{
    AnyOrderHint, Applied, Aws, Budget, ConfigError, Metric, Planned, RecordFailure, Resource,
    StreamFunction, Vars, WireRecord,
};

use crate::config::Indexes;
use crate::plan::any_order::{self, Changes};
use crate::plan::{Plan, PlanError, steps};

/// The variable that chooses in-order or order-insensitive indexing.
pub const ORDER_VAR: &str = "MULTIKEY_ORDER";

/// How the indexer takes one item's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// In order, as a DynamoDB stream delivers them (`stream`, the default): each record is
    /// diffed against its own old image.
    #[default]
    Stream,
    /// In any order and more than once (`any`): each item's records are ordered by a version
    /// head in the index table.
    Any,
}

impl Order {
    /// Reads `MULTIKEY_ORDER`.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Order, ConfigError> {
        vars.choice(ORDER_VAR, &[("stream", Order::Stream), ("any", Order::Any)])
    }
}

/// The function, with its configuration and client built once.
#[derive(Debug, Clone)]
pub struct Indexer {
    indexes: Indexes,
    order: Order,
    writer: Writer,
    dynamodb: aws_sdk_dynamodb::Client,
}

impl Indexer {
    /// The indexer for `indexes`, taking records in `order`, writing with `dynamodb` (built
    /// without the SDK's retries).
    pub fn new(indexes: Indexes, order: Order, dynamodb: aws_sdk_dynamodb::Client) -> Indexer {
        Indexer {
            indexes,
            order,
            writer: Writer::new(dynamodb.clone()),
            dynamodb,
        }
    }
}

/// A batch's plan: the writes, or (in any order) the changes still to resolve against heads.
#[derive(Debug)]
pub enum IndexPlan {
    /// In order: the writes.
    Writes(Vec<ItemWrite>),
    /// In any order: each item's newest change.
    Changes(Changes),
}

impl StreamFunction for Indexer {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    type Plan = IndexPlan;
    /// An entry is removed by the old image and put by the new one.
    const STREAM_VIEWS: &'static [&'static str] = &["NEW_AND_OLD_IMAGES"];

    /// Reads `MULTIKEY_INDEXES` and `MULTIKEY_ORDER`.
    fn init(vars: &Vars<'_>, aws: &Aws) -> Result<Indexer, ConfigError> {
        Ok(Indexer::new(
            Indexes::from_vars(vars)?,
            Order::from_vars(vars)?,
            aws.dynamodb(),
        ))
    }

    /// Only with `MULTIKEY_ORDER=any`.
    fn any_order(&self) -> Result<(), AnyOrderHint> {
        match self.order {
            Order::Any => Ok(()),
            Order::Stream => Err(AnyOrderHint(Some("MULTIKEY_ORDER=any"))),
        }
    }

    /// Each index table once, keyed as its index's `partitionKey` and `sortKey` say.
    fn resources(&self) -> Vec<Resource> {
        let mut tables: Vec<Resource> = Vec::new();
        for index in &self.indexes.indexes {
            let table = Resource::Table {
                variable: "MULTIKEY_INDEXES",
                name: index.table.to_string(),
                partition_key: index.partition_key.clone(),
                sort_key: Some(index.sort_key.clone()),
            };
            if !tables.contains(&table) {
                tables.push(table);
            }
        }
        tables
    }

    fn plan(&self, records: &[WireRecord<'_>]) -> Planned<IndexPlan> {
        if self.order == Order::Any {
            let mut changes = Changes::from_wire(&self.indexes, records);
            let failures = std::mem::take(&mut changes.failures);
            tracing::debug!(records = records.len(), changes = changes.items.len(), "planned");
            return Planned {
                counts: vec![(
                    Metric::SkippedRecords,
                    (changes.unindexed_records + changes.superseded) as u64,
                )],
                plan: IndexPlan::Changes(changes),
                failures: stream_runtime::rejections(failures, PlanError::kind),
            };
        }
        let plan = Plan::from_wire(&self.indexes, records);
        log_skipped(&plan);
        let (puts, deletes) = plan.counts();
        tracing::debug!(records = records.len(), puts, deletes, "planned");
        let failures = stream_runtime::rejections(plan.failures, PlanError::kind);
        Planned {
            plan: IndexPlan::Writes(plan.writes),
            failures,
            counts: vec![
                (Metric::SkippedValues, plan.skipped.len() as u64),
                (Metric::SkippedRecords, plan.unindexed_records as u64),
            ],
        }
    }

    async fn apply(&self, plan: IndexPlan, budget: &Budget) -> Applied {
        match plan {
            IndexPlan::Writes(writes) => self.write(writes, budget).await,
            IndexPlan::Changes(changes) => self.apply_changes(changes, budget).await,
        }
    }

    /// In order, a batch of more than [`steps::STEP_RECORDS`] records is planned in steps cut by
    /// item, each step's writes sent while the next is planned ([`Indexer::plan_in_steps`]); in
    /// any order, and for smaller batches, the whole batch is planned first.
    async fn plan_and_apply<'r>(&'r self, records: &'r [WireRecord<'r>], budget: &'r Budget) -> Applied {
        if self.order == Order::Stream && records.len() > steps::STEP_RECORDS {
            return self.plan_in_steps(records, budget).await;
        }
        stream_runtime::plan_then_apply(self, records, budget).await
    }
}

impl Indexer {
    /// Plans `records` in steps cut by item ([`steps`]) and sends each step's writes while the
    /// next is planned, in chunks of 25 across steps: the same writes, in as many requests, as the
    /// whole batch's plan. When a step's plan stops at a record (a systemic failure), the steps
    /// after it plan no record past that one; the steps before it may have written some, which
    /// Lambda delivers again from the checkpoint, each item's in order (docs/functions.md).
    async fn plan_in_steps(&self, records: &[WireRecord<'_>], budget: &Budget) -> Applied {
        let steps = steps::by_item(&self.indexes, records, steps::STEP_RECORDS);
        let (ready, chunks) = tokio::sync::mpsc::unbounded_channel::<Vec<ItemWrite>>();
        let chunks = futures_util::stream::unfold(chunks, |mut chunks| async move {
            chunks.recv().await.map(|chunk| (chunk, chunks))
        });
        let planning = async move {
            let mut failures = Vec::new();
            let (mut skipped, mut unindexed, mut puts, mut deletes) = (0, 0, 0, 0);
            let mut stop = usize::MAX;
            let mut pending: Vec<ItemWrite> = Vec::new();
            let last = steps.len() - 1;
            for (n, step) in steps.iter().enumerate() {
                let planned = step.partition_point(|&at| at < stop);
                let plan = Plan::from_wire_at(&self.indexes, records, &step[..planned]);
                log_skipped(&plan);
                let (p, d) = plan.counts();
                (puts, deletes) = (puts + p, deletes + d);
                skipped += plan.skipped.len();
                unindexed += plan.unindexed_records;
                if let Some(stopped) = &plan.failures.stopped {
                    stop = stop.min(stopped.record);
                }
                failures.extend(stream_runtime::rejections(plan.failures, PlanError::kind));
                pending.extend(plan.writes);
                // Whole chunks, but for the last step's remainder: a request is never sent short
                // while more writes are coming.
                let sendable = if n == last {
                    pending.len()
                } else {
                    pending.len() - pending.len() % ddb_writer::MAX_BATCH
                };
                let mut sending = pending.drain(..sendable);
                loop {
                    let chunk: Vec<ItemWrite> = sending.by_ref().take(ddb_writer::MAX_BATCH).collect();
                    if chunk.is_empty() {
                        break;
                    }
                    // The writer outlives the planning: it is joined with it below.
                    ready.send(chunk).ok();
                }
                drop(sending);
                // Let the writes made so far go out before the next step is planned.
                tokio::task::yield_now().await;
            }
            tracing::debug!(
                records = records.len(),
                steps = steps.len(),
                puts,
                deletes,
                "planned"
            );
            let counts = vec![
                (Metric::SkippedValues, skipped as u64),
                (Metric::SkippedRecords, unindexed as u64),
            ];
            (failures, counts)
        };
        let ((failures, counts), report) = tokio::join!(planning, self.writer.write_as_ready(chunks, budget));
        Applied::after(failures, counts, applied(report))
    }

    async fn write(&self, writes: Vec<ItemWrite>, budget: &Budget) -> Applied {
        applied(self.writer.write(writes, budget).await)
    }

    /// Reads the changes' heads, resolves, writes the entries, then the heads of the records
    /// whose entry writes all succeeded.
    async fn apply_changes(&self, changes: Changes, budget: &Budget) -> Applied {
        let mut heads = HashMap::new();
        for (table, keys) in changes.heads_by_table(&self.indexes) {
            if let Err(failure) = self.read_heads(&table, keys, budget, &mut heads).await {
                // Nothing is written: every change waits for its head.
                return Applied {
                    failures: changes
                        .items
                        .iter()
                        .map(|c| RecordFailure::new(c.origin, failure.clone()))
                        .collect(),
                    ..Applied::default()
                };
            }
        }
        let resolved = any_order::resolve(&self.indexes, changes, &heads);
        log_skipped(&resolved.plan);
        let mut applied = self.write(resolved.plan.writes, budget).await;
        let failed: HashSet<usize> = applied.failures.iter().map(|f| f.record).collect();
        let heads: Vec<ItemWrite> = resolved
            .heads
            .into_iter()
            .filter(|h| !failed.contains(&h.origin))
            .collect();
        let written = self.write(heads, budget).await;
        applied.writes += written.writes;
        applied.failed_writes += written.failed_writes;
        applied.failures.extend(written.failures);
        applied.failures.extend(stream_runtime::rejections(
            resolved.plan.failures,
            PlanError::kind,
        ));
        applied.counts = vec![
            (Metric::SkippedRecords, resolved.stale as u64),
            (Metric::SkippedValues, resolved.plan.skipped.len() as u64),
        ];
        applied
    }

    /// Reads `keys` (heads of one table, 100 a request) into `heads`, by partition key.
    async fn read_heads(
        &self,
        table: &str,
        keys: Vec<Item>,
        budget: &Budget,
        heads: &mut HashMap<String, Head>,
    ) -> Result<(), Failure> {
        let index = self
            .indexes
            .indexes
            .iter()
            .find(|i| &*i.table == table)
            .ok_or_else(|| Failure::systemic(format!("no configured index writes to the table {table}")))?;
        let mut keys = keys;
        while !keys.is_empty() {
            let rest = keys.split_off(keys.len().min(100));
            let wanted = KeysAndAttributes::builder()
                .set_keys(Some(keys.into_iter().map(Into::into).collect()))
                .consistent_read(true)
                .build()
                .map_err(|e| Failure::systemic(e.to_string()))?;
            for item in io_policy::batch_get_item(budget, &self.dynamodb, table, wanted, || ()).await? {
                let item = Item::from(item);
                let Some(AttributeValue::S(pk)) = item.get(&index.partition_key) else {
                    continue;
                };
                let head = Head::read(&item).map_err(|e| {
                    Failure::systemic(format!(
                        "table {table}: the version head {pk:?} is unreadable: {e}"
                    ))
                })?;
                heads.insert(pk.clone(), head);
            }
            keys = rest;
        }
        Ok(())
    }
}

/// What a writer's report says, as the runtime takes it.
fn applied(report: ddb_writer::Report) -> Applied {
    Applied {
        failures: report
            .failures
            .into_iter()
            .map(|(origin, failure)| RecordFailure::new(origin, failure))
            .collect(),
        writes: report.writes,
        failed_writes: report.failed,
        counts: Vec::new(),
    }
}

fn log_skipped(plan: &Plan) {
    for s in &plan.skipped {
        tracing::warn!(record = s.record, index = %s.index, member = %s.member, reason = %s.reason, "value left out of the index");
    }
}

#[cfg(test)]
mod tests;
