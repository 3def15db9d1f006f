//! Hot counters: several invocations at once folding shard records of the same counters, as
//! `ParallelizationFactor` (or several stream shards) produces. Each invocation has its own
//! runtime and connections, like a Lambda instance; each shard item's records go to one lane,
//! by its key's hash, in order. A batch that stops at a checkpoint is delivered again from it,
//! as Lambda would, until it finishes; then every total is read back and compared with the generator's
//! own sums.

use std::sync::atomic::Ordering;
use std::time::Instant;

use aws_lambda_events::event::dynamodb::EventRecord;
use counter_aggregator::Aggregator;
use formats::counter::Sharding;
use serde::Serialize;
use sharded_counter::Counters;

use crate::bench::events::{Batch, CounterSim, lane};
use crate::bench::{Bench, BenchError, Options, Progress, Sample, deliver, invoke, median, ms};
use stream_runtime::StreamFunction as _;

/// Counters every lane updates.
pub const COUNTERS: usize = 4;
/// Shards per counter.
pub const SHARDS: u32 = 16;
/// Records per lane per round.
pub(crate) const RECORDS_PER_BATCH: usize = 100;

/// One number of concurrent invocations.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Invocations at once.
    pub invocations: usize,
    /// Batches handled (first deliveries).
    pub batches: u64,
    /// Records per round, spread over the lanes.
    pub records_per_round: usize,
    /// Batches that finished without reading a total again.
    pub conflict_free: u64,
    /// `conflict_free / batches`.
    pub conflict_free_share: f64,
    /// Totals read and merged again after another invocation changed them.
    pub conflicts: u64,
    /// `conflicts / batches`.
    pub conflicts_per_batch: f64,
    /// Requests, retries included.
    pub requests: u64,
    /// Requests that were retries.
    pub retries: u64,
    /// Batches that stopped at a checkpoint and were delivered again.
    pub redelivered: u64,
    /// The median round: all lanes' invocations, side by side.
    pub round_ms: f64,
    /// Whether every total equals the sum of its shards' values.
    pub exact: bool,
    /// The totals that differ, if any.
    pub detail: String,
}

/// Measures each of `options.hot_invocations`.
pub async fn run(bench: &Bench<'_>, options: &Options, progress: &Progress) -> Result<Vec<Row>, BenchError> {
    let sharding = Sharding::new(SHARDS).map_err(|e| BenchError::Io(e.to_string()))?;
    let table = bench.stack.table("CounterTable")?.name.clone();
    let counters = Counters::new(aws_sdk_dynamodb::Client::new(&bench.direct), table, sharding.clone());
    let mut rows = Vec::new();
    for &k in &options.hot_invocations {
        rows.push(case(bench, options, k, &sharding, &counters).await?);
        progress.done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(rows)
}

async fn case(
    bench: &Bench<'_>,
    options: &Options,
    k: usize,
    sharding: &Sharding,
    counters: &Counters,
) -> Result<Row, BenchError> {
    let k = k.max(1);
    let runtimes =
        (0..k).map(|_| bench.runtime::<Aggregator>(Aggregator::NAME, &[])).collect::<Result<Vec<_>, _>>()?;
    // Each instance's connections opened on counters of its own.
    let mut warm = CounterSim::new(&format!("warm{k}"), 1, sharding.clone(), 0);
    for runtime in &runtimes {
        let (_, bytes) = Batch::Records(5).encode(warm.changes(5).into_iter().map(|c| c.record).collect());
        invoke(runtime, &bytes).await?;
    }

    let mut sim = CounterSim::new(&format!("hot{k}"), COUNTERS, sharding.clone(), k as u64);
    let mut totals = Sample::default();
    let (mut batches, mut conflict_free, mut redelivered) = (0, 0, 0);
    let mut rounds = Vec::new();
    for _ in 0..options.hot_rounds.max(1) {
        let mut lanes: Vec<Vec<EventRecord>> = vec![Vec::new(); k];
        for change in sim.changes(k * RECORDS_PER_BATCH) {
            lanes[lane(&change.key, k)].push(change.record);
        }
        let started = Instant::now();
        let outcomes = futures_util::future::join_all(
            lanes
                .into_iter()
                .filter(|l| !l.is_empty())
                .zip(&runtimes)
                .map(|(records, runtime)| deliver(runtime, records, 10)),
        )
        .await;
        rounds.push(ms(started.elapsed()));
        for samples in outcomes {
            let samples = samples?;
            batches += 1;
            conflict_free += u64::from(samples[0].conflicts == 0);
            redelivered += samples.len() as u64 - 1;
            for s in samples {
                totals.requests += s.requests;
                totals.retries += s.retries;
                totals.conflicts += s.conflicts;
            }
        }
    }

    let mut wrong = Vec::new();
    for (i, name) in sim.names().iter().enumerate() {
        let total = counters.total(name).await.map_err(|e| BenchError::Io(e.to_string()))?;
        if total != Some(sim.sum(i)) {
            wrong.push(format!("{name}: {total:?}, the shards sum to {}", sim.sum(i)));
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "shares for people")]
    let share = |n: u64| n as f64 / batches.max(1) as f64;
    Ok(Row {
        invocations: k,
        batches,
        records_per_round: k * RECORDS_PER_BATCH,
        conflict_free,
        conflict_free_share: share(conflict_free),
        conflicts: totals.conflicts,
        conflicts_per_batch: share(totals.conflicts),
        requests: totals.requests,
        retries: totals.retries,
        redelivered,
        round_ms: median(&mut rounds),
        exact: wrong.is_empty(),
        detail: wrong.join("; "),
    })
}
