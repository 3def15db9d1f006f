//! What a user pays for, each stream function's whole invocation, measured against
//! the requests it has to make.
//!
//! [`run`] creates the template's stack on the emulator and starts the fault proxy in front of
//! it, adding a fixed latency to every data call (10 ms by default: a stand-in for an AWS round
//! trip). The functions run in this process under their real runtime
//! ([`stream_runtime::Runtime`]), configured from the template's environment as on Lambda; each
//! invocation is timed from the event's JSON bytes to its response.
//!
//! - [`write_path`]: each function on `BatchSize` 100, `BatchSize` 1,000 and a 6 MB batch, against
//!   moto and against the proxy's sink (an ideal service whose every call costs the latency).
//! - [`hot`]: several invocations at once folding shard records of the same counters.
//! - [`throttled`]: the indexer against write capacities of the sink, with fixed and adaptive
//!   windows.
//! - [`cold`]: each function's binary started cold against a local Runtime API
//!   ([`runtime_api`]), primed at init and not.
//! - [`combined`]: the issues stream read by two mappings (`Consumers=Separate`) and by one
//!   (`Consumers=Combined`), on the same batches.
//! - [`kinesis`]: the aggregator and the archiver on the same changes from a DynamoDB stream and
//!   from a Kinesis data stream.
//! - [`any_order`]: the indexer in order and in any order (`MULTIKEY_ORDER`) on the same batches.
//! - [`cost`]: what a million changes cost each function, billed by the emulator's meter.
//!
//! The report's ratios compare each wall time with the *request bound*,
//! ⌈requests / concurrency⌉ × latency, and with a *floor* measured in the same run: the
//! invocation's own requests, recorded by the proxy and sent again byte for byte by a bare
//! client at the same concurrency ([`crate::fault_proxy::replay`]), which is what the emulator and the
//! latency alone cost for them. The gap between the bound and the floor is the emulator's; the
//! gap between the floor and the wall time is Sidestream's.

pub mod any_order;
pub mod cold;
pub mod combined;
pub mod cost;
pub mod events;
pub mod hot;
pub mod kinesis;
pub mod runtime_api;
pub mod throttled;
pub mod write_path;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::Stack;
use aws_config::SdkConfig;
use aws_lambda_events::event::dynamodb::Event;
use io_policy::Deadline;
use serde::Serialize;
use stream_runtime::{Metric, Vars};
use stream_runtime::{Runtime, StreamFunction};

/// A bench that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The stack could not be created or read.
    #[error(transparent)]
    Stack(#[from] crate::StackError),
    /// The fault proxy could not start or its spec is wrong.
    #[error("the fault proxy: {0}")]
    Proxy(String),
    /// A function could not be configured.
    #[error("{function}: {cause}")]
    Config {
        /// The function.
        function: &'static str,
        /// Why.
        cause: stream_runtime::ConfigError,
    },
    /// An invocation did not finish its batch where the bench needs it to.
    #[error("{function}: {message}")]
    Invocation {
        /// The function.
        function: &'static str,
        /// What happened.
        message: String,
    },
    /// The bench's own reads and writes (the floor, the counters' totals).
    #[error("{0}")]
    Io(String),
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// The SAM template.
    pub template: PathBuf,
    /// The stack name (resources are `<stack>-<logicalid>`).
    pub stack: String,
    /// Added by the proxy to every data call.
    pub latency: Duration,
    /// Invocations per write-path case; the median is reported.
    pub repeats: usize,
    /// Records per batch for the write-path cases: `BatchSize` 100, 1,000, and about 6 MB.
    pub batches: Vec<events::Batch>,
    /// Concurrent invocations for the hot-counter cases.
    pub hot_invocations: Vec<usize>,
    /// Rounds of concurrent invocations per hot-counter case.
    pub hot_rounds: usize,
    /// The throttling cases' write capacities, in requests per second (0: no limit, no throttling).
    pub capacities: Vec<u32>,
    /// The parts to run (all by default).
    pub parts: Vec<Part>,
    /// Where the functions' binaries are, for the cold starts (`target/<profile>`).
    pub binaries: PathBuf,
    /// Source changes in the cost part's workload.
    pub cost_changes: usize,
    /// The cost part's workload shape and rates.
    pub cost_shape: cost::Shape,
}

/// A part of the bench (`sidestream-local bench --only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// Each function's invocations against the request bound and the replayed floor.
    WritePath,
    /// Concurrent invocations updating the same counter totals.
    Hot,
    /// Fixed and adaptive write windows against a write capacity.
    Throttled,
    /// Each function's process started cold against a local Runtime API, primed and not.
    Cold,
    /// The issues stream read by two mappings and by one.
    Combined,
    /// The same changes from a DynamoDB stream and from a Kinesis data stream.
    Kinesis,
    /// The indexer in order and in any order (`MULTIKEY_ORDER`), on the same batches.
    AnyOrder,
    /// What a million changes cost each function, by the emulator's meter.
    Cost,
}

impl Options {
    /// The full bench, as `scripts/bench-e2e` runs it.
    pub fn full(template: PathBuf, stack: String) -> Options {
        Options {
            template,
            stack,
            latency: Duration::from_millis(10),
            repeats: 3,
            batches: events::Batch::STANDARD.to_vec(),
            hot_invocations: vec![1, 2, 5, 10],
            hot_rounds: 10,
            capacities: vec![0, 250, 800],
            parts: vec![
                Part::WritePath,
                Part::Hot,
                Part::Throttled,
                Part::Cold,
                Part::Combined,
                Part::Kinesis,
                Part::AnyOrder,
                Part::Cost,
            ],
            binaries: PathBuf::from("target/fuzz"),
            cost_changes: 20_000,
            cost_shape: cost::Shape::default(),
        }
    }
}

/// Progress, for a bar: cases done of cases planned.
#[derive(Debug, Default)]
pub struct Progress {
    /// Cases planned.
    pub cases: AtomicU64,
    /// Cases done.
    pub done: AtomicU64,
}

/// Everything measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The proxy's latency per call, in milliseconds.
    pub latency_ms: f64,
    /// One row per function and batch.
    pub write_path: Vec<write_path::Row>,
    /// One row per number of concurrent invocations.
    pub hot: Vec<hot::Row>,
    /// Fixed and adaptive write windows against a write capacity.
    pub throttled: Vec<throttled::Row>,
    /// Cold starts, primed and not.
    pub cold: Vec<cold::Row>,
    /// Two mappings against one on the issues stream.
    pub combined: Vec<combined::Row>,
    /// A DynamoDB stream against a Kinesis data stream.
    pub kinesis: Vec<kinesis::Row>,
    /// The indexer in order against in any order.
    pub any_order: Vec<any_order::Row>,
    /// What a million changes cost.
    pub cost: Option<cost::Report>,
}

/// Runs the bench against the emulator at `endpoint` (`sdk` reaches it directly).
pub async fn run(
    sdk: &SdkConfig,
    endpoint: &str,
    options: &Options,
    progress: &Progress,
) -> Result<Report, BenchError> {
    let part = |p: Part| options.parts.contains(&p);
    let throttling = part(Part::Throttled) && !options.capacities.is_empty();
    let planned = options.batches.len() * 3 * 2 * usize::from(part(Part::WritePath))
        + options.hot_invocations.len() * usize::from(part(Part::Hot))
        + throttled::SETTINGS.len() * options.capacities.len() * usize::from(throttling)
        + 6 * usize::from(part(Part::Cold))
        + options.batches.len() * 2 * usize::from(part(Part::Combined))
        + options.batches.len() * 2 * 2 * usize::from(part(Part::Kinesis))
        + options.batches.len() * usize::from(part(Part::AnyOrder))
        + 4 * usize::from(part(Part::Cost));
    progress.cases.store(planned as u64, Ordering::Relaxed);
    let stack = Stack::create(sdk, &options.template, &options.stack, &BTreeMap::new()).await?;
    let spec = format!("latency={}ms", options.latency.as_millis());
    let ground = Ground { sdk, endpoint, stack: &stack, spec: &spec, options, progress };
    let bench = ground.bench(&spec).await?;
    let write_path = if part(Part::WritePath) {
        let mut rows = Vec::new();
        for (upstream, spec) in upstreams(&spec) {
            rows.extend(write_path::run(&ground.bench(&spec).await?, upstream, ground).await?);
        }
        rows
    } else {
        Vec::new()
    };
    let hot = if part(Part::Hot) { hot::run(&bench, options, progress).await? } else { Vec::new() };
    let cold = if part(Part::Cold) {
        cold::run(&bench, options, &options.binaries, progress).await?
    } else {
        Vec::new()
    };
    let throttled = if throttling { throttled::run(ground).await? } else { Vec::new() };
    let kinesis =
        if part(Part::Kinesis) { Box::pin(kinesis::both_upstreams(ground)).await? } else { Vec::new() };
    let combined =
        if part(Part::Combined) { Box::pin(combined::both_upstreams(ground)).await? } else { Vec::new() };
    let any_order = if part(Part::AnyOrder) { Box::pin(any_order::run(ground)).await? } else { Vec::new() };
    let cost = if part(Part::Cost) {
        Some(Box::pin(cost::run(ground, options.cost_changes, options.cost_shape)).await?)
    } else {
        None
    };
    Ok(Report {
        latency_ms: options.latency.as_secs_f64() * 1000.0,
        write_path,
        hot,
        throttled,
        cold,
        combined,
        kinesis,
        any_order,
        cost,
    })
}

/// The two upstreams the proxy made from `spec` answers for: moto, and the sink (the proxy
/// itself, after the latency).
pub fn upstreams(spec: &str) -> [(&'static str, String); 2] {
    [("moto", spec.to_owned()), ("sink", format!("{spec},sink=1"))]
}

/// What a row of the write path or of the Kinesis part measured: one function on one batch.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// What answers the calls: `moto`, or `sink` (the proxy itself, an ideal service whose every
    /// call costs exactly the latency).
    pub upstream: &'static str,
    /// The function.
    pub function: &'static str,
    /// The batch, as the report names it.
    pub batch: String,
    /// Records in the batch.
    pub records: usize,
}

impl Case {
    /// Function `F` on `records` records of `batch`, against `upstream`.
    pub fn of<F: StreamFunction>(upstream: &'static str, batch: events::Batch, records: usize) -> Case {
        Case { upstream, function: F::NAME, batch: batch.label(), records }
    }
}

/// What every part of the bench runs on: the emulator, the stack on it, the proxy's spec, and
/// the run's options and progress.
#[derive(Clone, Copy)]
pub struct Ground<'a> {
    /// Reaches the emulator directly.
    pub sdk: &'a SdkConfig,
    /// The emulator's endpoint.
    pub endpoint: &'a str,
    /// The stack on it.
    pub stack: &'a Stack,
    /// The fault proxy's spec (the latency).
    pub spec: &'a str,
    /// The run's options.
    pub options: &'a Options,
    /// Where the run reports how far it has got.
    pub progress: &'a Progress,
}

impl<'a> Ground<'a> {
    /// Creates a table shaped as the stack's index table, named `name`: a bench's own index.
    pub(crate) async fn index_table(&self, name: String) -> Result<(), BenchError> {
        let mut table = self.stack.table("IndexTable")?.clone();
        table.name = name;
        crate::replayer::resources::create_table(&aws_sdk_dynamodb::Client::new(self.sdk), &table)
            .await
            .map_err(|e| BenchError::Io(e.to_string()))?;
        Ok(())
    }

    /// A proxy with `spec` in front of the emulator, for the ground's stack.
    pub(crate) async fn bench(&self, spec: &str) -> Result<Bench<'a>, BenchError> {
        Bench::start(self.sdk, self.endpoint, self.stack, spec).await
    }
}

/// The stack, and the proxy in front of the emulator with clients through it.
pub struct Bench<'s> {
    /// The stack on the emulator.
    pub stack: &'s Stack,
    /// The running proxy.
    pub proxy: crate::fault_proxy::Proxy,
    /// SDK configuration whose endpoint is the proxy.
    pub through: SdkConfig,
    /// The emulator, directly.
    pub direct: SdkConfig,
}

impl<'s> Bench<'s> {
    /// Starts a proxy with `spec` in front of `endpoint`.
    pub async fn start(
        sdk: &SdkConfig,
        endpoint: &str,
        stack: &'s Stack,
        spec: &str,
    ) -> Result<Bench<'s>, BenchError> {
        let spec = crate::fault_proxy::Spec::parse(spec).map_err(|e| BenchError::Proxy(e.to_string()))?;
        let proxy =
            crate::fault_proxy::start(endpoint, spec).await.map_err(|e| BenchError::Proxy(e.to_string()))?;
        // An explicit endpoint: one set on a copy of `sdk` would lose to AWS_ENDPOINT_URL.
        let through = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(format!("http://{}", proxy.addr))
            .load()
            .await;
        Ok(Bench { stack, proxy, through, direct: sdk.clone() })
    }

    /// The runtime of function `F` (cargo binary `binary`), configured from the template's
    /// environment with `overrides` on top, its clients going through the proxy.
    pub fn runtime<F: StreamFunction>(
        &self,
        binary: &'static str,
        overrides: &[(&str, String)],
    ) -> Result<Runtime<F>, BenchError> {
        let mut env = crate::environment(self.stack.function(binary)?);
        env.extend(overrides.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        let lookup = |name: &str| env.get(name).cloned();
        Runtime::<F>::from_vars(&Vars::new(&lookup), &self.through)
            .map_err(|source| BenchError::Config { function: binary, cause: source })
    }
}

/// One invocation, measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// From the event's bytes to the response.
    pub wall: Duration,
    /// Requests sent, retries included.
    pub requests: u64,
    /// Requests that were retries.
    pub retries: u64,
    /// Counter totals read and merged again after another writer changed them.
    pub conflicts: u64,
    /// Item writes or objects that succeeded.
    pub writes: u64,
    /// Whether the batch stopped at a checkpoint (Lambda would retry from it).
    pub stopped: bool,
    /// The checkpoint's position in the batch, when it stopped.
    pub checkpoint: Option<usize>,
}

/// Delivers `records` to `runtime` as Lambda does: again from the checkpoint while the batch
/// stops at one, at most `limit` times. The samples of every delivery, the first one first.
pub async fn deliver<F: StreamFunction>(
    runtime: &Runtime<F>,
    mut records: Vec<aws_lambda_events::event::dynamodb::EventRecord>,
    limit: usize,
) -> Result<Vec<Sample>, BenchError> {
    let mut samples = Vec::new();
    loop {
        let (_, bytes) = events::Batch::Records(usize::MAX).encode(records.clone());
        let sample = invoke(runtime, &bytes).await?;
        samples.push(sample);
        match sample.checkpoint {
            None => return Ok(samples),
            Some(_) if samples.len() >= limit => {
                return Err(BenchError::Invocation {
                    function: F::NAME,
                    message: format!("a batch still stops at a checkpoint after {limit} deliveries"),
                });
            }
            Some(at) => records = records.split_off(at),
        }
    }
}

/// Invokes `runtime` on the event `bytes`, as Lambda hands them over: read in place, handled
/// and answered, with a 15-minute deadline.
pub async fn invoke<F: StreamFunction>(runtime: &Runtime<F>, bytes: &[u8]) -> Result<Sample, BenchError> {
    let started = Instant::now();
    let not_an_event = |e: &dyn std::fmt::Display| BenchError::Invocation {
        function: F::NAME,
        message: format!("the event does not decode: {e}"),
    };
    let text = std::str::from_utf8(bytes).map_err(|e| not_an_event(&e))?;
    let (response, metrics) = runtime
        .handle_json(text, Deadline::after(Duration::from_secs(900)))
        .await
        .map_err(|e| not_an_event(&e))?;
    let wall = started.elapsed();
    let response =
        response.map_err(|e| BenchError::Invocation { function: F::NAME, message: e.to_string() })?;
    let checkpoint = response.batch_item_failures.first().map(|f| {
        // Outside the timing: where the batch stopped, for the bench's redelivery.
        let event: Event = serde_json::from_slice(bytes).unwrap_or_default();
        event
            .records
            .iter()
            .position(|r| r.change.sequence_number.is_some() && r.change.sequence_number == f.item_identifier)
            .unwrap_or(0)
    });
    Ok(Sample {
        wall,
        checkpoint,
        requests: metrics.get(Metric::Requests),
        retries: metrics.get(Metric::Retries),
        conflicts: metrics.get(Metric::Conflicts),
        writes: metrics.get(Metric::Writes),
        stopped: !response.batch_item_failures.is_empty(),
    })
}

/// The median of `values` (0 when empty).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => f64::midpoint(values[n / 2 - 1], values[n / 2]),
    }
}

/// Milliseconds, for reports.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// ⌈requests / concurrency⌉ × latency: the least time that many requests can take.
pub(crate) fn request_bound(requests: u64, concurrency: usize, latency: Duration) -> Duration {
    let rounds = requests.div_ceil(concurrency.max(1) as u64);
    latency.saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX))
}
