//! Cold starts: each function's real binary started as Lambda starts it, against a local
//! Runtime API ([`crate::bench::runtime_api`]), its AWS calls through the latency proxy, with and
//! without priming (`PRIME_AT_INIT`). Init is from the process's start to its first request
//! for work; then its first and second invocations, each from the event handed out to the
//! response. Priming moves the first AWS call's setup (credentials, the client's first
//! connection) from the first invocation into init. A third invocation hands the process a
//! 6 MB batch, and its peak resident memory (`VmHWM`) is read before it is stopped: the figure
//! `MemorySize` must hold.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use formats::counter::Sharding;
use serde::Serialize;

use crate::bench::events::{self, Batch, CounterSim};
use crate::bench::runtime_api::RuntimeApi;
use crate::bench::{Bench, BenchError, Options, Progress, median, ms};
use multikey_indexer::Indexer;
use stream_runtime::StreamFunction as _;
use ttl_archiver::Archiver;

/// The longest a cold start may take before the bench gives up on it.
const PATIENCE: Duration = Duration::from_secs(60);

/// One function, primed or not.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The function.
    pub function: &'static str,
    /// `PRIME_AT_INIT`.
    pub primed: bool,
    /// Process start to its first request for work (median).
    pub init_ms: f64,
    /// The first invocation (median).
    pub first_ms: f64,
    /// The second invocation, warm (median).
    pub second_ms: f64,
    /// Init and the first invocation: what the first batch waits.
    pub cold_ms: f64,
    /// The process's peak resident memory after a 6 MB batch, in MiB (the largest of the starts).
    pub peak_rss_mib: f64,
    /// Starts measured.
    pub starts: usize,
}

/// Measures each function's binary in `binaries` (`target/<profile>`), `options.repeats`
/// starts per setting.
pub async fn run(
    bench: &Bench<'_>,
    options: &Options,
    binaries: &Path,
    progress: &Progress,
) -> Result<Vec<Row>, BenchError> {
    let sharding = Sharding::new(10).map_err(|e| BenchError::Io(e.to_string()))?;
    let mut sim = CounterSim::new("cold", 20, sharding, 3);
    let mut rows = Vec::new();
    for function in sidestream_combined::FUNCTIONS.iter().map(|f| f.name) {
        for primed in [false, true] {
            let mut samples = Vec::new();
            for repeat in 0..options.repeats.max(1) as u64 {
                let mut event = |batch: Batch, seed: u64| match function {
                    Indexer::NAME => events::issues(batch, seed).1,
                    Archiver::NAME => events::ttl_deletes(batch, seed).1,
                    _ => sim.batch(batch, 1_600).1,
                };
                // In this order: the counter simulation's batches must reach the process in the
                // order they were generated.
                let first = event(Batch::Records(100), repeat * 2 + 1);
                let second = event(Batch::Records(100), repeat * 2 + 2);
                let large = event(Batch::Bytes(6_000_000), repeat + 100);
                let batches = vec![first, second, large];
                samples.push(start(bench, &binaries.join(function), function, primed, batches).await?);
            }
            let peak_rss_mib = samples.iter().map(|s| s.1).fold(0.0, f64::max);
            let samples: Vec<[Duration; 3]> = samples.into_iter().map(|s| s.0).collect();
            let pick = |f: fn(&[Duration; 3]) -> Duration| {
                median(&mut samples.iter().map(|s| ms(f(s))).collect::<Vec<_>>())
            };
            let (init_ms, first_ms, second_ms) = (pick(|s| s[0]), pick(|s| s[1]), pick(|s| s[2]));
            rows.push(Row {
                function,
                primed,
                init_ms,
                first_ms,
                second_ms,
                cold_ms: pick(|s| s[0] + s[1]),
                peak_rss_mib,
                starts: samples.len(),
            });
            progress.done.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(rows)
}

/// One process: init, the first invocation and the second; then its peak memory (MiB) after
/// the rest of `batches`.
async fn start(
    bench: &Bench<'_>,
    binary: &Path,
    function: &'static str,
    primed: bool,
    batches: Vec<Vec<u8>>,
) -> Result<([Duration; 3], f64), BenchError> {
    let answers = batches.len();
    let failed = |message: String| BenchError::Invocation { function, message };
    let api = RuntimeApi::start(batches).await.map_err(|e| BenchError::Io(e.to_string()))?;
    let mut env = crate::environment(bench.stack.function(function)?);
    env.insert("PRIME_AT_INIT".to_owned(), primed.to_string());
    env.insert("AWS_ENDPOINT_URL".to_owned(), format!("http://{}", bench.proxy.addr));
    env.insert("AWS_LAMBDA_RUNTIME_API".to_owned(), api.addr.to_string());
    for (name, value) in [
        ("AWS_LAMBDA_FUNCTION_NAME", function),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/bench"),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "bench"),
        ("RUST_LOG", "error"),
    ] {
        env.insert(name.to_owned(), value.to_owned());
    }
    let started = Instant::now();
    let mut child =
        Command::new(binary).envs(&env).stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(|e| {
            failed(format!("cannot start {}: {e} (scripts/bench-e2e builds it)", binary.display()))
        })?;
    let seen =
        tokio::time::timeout(PATIENCE, api.until(|s| s.answers.len() >= answers || s.init_error.is_some()))
            .await;
    let peak = peak_rss_mib(child.id());
    let _ = child.kill();
    let _ = child.wait();
    let seen = seen.map_err(|_| failed(format!("no {answers} answers within {} s", PATIENCE.as_secs())))?;
    if let Some(error) = seen.init_error {
        return Err(failed(format!("init failed: {error}")));
    }
    for (_, body) in &seen.answers {
        if body.contains("errorType") || !body.contains("\"batchItemFailures\":[]") {
            return Err(failed(format!("an invocation did not finish its batch: {body}")));
        }
    }
    let (next, answered) = (&seen.next, &seen.answers);
    let times = [next[0] - started, answered[0].0 - next[0], answered[1].0 - next[1]];
    Ok((times, peak))
}

/// The peak resident memory of process `pid` so far (`VmHWM`), in MiB; 0 where `/proc` cannot
/// tell.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u32>().ok())
        .map_or(0.0, |kib| f64::from(kib) / 1024.0)
}
