//! The I/O shell: plan a batch, merge each counter's update into its total item with an
//! optimistic-concurrency write, and report where Lambda must resume.
//!
//! Per counter: a strongly consistent `GetItem` of the total item, the pure merge, and, when the
//! batch brings anything newer, a `PutItem` conditioned on the version read
//! (`attribute_not_exists` for a new item). A failed condition means another invocation wrote
//! the item in between; the counter is read and merged again, with jittered backoff. Counters are
//! independent, so up to `WRITE_CONCURRENCY` are applied at once. A counter whose update cannot
//! be applied makes its first record the checkpoint.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use ddb_writer::WriterConfig;
use futures_util::StreamExt as _;
use sharded_counter::layout::{DEFAULT_PARTITION_KEY, total_key};
use stream_kit::{
    ConfigError, Deadline, DynamoDbEventResponse, Event, Metric, Metrics, NoCheckpoint, Vars, conclude,
    earliest, report_poison,
};

use crate::plan::{CounterUpdate, Plan};
use crate::state::{Total, VERSION};

/// Everything the function reads from its environment at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// `COUNTER_TABLE`: the table of shards and totals.
    pub table: String,
    /// `COUNTER_PARTITION_KEY` (default `pk`).
    pub partition_key: String,
    /// `WRITE_CONCURRENCY` (counters applied at once), `WRITE_MAX_ATTEMPTS` (read-merge-write
    /// attempts per counter), `DEADLINE_MARGIN_MS` (no attempt starts this close to the
    /// deadline), read as the DynamoDB writer reads them.
    pub writer: WriterConfig,
    /// `METRICS_NAMESPACE`, `AWS_LAMBDA_FUNCTION_NAME`.
    pub metrics: Metrics,
}

impl Config {
    /// Reads the configuration; errors name the variable.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        Ok(Config {
            table: vars.required(
                "COUNTER_TABLE",
                "the name of the table that holds the counters' shards and totals",
            )?,
            partition_key: vars
                .optional("COUNTER_PARTITION_KEY")
                .unwrap_or_else(|| DEFAULT_PARTITION_KEY.to_owned()),
            writer: WriterConfig::from_vars(vars)?,
            metrics: Metrics::from_vars(vars, env!("CARGO_PKG_NAME"))?,
        })
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_vars(&Vars::new(&Vars::process_lookup))
    }
}

/// The function, with its configuration and client built once.
#[derive(Debug, Clone)]
pub struct Aggregator {
    config: Config,
    client: aws_sdk_dynamodb::Client,
}

/// What applying one counter's update did.
#[derive(Debug, Default)]
struct Applied {
    requests: u64,
    conflicts: u64,
    wrote: bool,
}

impl Aggregator {
    /// Builds the function from its configuration and a DynamoDB client configuration (the
    /// SDK's standard retries handle throttling).
    pub fn new(config: Config, dynamodb: &aws_sdk_dynamodb::Config) -> Aggregator {
        Aggregator {
            config,
            client: aws_sdk_dynamodb::Client::from_conf(dynamodb.clone()),
        }
    }

    /// Handles one batch. Errs only when no checkpoint can be reported, so Lambda retries the
    /// whole batch.
    pub async fn handle(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> Result<DynamoDbEventResponse, NoCheckpoint> {
        let records = event.records;
        let mut metrics = self.config.metrics.for_batch(records.len());
        let plan = Plan::new(&self.config.partition_key, &records);
        for s in &plan.skipped {
            tracing::debug!(record = s.record, reason = %s.reason, "not a counter shard");
        }
        metrics.add(Metric::SkippedRecords, plan.skipped.len() as u64);
        if let Some(stopped) = &plan.stopped {
            report_poison(&records, stopped.record, &stopped.error, &mut metrics);
        }

        let stop_by = deadline.less(self.config.writer.margin);
        // Collected first: a stream over a lazy `map` closure makes this future's `Send` proof
        // depend on a higher-ranked closure bound that rustc cannot show, and callers that
        // spawn the handler (the local replayer) need it.
        let applies: Vec<_> = plan
            .updates
            .iter()
            .map(|u| async move { (u, self.apply(u, stop_by).await) })
            .collect();
        let mut results =
            futures_util::stream::iter(applies).buffer_unordered(self.config.writer.concurrency);
        let mut failed_at: Option<usize> = None;
        while let Some((update, (applied, result))) = results.next().await {
            metrics.add(Metric::Requests, applied.requests);
            metrics.add(Metric::Retries, applied.conflicts);
            match result {
                Ok(()) => metrics.add(Metric::Writes, u64::from(applied.wrote)),
                Err(error) => {
                    metrics.add(Metric::FailedWrites, 1);
                    tracing::error!(counter = %update.name, first_record = update.first_record, %error, "counter total not updated");
                    failed_at = earliest(failed_at, Some(update.first_record));
                }
            }
        }
        drop(results);
        conclude(
            &records,
            earliest(plan.stopped.map(|s| s.record), failed_at),
            &mut metrics,
        )
    }

    /// Reads, merges and conditionally writes one counter's total item until it sticks.
    async fn apply(
        &self,
        update: &CounterUpdate,
        stop_by: std::time::Instant,
    ) -> (Applied, Result<(), String>) {
        let mut applied = Applied::default();
        let result = self.try_apply(update, stop_by, &mut applied).await;
        (applied, result)
    }

    /// One counter's read-merge-write loop; `applied` counts its requests as they are made.
    async fn try_apply(
        &self,
        update: &CounterUpdate,
        stop_by: std::time::Instant,
        applied: &mut Applied,
    ) -> Result<(), String> {
        let pk = &self.config.partition_key;
        let key = total_key(&update.name).map_err(|e| e.to_string())?;
        for attempt in 0..self.config.writer.retry.max_attempts {
            if std::time::Instant::now() >= stop_by {
                return Err("no time left before the deadline margin".to_owned());
            }
            if attempt > 0 {
                let cap = 20_u64 << attempt.min(6);
                tokio::time::sleep(Duration::from_millis(fastrand::u64(..=cap))).await;
            }
            applied.requests += 1;
            let got = self
                .client
                .get_item()
                .table_name(&self.config.table)
                .key(pk, AttributeValue::S(key.clone()))
                .consistent_read(true)
                .send()
                .await;
            let stored = match got {
                Ok(out) => match out.item {
                    None => Total::default(),
                    Some(item) => {
                        Total::from_item(&key, &serde_dynamo::Item::from(item)).map_err(|e| e.to_string())?
                    }
                },
                Err(e) => return Err(format!("GetItem {key}: {}", DisplayErrorContext(&e))),
            };
            let Some(merged) = stored.merge(update) else {
                return Ok(());
            };
            let item: HashMap<String, AttributeValue> = merged.to_item(pk, &key).into();
            let mut put = self
                .client
                .put_item()
                .table_name(&self.config.table)
                .set_item(Some(item));
            put = if stored.version == 0 {
                put.condition_expression("attribute_not_exists(#pk)")
                    .expression_attribute_names("#pk", pk)
            } else {
                put.condition_expression("#version = :version")
                    .expression_attribute_names("#version", VERSION)
                    .expression_attribute_values(":version", AttributeValue::N(stored.version.to_string()))
            };
            applied.requests += 1;
            match put.send().await {
                Ok(_) => {
                    applied.wrote = true;
                    return Ok(());
                }
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
                {
                    applied.conflicts += 1;
                }
                Err(e) => return Err(format!("PutItem {key}: {}", DisplayErrorContext(&e))),
            }
        }
        let tries = self.config.writer.retry.max_attempts;
        Err(format!(
            "{key} was changed by other writers on each of {tries} attempts"
        ))
    }
}
