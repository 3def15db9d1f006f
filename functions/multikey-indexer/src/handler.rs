//! The indexer as a stream function: its configuration, its plan and its writes. The runtime
//! (`stream-runtime`) does the rest: the failure model, parking, metrics and the response.
//!
//! Every item's entry writes are sent behind a *fence* ([`stream_runtime::writer::Fenced`]): in one
//! `TransactWriteItems` with a put of the item's version head, conditioned on the head being
//! older, so that a request that lands late (its invocation timed out, and Lambda's retry and
//! the item's next record have been applied since) is refused whole instead of undoing newer
//! writes. In order, the head holds the version only ([`Head::in_order`]).
//!
//! With `MULTIKEY_ORDER=any` (order-insensitive indexing, [`crate::plan::any_order`]) a batch is
//! applied in two steps: the heads of the items it touches are read (`BatchGetItem`,
//! consistent) and the plan is resolved against them; then each item's entry writes are sent
//! with its new head, on the same condition, so that the head read must still be the newest.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::KeysAndAttributes;
use formats::config::VERSION_ATTRIBUTE;
use formats::head::Head;
use io_policy::Budget;
use io_policy::Failure;
use serde_dynamo::{AttributeValue, Item};
use stream_runtime::writer::{Fence, Fenced, FencedReport, Writer};
use stream_runtime::{
    AnyOrderHint, Applied, Aws, ConfigError, ExplainError, Explained, Metric, Planned, RecordFailure, Replay,
    Resource, StreamFunction, Vars, WireRecord,
};
use stream_runtime::{Attributes, ItemWrite, Op};

use crate::config::Indexes;
use crate::plan::any_order::{self, Changes, ResolvedHead};
use crate::plan::{Plan, PlanError, steps};

/// The variable that chooses in-order or order-insensitive indexing.
pub(crate) const ORDER_VAR: &str = "MULTIKEY_ORDER";

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
        Indexer { indexes, order, writer: Writer::new(dynamodb.clone()), dynamodb }
    }
}

/// A batch's plan: the writes, or (in any order) the changes still to resolve against heads.
#[derive(Debug)]
pub enum IndexPlan {
    /// In order: the writes and their fences.
    Writes(Plan),
    /// In any order: each item's newest change.
    Changes(Changes),
}

impl StreamFunction for Indexer {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const REPLAY: Replay = Replay::ThroughTheStream;
    type Plan = IndexPlan;
    /// An entry is removed by the old image and put by the new one.
    const STREAM_VIEWS: &'static [&'static str] = &["NEW_AND_OLD_IMAGES"];

    /// Reads `MULTIKEY_INDEXES` and `MULTIKEY_ORDER`.
    fn init(vars: &Vars<'_>, aws: &Aws) -> Result<Indexer, ConfigError> {
        Ok(Indexer::new(Indexes::from_vars(vars)?, Order::from_vars(vars)?, aws.dynamodb()))
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

    fn explain(vars: &Vars<'_>, records: &[WireRecord<'_>]) -> Result<Explained, ExplainError> {
        crate::explain::explain(vars, records)
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
        let mut plan = plan;
        let failures = stream_runtime::rejections(std::mem::take(&mut plan.failures), PlanError::kind);
        let counts = vec![
            (Metric::SkippedValues, plan.skipped.len() as u64),
            (Metric::SkippedRecords, plan.unindexed_records as u64),
        ];
        Planned { plan: IndexPlan::Writes(plan), failures, counts }
    }

    async fn apply(&self, plan: IndexPlan, budget: &Budget) -> Applied {
        match plan {
            IndexPlan::Writes(plan) => {
                let (groups, unfenced) = fenced_in_order(&self.indexes, plan);
                self.write_fenced(groups, unfenced, budget).await
            }
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
    /// Plans `records` in steps cut by item ([`steps`]) and sends each step's fenced writes
    /// while the next is planned, packed into transactions across steps: the same transactions
    /// as the whole batch's plan would fill. When a step's plan stops at a record (a systemic
    /// failure), the steps after it plan no record past that one; the steps before it may have
    /// written some, which Lambda delivers again from the checkpoint, each item's in order
    /// (docs/functions.md).
    async fn plan_in_steps(&self, records: &[WireRecord<'_>], budget: &Budget) -> Applied {
        let steps = steps::by_item(&self.indexes, records, steps::STEP_RECORDS);
        let (ready, lots) = tokio::sync::mpsc::unbounded_channel::<Vec<Fenced>>();
        let lots =
            futures_util::stream::unfold(
                lots,
                |mut lots| async move { lots.recv().await.map(|lot| (lot, lots)) },
            );
        let planning = async move {
            let mut failures = Vec::new();
            let (mut skipped, mut unindexed, mut puts, mut deletes) = (0, 0, 0, 0);
            let mut stop = usize::MAX;
            let mut unfenced: Vec<ItemWrite> = Vec::new();
            for step in &steps {
                let planned = step.partition_point(|&at| at < stop);
                let mut plan = Plan::from_wire_at(&self.indexes, records, &step[..planned]);
                log_skipped(&plan);
                let (p, d) = plan.counts();
                (puts, deletes) = (puts + p, deletes + d);
                skipped += plan.skipped.len();
                unindexed += plan.unindexed_records;
                if let Some(stopped) = &plan.failures.stopped {
                    stop = stop.min(stopped.record);
                }
                failures
                    .extend(stream_runtime::rejections(std::mem::take(&mut plan.failures), PlanError::kind));
                let (groups, rest) = fenced_in_order(&self.indexes, plan);
                unfenced.extend(rest);
                // The writer outlives the planning: it is joined with it below.
                ready.send(groups).ok();
                // Let the writes made so far go out before the next step is planned.
                tokio::task::yield_now().await;
            }
            drop(ready);
            tracing::debug!(records = records.len(), steps = steps.len(), puts, deletes, "planned");
            let counts =
                vec![(Metric::SkippedValues, skipped as u64), (Metric::SkippedRecords, unindexed as u64)];
            (failures, counts, unfenced)
        };
        let ((failures, counts, unfenced), report) =
            tokio::join!(planning, self.writer.write_fenced_as_ready(lots, budget));
        let mut written = applied_fenced(report);
        if !unfenced.is_empty() {
            merge(&mut written, applied(self.writer.write(unfenced, budget).await));
        }
        Applied::after(failures, counts, written)
    }

    /// Sends `groups` behind their fences, and `unfenced` (writes of records without a version)
    /// as they are.
    async fn write_fenced(&self, groups: Vec<Fenced>, unfenced: Vec<ItemWrite>, budget: &Budget) -> Applied {
        let mut written = applied_fenced(self.writer.write_fenced(groups, budget).await);
        if !unfenced.is_empty() {
            merge(&mut written, applied(self.writer.write(unfenced, budget).await));
        }
        written
    }

    /// Reads the changes' heads, resolves, and writes each item's entries with its new head.
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
        let stale = resolved.stale;
        let mut plan = resolved.plan;
        let rejected = stream_runtime::rejections(std::mem::take(&mut plan.failures), PlanError::kind);
        let skipped = plan.skipped.len();
        let (groups, unfenced) = fenced_any_order(&self.indexes, plan, resolved.heads);
        let mut applied = self.write_fenced(groups, unfenced, budget).await;
        applied.failures.extend(rejected);
        applied
            .counts
            .extend([(Metric::SkippedRecords, stale as u64), (Metric::SkippedValues, skipped as u64)]);
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
        let index =
            self.indexes.indexes.iter().find(|i| &*i.table == table).ok_or_else(|| {
                Failure::systemic(format!("no configured index writes to the table {table}"))
            })?;
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
                    Failure::systemic(format!("table {table}: the version head {pk:?} is unreadable: {e}"))
                })?;
                heads.insert(pk.clone(), head);
            }
            keys = rest;
        }
        Ok(())
    }
}

/// An in-order plan's writes behind their items' fences: each item's version head
/// ([`Head::in_order`]), put with them on the condition that it is older (a record redelivered
/// after its item's writes were applied is refused, harmlessly: they were applied whole). An
/// item whose writes are all coalesced away has no group. Writes without a fence (a record without a version) are
/// returned apart.
pub fn fenced_in_order(indexes: &Indexes, plan: Plan) -> (Vec<Fenced>, Vec<ItemWrite>) {
    let fences = plan
        .fences
        .into_iter()
        .map(|f| {
            let index = &indexes.indexes[f.index];
            let head: Attributes = Head::in_order(f.version.clone()).item(index, f.head).into();
            Some(Fence {
                table: Arc::clone(&index.table),
                key: key_of(index, &head),
                head,
                version_attribute: VERSION_ATTRIBUTE,
                version: f.version,
                origin: f.origin,
            })
        })
        .collect();
    let (mut groups, unfenced) = group(plan.writes, plan.fenced_by, fences);
    groups.retain(|g| !g.writes.is_empty());
    (groups, unfenced)
}

/// An any-order plan's writes behind the new heads of their changes, each put on the condition
/// that the head is older than the change (so the head read is still the newest). A change that writes no entry still moves its
/// head; a change whose head was rejected (too large) has its writes returned apart.
fn fenced_any_order(
    indexes: &Indexes,
    plan: Plan,
    heads: Vec<ResolvedHead>,
) -> (Vec<Fenced>, Vec<ItemWrite>) {
    let mut by_key: HashMap<(usize, String), ResolvedHead> =
        heads.into_iter().map(|h| ((h.index, h.pk.clone()), h)).collect();
    let fences = plan
        .fences
        .iter()
        .map(|f| by_key.remove(&(f.index, f.head.pk.clone())).and_then(|h| fence_of(indexes, h)))
        .collect();
    let (mut groups, unfenced) = group(plan.writes, plan.fenced_by, fences);
    let mut alone: Vec<ResolvedHead> = by_key.into_values().collect();
    alone.sort_by_key(|h| h.write.origin);
    groups.extend(
        alone
            .into_iter()
            .filter_map(|h| fence_of(indexes, h))
            .map(|fence| Fenced { fence, writes: Vec::new() }),
    );
    (groups, unfenced)
}

/// A resolved head as the fence of its change's writes.
fn fence_of(indexes: &Indexes, head: ResolvedHead) -> Option<Fence> {
    let Op::Put(item) = head.write.op else {
        return None;
    };
    Some(Fence {
        table: head.write.table,
        key: key_of(&indexes.indexes[head.index], &item),
        head: item,
        version_attribute: VERSION_ATTRIBUTE,
        version: head.version,
        origin: head.write.origin,
    })
}

/// The key attributes of `item`, an item of `index`'s table.
fn key_of(index: &crate::config::Index, item: &Attributes) -> Attributes {
    let mut key = Attributes::with_capacity(2);
    for name in [&index.partition_key, &index.sort_key] {
        if let Some(value) = item.get(name) {
            key.push(name.as_str(), value.clone());
        }
    }
    key
}

/// Writes grouped by their fence (a position in `fences`); those with none, or whose fence is
/// `None`, returned apart.
fn group(
    writes: Vec<ItemWrite>,
    fenced_by: Vec<Option<usize>>,
    fences: Vec<Option<Fence>>,
) -> (Vec<Fenced>, Vec<ItemWrite>) {
    let mut groups: Vec<Option<Fenced>> =
        fences.into_iter().map(|f| f.map(|fence| Fenced { fence, writes: Vec::new() })).collect();
    let mut unfenced = Vec::new();
    for (write, at) in writes.into_iter().zip(fenced_by) {
        match at.and_then(|at| groups.get_mut(at)).and_then(Option::as_mut) {
            Some(group) => group.writes.push(write),
            None => unfenced.push(write),
        }
    }
    (groups.into_iter().flatten().collect(), unfenced)
}

/// What the fenced writer's report says, as the runtime takes it: superseded writes counted.
fn applied_fenced(report: FencedReport) -> Applied {
    let mut written = applied(report.report);
    written.counts.push((Metric::SupersededWrites, report.superseded_writes));
    written
}

/// `more` added to `written`.
fn merge(written: &mut Applied, more: Applied) {
    written.writes += more.writes;
    written.failed_writes += more.failed_writes;
    written.failures.extend(more.failures);
    written.counts.extend(more.counts);
}

fn applied(report: stream_runtime::writer::Report) -> Applied {
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
