//! The I/O shell: plan a batch, write the plan, and report where Lambda must resume.

use aws_lambda_events::event::dynamodb::Event;
use ddb_writer::{Writer, WriterConfig};
use stream_kit::{
    ConfigError, Deadline, DynamoDbEventResponse, Metric, Metrics, NoCheckpoint, Vars, conclude, earliest,
    report_poison,
};

use crate::config::Indexes;
use crate::plan::Plan;

/// Everything the function reads from its environment at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// `MULTIKEY_INDEXES`.
    pub indexes: Indexes,
    /// `WRITE_CONCURRENCY`, `WRITE_MAX_ATTEMPTS`, `DEADLINE_MARGIN_MS`.
    pub writer: WriterConfig,
    /// `METRICS_NAMESPACE`, `AWS_LAMBDA_FUNCTION_NAME`.
    pub metrics: Metrics,
}

impl Config {
    /// Reads the configuration; errors name the variable.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        Ok(Config {
            indexes: Indexes::from_vars(vars)?,
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
pub struct Indexer {
    indexes: Indexes,
    writer: Writer,
    metrics: Metrics,
}

impl Indexer {
    /// Builds the function from its configuration and a DynamoDB client configuration.
    pub fn new(config: Config, dynamodb: &aws_sdk_dynamodb::Config) -> Indexer {
        Indexer {
            indexes: config.indexes,
            writer: Writer::new(dynamodb, config.writer),
            metrics: config.metrics,
        }
    }

    /// Handles one batch. Records are planned in order; the plan's writes are applied; the first
    /// record that did not finish (it could not be planned, or one of its writes failed) becomes
    /// the checkpoint in `batchItemFailures`. Errs only when no checkpoint can be reported, so
    /// Lambda retries the whole batch.
    pub async fn handle(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> Result<DynamoDbEventResponse, NoCheckpoint> {
        let records = event.records;
        let mut metrics = self.metrics.for_batch(records.len());

        let plan = Plan::new(&self.indexes, &records);
        for s in &plan.skipped {
            tracing::warn!(record = s.record, index = %s.index, member = %s.member, reason = %s.reason, "value left out of the index");
        }
        metrics.add(Metric::SkippedValues, plan.skipped.len() as u64);
        if let Some(stopped) = &plan.stopped {
            report_poison(&records, stopped.record, &stopped.error, &mut metrics);
        }
        let (puts, deletes) = plan.counts();
        tracing::debug!(records = records.len(), puts, deletes, "planned");

        let report = self.writer.write(plan.writes, deadline).await;
        metrics.add(Metric::Writes, report.writes);
        metrics.add(Metric::Requests, report.requests);
        metrics.add(Metric::Retries, report.retries);
        metrics.add(Metric::FailedWrites, report.failed);

        let stopped_at = earliest(plan.stopped.map(|s| s.record), report.first_failed_origin);
        conclude(&records, stopped_at, &mut metrics)
    }
}
