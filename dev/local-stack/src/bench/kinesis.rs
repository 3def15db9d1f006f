//! A DynamoDB stream against a Kinesis data stream as the source: the aggregator and the archiver
//! on the same changes, delivered as Lambda's DynamoDB event and as its Kinesis event (the
//! changes written as Kinesis Data Streams for DynamoDB writes them,
//! `crate::replayer::kinesis::Writer`), in one run. The difference is what reading Kinesis costs:
//! the event's JSON parsed as a whole, each record's data decoded from base64 and parsed again,
//! and the change record built from it (`stream_runtime::kinesis`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::replayer::kinesis::Writer;
use counter_aggregator::Aggregator;
use formats::counter::Sharding;
use io_policy::Deadline;
use serde::Serialize;
use serde_json::{Value, json};
use stream_runtime::{Event, Metric};
use stream_runtime::{Runtime, StreamFunction};
use ttl_archiver::Archiver;

use crate::bench::events::{Batch, CounterSim};
use crate::bench::{Bench, BenchError, Case, Ground, Options, invoke, ms};

/// One function on one batch, from both sources.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The function, the batch and what answered.
    #[serde(flatten)]
    pub case: Case,
    /// Bytes of the DynamoDB event's JSON.
    pub dynamodb_bytes: usize,
    /// Bytes of the Kinesis event's JSON (base64 makes each record's data a third larger).
    pub kinesis_bytes: usize,
    /// The median invocation from the DynamoDB event's bytes to the response.
    pub dynamodb_ms: f64,
    /// The median invocation from the Kinesis event's bytes to the response.
    pub kinesis_ms: f64,
    /// Kinesis over DynamoDB.
    pub ratio: f64,
    /// Requests of the median invocations, DynamoDB then Kinesis.
    pub requests: (u64, u64),
}

/// Measures both sources against moto and against the sink, behind proxies made from `spec`.
pub(crate) async fn both_upstreams(ground: Ground<'_>) -> Result<Vec<Row>, BenchError> {
    let mut rows = Vec::new();
    for (upstream, spec) in crate::bench::upstreams(ground.spec) {
        rows.extend(run(&ground.bench(&spec).await?, upstream, ground).await?);
    }
    Ok(rows)
}

/// Measures the aggregator and the archiver on `options.batches` from both sources.
pub async fn run(
    bench: &Bench<'_>,
    upstream: &'static str,
    ground: Ground<'_>,
) -> Result<Vec<Row>, BenchError> {
    let kinesis = [("CHANGE_SOURCE", "kinesis".to_owned())];
    let Ground { options, progress, .. } = ground;
    let mut writer = Writer::new("arn:aws:kinesis:us-east-1:123456789012:stream/bench", "bench");
    let mut rows = Vec::new();
    let aggregator = bench.runtime::<Aggregator>(Aggregator::NAME, &kinesis)?;
    let sharding = Sharding::new(10).map_err(|e| BenchError::Io(e.to_string()))?;
    // Two simulations alike but for their counters' names: the same work from each source, and
    // neither finds the other's shard states (a Kinesis version, a change time, would read as
    // older than a stream's sequence number).
    let sims = std::cell::RefCell::new((
        CounterSim::new(&format!("{upstream}-streams"), 100, sharding.clone(), 5),
        CounterSim::new(&format!("{upstream}-kinesis"), 100, sharding, 5),
    ));
    for &batch in &options.batches {
        let make = |_seed| {
            let (streams, kinesis) = &mut *sims.borrow_mut();
            (streams.batch(batch, 1_600).1, kinesis.batch(batch, 1_600))
        };
        rows.push(case(&aggregator, &mut writer, upstream, batch, options, make).await?);
        progress.done.fetch_add(1, Ordering::Relaxed);
    }
    let archiver = bench.runtime::<Archiver>(Archiver::NAME, &kinesis)?;
    for &batch in &options.batches {
        // The same deletions from each source: archiving one again costs the same request.
        let make = |seed| {
            let (n, event) = crate::bench::events::ttl_deletes(batch, seed + 100);
            (event.clone(), (n, event))
        };
        rows.push(case(&archiver, &mut writer, upstream, batch, options, make).await?);
        progress.done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(rows)
}

/// `options.repeats` pairs of batches made by `make` (given the repeat's number): the first
/// handled from its DynamoDB event, the second, of the same shape, from its Kinesis event; the
/// medians.
async fn case<F: StreamFunction>(
    runtime: &Runtime<F>,
    writer: &mut Writer,
    upstream: &'static str,
    batch: Batch,
    options: &Options,
    mut make: impl FnMut(u64) -> (Vec<u8>, (usize, Vec<u8>)),
) -> Result<Row, BenchError> {
    let (mut from_streams, mut from_kinesis) = (Vec::new(), Vec::new());
    let (mut records, mut bytes) = (0, (0, 0));
    for repeat in 0..options.repeats.max(1) {
        let (event, (n, twin)) = make(repeat as u64 + 1);
        let kinesis = kinesis_event(writer, &twin)?;
        let streams = invoke(runtime, &event).await?;
        let (wall, requests) = invoke_kinesis(runtime, &kinesis).await?;
        (records, bytes) = (n, (event.len(), kinesis.len()));
        from_streams.push((streams.wall, streams.requests));
        from_kinesis.push((wall, requests));
    }
    let median = |samples: &mut Vec<(Duration, u64)>| {
        samples.sort();
        samples[samples.len() / 2]
    };
    let (streams, kinesis) = (median(&mut from_streams), median(&mut from_kinesis));
    Ok(Row {
        case: Case::of::<F>(upstream, batch, records),
        dynamodb_bytes: bytes.0,
        kinesis_bytes: bytes.1,
        dynamodb_ms: ms(streams.0),
        kinesis_ms: ms(kinesis.0),
        ratio: ms(kinesis.0) / ms(streams.0).max(f64::EPSILON),
        requests: (streams.1, kinesis.1),
    })
}

/// The DynamoDB event's changes as Lambda's Kinesis event, written by `writer` (one for the
/// whole run, as one stream: its change times keep growing from batch to batch).
fn kinesis_event(writer: &mut Writer, dynamodb: &[u8]) -> Result<Vec<u8>, BenchError> {
    let event: Event = serde_json::from_slice(dynamodb)
        .map_err(|e| BenchError::Io(format!("the batch does not decode: {e}")))?;
    let records: Vec<Value> = event.records.iter().map(|r| writer.write(r)).collect();
    Ok(json!({ "Records": records }).to_string().into_bytes())
}

/// One Kinesis invocation, from the event's bytes to the response: its wall time and requests.
async fn invoke_kinesis<F: StreamFunction>(
    runtime: &Runtime<F>,
    bytes: &[u8],
) -> Result<(Duration, u64), BenchError> {
    let started = Instant::now();
    let failed = |message: String| BenchError::Invocation { function: F::NAME, message };
    let event: Value = serde_json::from_slice(bytes).map_err(|e| failed(e.to_string()))?;
    let batch = stream_runtime::kinesis::from_value(&event).map_err(|e| failed(e.to_string()))?;
    let (response, metrics) =
        runtime.handle_counted(batch.event, Deadline::after(Duration::from_secs(900))).await;
    let response = batch.places.response(response.map_err(|e| failed(e.to_string()))?);
    let wall = started.elapsed();
    if !response.batch_item_failures.is_empty() {
        return Err(failed("stopped at a checkpoint without faults injected".to_owned()));
    }
    Ok((wall, metrics.get(Metric::Requests)))
}
