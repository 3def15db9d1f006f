//! One reader against two: the issues stream's batches handled by the indexer and the archiver
//! each behind its own mapping (`Consumers=Separate`), and by `sidestream-combined` behind one
//! (`Consumers=Combined`), side by side on the same batches.
//!
//! A batch is the issues stream as both functions see it: nine issue changes to one TTL
//! deletion. Separate mappings each filter the batch with their own `FilterCriteria` (from the
//! template) and invoke their function on what passes, at the same time; the batch is done when
//! the slower one is, and Lambda bills both durations. The combined mapping invokes one function
//! on the union, which filters for each member in code ([`stream_runtime::combined::select`])
//! and runs both at once.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::Stack;
use io_policy::Deadline;
use multikey_indexer::Indexer;
use serde::Serialize;
use stream_runtime::combined::{Combined, select};
use stream_runtime::filter::Pattern;
use stream_runtime::{Event, EventRecord, Metric, Vars};
use stream_runtime::{Runtime, StreamFunction};
use ttl_archiver::Archiver;

use crate::bench::events::{self, Batch};
use crate::bench::{Bench, BenchError, Ground, Options, Progress, Sample, invoke, ms};

/// The parameters that make the template's combined stack.
pub(crate) const PARAMETERS: [(&str, &str); 1] = [("Consumers", "Combined")];

/// One batch size, both ways.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What answers the calls: `moto` or `sink`.
    pub upstream: &'static str,
    /// The batch, as the report names it.
    pub batch: String,
    /// Records in the batch.
    pub records: usize,
    /// Records the indexer's filter passes.
    pub indexer_records: usize,
    /// Records the archiver's filter passes.
    pub archiver_records: usize,
    /// Two mappings, two invocations at once.
    pub separate: Side,
    /// One mapping, one invocation.
    pub combined: Side,
    /// Combined over separate: the batch's wall time.
    pub wall_ratio: f64,
    /// Combined over separate: the billed duration.
    pub billed_ratio: f64,
}

/// One way of reading the batch, at its median repeat.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Side {
    /// Lambda invocations for the batch.
    pub invocations: usize,
    /// Until the batch is done: the slowest invocation.
    pub wall_ms: f64,
    /// What Lambda bills: every invocation's duration, summed.
    pub billed_ms: f64,
    /// Requests, retries included.
    pub requests: u64,
    /// Item writes and objects written.
    pub writes: u64,
}

/// Creates the combined stack beside the ground's and measures both ways against moto and the
/// sink, behind proxies made from `spec`.
pub(crate) async fn both_upstreams(ground: Ground<'_>) -> Result<Vec<Row>, BenchError> {
    let Ground { sdk, endpoint, options, progress, .. } = ground;
    let parameters = PARAMETERS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let name = format!("{}-combined", options.stack);
    let combined = Stack::create(sdk, &options.template, &name, &parameters).await?;
    let mut rows = Vec::new();
    for (upstream, spec) in crate::bench::upstreams(ground.spec) {
        let two = ground.bench(&spec).await?;
        let one = Bench::start(sdk, endpoint, &combined, &spec).await?;
        rows.extend(run(&two, &one, upstream, options, progress).await?);
    }
    Ok(rows)
}

/// Measures both ways on `options.batches`; `combined` is the stack made with [`PARAMETERS`].
pub async fn run(
    separate: &Bench<'_>,
    combined: &Bench<'_>,
    upstream: &'static str,
    options: &Options,
    progress: &Progress,
) -> Result<Vec<Row>, BenchError> {
    let indexer = separate.runtime::<Indexer>(Indexer::NAME, &[])?;
    let archiver = separate.runtime::<Archiver>(Archiver::NAME, &[])?;
    let indexer_patterns = mapping_patterns(separate, Indexer::NAME)?;
    let archiver_patterns = mapping_patterns(separate, Archiver::NAME)?;
    let both = combined.combined()?;

    let warm = events::issues_stream(Batch::Records(20), 0).1;
    two_mappings(&indexer, &indexer_patterns, &archiver, &archiver_patterns, &warm).await?;
    one_mapping(&both, &warm).await?;

    let mut rows = Vec::new();
    for &batch in &options.batches {
        let mut samples = Vec::new();
        let mut shape = (0, 0, 0);
        for repeat in 0..options.repeats.max(1) {
            // Both ways on the same batch, so that they make the same writes: the second
            // writes again what the first wrote, which costs the same requests.
            let (n, event) = events::issues_stream(batch, repeat as u64 + 1);
            let (apart, counts) =
                two_mappings(&indexer, &indexer_patterns, &archiver, &archiver_patterns, &event).await?;
            let together = one_mapping(&both, &event).await?;
            shape = (n, counts.0, counts.1);
            samples.push((apart, together));
        }
        let median = |pick: fn(&(Side, Side)) -> Side| {
            let mut sides: Vec<Side> = samples.iter().map(pick).collect();
            sides.sort_by(|a, b| a.wall_ms.total_cmp(&b.wall_ms));
            sides[sides.len() / 2]
        };
        let (separate, combined) = (median(|s| s.0), median(|s| s.1));
        rows.push(Row {
            upstream,
            batch: batch.label(),
            records: shape.0,
            indexer_records: shape.1,
            archiver_records: shape.2,
            separate,
            combined,
            wall_ratio: combined.wall_ms / separate.wall_ms.max(f64::EPSILON),
            billed_ratio: combined.billed_ms / separate.billed_ms.max(f64::EPSILON),
        });
        progress.done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(rows)
}

/// The patterns of the `FilterCriteria` on `binary`'s mapping in the separate stack.
fn mapping_patterns(bench: &Bench<'_>, binary: &str) -> Result<Vec<Pattern>, BenchError> {
    let function = bench.stack.function(binary)?;
    let source = function
        .streams
        .first()
        .ok_or_else(|| BenchError::Io(format!("{binary} has no stream mapping in the template")))?;
    source
        .filters
        .iter()
        .map(|text| {
            Pattern::parse_dynamodb(text)
                .map_err(|e| BenchError::Io(format!("{binary}'s filter {text}: {e}")))
        })
        .collect()
}

/// Each function invoked at once on what its mapping's filter passes; the records each got.
async fn two_mappings(
    indexer: &Runtime<Indexer>,
    indexer_patterns: &[Pattern],
    archiver: &Runtime<Archiver>,
    archiver_patterns: &[Pattern],
    bytes: &[u8],
) -> Result<(Side, (usize, usize)), BenchError> {
    let records = decode(bytes)?.records;
    let part = |patterns: &[Pattern]| -> Vec<EventRecord> {
        select(&records, patterns).into_iter().map(|i| records[i].clone()).collect()
    };
    let (to_indexer, to_archiver) = (part(indexer_patterns), part(archiver_patterns));
    let counts = (to_indexer.len(), to_archiver.len());
    let (a, b) =
        futures_util::future::join(delivered(indexer, to_indexer), delivered(archiver, to_archiver)).await;
    let samples: Vec<Sample> = [a?, b?].into_iter().flatten().collect();
    let side = Side {
        invocations: samples.len(),
        wall_ms: samples.iter().map(|s| ms(s.wall)).fold(0.0, f64::max),
        billed_ms: samples.iter().map(|s| ms(s.wall)).sum(),
        requests: samples.iter().map(|s| s.requests).sum(),
        writes: samples.iter().map(|s| s.writes).sum(),
    };
    Ok((side, counts))
}

/// `records` as one invocation of `runtime`, as its mapping sends them: none when the filter
/// passed nothing (Lambda does not invoke on an empty batch).
async fn delivered<F: StreamFunction>(
    runtime: &Runtime<F>,
    records: Vec<EventRecord>,
) -> Result<Option<Sample>, BenchError> {
    if records.is_empty() {
        return Ok(None);
    }
    let (_, bytes) = Batch::Records(usize::MAX).encode(records);
    let sample = invoke(runtime, &bytes).await?;
    finished(F::NAME, sample.stopped)?;
    Ok(Some(sample))
}

/// The combined function invoked once on the whole batch.
async fn one_mapping(combined: &Combined, bytes: &[u8]) -> Result<Side, BenchError> {
    let started = Instant::now();
    // Read in place, as the combined function reads Lambda's invocation.
    let text =
        std::str::from_utf8(bytes).map_err(|e| BenchError::Io(format!("the batch is not UTF-8: {e}")))?;
    let batch = stream_runtime::wire::Batch::parse(text).map_err(|e| BenchError::Io(e.to_string()))?;
    let (response, metrics) = combined
        .handle_wire(
            &batch.records,
            stream_runtime::Whole::text(text),
            Deadline::after(Duration::from_secs(900)),
        )
        .await;
    let wall = ms(started.elapsed());
    let response = response
        .map_err(|e| BenchError::Invocation { function: "sidestream-combined", message: e.to_string() })?;
    finished("sidestream-combined", !response.batch_item_failures.is_empty())?;
    Ok(Side {
        invocations: 1,
        wall_ms: wall,
        billed_ms: wall,
        requests: metrics.iter().map(|m| m.get(Metric::Requests)).sum(),
        writes: metrics.iter().map(|m| m.get(Metric::Writes)).sum(),
    })
}

fn decode(bytes: &[u8]) -> Result<Event, BenchError> {
    serde_json::from_slice(bytes).map_err(|e| BenchError::Io(format!("the batch does not decode: {e}")))
}

fn finished(function: &'static str, stopped: bool) -> Result<(), BenchError> {
    if stopped {
        return Err(BenchError::Invocation {
            function,
            message: "stopped at a checkpoint without faults injected".to_owned(),
        });
    }
    Ok(())
}

impl Bench<'_> {
    /// The stack's combined function, configured from its template environment, its clients
    /// going through the proxy.
    pub fn combined(&self) -> Result<Combined, BenchError> {
        let function = self.stack.function(sidestream_combined::COMBINED_BINARY)?;
        let env = crate::environment(function);
        let lookup = |name: &str| env.get(name).cloned();
        sidestream_combined::combined(&Vars::new(&lookup), &self.through).map_err(|source| {
            BenchError::Config { function: sidestream_combined::COMBINED_BINARY, cause: source }
        })
    }
}
