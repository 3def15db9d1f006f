//! The indexer as a stream function: its configuration, its plan and its writes. The runtime
//! (`stream-runtime`) does the rest: the failure model, parking, metrics and the response.
//!
//! Every entry write is a put guarded by its record's version
//! ([`stream_runtime::writer::Writer::write_versioned`]): an entry, or a removed entry's tombstone
//! (`formats::tombstone`), put on the condition that the stored item is absent or older. A
//! request that lands late (its invocation timed out, and Lambda's retry and the item's next
//! record have been applied since) is refused instead of undoing newer writes, and records that
//! come out of order (`MULTIKEY_ORDER=any`) end as if they had come in order ([`crate::plan`]).
//! Both orders plan and write alike; in any order a record without a version is refused.

use io_policy::Budget;
use stream_runtime::prime::Table;
use stream_runtime::writer::{VersionedReport, Writer};
use stream_runtime::{
    AnyOrderHint, Applied, Aws, ConfigError, Explain, Metric, Planned, Replay, Resource, StreamFunction,
    Vars, WireRecord,
};
use stream_runtime::{ItemWrite, Op};

use crate::VERSION_ATTRIBUTE;
pub use crate::config::Order;
use crate::config::{Config, Indexes};
use crate::plan::{Plan, PlanError, steps};

/// The function, with its configuration and client built once.
#[derive(Debug, Clone)]
pub struct Indexer {
    indexes: Indexes,
    order: Order,
    writer: Writer,
}

impl Indexer {
    /// The indexer for `indexes`, taking records in `order`, writing with `dynamodb` (built
    /// without the SDK's retries).
    pub fn new(indexes: Indexes, order: Order, dynamodb: aws_sdk_dynamodb::Client) -> Indexer {
        Indexer { indexes, order, writer: Writer::new(dynamodb) }
    }
}

impl StreamFunction for Indexer {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const NAMESPACE: &'static str = formats::METRICS_NAMESPACE;
    const REPLAY: Replay = Replay::ThroughTheStream;
    const EXPLAIN: Option<Explain> = Some(crate::explain::explain);
    type Plan = Plan;
    /// An entry is removed by the old image and put by the new one.
    const STREAM_VIEWS: &'static [&'static str] = &["NEW_AND_OLD_IMAGES"];

    /// Reads its [`Config`].
    fn init(vars: &Vars<'_>, aws: &Aws) -> Result<Indexer, ConfigError> {
        let Config { indexes, order } = Config::from_vars(vars)?;
        Ok(Indexer::new(indexes, order, aws.dynamodb()))
    }

    /// Only with `MULTIKEY_ORDER=any`.
    fn any_order(&self) -> Result<(), AnyOrderHint> {
        match self.order {
            Order::Any => Ok(()),
            Order::Stream => Err(AnyOrderHint(Some("MULTIKEY_ORDER=any"))),
        }
    }

    /// Each index table once, keyed as its index's `partitionKey` and `sortKey` say.
    fn resources(&self) -> Vec<Box<dyn Resource>> {
        let mut tables: Vec<Table> = Vec::new();
        for index in &self.indexes.indexes {
            let table = Table {
                variable: "MULTIKEY_INDEXES",
                name: index.table.to_string(),
                partition_key: index.partition_key.clone(),
                sort_key: Some(index.sort_key.clone()),
            };
            if !tables.contains(&table) {
                tables.push(table);
            }
        }
        tables.into_iter().map(|t| Box::new(t) as Box<dyn Resource>).collect()
    }

    fn plan(&self, records: &[WireRecord<'_>]) -> Planned<Plan> {
        let mut plan = Plan::in_order(&self.indexes, records, self.order, now());
        log_skipped(&plan);
        let (puts, deletes) = plan.counts();
        tracing::debug!(records = records.len(), puts, deletes, "planned");
        let failures = stream_runtime::rejections(std::mem::take(&mut plan.failures), PlanError::kind);
        let counts = vec![
            (Metric::SkippedValues, plan.skipped.len() as u64),
            (Metric::SkippedRecords, plan.unindexed_records as u64),
        ];
        Planned { plan, failures, counts }
    }

    async fn apply(&self, plan: Plan, budget: &Budget) -> Applied {
        let (versioned, unguarded) = split(plan.writes);
        let mut written =
            applied_versioned(self.writer.write_versioned(versioned, VERSION_ATTRIBUTE, budget).await);
        if !unguarded.is_empty() {
            merge(&mut written, Applied::from(self.writer.write(unguarded, budget).await));
        }
        written
    }

    /// A batch of more than [`steps::STEP_RECORDS`] records is planned in steps cut by item,
    /// each step's writes sent while the next is planned ([`Indexer::plan_in_steps`]); a smaller
    /// one is planned whole first.
    async fn plan_and_apply<'r>(&'r self, records: &'r [WireRecord<'r>], budget: &'r Budget) -> Applied {
        if records.len() > steps::STEP_RECORDS {
            return self.plan_in_steps(records, budget).await;
        }
        stream_runtime::plan_then_apply(self, records, budget).await
    }
}

impl Indexer {
    /// Plans `records` in steps cut by item ([`steps`]) and sends each step's versioned puts
    /// while the next is planned. When a step's plan stops at a record (a systemic failure), the
    /// steps after it plan no record past that one; the steps before it may have written some,
    /// which Lambda delivers again from the checkpoint (docs/functions.md): their puts are
    /// refused then, or applied again alike.
    async fn plan_in_steps(&self, records: &[WireRecord<'_>], budget: &Budget) -> Applied {
        let steps = steps::by_item(&self.indexes, records, steps::STEP_RECORDS);
        let now = now();
        let (ready, lots) = tokio::sync::mpsc::unbounded_channel::<Vec<ItemWrite>>();
        let lots =
            futures_util::stream::unfold(
                lots,
                |mut lots| async move { lots.recv().await.map(|lot| (lot, lots)) },
            );
        let planning = async move {
            let mut failures = Vec::new();
            let (mut skipped, mut unindexed, mut puts, mut deletes) = (0, 0, 0, 0);
            let mut stop = usize::MAX;
            let mut unversioned: Vec<ItemWrite> = Vec::new();
            for step in &steps {
                let planned = step.partition_point(|&at| at < stop);
                let mut plan = Plan::from_wire_at(&self.indexes, records, &step[..planned], self.order, now);
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
                let (versioned, unguarded) = split(plan.writes);
                unversioned.extend(unguarded);
                // The writer outlives the planning: it is joined with it below.
                ready.send(versioned).ok();
                // Let the writes made so far go out before the next step is planned.
                tokio::task::yield_now().await;
            }
            drop(ready);
            tracing::debug!(records = records.len(), steps = steps.len(), puts, deletes, "planned");
            let counts =
                vec![(Metric::SkippedValues, skipped as u64), (Metric::SkippedRecords, unindexed as u64)];
            (failures, counts, unversioned)
        };
        let ((failures, counts, unversioned), report) =
            tokio::join!(planning, self.writer.write_versioned_as_ready(lots, VERSION_ATTRIBUTE, budget));
        let mut written = applied_versioned(report);
        if !unversioned.is_empty() {
            merge(&mut written, Applied::from(self.writer.write(unversioned, budget).await));
        }
        Applied::after(failures, counts, written)
    }
}

/// A plan's writes: the versioned puts (entries and tombstones carrying `VERSION_ATTRIBUTE`), and
/// the rest (a record without a version's puts and deletes), sent as they are.
pub fn split(writes: Vec<ItemWrite>) -> (Vec<ItemWrite>, Vec<ItemWrite>) {
    writes.into_iter().partition(|w| matches!(&w.op, Op::Put(item) if item.get(VERSION_ATTRIBUTE).is_some()))
}

/// What the versioned writer's report says, as the runtime takes it: superseded puts counted.
fn applied_versioned(report: VersionedReport) -> Applied {
    let mut written = Applied::from(report.report);
    written.counts.push((Metric::SupersededWrites, report.superseded));
    written
}

/// `more` added to `written`.
fn merge(written: &mut Applied, more: Applied) {
    written.writes += more.writes;
    written.failed_writes += more.failed_writes;
    written.failures.extend(more.failures);
    written.counts.extend(more.counts);
}

fn log_skipped(plan: &Plan) {
    for s in &plan.skipped {
        tracing::warn!(record = s.record, index = %s.index, member = %s.member, reason = %s.reason, "value left out of the index");
    }
}
/// The clock, read when a batch is planned: the time its tombstones' lifetimes count from, when
/// it is later than their records' changes (`Plan::in_order`). Seconds since the Unix epoch.
fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
