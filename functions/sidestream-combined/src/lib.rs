//! sidestream-combined: Sidestream's stream functions, each named once ([`FUNCTIONS`]), run in
//! this process under the stream runtime, alone or several behind one mapping.
//!
//! [`FUNCTIONS`] is the one registry of the stream functions: their names (each the name of its
//! cargo binary, its logs and metrics, and its parked records), the template's logical ids, how
//! `failures replay` replays their records, and how each is built from the variables its binary
//! reads at cold start. The CLI, the stack's status, the replay, the local stack and the benches
//! read it; adding a function is its crate, one entry here and its template block
//! (`functions/<crate>/template.yaml.in`, spliced into `template.yaml` by `scripts/template-build`).
//!
//! [`function`] and [`kinesis_function`] run a function in process behind `stream_runtime::delivery`'s
//! [`Invoker`]: what `failures replay` reruns records through, and what the local stack runs.
//! [`combined`] builds the functions `COMBINED_FUNCTIONS` names behind one mapping
//! ([`stream_runtime::Combined`]): the `sidestream-combined` binary, and the same in process.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_types::SdkConfig;
use io_policy::Deadline;
use stream_runtime::delivery::{Invocation, Invoker, KinesisInvoker, in_process};
use stream_runtime::explain::Sink;
use stream_runtime::{Combined, ExplainError, NoCheckpoint, Replay, Runtime, StreamFunction};
use stream_runtime::{ConfigError, DynamoDbEventResponse, Event, Metric, Metrics, Vars};

/// One stream function, as every tool knows it.
#[derive(Clone, Copy)]
pub struct Function {
    /// Its name: its cargo binary's, its logs' and metrics' (`Function` dimension), and its
    /// parked records' ([`StreamFunction::NAME`]).
    pub name: &'static str,
    /// What it keeps, in a few words (the CLI's help).
    pub about: &'static str,
    /// Its logical id in `template.yaml` when it has a mapping of its own, which CloudFormation
    /// puts in its deployed name.
    pub logical_id: &'static str,
    /// How `failures replay` replays its records ([`StreamFunction::REPLAY`]).
    pub replay: Replay,
    /// Builds it from its variables, as its binary does at cold start.
    build: fn(&Vars<'_>, &SdkConfig) -> Result<Handler, ConfigError>,
    /// Adds it to functions behind one mapping.
    add: fn(Combined, &Vars<'_>, &SdkConfig) -> Result<Combined, ConfigError>,
    /// Explains its plan of an event, without AWS ([`StreamFunction::EXPLAIN`]).
    explain: fn(&Vars<'_>, &[u8], &mut dyn Sink) -> Result<bool, ExplainError>,
}

impl Function {
    /// The registry's entry for `F`, which keeps `about`, deployed as `logical_id`.
    const fn of<F: StreamFunction>(about: &'static str, logical_id: &'static str) -> Function {
        Function {
            name: F::NAME,
            about,
            logical_id,
            replay: F::REPLAY,
            build: build::<F>,
            add: Combined::add::<F>,
            explain: stream_runtime::explain::explain_to::<F>,
        }
    }

    /// Its plan of `event` (Lambda's DynamoDB stream event, as JSON), configured from `vars` as
    /// its binary is, explained without AWS to `sink` as it is made: what `sidestream plan`
    /// prints. Returns whether a record was rejected or stopped planning.
    pub fn explain(&self, vars: &Vars<'_>, event: &[u8], sink: &mut dyn Sink) -> Result<bool, ExplainError> {
        (self.explain)(vars, event, sink)
    }

    /// The function named `name`, if there is one.
    pub fn named(name: &str) -> Option<&'static Function> {
        FUNCTIONS.iter().find(|f| f.name == name)
    }

    /// Every function's name, comma-separated: for messages that list them.
    pub fn names() -> String {
        FUNCTIONS.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
    }
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The stream functions: the one place each is named.
pub const FUNCTIONS: &[Function] = &[
    Function::of::<multikey_indexer::Indexer>("the multikey index", "IndexerFunction"),
    Function::of::<ttl_archiver::Archiver>("the TTL archive", "ArchiverFunction"),
    Function::of::<counter_aggregator::Aggregator>("the sharded counters' totals", "AggregatorFunction"),
];

/// The binary that runs several functions behind one mapping.
pub const COMBINED_BINARY: &str = "sidestream-combined";

/// Its logical id in `template.yaml` (`Consumers: Combined`).
pub const COMBINED_LOGICAL_ID: &str = "IssuesStreamFunction";

/// A function, or several, ready to handle batches in this process.
type Handler = Arc<dyn Counted>;

fn build<F: StreamFunction>(vars: &Vars<'_>, sdk: &SdkConfig) -> Result<Handler, ConfigError> {
    Ok(Arc::new(Runtime::<F>::from_vars(vars, sdk)?))
}

/// Why a function could not be made ready to invoke.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// No stream function is built from this binary.
    #[error(
        "{name}: no stream function is built from the binary {binary} ({}, {COMBINED_BINARY})",
        Function::names()
    )]
    UnknownBinary {
        /// The function's name, as the caller knows it.
        name: String,
        /// The binary asked for.
        binary: String,
    },
    /// The function's configuration is invalid; the error names the variable.
    #[error("{function}: {cause}")]
    Config {
        /// The function's name, as the caller knows it.
        function: String,
        /// What is wrong with which variable.
        cause: ConfigError,
    },
}

/// Where an in-process function's metrics go.
#[derive(Clone, Default)]
pub enum MetricsTo {
    /// To stdout, as EMF lines, as on Lambda.
    #[default]
    Stdout,
    /// Added up over every invocation.
    Tally(Arc<Tally>),
    /// Each invocation's metrics (one set per function) to a sink: the local stack's CloudWatch
    /// feed, say, which renders them as the EMF lines Lambda would log.
    Each(Arc<dyn Fn(&Metrics) + Send + Sync>),
}

impl std::fmt::Debug for MetricsTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MetricsTo::Stdout => "Stdout",
            MetricsTo::Tally(_) => "Tally",
            MetricsTo::Each(_) => "Each",
        })
    }
}

/// A function built in process, as its binary builds it at cold start.
#[derive(Clone)]
pub struct Built(Handler);

impl Built {
    /// The function built from the cargo binary `binary` (or the functions a combined binary
    /// names), called `name` in errors, configured from `vars` as it reads its environment.
    pub fn new(binary: &str, name: &str, vars: &Vars<'_>, sdk: &SdkConfig) -> Result<Built, InvokeError> {
        let config = |source| InvokeError::Config { function: name.to_owned(), cause: source };
        // Every missing variable is named at once (`Vars::build`).
        if binary == COMBINED_BINARY {
            return Ok(Built(Arc::new(vars.build(|vars| combined(vars, sdk)).map_err(config)?)));
        }
        let function = Function::named(binary)
            .ok_or_else(|| InvokeError::UnknownBinary { name: name.to_owned(), binary: binary.to_owned() })?;
        Ok(Built(vars.build(|vars| (function.build)(vars, sdk)).map_err(config)?))
    }

    /// Its invoker, with DynamoDB stream events; its metrics go to `metrics`.
    pub fn invoker(self, metrics: MetricsTo) -> Invoker {
        invoker(self.0, metrics)
    }

    /// Its invoker with Kinesis events: each record's data decoded into a change record
    /// (`stream_runtime::kinesis`), and the checkpoint named by its Kinesis sequence number, as
    /// the function's binary does with `CHANGE_SOURCE=kinesis`.
    pub fn kinesis_invoker(self, metrics: MetricsTo) -> KinesisInvoker {
        kinesis_invoker(self.0, metrics)
    }
}

/// The variable naming the functions a `sidestream-combined` binary runs.
pub const COMBINED_FUNCTIONS: &str = "COMBINED_FUNCTIONS";

/// The functions `COMBINED_FUNCTIONS` names: stream functions' binaries, comma-separated, each
/// once. Errors name the variable and the name that is wrong.
pub fn combined_functions(vars: &Vars<'_>) -> Result<Vec<&'static Function>, ConfigError> {
    let names = vars.required(
        COMBINED_FUNCTIONS,
        "the functions this mapping serves, comma-separated (multikey-indexer,ttl-archiver)",
    )?;
    let invalid = |reason: String| ConfigError::Invalid { var: COMBINED_FUNCTIONS, reason };
    let mut functions = Vec::new();
    for name in names.split(',').map(str::trim) {
        let Some(function) = Function::named(name) else {
            return Err(invalid(format!("{name:?} is not a stream function ({})", Function::names())));
        };
        if functions.iter().any(|f: &&Function| f.name == function.name) {
            return Err(invalid(format!("{name} is named twice")));
        }
        functions.push(function);
    }
    Ok(functions)
}

/// The functions `COMBINED_FUNCTIONS` names, each built from `vars` as its own binary would
/// build it, behind one mapping.
pub fn combined(vars: &Vars<'_>, sdk: &SdkConfig) -> Result<Combined, ConfigError> {
    let mut combined = Combined::new();
    for function in combined_functions(vars)? {
        combined = (function.add)(combined, vars, sdk)?;
    }
    Ok(combined)
}

/// Metrics summed over many invocations.
#[derive(Debug, Default)]
pub struct Tally([AtomicU64; Metric::ALL.len()]);

impl Tally {
    /// Adds one invocation's metrics.
    pub fn add(&self, metrics: &Metrics) {
        for (slot, metric) in self.0.iter().zip(Metric::ALL) {
            slot.fetch_add(metrics.get(metric), Ordering::Relaxed);
        }
    }

    /// The sum of `metric` so far.
    pub fn get(&self, metric: Metric) -> u64 {
        Metric::ALL.iter().position(|m| *m == metric).map_or(0, |i| self.0[i].load(Ordering::Relaxed))
    }
}

/// What one invocation returns in this process: the response, and the metrics of each function
/// that had records.
type Counting<'a> =
    Pin<Box<dyn Future<Output = (Result<DynamoDbEventResponse, NoCheckpoint>, Vec<Metrics>)> + Send + 'a>>;

/// What handles a batch in this process and says what it counted: a function's runtime, or
/// several functions behind one mapping.
trait Counted: Send + Sync + 'static {
    /// The response, and the metrics of each function that had records.
    fn handle_counted(&self, event: Event, deadline: Deadline) -> Counting<'_>;
}

impl<F: StreamFunction> Counted for Runtime<F> {
    fn handle_counted(&self, event: Event, deadline: Deadline) -> Counting<'_> {
        Box::pin(async move {
            let (response, metrics) = Runtime::handle_counted(self, event, deadline).await;
            (response, vec![metrics])
        })
    }
}

impl Counted for Combined {
    fn handle_counted(&self, event: Event, deadline: Deadline) -> Counting<'_> {
        Box::pin(Combined::handle_counted(self, event, deadline))
    }
}

/// An in-process invoker of `handler`, its metrics (one set per function) sent to `to`.
fn invoker(handler: Handler, to: MetricsTo) -> Invoker {
    in_process(move |event, deadline| {
        let (handler, to) = (Arc::clone(&handler), to.clone());
        async move {
            let (response, metrics) = handler.handle_counted(event, Deadline::at(deadline)).await;
            count(&to, metrics);
            Invocation::answer(response)
        }
    })
}

/// An in-process invoker of `handler` with Kinesis events, as [`invoker`] with DynamoDB's.
fn kinesis_invoker(handler: Handler, to: MetricsTo) -> KinesisInvoker {
    Arc::new(move |event: serde_json::Value, deadline| {
        let (handler, to) = (Arc::clone(&handler), to.clone());
        Box::pin(async move {
            let batch = match stream_runtime::source::kinesis_batch(&event) {
                Ok(batch) => batch,
                Err(refused) => {
                    return Invocation::Failed {
                        error_type: refused.error_type,
                        message: refused.error_message,
                    };
                }
            };
            let (response, metrics) = handler.handle_counted(batch.event, Deadline::at(deadline)).await;
            count(&to, metrics);
            Invocation::answer(response.map(|r| batch.places.response(r)))
        })
    })
}

/// Sends each function's metrics where `to` says.
fn count(to: &MetricsTo, metrics: Vec<Metrics>) {
    for mut m in metrics {
        match to {
            MetricsTo::Stdout => m.flush(),
            MetricsTo::Tally(tally) => tally.add(&m),
            MetricsTo::Each(sink) => sink(&m),
        }
    }
}

#[cfg(test)]
mod tests;
