//! The aggregator as a stream function: each counter's update goes into its total item as a
//! delta write, or else with an optimistic-concurrency read-merge-write.
//!
//! Per counter: first the delta writes ([`crate::delta`]), conditional `UpdateItem`s that need
//! no read and that other invocations' shards never make fail. A failed condition returns the
//! item as it stood (`ReturnValuesOnConditionCheckFailure = ALL_OLD`). No item: the counter's
//! first write, so the total item is created empty unless another invocation just did (a
//! `PutItem` that only creates, which no other write makes conflict) and the deltas are tried
//! once more. An item that does not hold what the
//! batch expects (a redelivered batch, one retried from an earlier checkpoint): the counter falls
//! back to the read-merge-write, starting from the item the condition returned: the pure merge
//! and, when the batch brings anything newer, a `PutItem` conditioned on the version read
//! (`attribute_not_exists` for a new item). A failed version condition means another invocation
//! wrote the item in between; the counter is read again (a strongly consistent `GetItem`) and
//! merged after a jittered backoff, counted as `Conflicts`. Counters are independent, so
//! several are applied at once, as many as the budget's write window allows.
//! Every request, and every round, is bounded by the one I/O policy and the invocation's
//! deadline. A counter whose update cannot be applied makes its first record the checkpoint
//! (transient, systemic), or has all its records parked (a total item that would exceed
//! DynamoDB's 400 KB item limit, or a counter name that cannot be keyed).

use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use formats::counter::total_key;

use crate::config::Config;
use io_policy::Budget;
use io_policy::dynamodb::Item;
use io_policy::{Failure, FailureKind};
use stream_runtime::limits::{MAX_ITEM_BYTES, item_size};
use stream_runtime::prime::Table;
use stream_runtime::{
    Applied, Aws, ConfigError, Explain, Metric, Planned, RecordFailure, Replay, Resource, StreamFunction,
    Vars, WireRecord,
};

use crate::delta::DeltaWrite;
use crate::plan::{CounterUpdate, Plan, PlanError};
use crate::state::{Total, VERSION};

/// The function, with its configuration and client built once.
#[derive(Debug, Clone)]
pub struct Aggregator {
    table: String,
    partition_key: String,
    client: aws_sdk_dynamodb::Client,
}

/// How a counter's delta writes ended.
enum Deltas {
    /// All were applied.
    Applied,
    /// A condition failed on a total item that does not exist yet.
    NoItem,
    /// A condition failed on the total item: as it stood then, when DynamoDB returned it.
    Differs(Option<Item>),
}

/// How one counter's read-merge-write ended.
enum Merged {
    /// The total item was written.
    Wrote,
    /// The total already held everything the batch brings.
    Unchanged,
}

impl Aggregator {
    /// The aggregator of the counters in `table`, whose partition key is `partition_key`,
    /// through `client` (built without the SDK's retries).
    pub fn new(table: &str, partition_key: &str, client: aws_sdk_dynamodb::Client) -> Aggregator {
        Aggregator { table: table.to_owned(), partition_key: partition_key.to_owned(), client }
    }

    /// Brings one counter's total item up to the batch: by delta writes where the batch has them
    /// ([`Self::merge_by_deltas`]), else, or when their condition fails, by a version-conditioned
    /// read-merge-write ([`Self::merge_by_version`]).
    async fn merge(
        &self,
        update: &CounterUpdate,
        budget: &Budget,
        conflicts: &AtomicU64,
    ) -> Result<Merged, Failure> {
        let key = total_key(&update.name)
            .map_err(|e| Failure::record_permanent(format!("counter {:?}: {e}", update.name)))?;
        let key = key.as_str();
        // The item as a failed delta condition returned it: the first round's read.
        let returned = match crate::delta::delta_writes(update) {
            None => None,
            Some(writes) => match self.merge_by_deltas(key, writes, budget).await? {
                Ok(()) => return Ok(Merged::Wrote),
                Err(returned) => returned,
            },
        };
        self.merge_by_version(key, update, returned, budget, conflicts).await
    }
}

impl Aggregator {
    /// The delta strategy: the batch's shard changes as conditional `UpdateItem`s, creating the
    /// total item empty on the counter's first write. `Ok(())` once applied; otherwise the
    /// total item as the failed condition returned it (if it did), for the version strategy.
    async fn merge_by_deltas(
        &self,
        key: &str,
        writes: Vec<DeltaWrite>,
        budget: &Budget,
    ) -> Result<Result<(), Option<Item>>, Failure> {
        match self.apply_deltas(key, writes.clone(), budget).await? {
            Deltas::Applied => Ok(Ok(())),
            Deltas::Differs(item) => Ok(Err(item)),
            // The counter's first write: create the total item empty unless it exists (another
            // invocation may just have: either way it exists now, and no other invocation's
            // delta makes ours fail), and try once more.
            Deltas::NoItem => {
                self.create_empty(key, budget).await?;
                match self.apply_deltas(key, writes, budget).await? {
                    Deltas::Applied => Ok(Ok(())),
                    Deltas::NoItem => Ok(Err(None)),
                    Deltas::Differs(item) => Ok(Err(item)),
                }
            }
        }
    }

    /// The version strategy: read the total item (or take the one `returned`), merge the batch
    /// into it, and put it back conditioned on the version read; a lost race reads again, as a
    /// retry under the budget.
    async fn merge_by_version(
        &self,
        key: &str,
        update: &CounterUpdate,
        mut returned: Option<Item>,
        budget: &Budget,
        conflicts: &AtomicU64,
    ) -> Result<Merged, Failure> {
        let mut rounds = budget.attempts();
        let mut last = None;
        loop {
            rounds.next(last.take()).await?;
            rounds.round();
            let item = match returned.take() {
                Some(item) => Some(item),
                None => self.read_total(key, budget).await?,
            };
            let stored = match item {
                None => Total::default(),
                Some(item) => Total::from_item(key, &serde_dynamo::Item::from(item))
                    .map_err(|e| Failure::systemic(e.to_string()))?,
            };
            let Some(merged) = stored.merge(update) else {
                return Ok(Merged::Unchanged);
            };
            if self.put_total(key, &merged, stored.version, budget).await? {
                return Ok(Merged::Wrote);
            }
            conflicts.fetch_add(1, Ordering::Relaxed);
            last = Some(Failure::transient(format!("{key} was changed by another writer")));
        }
    }

    /// Whether the total of `record`'s counter already holds a state of `record`'s shard newer
    /// than `record` (a later write of the shard, applied since): then running `record` again
    /// would change nothing, since the total keeps each shard's newest state, so a replay of it
    /// is not needed. That state's sequence number when it is so; `None` when the total holds
    /// no newer state of the shard, or `record` is not a counter shard's.
    pub async fn superseded(
        &self,
        record: &stream_runtime::EventRecord,
        budget: &Budget,
    ) -> Result<Option<String>, Failure> {
        let key = match record.change.keys.get(&self.partition_key) {
            Some(serde_dynamo::AttributeValue::S(key)) => key.as_str(),
            _ => return Ok(None),
        };
        let (Some(formats::counter::CounterKey::Shard { name, shard }), Some(sequence)) = (
            formats::counter::CounterKey::parse(key),
            record.change.sequence_number.as_deref().and_then(|s| key_codec::SequenceNumber::parse(s).ok()),
        ) else {
            return Ok(None);
        };
        let total =
            total_key(&name).map_err(|e| Failure::record_permanent(format!("counter {name:?}: {e}")))?;
        let Some(item) = self.read_total(&total, budget).await? else {
            return Ok(None);
        };
        let stored = Total::from_item(&total, &serde_dynamo::Item::from(item))
            .map_err(|e| Failure::systemic(e.to_string()))?;
        Ok(stored
            .shards
            .get(&shard)
            .filter(|kept| kept.sequence_number > sequence)
            .map(|kept| kept.sequence_number.to_string()))
    }

    /// The total item `key`, read consistently.
    async fn read_total(&self, key: &str, budget: &Budget) -> Result<Option<Item>, Failure> {
        let operation = format!("GetItem {key}");
        let operation = operation.as_str();
        Ok(budget
            .call(|| {
                let get = self
                    .client
                    .get_item()
                    .table_name(&self.table)
                    .key(&self.partition_key, AttributeValue::S(key.to_owned()))
                    .consistent_read(true)
                    .send();
                async move { get.await.map_err(|e| io_policy::classify(operation, &e)) }
            })
            .await?
            .item)
    }

    /// Puts `merged` as the total item `key` if it still holds `version` (0: if it does not
    /// exist); whether it did.
    async fn put_total(
        &self,
        key: &str,
        merged: &Total,
        version: u64,
        budget: &Budget,
    ) -> Result<bool, Failure> {
        let pk = &self.partition_key;
        let item = merged.to_item(pk, key);
        let size = item_size(&item);
        if size > MAX_ITEM_BYTES {
            return Err(Failure::record_permanent(format!(
                "the total item {key} would be {size} bytes, over DynamoDB's item limit of {MAX_ITEM_BYTES} \
                 bytes ({} shards); use fewer shards",
                merged.shards.len()
            )));
        }
        let item: Item = item.into();
        let operation = format!("PutItem {key}");
        let operation = operation.as_str();
        budget
            .call(|| {
                let mut put = self.client.put_item().table_name(&self.table).set_item(Some(item.clone()));
                put = if version == 0 {
                    put.condition_expression("attribute_not_exists(#pk)")
                        .expression_attribute_names("#pk", pk)
                } else {
                    put.condition_expression("#version = :version")
                        .expression_attribute_names("#version", VERSION)
                        .expression_attribute_values(":version", AttributeValue::N(version.to_string()))
                };
                let put = put.send();
                async move { put_applied(put.await, operation) }
            })
            .await
    }

    /// Sends `writes` to the total item `key` in turn, until all are applied or one's condition
    /// fails (the item does not hold what the batch expects, or does not exist yet). Those
    /// applied before it stay, and are correct: each is a delta of its own shards.
    async fn apply_deltas(
        &self,
        key: &str,
        writes: Vec<DeltaWrite>,
        budget: &Budget,
    ) -> Result<Deltas, Failure> {
        let op = format!("UpdateItem {key}");
        let op = op.as_str();
        for write in writes {
            let values: Item = write.values.into_iter().map(|(name, value)| (name, value.into())).collect();
            let applied = budget
                .call(|| {
                    let update = self
                        .client
                        .update_item()
                        .table_name(&self.table)
                        .key(&self.partition_key, AttributeValue::S(key.to_owned()))
                        .update_expression(&write.update)
                        .condition_expression(&write.condition)
                        .set_expression_attribute_names(Some(write.names.clone()))
                        .set_expression_attribute_values(Some(values.clone()))
                        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                        .send();
                    async move {
                        match update.await {
                            Ok(_) => Ok(Deltas::Applied),
                            Err(SdkError::ServiceError(ref e))
                                if let UpdateItemError::ConditionalCheckFailedException(failed) = e.err() =>
                            {
                                let item = failed.item.clone();
                                Ok(item.map_or(Deltas::NoItem, |item| Deltas::Differs(Some(item))))
                            }
                            // A total item without `shards` yet: DynamoDB may name the path
                            // instead of failing the condition. Read-merge-write creates it.
                            Err(SdkError::ServiceError(e))
                                if e.err().meta().message().is_some_and(|m| m.contains("document path")) =>
                            {
                                Ok(Deltas::Differs(None))
                            }
                            Err(e) => Err(io_policy::classify(op, &e)),
                        }
                    }
                })
                .await?;
            if !matches!(applied, Deltas::Applied) {
                return Ok(applied);
            }
        }
        Ok(Deltas::Applied)
    }
}

impl Aggregator {
    /// Creates the total item `key` with no shards, a total of 0 and version 1, unless it
    /// exists.
    async fn create_empty(&self, key: &str, budget: &Budget) -> Result<(), Failure> {
        let op = format!("PutItem {key} (empty)");
        let op = op.as_str();
        let item = Total::default().to_item(&self.partition_key, key);
        let mut item: Item = item.into();
        item.insert(VERSION.to_owned(), AttributeValue::N("1".to_owned()));
        budget
            .call(|| {
                let put = self
                    .client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(item.clone()))
                    .condition_expression("attribute_not_exists(#pk)")
                    .expression_attribute_names("#pk", &self.partition_key)
                    .send();
                async move { put_applied(put.await, op) }
            })
            .await
            .map(drop)
    }
}

/// A conditional `PutItem`'s answer: `true` when it was applied, `false` when its condition
/// failed, or else the failure, classified.
fn put_applied<R>(
    answer: Result<R, SdkError<PutItemError, aws_sdk_dynamodb::config::http::HttpResponse>>,
    op: &str,
) -> Result<bool, Failure> {
    match answer {
        Ok(_) => Ok(true),
        Err(SdkError::ServiceError(e))
            if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
        {
            Ok(false)
        }
        Err(e) => Err(io_policy::classify(op, &e)),
    }
}

impl StreamFunction for Aggregator {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const NAMESPACE: &'static str = formats::METRICS_NAMESPACE;
    const REPLAY: Replay = Replay::Rerun;
    const EXPLAIN: Option<Explain> = Some(crate::explain::explain);
    /// Each shard's state is kept with its record's version, and an older one changes nothing:
    /// out of order and twice, the totals end the same.
    type Plan = Vec<CounterUpdate>;
    /// A shard's count is its new image's; a deleted shard's, its old image's.
    const STREAM_VIEWS: &'static [&'static str] = &["NEW_AND_OLD_IMAGES"];

    /// Reads its [`Config`].
    fn init(vars: &Vars<'_>, aws: &Aws) -> Result<Aggregator, ConfigError> {
        let config = Config::from_vars(vars)?;
        Ok(Aggregator::new(&config.table, &config.partition_key, aws.dynamodb()))
    }

    /// The counter table, keyed by `COUNTER_PARTITION_KEY` alone (totals have no sort key).
    fn resources(&self) -> Vec<Box<dyn Resource>> {
        vec![Box::new(Table {
            variable: "COUNTER_TABLE",
            name: self.table.clone(),
            partition_key: self.partition_key.clone(),
            sort_key: None,
        })]
    }

    /// Yes: each shard's state in the total carries the version it was read at, and an older
    /// or equal record changes nothing.
    fn any_order(&self) -> Result<(), stream_runtime::AnyOrderHint> {
        Ok(())
    }

    fn plan(&self, records: &[WireRecord<'_>]) -> Planned<Vec<CounterUpdate>> {
        let plan = Plan::from_wire(&self.partition_key, records);
        for s in &plan.skipped {
            tracing::debug!(record = s.record, reason = %s.reason, "not a counter shard");
        }
        let failures = stream_runtime::rejections(plan.failures, PlanError::kind);
        Planned {
            plan: plan.updates,
            failures,
            counts: vec![(Metric::SkippedRecords, plan.skipped.len() as u64)],
        }
    }

    async fn apply(&self, updates: Vec<CounterUpdate>, budget: &Budget) -> Applied {
        let conflicts = AtomicU64::new(0);
        let conflicts = &conflicts;
        // Collected first: a stream over a lazy `map` closure makes this future's `Send` proof
        // depend on a higher-ranked closure bound that rustc cannot show.
        let merges: Vec<_> =
            updates.iter().map(|u| async move { (u, self.merge(u, budget, conflicts).await) }).collect();
        let results = budget.in_window(merges).await;
        let mut applied = Applied::default();
        for (update, result) in results {
            match result {
                Ok(Merged::Wrote) => applied.writes += 1,
                Ok(Merged::Unchanged) => {}
                Err(failure) => {
                    applied.failed_writes += 1;
                    tracing::error!(counter = %update.name, first_record = update.first_record, kind = %failure.kind, error = %failure.message, "counter total not updated");
                    if failure.kind == FailureKind::RecordPermanent {
                        applied
                            .failures
                            .extend(update.records.iter().map(|&r| RecordFailure::new(r, failure.clone())));
                    } else {
                        applied.failures.push(RecordFailure::new(update.first_record, failure));
                    }
                }
            }
        }
        applied.counts.push((Metric::Conflicts, conflicts.load(Ordering::Relaxed)));
        applied
    }
}
