//! Each function on realistic batches at its default settings: wall time against the request
//! bound, and against the floor measured beside it: the invocation's own requests, recorded by
//! the proxy and sent again by a bare client at the same concurrency (what the emulator and the
//! latency alone cost for them).

use std::sync::atomic::Ordering;

use counter_aggregator::Aggregator;
use formats::counter::Sharding;
use multikey_indexer::Indexer;
use serde::Serialize;
use stream_runtime::{Runtime, StreamFunction};
use ttl_archiver::Archiver;

use crate::bench::events::{self, Batch, CounterSim};
use crate::bench::{Bench, BenchError, Case, Ground, Options, invoke, ms, request_bound};

/// One function on one batch size.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The function, the batch and what answered.
    #[serde(flatten)]
    pub case: Case,
    /// Bytes of event JSON.
    pub event_bytes: usize,
    /// Requests in flight at once (`WRITE_CONCURRENCY`).
    pub concurrency: usize,
    /// The median invocation, from the event's bytes to the response.
    pub wall_ms: f64,
    /// Records per second at that median.
    pub records_per_second: f64,
    /// Requests of the median invocation, retries included.
    pub requests: u64,
    /// Retries among them.
    pub retries: u64,
    /// Item writes or objects written.
    pub writes: u64,
    /// ⌈requests / concurrency⌉ × latency.
    pub bound_ms: f64,
    /// Wall time over the request bound.
    pub ratio: f64,
    /// The same requests, byte for byte, sent again by a bare client at the same concurrency
    /// through the same proxy.
    pub floor_ms: f64,
    /// Wall time over the floor.
    pub floor_ratio: f64,
    /// Requests the floor replayed: those the proxy recorded during the invocation.
    pub replayed: usize,
}

/// Measures the three functions on `options.batches`.
pub async fn run(
    bench: &Bench<'_>,
    upstream: &'static str,
    ground: Ground<'_>,
) -> Result<Vec<Row>, BenchError> {
    // A fixed window, so that the request bound and the floor know the concurrency.
    let concurrency = io_policy::Policy::default().concurrency;
    let fixed =
        [("WRITE_CONCURRENCY", concurrency.to_string()), ("WRITE_MAX_CONCURRENCY", concurrency.to_string())];
    let on = Fixed { bench, upstream, concurrency, ground };
    let mut rows = Vec::new();
    let indexer = bench.runtime::<Indexer>(Indexer::NAME, &fixed)?;
    rows.extend(on.each_batch(&indexer, events::issues).await?);
    let archiver = bench.runtime::<Archiver>(Archiver::NAME, &fixed)?;
    rows.extend(on.each_batch(&archiver, events::ttl_deletes).await?);
    let aggregator = bench.runtime::<Aggregator>(Aggregator::NAME, &fixed)?;
    let sharding = Sharding::new(10).map_err(|e| BenchError::Io(e.to_string()))?;
    let sim = std::cell::RefCell::new(CounterSim::new("write-path", 100, sharding, 7));
    rows.extend(on.each_batch(&aggregator, |batch, _seed| sim.borrow_mut().batch(batch, 1_600)).await?);
    Ok(rows)
}

/// A proxy, an upstream and a fixed write window.
struct Fixed<'a> {
    bench: &'a Bench<'a>,
    upstream: &'static str,
    concurrency: usize,
    ground: Ground<'a>,
}

impl Fixed<'_> {
    /// One warm-up invocation, then a row for each of the options' batches, made by `make`
    /// (given the batch and the repeat's number).
    async fn each_batch<F: StreamFunction>(
        &self,
        runtime: &Runtime<F>,
        mut make: impl FnMut(Batch, u64) -> (usize, Vec<u8>),
    ) -> Result<Vec<Row>, BenchError> {
        warm_up(runtime, &make(Batch::Records(10), 0).1).await?;
        let mut rows = Vec::new();
        for &batch in &self.ground.options.batches {
            let (bench, options) = (self.bench, self.ground.options);
            let make = |seed| make(batch, seed);
            rows.push(case(bench, self.upstream, runtime, batch, options, self.concurrency, make).await?);
            self.ground.progress.done.fetch_add(1, Ordering::Relaxed);
        }
        Ok(rows)
    }
}

/// One invocation, not measured: a cold function's first requests open its connections.
async fn warm_up<F: StreamFunction>(runtime: &Runtime<F>, bytes: &[u8]) -> Result<(), BenchError> {
    invoke(runtime, bytes).await.map(drop)
}

/// `options.repeats` invocations on batches made by `make` (given the repeat's number), and a
/// floor for the median one's requests.
async fn case<F: StreamFunction>(
    bench: &Bench<'_>,
    upstream: &'static str,
    runtime: &Runtime<F>,
    batch: Batch,
    options: &Options,
    concurrency: usize,
    mut make: impl FnMut(u64) -> (usize, Vec<u8>),
) -> Result<Row, BenchError> {
    let mut samples = Vec::new();
    let (mut records, mut bytes) = (0, 0);
    for repeat in 0..options.repeats.max(1) {
        let (n, event) = make(repeat as u64 + 1);
        bench.proxy.record();
        let sample = invoke(runtime, &event).await?;
        let sent = bench.proxy.recorded();
        if sample.stopped {
            return Err(BenchError::Invocation {
                function: F::NAME,
                message: format!("{} stopped at a checkpoint without faults injected", batch.label()),
            });
        }
        (records, bytes) = (n, event.len());
        samples.push((sample, sent));
    }
    samples.sort_by_key(|(s, _)| s.wall);
    let (sample, sent) = samples.swap_remove(samples.len() / 2);
    let replayed = sent.len();
    let floor = crate::fault_proxy::replay(bench.proxy.addr, sent, concurrency)
        .await
        .map_err(|e| BenchError::Io(e.to_string()))?;
    let bound = request_bound(sample.requests, concurrency, options.latency);
    let wall = ms(sample.wall);
    #[expect(clippy::cast_precision_loss, reason = "rates for people")]
    let records_per_second = records as f64 / sample.wall.as_secs_f64().max(f64::EPSILON);
    Ok(Row {
        case: Case::of::<F>(upstream, batch, records),
        event_bytes: bytes,
        concurrency,
        wall_ms: wall,
        records_per_second,
        requests: sample.requests,
        retries: sample.retries,
        writes: sample.writes,
        bound_ms: ms(bound),
        ratio: wall / ms(bound).max(f64::EPSILON),
        floor_ms: ms(floor),
        floor_ratio: wall / ms(floor).max(f64::EPSILON),
        replayed,
    })
}
