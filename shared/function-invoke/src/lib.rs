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
use stream_delivery::{Invocation, Invoker, in_process};
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

/// An invoker of the function built from the cargo binary `binary`, called `name` in errors,
/// configured from `vars` as it reads its environment at cold start. Its metrics are added to
/// `tally` if there is one, else written to stdout as EMF lines, as on Lambda.
pub fn function(
    binary: &str,
    name: &str,
    vars: &Vars<'_>,
    sdk: &SdkConfig,
    tally: Option<Arc<Tally>>,
) -> Result<Invoker, InvokeError> {
    match binary {
        "multikey-indexer" => runtime::<multikey_indexer::Indexer>(name, vars, sdk, tally),
        "ttl-archiver" => runtime::<ttl_archiver::Archiver>(name, vars, sdk, tally),
        "counter-aggregator" => runtime::<counter_aggregator::Aggregator>(name, vars, sdk, tally),
        COMBINED_BINARY => combined_invoker(name, vars, sdk, tally),
        other => Err(InvokeError::UnknownBinary {
            name: name.to_owned(),
            binary: other.to_owned(),
        }),
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

/// An in-process invoker of the function `F` under the stream runtime.
fn runtime<F: StreamFunction>(
    name: &str,
    vars: &Vars<'_>,
    sdk: &SdkConfig,
    tally: Option<Arc<Tally>>,
) -> Result<Invoker, InvokeError> {
    let runtime = Runtime::<F>::from_vars(vars, sdk).map_err(|source| InvokeError::Config {
        function: name.to_owned(),
        source,
    })?;
    Ok(invoker(runtime, tally))
}

/// An in-process invoker of the functions `COMBINED_FUNCTIONS` names, behind one mapping; every
/// function's metrics go to the one `tally`.
fn combined_invoker(
    name: &str,
    vars: &Vars<'_>,
    sdk: &SdkConfig,
    tally: Option<Arc<Tally>>,
) -> Result<Invoker, InvokeError> {
    let combined = combined(vars, sdk).map_err(|source| InvokeError::Config {
        function: name.to_owned(),
        source,
    })?;
    Ok(invoker(combined, tally))
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

/// An in-process invoker of `handler`. Its metrics are added to `tally` if there is one, else
/// written to stdout as EMF lines, one per function, as on Lambda.
fn invoker<H: Counted>(handler: H, tally: Option<Arc<Tally>>) -> Invoker {
    let handler = Arc::new(handler);
    in_process(move |event, deadline| {
        let (handler, tally) = (Arc::clone(&handler), tally.clone());
        async move {
            let (response, metrics) = handler.handle_counted(event, Deadline::at(deadline)).await;
            for mut m in metrics {
                match &tally {
                    Some(tally) => tally.add(&m),
                    None => m.flush(),
                }
            }
            Invocation::answer(response)
        }
    })
}

#[cfg(test)]
mod tests;
