//! Indexing in order against indexing in any order (`MULTIKEY_ORDER=stream` and `any`), on the
//! same issues batches delivered in order, as a DynamoDB stream delivers them, in one run: what
//! order-insensitivity costs where order is given.
//!
//! Each side keeps its own index table, created for the part, so that each sees only its own
//! writes: a continuous history of the synthetic issues is cut into consecutive batches, the
//! first of which warms both sides (it creates the items) and is not measured. Only moto answers,
//! so that the guarded puts meet the entries and tombstones earlier batches left.

use std::sync::atomic::Ordering;

use multikey_indexer::Indexer;
use serde::Serialize;
use stream_runtime::Runtime;

use crate::bench::events::Batch;
use crate::bench::{BenchError, Ground, Sample, invoke, ms};
use stream_runtime::StreamFunction as _;

/// One batch size, both ways.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The batch, as the report names it.
    pub batch: String,
    /// Records in the batch (the median repeat's).
    pub records: usize,
    /// In order (`MULTIKEY_ORDER=stream`), at the median repeat.
    pub stream: Side,
    /// In any order (`MULTIKEY_ORDER=any`), at the median repeat.
    pub any: Side,
    /// Any over in order: wall time.
    pub wall_ratio: f64,
    /// Any over in order: requests.
    pub requests_ratio: f64,
}

/// One way of indexing a batch.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Side {
    /// From the event's bytes to the response.
    pub wall_ms: f64,
    /// Requests, retries included.
    pub requests: u64,
    /// Item writes (entries and tombstones).
    pub writes: u64,
}

/// Measures both ways on `options.batches` against moto, behind a proxy made from `spec`.
pub async fn run(ground: Ground<'_>) -> Result<Vec<Row>, BenchError> {
    let Ground { spec, options, progress, .. } = ground;
    let bench = ground.bench(spec).await?;
    let mut rows = Vec::new();
    for (place, &batch) in options.batches.iter().enumerate() {
        let runtime = |order: &str| -> Result<Runtime<Indexer>, BenchError> {
            let table = format!("{}-order{place}-{order}", options.stack);
            let indexes = multikey_indexer::synthetic::INDEXES_JSON.replace("issue-attrib-index", &table);
            bench.runtime::<Indexer>(
                Indexer::NAME,
                &[("MULTIKEY_INDEXES", indexes), ("MULTIKEY_ORDER", order.to_owned())],
            )
        };
        let (stream, any) = (runtime("stream")?, runtime("any")?);
        for order in ["stream", "any"] {
            ground.index_table(format!("{}-order{place}-{order}", options.stack)).await?;
        }
        let repeats = options.repeats.max(1);
        let batches = history(batch, repeats + 1, place as u64 + 1);
        let (mut in_order, mut any_order) = (Vec::new(), Vec::new());
        let mut records = Vec::new();
        for (k, (n, bytes)) in batches.iter().enumerate() {
            let (s, a) = (invoke(&stream, bytes).await?, invoke(&any, bytes).await?);
            for sample in [s, a] {
                if sample.stopped {
                    return Err(BenchError::Invocation {
                        function: Indexer::NAME,
                        message: "stopped at a checkpoint without faults injected".to_owned(),
                    });
                }
            }
            if k > 0 {
                in_order.push(s);
                any_order.push(a);
                records.push(*n);
            }
        }
        let (stream, any) = (median(&mut in_order), median(&mut any_order));
        records.sort_unstable();
        rows.push(Row {
            batch: batch.label(),
            records: records[records.len() / 2],
            stream,
            any,
            wall_ratio: any.wall_ms / stream.wall_ms.max(f64::EPSILON),
            requests_ratio: ratio(any.requests, stream.requests),
        });
        progress.done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(rows)
}

/// `count` consecutive batches of the kind `batch` cut from one history of the synthetic issues.
fn history(batch: Batch, count: usize, seed: u64) -> Vec<(usize, Vec<u8>)> {
    let per = batch.generate(1_200);
    let mut records = multikey_indexer::synthetic::batch(per * count, (per / 2).max(50), seed).records;
    let mut out = Vec::new();
    for _ in 0..count {
        let (n, bytes) = batch.encode(records.clone());
        records.drain(..n.min(records.len()));
        out.push((n, bytes));
    }
    out
}

/// `a / b` for counts far below 2^52 (requests of one invocation).
fn ratio(a: u64, b: u64) -> f64 {
    let f = |n: u64| f64::from(u32::try_from(n).unwrap_or(u32::MAX));
    f(a) / f(b.max(1))
}

/// The median sample by wall time.
fn median(samples: &mut [Sample]) -> Side {
    samples.sort_by_key(|s| s.wall);
    let s = samples.get(samples.len() / 2).copied().unwrap_or_default();
    Side { wall_ms: ms(s.wall), requests: s.requests, writes: s.writes }
}
