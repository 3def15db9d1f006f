//! function-invoke: Sidestream's stream functions run in this process, under the stream runtime,
//! behind `stream-delivery`'s [`Invoker`].
//!
//! A function is named by its cargo binary (`multikey-indexer`, `ttl-archiver`,
//! `counter-aggregator`) and configured from variables as its binary reads its environment at
//! cold start. `failures replay` reruns records through it against the deployed tables; the local
//! stack runs the template's functions through it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_types::SdkConfig;
use stream_delivery::{Invocation, Invoker, in_process};
use stream_kit::{ConfigError, Deadline, Metric, Metrics, Vars};
use stream_runtime::{Runtime, StreamFunction};

/// The cargo binaries of the functions this crate can run.
pub const BINARIES: [&str; 3] = ["multikey-indexer", "ttl-archiver", "counter-aggregator"];

/// Why a function could not be made ready to invoke.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// No stream function is built from this binary.
    #[error("{name}: no in-process handler for the binary {binary} ({})", BINARIES.join(", "))]
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
        other => Err(InvokeError::UnknownBinary {
            name: name.to_owned(),
            binary: other.to_owned(),
        }),
    }
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
    let runtime = Arc::new(runtime);
    Ok(in_process(move |event, deadline| {
        let (runtime, tally) = (Arc::clone(&runtime), tally.clone());
        async move {
            let deadline = Deadline::at(deadline);
            match tally {
                None => Invocation::answer(runtime.handle(event, deadline).await),
                Some(tally) => {
                    let (response, metrics) = runtime.handle_counted(event, deadline).await;
                    tally.add(&metrics);
                    Invocation::answer(response)
                }
            }
        }
    }))
}
