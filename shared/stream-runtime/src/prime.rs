//! Priming at cold start: one cheap call per resource a function writes, made during init.
//!
//! `DescribeTable` for each table, `HeadBucket` for each bucket, and `DescribeTable` for the
//! table whose stream the function reads (`SOURCE_TABLE`). Two things come of it:
//!
//! - a table or bucket that is missing, unreadable, or keyed otherwise than the configuration
//!   says fails init with a message naming the variable, instead of every batch checkpointing
//!   on the same systemic failure; so does a source stream whose view type lacks the images the
//!   function reads (a `KEYS_ONLY` stream gives the indexer no entries and the aggregator no
//!   counts, silently, and the archiver keys where items belong);
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
pub(crate) const PRIME_TIME: Duration = Duration::from_secs(3);

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
    /// The table whose DynamoDB stream the function reads, and the view types it can work from.
    Source {
        /// The variable that names it.
        variable: &'static str,
        /// The table's name.
        name: String,
        /// `StreamViewType`s whose records carry what the function reads.
        views: &'static [&'static str],
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
    /// The source table's stream does not carry the images the function reads.
    #[error(
        "{variable}: table {table}'s stream is {found}, but the function reads {needs}; \
         set the table's StreamSpecification to {needs_first} (a new stream: the mapping must be \
         recreated on it)"
    )]
    StreamView {
        /// The variable naming the table.
        variable: &'static str,
        /// The table.
        table: String,
        /// Its stream's view type, or that it has none.
        found: String,
        /// The view types the function can work from, joined.
        needs: String,
        /// The first of them, the one to set.
        needs_first: &'static str,
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
    // One DescribeTable per table: the aggregator writes the table whose stream it reads.
    let mut described = std::collections::HashMap::new();
    for resource in resources {
        if let Resource::Table { name, .. } | Resource::Source { name, .. } = resource
            && !described.contains_key(name)
        {
            described.insert(name.clone(), describe(aws, &budget, name).await);
        }
        let table = |name: &String| described.get(name).cloned().unwrap_or(Ok(None));
        let checked = match resource {
            Resource::Table { variable, name, partition_key, sort_key } => table(name).map(|table| {
                let schema = table.and_then(|t| t.key_schema).unwrap_or_default();
                key_schema(variable, name, partition_key, sort_key.as_deref(), &schema)
            }),
            Resource::Source { variable, name, views } => table(name).map(|table| {
                let found = table
                    .and_then(|t| t.stream_specification)
                    .filter(|s| s.stream_enabled)
                    .and_then(|s| s.stream_view_type)
                    .map(|v| v.as_str().to_owned());
                stream_view(variable, name, found.as_deref(), views)
            }),
            Resource::Bucket { name, .. } => budget
                .call(|| {
                    let call = aws.s3().head_bucket().bucket(name).send();
                    async move { call.await.map(drop).map_err(|e| io_policy::classify("HeadBucket", &e)) }
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

/// `DescribeTable` of `name` within `budget`: the table's description.
async fn describe(
    aws: &Aws,
    budget: &io_policy::Budget,
    name: &str,
) -> Result<Option<aws_sdk_dynamodb::types::TableDescription>, Failure> {
    budget
        .call(|| {
            let call = aws.dynamodb().describe_table().table_name(name).send();
            async move { call.await.map_err(|e| io_policy::classify("DescribeTable", &e)) }
        })
        .await
        .map(|d| d.table)
}

/// A failed check: init fails unless the failure is transient.
fn unusable(resource: &Resource, failure: &Failure, primed: &mut Primed) -> Result<(), PrimeError> {
    let (variable, name) = match resource {
        Resource::Table { variable, name, .. }
        | Resource::Bucket { variable, name }
        | Resource::Source { variable, name, .. } => (*variable, name),
    };
    if failure.kind == FailureKind::Transient {
        tracing::warn!(variable, resource = %name, error = %failure.message, "could not check a resource at init; the first batch will meet it");
        primed.unchecked.push(name.clone());
        return Ok(());
    }
    let what = match resource {
        Resource::Table { .. } | Resource::Source { .. } => "table",
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

/// Whether a stream of view type `found` (`None`: the table has no stream enabled) carries what
/// a function that works from `views` reads.
pub(crate) fn stream_view(
    variable: &'static str,
    table: &str,
    found: Option<&str>,
    views: &'static [&'static str],
) -> Result<(), PrimeError> {
    if found.is_some_and(|f| views.contains(&f)) {
        return Ok(());
    }
    Err(PrimeError::StreamView {
        variable,
        table: table.to_owned(),
        found: found.map_or_else(|| "not enabled".to_owned(), str::to_owned),
        needs: views.join(" or "),
        needs_first: views.first().copied().unwrap_or("NEW_AND_OLD_IMAGES"),
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
    let role = |t: KeyType| schema.iter().find(|k| k.key_type == t).map(|k| k.attribute_name.as_str());
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
