//! Priming at cold start: one cheap call per resource a function writes, made during init.
//!
//! `DescribeTable` for each table, `HeadBucket` for each bucket. Two things come of it:
//!
//! - a table or bucket that is missing, unreadable, or keyed otherwise than the configuration
//!   says fails init with a message naming the variable, instead of every batch checkpointing
//!   on the same systemic failure;
//! - the client's pooled connection (DNS, TCP and the TLS handshake) is open before the first
//!   batch, so that the first invocation does not pay for it inside its own time.
//!
//! A transient answer (throttling, a server error, a timeout) does not fail init: the first
//! batch's writes meet the same cause under their own retries. The calls are made in INIT,
//! which Lambda bills like the invocation's time (docs/benchmarks.md weighs it).

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{KeySchemaElement, KeyType};
use io_policy::{Failure, FailureKind, Policy};

use crate::Aws;

/// The most time priming may take in all, retries included: well inside Lambda's 10 s init.
pub const PRIME_TIME: Duration = Duration::from_secs(3);

/// A resource a function writes, as its configuration names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// A DynamoDB table and the key schema the function writes it with.
    Table {
        /// The variable that names it (for messages).
        variable: &'static str,
        /// The table's name.
        name: String,
        /// The partition key attribute the function writes.
        partition_key: String,
        /// The sort key attribute the function writes, if the table has one.
        sort_key: Option<String>,
    },
    /// An S3 bucket.
    Bucket {
        /// The variable that names it.
        variable: &'static str,
        /// The bucket's name.
        name: String,
    },
}

/// Why init must fail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrimeError {
    /// The table's key schema is not the one the function writes.
    #[error(
        "{variable}: table {table} is keyed ({found}), but the function writes ({expected}); \
         point {variable} at the right table or change the key names in the configuration"
    )]
    KeySchema {
        /// The variable naming the table.
        variable: &'static str,
        /// The table.
        table: String,
        /// The key the configuration implies.
        expected: String,
        /// The key the table has.
        found: String,
    },
    /// The resource is missing or cannot be reached with the function's role.
    #[error("{variable}: {message}")]
    Unusable {
        /// The variable naming the resource.
        variable: &'static str,
        /// The AWS answer.
        message: String,
    },
}

/// What priming did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Primed {
    /// Calls made, retries included.
    pub calls: u64,
    /// Resources whose check met only transient failures (left to the first batch).
    pub unchecked: Vec<String>,
}

/// Checks each resource with one call, under `policy` and at most [`PRIME_TIME`].
pub async fn prime(aws: &Aws, resources: &[Resource], policy: Policy) -> Result<Primed, PrimeError> {
    let started = Instant::now();
    let budget = policy.within(PRIME_TIME);
    let mut primed = Primed::default();
    for resource in resources {
        let checked = match resource {
            Resource::Table {
                variable,
                name,
                partition_key,
                sort_key,
            } => {
                let described = budget
                    .call(|| {
                        let call = aws.dynamodb().describe_table().table_name(name).send();
                        async move { call.await.map_err(|e| io_policy::classify("DescribeTable", &e)) }
                    })
                    .await;
                described.map(|d| {
                    let schema = d.table.and_then(|t| t.key_schema).unwrap_or_default();
                    key_schema(variable, name, partition_key, sort_key.as_deref(), &schema)
                })
            }
            Resource::Bucket { name, .. } => budget
                .call(|| {
                    let call = aws.s3().head_bucket().bucket(name).send();
                    async move {
                        call.await
                            .map(drop)
                            .map_err(|e| io_policy::classify("HeadBucket", &e))
                    }
                })
                .await
                .map(Ok),
        };
        match checked {
            Ok(result) => result?,
            Err(failure) => unusable(resource, &failure, &mut primed)?,
        }
    }
    primed.calls = budget.tally.requests();
    tracing::info!(
        calls = primed.calls,
        resources = resources.len(),
        elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "primed: resources checked and connections opened"
    );
    Ok(primed)
}

/// A failed check: init fails unless the failure is transient.
fn unusable(resource: &Resource, failure: &Failure, primed: &mut Primed) -> Result<(), PrimeError> {
    let (variable, name) = match resource {
        Resource::Table { variable, name, .. } | Resource::Bucket { variable, name } => (*variable, name),
    };
    if failure.kind == FailureKind::Transient {
        tracing::warn!(variable, resource = %name, error = %failure.message, "could not check a resource at init; the first batch will meet it");
        primed.unchecked.push(name.clone());
        return Ok(());
    }
    let what = match resource {
        Resource::Table { .. } => "table",
        Resource::Bucket { .. } => "bucket",
    };
    Err(PrimeError::Unusable {
        variable,
        message: format!(
            "{what} {name} is missing or not reachable with the function's role ({})",
            failure.message
        ),
    })
}

/// Whether `schema` is the key `partition_key` (and `sort_key`).
pub fn key_schema(
    variable: &'static str,
    table: &str,
    partition_key: &str,
    sort_key: Option<&str>,
    schema: &[KeySchemaElement],
) -> Result<(), PrimeError> {
    let role = |t: KeyType| {
        schema
            .iter()
            .find(|k| k.key_type == t)
            .map(|k| k.attribute_name.as_str())
    };
    let (hash, range) = (role(KeyType::Hash), role(KeyType::Range));
    if hash == Some(partition_key) && range == sort_key {
        return Ok(());
    }
    let show = |hash: Option<&str>, range: Option<&str>| match range {
        Some(range) => format!("partition key {}, sort key {range}", hash.unwrap_or("?")),
        None => format!("partition key {}, no sort key", hash.unwrap_or("?")),
    };
    Err(PrimeError::KeySchema {
        variable,
        table: table.to_owned(),
        expected: show(Some(partition_key), sort_key),
        found: show(hash, range),
    })
}

#[cfg(test)]
mod tests;
