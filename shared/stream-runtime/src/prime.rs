//! Priming at cold start: one cheap call per resource a function writes, made during init.
//!
//! A resource is anything that implements [`Resource`]: the runtime's own are a [`Table`]
//! (`DescribeTable`), a [`Bucket`] (`HeadBucket`) and the [`Source`] table whose stream the
//! function reads (`SOURCE_TABLE`, `DescribeTable`); a function adds its own (a queue's
//! `GetQueueAttributes`, say) with the clients it built. Two things come of it:
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

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{KeySchemaElement, KeyType, TableDescription};
use io_policy::{Budget, Failure, FailureKind, Policy};

use crate::Aws;

/// The most time priming may take in all, retries included: well inside Lambda's 10 s init.
pub(crate) const PRIME_TIME: Duration = Duration::from_secs(3);

/// What [`Resource::check`] returns: ready, or why not.
pub type Check<'a> = Pin<Box<dyn Future<Output = Result<(), Unfit>> + Send + 'a>>;

/// A resource a function writes or reads, as its configuration names it, checked with one cheap
/// call at cold start.
pub trait Resource: Debug + Send + Sync {
    /// What it is and how the configuration names it, for messages.
    fn named(&self) -> Named<'_>;
    /// Checks it with one call (or reads a check already made) under `primer`'s budget: every
    /// AWS call goes through [`Primer::budget`].
    fn check<'a>(&'a self, primer: &'a Primer<'a>) -> Check<'a>;
}

/// A resource as messages name it: `bucket my-archive (ARCHIVE_BUCKET)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named<'a> {
    /// What it is: `table`, `bucket`, `queue`.
    pub kind: &'static str,
    /// The variable that names it (`ARCHIVE_BUCKET`).
    pub variable: &'static str,
    /// Its name (a table's, a bucket's, a queue's URL).
    pub name: &'a str,
}

/// Why a resource is not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    /// The call failed. Init fails unless the failure is transient (the first batch then meets
    /// the same cause under its own retries).
    Call(Failure),
    /// The resource answered, and is not what the function needs: init fails.
    Wrong(PrimeError),
}

impl From<Failure> for Unfit {
    fn from(failure: Failure) -> Unfit {
        Unfit::Call(failure)
    }
}

/// What a check is given: the runtime's clients, the budget every call goes through, and the
/// tables already described (one `DescribeTable` per table, however many resources name it).
#[derive(Debug)]
pub struct Primer<'a> {
    aws: &'a Aws,
    budget: Budget,
    described: Mutex<HashMap<String, Result<Option<TableDescription>, Failure>>>,
}

impl Primer<'_> {
    /// The runtime's clients.
    pub fn aws(&self) -> &Aws {
        self.aws
    }

    /// The budget every check's calls go through: the runtime's policy, within `PRIME_TIME`.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// `DescribeTable` of `name`, made once: the table's description.
    pub async fn describe_table(&self, name: &str) -> Result<Option<TableDescription>, Failure> {
        if let Some(done) = self.described.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(name)
        {
            return done.clone();
        }
        let described = self
            .budget
            .call(|| {
                let call = self.aws.dynamodb().describe_table().table_name(name).send();
                async move { call.await.map_err(|e| io_policy::classify("DescribeTable", &e)) }
            })
            .await
            .map(|d| d.table);
        self.described
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_owned(), described.clone());
        described
    }
}

/// A DynamoDB table and the key schema the function writes it with: it exists and is keyed so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The variable that names it (for messages).
    pub variable: &'static str,
    /// The table's name.
    pub name: String,
    /// The partition key attribute the function writes.
    pub partition_key: String,
    /// The sort key attribute the function writes, if the table has one.
    pub sort_key: Option<String>,
}

impl Resource for Table {
    fn named(&self) -> Named<'_> {
        Named { kind: "table", variable: self.variable, name: &self.name }
    }
    fn check<'a>(&'a self, primer: &'a Primer<'a>) -> Check<'a> {
        Box::pin(async move {
            let schema =
                primer.describe_table(&self.name).await?.and_then(|t| t.key_schema).unwrap_or_default();
            key_schema(self.variable, &self.name, &self.partition_key, self.sort_key.as_deref(), &schema)
                .map_err(Unfit::Wrong)
        })
    }
}

/// An S3 bucket: it exists and the function's role reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The variable that names it.
    pub variable: &'static str,
    /// The bucket's name.
    pub name: String,
}

impl Resource for Bucket {
    fn named(&self) -> Named<'_> {
        Named { kind: "bucket", variable: self.variable, name: &self.name }
    }
    fn check<'a>(&'a self, primer: &'a Primer<'a>) -> Check<'a> {
        Box::pin(async move {
            primer
                .budget()
                .call(|| {
                    let call = primer.aws().s3().head_bucket().bucket(&self.name).send();
                    async move { call.await.map(drop).map_err(|e| io_policy::classify("HeadBucket", &e)) }
                })
                .await?;
            Ok(())
        })
    }
}

/// The table whose DynamoDB stream the function reads, and the view types it can work from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The variable that names it.
    pub variable: &'static str,
    /// The table's name.
    pub name: String,
    /// `StreamViewType`s whose records carry what the function reads.
    pub views: &'static [&'static str],
}

impl Resource for Source {
    fn named(&self) -> Named<'_> {
        Named { kind: "table", variable: self.variable, name: &self.name }
    }
    fn check<'a>(&'a self, primer: &'a Primer<'a>) -> Check<'a> {
        Box::pin(async move {
            let found = primer
                .describe_table(&self.name)
                .await?
                .and_then(|t| t.stream_specification)
                .filter(|s| s.stream_enabled)
                .and_then(|s| s.stream_view_type)
                .map(|v| v.as_str().to_owned());
            stream_view(self.variable, &self.name, found.as_deref(), self.views).map_err(Unfit::Wrong)
        })
    }
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
    /// The resource is missing or cannot be reached with the function's role, or is otherwise
    /// not what the function needs (a function's own check says why).
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

/// Checks each resource, in order, under `policy` and at most `PRIME_TIME` in all.
pub async fn prime(aws: &Aws, resources: &[Box<dyn Resource>], policy: Policy) -> Result<Primed, PrimeError> {
    let started = Instant::now();
    let context = Primer { aws, budget: policy.within(PRIME_TIME), described: Mutex::default() };
    let mut primed = Primed::default();
    for resource in resources {
        match resource.check(&context).await {
            Ok(()) => {}
            Err(Unfit::Wrong(error)) => return Err(error),
            Err(Unfit::Call(failure)) => unusable(resource.as_ref(), &failure, &mut primed)?,
        }
    }
    primed.calls = context.budget.tally.requests();
    tracing::info!(
        calls = primed.calls,
        resources = resources.len(),
        elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "primed: resources checked and connections opened"
    );
    Ok(primed)
}

/// A failed check: init fails unless the failure is transient.
fn unusable(resource: &dyn Resource, failure: &Failure, primed: &mut Primed) -> Result<(), PrimeError> {
    let Named { kind, variable, name } = resource.named();
    if failure.kind == FailureKind::Transient {
        tracing::warn!(variable, resource = %name, error = %failure.message, "could not check a resource at init; the first batch will meet it");
        primed.unchecked.push(name.to_owned());
        return Ok(());
    }
    Err(PrimeError::Unusable {
        variable,
        message: format!(
            "{kind} {name} is missing or not reachable with the function's role ({})",
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
