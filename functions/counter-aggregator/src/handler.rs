//! The aggregator as a stream function: merge each counter's update into its total item with an
//! optimistic-concurrency write.
//!
//! Per counter: a strongly consistent `GetItem` of the total item, the pure merge, and, when the
//! batch brings anything newer, a `PutItem` conditioned on the version read
//! (`attribute_not_exists` for a new item). A failed condition means another invocation wrote
//! the item in between; the counter is read and merged again after a jittered backoff, counted
//! as `Conflicts`. Counters are independent, so up to `WRITE_CONCURRENCY` are applied at once.
//! Every request, and every round, is bounded by the one I/O policy and the invocation's
//! deadline. A counter whose update cannot be applied makes its first record the checkpoint
//! (transient, systemic), or has all its records parked (a total item that would exceed
//! DynamoDB's 400 KB item limit, or a counter name that cannot be keyed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use futures_util::StreamExt as _;
use sharded_counter::layout::{DEFAULT_PARTITION_KEY, total_key};
use stream_kit::limits::{MAX_ITEM_BYTES, item_size};
use stream_runtime::{
    Applied, Aws, Budget, ConfigError, EventRecord, Failure, FailureKind, Metric, Planned, RecordFailure,
    StreamFunction, Vars,
};

use crate::plan::{CounterUpdate, Plan, PlanError};
use crate::state::{Total, VERSION};

/// The function, with its configuration and client built once.
#[derive(Debug, Clone)]
pub struct Aggregator {
    table: String,
    partition_key: String,
    client: aws_sdk_dynamodb::Client,
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
        Aggregator {
            table: table.to_owned(),
            partition_key: partition_key.to_owned(),
            client,
        }
    }

    /// Reads, merges and conditionally writes one counter's total item until it sticks.
    async fn merge(
        &self,
        update: &CounterUpdate,
        budget: &Budget,
        conflicts: &AtomicU64,
    ) -> Result<Merged, Failure> {
        let pk = &self.partition_key;
        let key = total_key(&update.name)
            .map_err(|e| Failure::record_permanent(format!("counter {:?}: {e}", update.name)))?;
        let key = key.as_str();
        let (get_op, put_op) = (format!("GetItem {key}"), format!("PutItem {key}"));
        let (get_op, put_op) = (get_op.as_str(), put_op.as_str());
        let mut rounds = budget.attempts();
        let mut last = None;
        loop {
            rounds.next(last.take()).await?;
            rounds.round();
            let got = budget
                .call(|| {
                    let get = self
                        .client
                        .get_item()
                        .table_name(&self.table)
                        .key(pk, AttributeValue::S(key.to_owned()))
                        .consistent_read(true)
                        .send();
                    async move { get.await.map_err(|e| io_policy::classify(get_op, &e)) }
                })
                .await?;
            let stored = match got.item {
                None => Total::default(),
                Some(item) => Total::from_item(key, &serde_dynamo::Item::from(item))
                    .map_err(|e| Failure::systemic(e.to_string()))?,
            };
            let Some(merged) = stored.merge(update) else {
                return Ok(Merged::Unchanged);
            };
            let item = merged.to_item(pk, key);
            let size = item_size(&item);
            if size > MAX_ITEM_BYTES {
                return Err(Failure::record_permanent(format!(
                    "the total item {key} would be {size} bytes, over DynamoDB's item limit of {MAX_ITEM_BYTES} \
                     bytes ({} shards); use fewer shards",
                    merged.shards.len()
                )));
            }
            let item: HashMap<String, AttributeValue> = item.into();
            let written = budget
                .call(|| {
                    let mut put = self
                        .client
                        .put_item()
                        .table_name(&self.table)
                        .set_item(Some(item.clone()));
                    put = if stored.version == 0 {
                        put.condition_expression("attribute_not_exists(#pk)")
                            .expression_attribute_names("#pk", pk)
                    } else {
                        put.condition_expression("#version = :version")
                            .expression_attribute_names("#version", VERSION)
                            .expression_attribute_values(
                                ":version",
                                AttributeValue::N(stored.version.to_string()),
                            )
                    };
                    let put = put.send();
                    async move {
                        match put.await {
                            Ok(_) => Ok(true),
                            Err(SdkError::ServiceError(e))
                                if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
                            {
                                Ok(false)
                            }
                            Err(e) => Err(io_policy::classify(put_op, &e)),
                        }
                    }
                })
                .await?;
            if written {
                return Ok(Merged::Wrote);
            }
            conflicts.fetch_add(1, Ordering::Relaxed);
            last = Some(Failure::transient(format!("{key} was changed by another writer")));
        }
    }
}

/// Reads `COUNTER_TABLE` and `COUNTER_PARTITION_KEY` (default `pk`): the table of shards and
/// totals, and its partition key attribute.
pub fn config(vars: &Vars<'_>) -> Result<(String, String), ConfigError> {
    let table = vars.required(
        "COUNTER_TABLE",
        "the name of the table that holds the counters' shards and totals",
    )?;
    Ok((table, partition_key(vars)))
}

/// Reads `COUNTER_PARTITION_KEY`: the counter table's partition key attribute (default `pk`).
pub fn partition_key(vars: &Vars<'_>) -> String {
    vars.optional("COUNTER_PARTITION_KEY")
        .unwrap_or_else(|| DEFAULT_PARTITION_KEY.to_owned())
}

impl StreamFunction for Aggregator {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    type Plan = Vec<CounterUpdate>;

    /// Reads `COUNTER_TABLE` and `COUNTER_PARTITION_KEY` (default `pk`).
    fn init(vars: &Vars<'_>, aws: &Aws) -> Result<Aggregator, ConfigError> {
        let (table, partition_key) = config(vars)?;
        Ok(Aggregator::new(&table, &partition_key, aws.dynamodb()))
    }

    fn plan(&self, records: &[EventRecord]) -> Planned<Vec<CounterUpdate>> {
        let plan = Plan::new(&self.partition_key, records);
        for s in &plan.skipped {
            tracing::debug!(record = s.record, reason = %s.reason, "not a counter shard");
        }
        let failures = stream_runtime::rejections(plan.rejected, plan.stopped, PlanError::kind);
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
        let merges: Vec<_> = updates
            .iter()
            .map(|u| async move { (u, self.merge(u, budget, conflicts).await) })
            .collect();
        let mut results = futures_util::stream::iter(merges).buffer_unordered(budget.policy.concurrency);
        let mut applied = Applied::default();
        while let Some((update, result)) = results.next().await {
            match result {
                Ok(Merged::Wrote) => applied.writes += 1,
                Ok(Merged::Unchanged) => {}
                Err(failure) => {
                    applied.failed_writes += 1;
                    tracing::error!(counter = %update.name, first_record = update.first_record, kind = %failure.kind, error = %failure.message, "counter total not updated");
                    if failure.kind == FailureKind::RecordPermanent {
                        applied.failures.extend(
                            update
                                .records
                                .iter()
                                .map(|&r| RecordFailure::new(r, failure.clone())),
                        );
                    } else {
                        applied
                            .failures
                            .push(RecordFailure::new(update.first_record, failure));
                    }
                }
            }
        }
        drop(results);
        applied
            .counts
            .push((Metric::Conflicts, conflicts.load(Ordering::Relaxed)));
        applied
    }
}
