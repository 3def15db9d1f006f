//! The replay loop: for each stream, sweep expired items, read new records, filter them for each
//! function's mapping and deliver them in batches until every mapping has caught up.
//!
//! Streams are replayed concurrently, and so are the mappings of one stream (as Lambda runs one
//! mapping per function and stream); within a mapping each shard's records go strictly in order,
//! one invocation at a time.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::FutureExt as _;
use futures_util::future::try_join_all;
use sam_template::Pattern;

use crate::failures::{FailureLog, Origin, entry};
use crate::invoke::{Invoker, event};
use crate::reader::{StreamReader, record_json};
use crate::sweeper::Sweeper;
use crate::{Mapping, ReplayError, Settings, Step};

/// How often [`Pipeline::run_until`] sweeps expired items.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// One function's event source mapping on one stream.
pub struct Source {
    /// The function's name, for logs and the failure log.
    pub function: String,
    /// The stream's ARN on the emulator.
    pub stream_arn: String,
    /// Batching and retry settings.
    pub settings: Settings,
    /// `FilterCriteria`: a record goes to the function if any pattern matches (or there are
    /// none).
    pub filters: Vec<Pattern>,
    /// How to invoke the function.
    pub invoker: Invoker,
}

/// What one mapping has done so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Records read from the stream.
    pub read: u64,
    /// Records the filters left out (checkpointed without an invocation).
    pub filtered_out: u64,
    /// Records the function processed (checkpointed after an invocation).
    pub delivered: u64,
    /// Invocations.
    pub invocations: u64,
    /// Retries of a batch or of its rest.
    pub retries: u64,
    /// Batches split in two.
    pub bisections: u64,
    /// Records given up on (written to the failure log).
    pub given_up: u64,
    /// Failures reported but ignored, because the mapping lacks `ReportBatchItemFailures`.
    pub ignored_failures: u64,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} records read, {} left out by the filters, {} delivered in {} invocations ({} retries, {} bisections, {} given up)",
            self.read,
            self.filtered_out,
            self.delivered,
            self.invocations,
            self.retries,
            self.bisections,
            self.given_up
        )?;
        if self.ignored_failures > 0 {
            write!(f, ", {} reported failures ignored", self.ignored_failures)?;
        }
        Ok(())
    }
}

/// Running totals across all mappings, readable while the pipeline runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Records read from streams.
    pub read: AtomicU64,
    /// Records processed by functions.
    pub delivered: AtomicU64,
    /// Invocations.
    pub invocations: AtomicU64,
    /// Items deleted by TTL sweeps.
    pub swept: AtomicU64,
}

/// Every stream and mapping being replayed.
pub struct Pipeline {
    streams: Vec<Stream>,
    failures: FailureLog,
    progress: Arc<Progress>,
}

struct Stream {
    reader: StreamReader,
    sweeper: Option<Sweeper>,
    lanes: Vec<Lane>,
}

struct Lane {
    source: Source,
    shards: Vec<(String, Mapping)>,
    counts: Counts,
}

impl Pipeline {
    /// A pipeline over `sources`, reading streams with `client`; each sweeper expires the items
    /// of the table whose stream has the ARN paired with it. Given-up ranges go to `failures`.
    pub fn new(
        client: &aws_sdk_dynamodbstreams::Client,
        sources: Vec<Source>,
        sweepers: Vec<(String, Sweeper)>,
        failures: FailureLog,
    ) -> Pipeline {
        let mut streams: Vec<Stream> = Vec::new();
        for source in sources {
            let lane = Lane {
                source,
                shards: Vec::new(),
                counts: Counts::default(),
            };
            match streams
                .iter_mut()
                .find(|s| s.reader.arn() == lane.source.stream_arn)
            {
                Some(stream) => stream.lanes.push(lane),
                None => streams.push(Stream {
                    reader: StreamReader::new(client.clone(), lane.source.stream_arn.clone()),
                    sweeper: None,
                    lanes: vec![lane],
                }),
            }
        }
        for (arn, sweeper) in sweepers {
            match streams.iter_mut().find(|s| s.reader.arn() == arn) {
                Some(stream) => stream.sweeper = Some(sweeper),
                None => streams.push(Stream {
                    reader: StreamReader::new(client.clone(), arn),
                    sweeper: Some(sweeper),
                    lanes: Vec::new(),
                }),
            }
        }
        Pipeline {
            streams,
            failures,
            progress: Arc::default(),
        }
    }

    /// Running totals, to show progress from another task.
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// Each mapping's counts, by function name.
    pub fn counts(&self) -> Vec<(&str, Counts)> {
        self.streams
            .iter()
            .flat_map(|s| &s.lanes)
            .map(|l| (l.source.function.as_str(), l.counts))
            .collect()
    }

    /// One round: every stream swept, read and delivered until its mappings are idle. Whether
    /// anything happened (an item swept or a record read).
    pub async fn step(&mut self) -> Result<bool, ReplayError> {
        self.round(true).await
    }

    /// One round, sweeping expired items first when `sweep`.
    async fn round(&mut self, sweep: bool) -> Result<bool, ReplayError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let (failures, progress) = (&self.failures, &*self.progress);
        let moved = try_join_all(
            self.streams
                .iter_mut()
                .map(|s| s.step(now, sweep, failures, progress)),
        )
        .await?;
        Ok(moved.into_iter().any(|m| m))
    }

    /// Rounds until one finds nothing to do: everything written so far has been delivered, and
    /// everything expired so far swept and delivered.
    pub async fn settle(&mut self) -> Result<(), ReplayError> {
        while self.step().await? {}
        Ok(())
    }

    /// Rounds until `stop` completes, pausing `idle` whenever a round found nothing, and sweeping
    /// expired items at most once a second; then settles (sweeping every round).
    pub async fn run_until(
        &mut self,
        stop: impl Future<Output = ()>,
        idle: Duration,
    ) -> Result<(), ReplayError> {
        let mut stop = std::pin::pin!(stop.fuse());
        let mut last_sweep: Option<Instant> = None;
        loop {
            // A sweep scans whole tables: at most once per SWEEP_EVERY while running.
            let sweep = last_sweep.is_none_or(|at| at.elapsed() >= SWEEP_EVERY);
            if sweep {
                last_sweep = Some(Instant::now());
            }
            let moved = self.round(sweep).await?;
            if (&mut stop).now_or_never().is_some() {
                break;
            }
            if !moved {
                tokio::select! {
                    () = &mut stop => break,
                    () = tokio::time::sleep(idle) => {}
                }
            }
        }
        self.settle().await
    }
}

impl Stream {
    async fn step(
        &mut self,
        now: i64,
        sweep: bool,
        failures: &FailureLog,
        progress: &Progress,
    ) -> Result<bool, ReplayError> {
        let mut swept = 0;
        if let Some(sweeper) = self.sweeper.as_mut().filter(|_| sweep) {
            swept = sweeper.sweep(now).await?;
            if swept > 0 {
                tracing::info!(
                    table = sweeper.table(),
                    items = swept,
                    "TTL sweep deleted expired items"
                );
            }
            progress.swept.fetch_add(swept as u64, Ordering::Relaxed);
        }
        let mut records = self.reader.poll().await?;
        if let Some(sweeper) = &mut self.sweeper {
            for (_, record) in &mut records {
                sweeper.deletes().mark(record);
            }
        }
        progress.read.fetch_add(records.len() as u64, Ordering::Relaxed);
        for (shard, record) in &records {
            let json = record_json(record);
            for lane in &mut self.lanes {
                lane.counts.read += 1;
                let source = &lane.source;
                if source.filters.is_empty() || source.filters.iter().any(|p| p.matches(&json)) {
                    lane.mapping(shard).push([record.clone()]);
                } else {
                    lane.counts.filtered_out += 1;
                }
            }
        }
        let arn = self.reader.arn();
        try_join_all(self.lanes.iter_mut().map(|l| l.drain(arn, failures, progress))).await?;
        Ok(swept > 0 || !records.is_empty())
    }
}

impl Lane {
    fn mapping(&mut self, shard: &str) -> &mut Mapping {
        if let Some(at) = self.shards.iter().position(|(id, _)| id == shard) {
            return &mut self.shards[at].1;
        }
        self.shards
            .push((shard.to_owned(), Mapping::new(self.source.settings)));
        let (_, mapping) = self.shards.last_mut().expect("just pushed");
        mapping
    }

    /// Delivers every waiting record, shard by shard.
    async fn drain(
        &mut self,
        arn: &str,
        failures: &FailureLog,
        progress: &Progress,
    ) -> Result<(), ReplayError> {
        let function = self.source.function.as_str();
        for (shard, mapping) in &mut self.shards {
            while let Some(batch) = mapping.next_batch() {
                let records = batch.len();
                self.counts.invocations += 1;
                progress.invocations.fetch_add(1, Ordering::Relaxed);
                let invocation = (self.source.invoker)(event(batch)).await;
                match mapping.complete(&invocation) {
                    Step::Checkpointed {
                        records,
                        ignored_failures,
                    } => {
                        self.counts.delivered += records as u64;
                        progress.delivered.fetch_add(records as u64, Ordering::Relaxed);
                        if ignored_failures > 0 {
                            self.counts.ignored_failures += ignored_failures as u64;
                            tracing::warn!(
                                function,
                                ignored_failures,
                                "the function reported batchItemFailures, but its mapping lacks ReportBatchItemFailures: Lambda treats the batch as a success and those records are not retried"
                            );
                        }
                    }
                    Step::Retrying {
                        checkpointed,
                        records: retried,
                        retry,
                        reason,
                    } => {
                        self.counts.delivered += checkpointed as u64;
                        progress
                            .delivered
                            .fetch_add(checkpointed as u64, Ordering::Relaxed);
                        self.counts.retries += 1;
                        tracing::warn!(function, records = retried, retry, reason, "retrying");
                        backoff(retry).await;
                    }
                    Step::Bisected {
                        halves,
                        retry,
                        reason,
                    } => {
                        self.counts.bisections += 1;
                        tracing::warn!(
                            function,
                            records,
                            first = halves.0,
                            second = halves.1,
                            retry,
                            reason,
                            "bisecting the batch"
                        );
                        backoff(retry).await;
                    }
                    Step::GaveUp(range) => {
                        self.counts.given_up += range.batch_size as u64;
                        tracing::error!(
                            function,
                            records = range.batch_size,
                            start = range.start_sequence_number,
                            end = range.end_sequence_number,
                            reason = range.reason,
                            failure_log = %failures.path().display(),
                            "giving up on records after MaximumRetryAttempts; their range is in the failure log"
                        );
                        let origin = Origin {
                            function,
                            stream_arn: arn,
                            shard_id: shard,
                        };
                        failures.append(&entry(&range, origin, SystemTime::now()))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A pause before retry `retry`, growing from 20 ms to 1 s.
async fn backoff(retry: u32) {
    let millis = 20_u64.saturating_mul(1 << retry.min(6)).min(1000);
    tokio::time::sleep(Duration::from_millis(millis)).await;
}
