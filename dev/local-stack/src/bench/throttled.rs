//! Fixed and adaptive write windows against a write capacity: the proxy's sink serves so many
//! requests per second, each after the latency, and throttles the rest, as a DynamoDB partition
//! (about 1,000 WCU/s) or a provisioned table does. The sink, not moto: moto's own serial
//! throughput would be a second, hidden capacity. The indexer writes a 6 MB batch under each setting; a batch that
//! stops at a checkpoint (its retries used up) is delivered again from the checkpoint, as
//! Lambda would, until it finishes, and the whole time counts.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use multikey_indexer::Indexer;
use serde::Serialize;

use crate::bench::events::{self, Batch};
use crate::bench::{Bench, BenchError, Ground, deliver, invoke, ms};
use stream_runtime::StreamFunction as _;

/// One window setting.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// How the report names it.
    pub setting: String,
    /// `WRITE_CONCURRENCY`.
    pub start: usize,
    /// `WRITE_MAX_CONCURRENCY`.
    pub cap: usize,
    /// The sink's capacity, requests per second.
    pub capacity: u32,
    /// Records in the batch.
    pub records: usize,
    /// Until the batch finished, deliveries again included.
    pub wall_ms: f64,
    /// Records per second over that time.
    pub records_per_second: f64,
    /// Deliveries of the batch (1 when its first one finished).
    pub deliveries: u64,
    /// Requests, retries included.
    pub requests: u64,
    /// Retries among them.
    pub retries: u64,
    /// Requests the proxy throttled.
    pub throttled: u64,
}

/// The settings compared: the default start fixed, a larger fixed window, and the default
/// adaptive window.
pub(crate) const SETTINGS: [(&str, usize, usize); 3] =
    [("fixed 4", 4, 4), ("fixed 16", 16, 16), ("adaptive 4-16", 4, 16)];

/// Measures each of [`SETTINGS`] behind the sink at each of `options.capacities` (0: no limit).
pub async fn run(ground: Ground<'_>) -> Result<Vec<Row>, BenchError> {
    let Ground { sdk, endpoint, stack, options, progress, .. } = ground;
    let (n, event) = events::issues(Batch::Bytes(6_000_000), 11);
    let records = serde_json::from_slice::<aws_lambda_events::event::dynamodb::Event>(&event)
        .map_err(|e| BenchError::Io(e.to_string()))?
        .records;
    let mut rows = Vec::new();
    for &capacity in &options.capacities {
        let spec = format!("latency={}ms,capacity={capacity},sink=1", options.latency.as_millis());
        let bench = Bench::start(sdk, endpoint, stack, &spec).await?;
        for (setting, start, cap) in SETTINGS {
            let runtime = bench.runtime::<Indexer>(
                Indexer::NAME,
                &[("WRITE_CONCURRENCY", start.to_string()), ("WRITE_MAX_CONCURRENCY", cap.to_string())],
            )?;
            // Connections opened, and the bucket refilled, before the clock starts.
            invoke(&runtime, &events::issues(Batch::Records(10), 0).1).await?;
            tokio::time::sleep(Duration::from_millis(200)).await;
            let throttled_before = bench.proxy.counts.throttled.load(Ordering::Relaxed);
            let started = Instant::now();
            let samples = deliver(&runtime, records.clone(), 50).await?;
            let wall = started.elapsed();
            #[expect(clippy::cast_precision_loss, reason = "rates for people")]
            let records_per_second = n as f64 / wall.as_secs_f64().max(f64::EPSILON);
            rows.push(Row {
                setting: setting.to_owned(),
                start,
                cap,
                capacity,
                records: n,
                wall_ms: ms(wall),
                records_per_second,
                deliveries: samples.len() as u64,
                requests: samples.iter().map(|s| s.requests).sum(),
                retries: samples.iter().map(|s| s.retries).sum(),
                throttled: bench.proxy.counts.throttled.load(Ordering::Relaxed) - throttled_before,
            });
            progress.done.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(rows)
}
