//! One stream reader for several functions: each batch of one event source mapping handed to
//! every function's runtime, each on the records its own filter matches, and answered with the
//! earliest checkpoint any of them reports.
//!
//! DynamoDB advises at most two readers per stream shard (one on a global table), and each
//! mapping is one. Under a combined mapping:
//!
//! - **Filters.** The mapping's filter is the union of the functions' patterns (or none, when one
//!   function takes every record). Each function's own patterns, from `COMBINED_FILTERS`, are
//!   applied here with Lambda's matching rules ([`crate::filter`]), on the record as Lambda
//!   delivers it, so each function sees what its own mapping would have given it.
//! - **Checkpoint.** Each function runs its batch exactly as it would alone: plan, apply,
//!   park, decide. The batch's checkpoint is the earliest record any function stopped at
//!   ([`earliest`]). Lambda redelivers from there to every function, including those that
//!   finished: their writes are idempotent, so the redelivery changes nothing. A record one
//!   function parked and another applied stays so: the retry begins at a later record, or at
//!   it, where parking and applying again are both idempotent. When any function can report no
//!   checkpoint at all, the invocation fails and Lambda retries the whole batch, safe for the
//!   same reason.
//! - **Metrics** stay per function: each writes its own EMF line, with the `Function` dimension
//!   `<Lambda function name>/<function>` (`my-stack-Issues-1A2B/ttl-archiver`).
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `COMBINED_FILTERS` | every record to every function | A JSON object from a function's name to its list of Lambda filter patterns (objects, as in `FilterCriteria`); a function that is absent, or has an empty list, takes every record. |

use std::future::Future;
use std::pin::Pin;

use crate::filter::Pattern;
use crate::{ConfigError, Event, EventRecord, Metrics, Vars};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use io_policy::Deadline;
use serde_json::Value;

use crate::conclude::NoCheckpoint;
use crate::{PrimeError, Primed, Runtime, StreamFunction, Whole, WireRecord};

/// The variable that holds each function's filter patterns.
pub const FILTERS_VAR: &str = "COMBINED_FILTERS";

/// What one function answered for its part of a batch.
type Answer = (Result<DynamoDbEventResponse, NoCheckpoint>, Metrics);

/// A future that borrows the member.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One function of a combined mapping: its runtime, seen through an object-safe face.
pub trait Member: Send + Sync {
    /// The function's name.
    fn name(&self) -> &'static str;
    /// Whether its settings ask for priming at cold start (`PRIME_AT_INIT`).
    fn primes_at_init(&self) -> bool;
    /// Checks and connects its resources ([`Runtime::prime`]).
    fn prime(&self) -> Boxed<'_, Result<Primed, PrimeError>>;
    /// Handles its records of a batch, read in place, without writing its metrics.
    fn handle<'r>(
        &'r self,
        records: &'r [WireRecord<'r>],
        whole: Whole<'r>,
        deadline: Deadline,
    ) -> Boxed<'r, Answer>;
}

impl<F: StreamFunction> Member for Runtime<F> {
    fn name(&self) -> &'static str {
        F::NAME
    }

    fn primes_at_init(&self) -> bool {
        self.settings.prime
    }

    fn prime(&self) -> Boxed<'_, Result<Primed, PrimeError>> {
        Box::pin(Runtime::prime(self))
    }

    fn handle<'r>(
        &'r self,
        records: &'r [WireRecord<'r>],
        whole: Whole<'r>,
        deadline: Deadline,
    ) -> Boxed<'r, Answer> {
        Box::pin(self.handle_wire(records, whole, deadline))
    }
}

/// Several functions behind one mapping.
pub struct Combined {
    members: Vec<(Box<dyn Member>, Vec<Pattern>)>,
}

impl std::fmt::Debug for Combined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.members.iter().map(|(m, p)| (m.name(), p.len())).collect();
        f.debug_struct("Combined").field("members (name, patterns)", &names).finish()
    }
}

/// The `Function` dimension of a member's metrics: `<Lambda function name>/<its name>`, so that
/// metrics and alarms stay per function.
pub fn member_dimension(lambda: &str, member: &str) -> String {
    format!("{lambda}/{member}")
}

impl Combined {
    /// No functions yet.
    pub fn new() -> Combined {
        Combined { members: Vec::new() }
    }

    /// Adds a function with its filter patterns (none: every record).
    #[must_use]
    pub fn with(mut self, member: Box<dyn Member>, patterns: Vec<Pattern>) -> Combined {
        self.members.push((member, patterns));
        self
    }

    /// Adds the function `F`, built from `vars` as it would be alone, with the `Function`
    /// dimension `<Lambda function name>/<F::NAME>` and its patterns from `COMBINED_FILTERS`.
    pub fn add<F: StreamFunction>(
        self,
        vars: &Vars<'_>,
        sdk: &aws_types::SdkConfig,
    ) -> Result<Combined, ConfigError> {
        let mut runtime = Runtime::<F>::from_vars(vars, sdk)?;
        let dimension = member_dimension(runtime.settings.metrics.function(), F::NAME);
        runtime.settings.metrics = runtime.settings.metrics.for_function(dimension);
        let patterns = patterns_for(vars.optional(FILTERS_VAR).as_deref(), F::NAME)?;
        Ok(self.with(Box::new(runtime), patterns))
    }

    /// Primes every function whose settings ask for it, in turn; the first error fails init.
    pub async fn prime(&self) -> Result<(), PrimeError> {
        for (member, _) in &self.members {
            if member.primes_at_init() {
                member.prime().await?;
            }
        }
        Ok(())
    }

    /// Handles a batch: each function on the records its patterns match, all at once, and the
    /// earliest checkpoint; each function's metrics are written as its own EMF line.
    pub async fn handle(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> Result<DynamoDbEventResponse, NoCheckpoint> {
        let (response, metrics) = self.handle_counted(event, deadline).await;
        for mut m in metrics {
            m.flush();
        }
        response
    }

    /// [`Combined::handle`] without writing the metrics: they come back, one per function that
    /// had records, beside the response.
    pub async fn handle_counted(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> (Result<DynamoDbEventResponse, NoCheckpoint>, Vec<Metrics>) {
        let records = WireRecord::view_all(&event.records);
        self.handle_wire(&records, Whole::events(&event.records), deadline).await
    }

    /// [`Combined::handle_counted`] of a batch read in place: a function whose patterns take
    /// every record reads the batch's records as they are; another, a copy of its own.
    pub async fn handle_wire(
        &self,
        records: &[WireRecord<'_>],
        whole: Whole<'_>,
        deadline: Deadline,
    ) -> (Result<DynamoDbEventResponse, NoCheckpoint>, Vec<Metrics>) {
        let patterns: Vec<&[Pattern]> = self.members.iter().map(|(_, p)| p.as_slice()).collect();
        let chosen = select_each(records.len(), whole, &patterns);
        let parts: Vec<Option<Vec<WireRecord<'_>>>> = chosen
            .iter()
            .map(|mine| {
                (mine.len() < records.len()).then(|| mine.iter().map(|&i| records[i].clone()).collect())
            })
            .collect();
        let mut handling = Vec::new();
        for (((member, _), mine), part) in self.members.iter().zip(&chosen).zip(&parts) {
            if mine.is_empty() {
                continue;
            }
            handling.push(match part {
                Some(part) => member.handle(part, whole.part(mine), deadline),
                None => member.handle(records, whole, deadline),
            });
        }
        let answers = futures_util::future::join_all(handling).await;
        let mut responses = Vec::with_capacity(answers.len());
        let mut metrics = Vec::with_capacity(answers.len());
        for (response, m) in answers {
            responses.push(response);
            metrics.push(m);
        }
        (earliest(records, responses), metrics)
    }
}

/// Runs the functions `build` combines under Lambda: logging, configuration and clients once at
/// cold start, priming, then every batch through [`Combined::handle`]. A combined binary's `main`
/// is this one call.
pub async fn run<E>(
    build: impl FnOnce(&Vars<'_>, &aws_types::SdkConfig) -> Result<Combined, E>,
) -> Result<(), lambda_runtime::Error>
where
    E: Into<lambda_runtime::Error>,
{
    lambda_runtime::tracing::init_default_subscriber();
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let vars = Vars::new(&Vars::process_lookup);
    let source = crate::source::Source::from_vars(&vars)?;
    let combined = build(&vars, &sdk).map_err(Into::into)?;
    combined.prime().await?;
    crate::source::serve(source, &combined).await
}

impl crate::source::Handler for Combined {
    async fn handle_batch<'r>(
        &'r self,
        batch: crate::source::Delivered<'r>,
    ) -> Result<DynamoDbEventResponse, NoCheckpoint> {
        let (response, metrics) = self.handle_wire(batch.records, batch.whole, batch.deadline).await;
        for mut m in metrics {
            m.flush();
        }
        response
    }
}

impl Default for Combined {
    fn default() -> Combined {
        Combined::new()
    }
}

/// The positions of the records that `patterns` let through (every record when there are
/// none), matched as Lambda matches them: on the record's JSON as Lambda delivers it.
pub fn select(records: &[EventRecord], patterns: &[Pattern]) -> Vec<usize> {
    select_each(records.len(), Whole::events(records), &[patterns]).swap_remove(0)
}

/// [`select`] for each of several functions' patterns, over a batch of `count` records that
/// `whole` shows whole: each record shown as JSON once at most, however many functions have
/// patterns, and none when no function has any.
pub(crate) fn select_each(count: usize, whole: Whole<'_>, patterns: &[&[Pattern]]) -> Vec<Vec<usize>> {
    let mut chosen = vec![Vec::new(); patterns.len()];
    let opened = patterns.iter().any(|set| !set.is_empty()).then(|| whole.open());
    for i in 0..count {
        let mut json = None;
        for (set, mine) in patterns.iter().zip(&mut chosen) {
            // A record that cannot be shown as JSON goes to the function, whose plan rejects
            // it by name: never dropped silently.
            let passes = set.is_empty()
                || json
                    .get_or_insert_with(|| opened.as_ref().and_then(|o| o.json(i)))
                    .as_ref()
                    .is_none_or(|json| set.iter().any(|p| p.matches(json)));
            if passes {
                mine.push(i);
            }
        }
    }
    chosen
}

/// The batch's answer from each function's: the earliest checkpoint by position in the batch,
/// or no checkpoint when none has one. When any function could report no checkpoint, nor can
/// the batch: the invocation fails and Lambda retries it whole.
pub fn earliest(
    records: &[WireRecord<'_>],
    responses: Vec<Result<DynamoDbEventResponse, NoCheckpoint>>,
) -> Result<DynamoDbEventResponse, NoCheckpoint> {
    let mut first: Option<(usize, DynamoDbBatchItemFailure)> = None;
    for response in responses {
        for failure in response?.batch_item_failures {
            let id = failure.item_identifier.as_deref().unwrap_or_default();
            // Every identifier a function reports is a sequence number of a record it was
            // given, all taken from this batch; one not found counts as the batch's start,
            // which only replays more.
            let at = records.iter().position(|r| r.sequence_number.as_deref() == Some(id)).unwrap_or(0);
            if first.as_ref().is_none_or(|(best, _)| at < *best) {
                first = Some((at, failure));
            }
        }
    }
    let mut response = DynamoDbEventResponse::default();
    response.batch_item_failures.extend(first.map(|(_, f)| f));
    Ok(response)
}

/// The patterns `COMBINED_FILTERS` gives `function`: none when the variable or its entry is
/// absent. Errors name the variable and say which pattern is wrong.
pub fn patterns_for(text: Option<&str>, function: &str) -> Result<Vec<Pattern>, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { var: FILTERS_VAR, reason };
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let all: Value = serde_json::from_str(text).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let Value::Object(all) = all else {
        return Err(invalid("expected an object from function names to lists of patterns".to_owned()));
    };
    let Some(list) = all.get(function) else {
        return Ok(Vec::new());
    };
    let Value::Array(list) = list else {
        return Err(invalid(format!("{function}: expected a list of filter patterns")));
    };
    list.iter()
        .enumerate()
        .map(|(i, pattern)| {
            Pattern::parse_dynamodb(&pattern.to_string())
                .map_err(|e| invalid(format!("{function}[{i}]: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests;
