//! function-invoke: Sidestream's stream functions run in this process, under the stream runtime,
//! behind `stream-delivery`'s [`Invoker`].
//!
//! A function is named by its cargo binary (`multikey-indexer`, `ttl-archiver`,
//! `counter-aggregator`) and configured from variables as its binary reads its environment at
//! cold start. `failures replay` reruns records through it against the deployed tables; the local
//! stack runs the template's functions through it.
//!
//! [`combined`] builds the functions `COMBINED_FUNCTIONS` names behind one mapping
//! ([`stream_runtime::Combined`]): the `sidestream-combined` binary, and the same in process.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_types::SdkConfig;
use stream_delivery::{Invocation, Invoker, KinesisInvoker, in_process};
use stream_kit::{ConfigError, Deadline, DynamoDbEventResponse, Event, Metric, Metrics, Vars};
use stream_runtime::{Combined, NoCheckpoint, Runtime, StreamFunction};

/// The cargo binaries of the functions this crate can run, each alone or combined.
pub const BINARIES: [&str; 3] = ["multikey-indexer", "ttl-archiver", "counter-aggregator"];

/// Why a function could not be made ready to invoke.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// No stream function is built from this binary.
    #[error("{name}: no in-process handler for the binary {binary} ({}, {COMBINED_BINARY})", BINARIES.join(", "))]
    UnknownBinary {
        /// The function's name, as the caller knows it.
        name: String,
        /// The binary asked for.
        binary: String,
    },
    /// The function's configuration is invalid; the error names the variable.
    #[error("{function}: {source}")]
    Config {
        /// The function's name, as the caller knows it.
        function: String,
        /// What is wrong with which variable.
        source: ConfigError,
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

/// An invoker of the function built from the cargo binary `binary`, called `name` in errors,
/// configured from `vars` as it reads its environment at cold start. Its metrics go to
/// `metrics`.
pub fn function(
    binary: &str,
    name: &str,
    vars: &Vars<'_>,
    sdk: &SdkConfig,
    metrics: MetricsTo,
) -> Result<Invoker, InvokeError> {
    Ok(invoker(Built::new(binary, name, vars, sdk)?, metrics))
}

/// [`function`], invoked with Kinesis events: each record's data decoded into a change record
/// (`stream_kit::kinesis`), and the checkpoint named by its Kinesis sequence number, as the
/// function's binary does with `CHANGE_SOURCE=kinesis`.
pub fn kinesis_function(
    binary: &str,
    name: &str,
    vars: &Vars<'_>,
    sdk: &SdkConfig,
    metrics: MetricsTo,
) -> Result<KinesisInvoker, InvokeError> {
    Ok(kinesis_invoker(Built::new(binary, name, vars, sdk)?, metrics))
}

/// A function built in this process from its binary's name.
enum Built {
    Indexer(Runtime<multikey_indexer::Indexer>),
    Archiver(Runtime<ttl_archiver::Archiver>),
    Aggregator(Runtime<counter_aggregator::Aggregator>),
    Combined(Combined),
}

impl Built {
    fn new(binary: &str, name: &str, vars: &Vars<'_>, sdk: &SdkConfig) -> Result<Built, InvokeError> {
        let config = |source| InvokeError::Config {
            function: name.to_owned(),
            source,
        };
        Ok(match binary {
            "multikey-indexer" => Built::Indexer(Runtime::from_vars(vars, sdk).map_err(config)?),
            "ttl-archiver" => Built::Archiver(Runtime::from_vars(vars, sdk).map_err(config)?),
            "counter-aggregator" => Built::Aggregator(Runtime::from_vars(vars, sdk).map_err(config)?),
            COMBINED_BINARY => Built::Combined(combined(vars, sdk).map_err(config)?),
            other => {
                return Err(InvokeError::UnknownBinary {
                    name: name.to_owned(),
                    binary: other.to_owned(),
                });
            }
        })
    }
}

impl Counted for Built {
    async fn handle_counted(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> (Result<DynamoDbEventResponse, NoCheckpoint>, Vec<Metrics>) {
        match self {
            Built::Indexer(r) => Box::pin(Counted::handle_counted(r, event, deadline)).await,
            Built::Archiver(r) => Box::pin(Counted::handle_counted(r, event, deadline)).await,
            Built::Aggregator(r) => Box::pin(Counted::handle_counted(r, event, deadline)).await,
            Built::Combined(c) => Box::pin(Counted::handle_counted(c, event, deadline)).await,
        }
    }
}

/// The binary that runs several functions behind one mapping.
pub const COMBINED_BINARY: &str = "sidestream-combined";

/// The variable naming the functions a `sidestream-combined` binary runs.
pub const COMBINED_FUNCTIONS: &str = "COMBINED_FUNCTIONS";

/// The functions `COMBINED_FUNCTIONS` names: stream functions' binaries, comma-separated, each
/// once. Errors name the variable and the name that is wrong.
pub fn combined_functions(vars: &Vars<'_>) -> Result<Vec<&'static str>, ConfigError> {
    let names = vars.required(
        COMBINED_FUNCTIONS,
        "the functions this mapping serves, comma-separated (multikey-indexer,ttl-archiver)",
    )?;
    let invalid = |reason: String| ConfigError::Invalid {
        var: COMBINED_FUNCTIONS,
        reason,
    };
    let mut functions = Vec::new();
    for name in names.split(',').map(str::trim) {
        let Some(binary) = BINARIES.into_iter().find(|b| *b == name) else {
            return Err(invalid(format!(
                "{name:?} is not a stream function ({})",
                BINARIES.join(", ")
            )));
        };
        if functions.contains(&binary) {
            return Err(invalid(format!("{name} is named twice")));
        }
        functions.push(binary);
    }
    Ok(functions)
}

/// The functions `COMBINED_FUNCTIONS` names, each built from `vars` as its own binary would
/// build it, behind one mapping.
pub fn combined(vars: &Vars<'_>, sdk: &SdkConfig) -> Result<Combined, ConfigError> {
    let mut combined = Combined::new();
    for binary in combined_functions(vars)? {
        combined = match binary {
            "multikey-indexer" => combined.add::<multikey_indexer::Indexer>(vars, sdk)?,
            "ttl-archiver" => combined.add::<ttl_archiver::Archiver>(vars, sdk)?,
            "counter-aggregator" => combined.add::<counter_aggregator::Aggregator>(vars, sdk)?,
            other => {
                return Err(ConfigError::Invalid {
                    var: COMBINED_FUNCTIONS,
                    reason: format!("{other} has no in-process handler"),
                });
            }
        };
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
        Metric::ALL
            .iter()
            .position(|m| *m == metric)
            .map_or(0, |i| self.0[i].load(Ordering::Relaxed))
    }
}

/// What handles a batch in this process and says what it counted: a function's runtime, or
/// several functions behind one mapping.
trait Counted: Send + Sync + 'static {
    /// The response, and the metrics of each function that had records.
    fn handle_counted(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> impl Future<Output = (Result<DynamoDbEventResponse, NoCheckpoint>, Vec<Metrics>)> + Send;
}

impl<F: StreamFunction> Counted for Runtime<F> {
    async fn handle_counted(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> (Result<DynamoDbEventResponse, NoCheckpoint>, Vec<Metrics>) {
        let (response, metrics) = Runtime::handle_counted(self, event, deadline).await;
        (response, vec![metrics])
    }
}

impl Counted for Combined {
    fn handle_counted(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> impl Future<Output = (Result<DynamoDbEventResponse, NoCheckpoint>, Vec<Metrics>)> + Send {
        Combined::handle_counted(self, event, deadline)
    }
}

/// An in-process invoker of `handler`, its metrics (one set per function) sent to `to`.
fn invoker<H: Counted>(handler: H, to: MetricsTo) -> Invoker {
    let handler = Arc::new(handler);
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
fn kinesis_invoker<H: Counted>(handler: H, to: MetricsTo) -> KinesisInvoker {
    let handler = Arc::new(handler);
    Arc::new(move |event: serde_json::Value, deadline| {
        let (handler, to) = (Arc::clone(&handler), to.clone());
        Box::pin(async move {
            let batch = match stream_kit::kinesis::from_value(&event) {
                Ok(batch) => batch,
                Err(e) => {
                    return Invocation::Failed {
                        error_type: stream_runtime::source::NOT_CHANGES.to_owned(),
                        message: e.to_string(),
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
