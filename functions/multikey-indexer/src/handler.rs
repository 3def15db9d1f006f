//! The indexer as a stream function: its configuration, its plan and its writes. The runtime
//! (`stream-runtime`) does the rest: the failure model, parking, metrics and the response.

use ddb_writer::Writer;
use stream_kit::ItemWrite;
use stream_runtime::{
    Applied, Aws, Budget, ConfigError, EventRecord, Metric, Planned, RecordFailure, Resource, StreamFunction,
    Vars,
};

use crate::config::Indexes;
use crate::plan::{Plan, PlanError};

/// The function, with its configuration and client built once.
#[derive(Debug, Clone)]
pub struct Indexer {
    indexes: Indexes,
    writer: Writer,
}

impl Indexer {
    /// The indexer for `indexes`, writing with `dynamodb` (built without the SDK's retries).
    pub fn new(indexes: Indexes, dynamodb: aws_sdk_dynamodb::Client) -> Indexer {
        Indexer {
            indexes,
            writer: Writer::new(dynamodb),
        }
    }
}

impl StreamFunction for Indexer {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    type Plan = Vec<ItemWrite>;

    /// Reads `MULTIKEY_INDEXES`.
    fn init(vars: &Vars<'_>, aws: &Aws) -> Result<Indexer, ConfigError> {
        Ok(Indexer::new(Indexes::from_vars(vars)?, aws.dynamodb()))
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

    fn plan(&self, records: &[EventRecord]) -> Planned<Vec<ItemWrite>> {
        let plan = Plan::new(&self.indexes, records);
        for s in &plan.skipped {
            tracing::warn!(record = s.record, index = %s.index, member = %s.member, reason = %s.reason, "value left out of the index");
        }
        let (puts, deletes) = plan.counts();
        tracing::debug!(records = records.len(), puts, deletes, "planned");
        let failures = stream_runtime::rejections(plan.failures, PlanError::kind);
        Planned {
            plan: plan.writes,
            failures,
            counts: vec![
                (Metric::SkippedValues, plan.skipped.len() as u64),
                (Metric::SkippedRecords, plan.unindexed_records as u64),
            ],
        }
    }

    async fn apply(&self, writes: Vec<ItemWrite>, budget: &Budget) -> Applied {
        let report = self.writer.write(writes, budget).await;
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
}
