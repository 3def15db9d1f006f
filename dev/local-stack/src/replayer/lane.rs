//! One function's mapping on one stream: its shards, each a [`Mapping`] per parallel batch, and
//! how an invocation is made, with the Lambda-side faults of [`crate::replayer::faults`] injected.
//!
//! Shards of one generation are delivered concurrently, and so are a shard's parallel batches
//! (`ParallelizationFactor`); a generation starts only when the one before it has been delivered,
//! so a child shard never runs ahead of its parent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use aws_lambda_events::event::dynamodb::EventRecord;
use futures_util::future::try_join_all;

use crate::replayer::failures::{FailureLog, KinesisRange, Origin};
use crate::replayer::faults::{Fault, LambdaFaults};
use crate::replayer::lambda_metrics::{self, MetricSink};
use crate::replayer::pipeline::{Counts, Progress, Source};
use crate::replayer::{Invocation, Mapping, ReplayError, Step};
use stream_runtime::delivery::{Invoker, event};

/// A mapping's shards and what it has done.
pub(crate) struct Lane {
    pub(crate) source: Source,
    shards: Vec<ShardLane>,
    /// Reading and filtering, and what finished shard lanes did; each running shard lane counts
    /// its own deliveries.
    pub(crate) counts: Counts,
    /// Seeds each shard lane's draws of faults.
    rng: fastrand::Rng,
}

/// One shard's records for one of its parallel batches.
struct ShardLane {
    /// The shard as the stream names it (for the failure log).
    shard_id: String,
    /// The shard as the topology places it (generation and number), and which parallel batch.
    place: (u32, u32, u8),
    mapping: Mapping,
    counts: Counts,
    rng: fastrand::Rng,
}

/// Where a record goes: its stream shard, its place in the topology, and its item key's hash.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place<'a> {
    pub(crate) shard_id: &'a str,
    pub(crate) generation: u32,
    pub(crate) shard: u32,
    pub(crate) key_hash: u64,
}

/// What a lane needs from the pipeline while it delivers.
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) arn: &'a str,
    pub(crate) failures: &'a FailureLog,
    pub(crate) progress: &'a Progress,
    pub(crate) faults: &'a LambdaFaults,
    pub(crate) metrics: Option<&'a MetricSink>,
}

impl Lane {
    pub(crate) fn new(source: Source, seed: u64) -> Lane {
        let salt = crate::replayer::faults::hash(source.function.as_bytes());
        Lane {
            source,
            shards: Vec::new(),
            counts: Counts::default(),
            rng: fastrand::Rng::with_seed(seed ^ salt),
        }
    }

    /// Seeds the draws of the shard lanes created from now on.
    pub(crate) fn reseed(&mut self, seed: u64) {
        let salt = crate::replayer::faults::hash(self.source.function.as_bytes());
        self.rng = fastrand::Rng::with_seed(seed ^ salt);
    }

    /// Everything this lane has done.
    pub(crate) fn counts(&self) -> Counts {
        self.shards.iter().fold(self.counts, |sum, shard| sum + shard.counts)
    }

    /// Queues a record that passed the filters.
    pub(crate) fn push(&mut self, place: Place<'_>, record: EventRecord) {
        let factor = u64::from(self.source.settings.parallelization_factor.max(1));
        let batch = u8::try_from(place.key_hash % factor).unwrap_or(0);
        let at = (place.generation, place.shard, batch);
        let found = self.shards.iter().position(|s| s.place == at && s.shard_id == place.shard_id);
        let index = found.unwrap_or_else(|| {
            self.counts.lanes += 1;
            self.shards.push(ShardLane {
                shard_id: place.shard_id.to_owned(),
                place: at,
                mapping: Mapping::new(self.source.settings),
                counts: Counts::default(),
                rng: fastrand::Rng::with_seed(self.rng.u64(..)),
            });
            self.shards.len() - 1
        });
        self.shards[index].mapping.push([record]);
    }

    /// Delivers every waiting record: generation by generation, the shards and parallel batches
    /// of each at once. Lanes with nothing left are dropped.
    pub(crate) async fn drain(&mut self, context: Context<'_>) -> Result<(), ReplayError> {
        let mut generations: Vec<u32> =
            self.shards.iter().filter(|s| !s.mapping.is_idle()).map(|s| s.place.0).collect();
        generations.sort_unstable();
        generations.dedup();
        for generation in generations {
            let source = &self.source;
            try_join_all(
                self.shards.iter_mut().filter(|s| s.place.0 == generation).map(|s| s.drain(source, context)),
            )
            .await?;
        }
        // A shard lane that is done keeps only its counts.
        let done = self.shards.iter().filter(|s| s.mapping.is_idle());
        let finished = done.fold(Counts::default(), |sum, s| sum + s.counts);
        self.counts = self.counts + finished;
        self.shards.retain(|s| !s.mapping.is_idle());
        Ok(())
    }
}

impl ShardLane {
    async fn drain(&mut self, source: &Source, context: Context<'_>) -> Result<(), ReplayError> {
        let function = source.function.as_str();
        while let Some(batch) = self.mapping.next_batch() {
            let records = batch.len();
            self.counts.invocations += 1;
            context.progress.invocations.fetch_add(1, Ordering::Relaxed);
            let fault = context.faults.draw(&mut self.rng);
            // The age of the batch's last record as the invocation starts (Lambda's IteratorAge).
            let newest = batch.last().map(|r| r.change.approximate_creation_date_time);
            let (started, started_at) = (Instant::now(), SystemTime::now());
            let invocation = invoke(source, batch, fault, &mut self.counts).await;
            if let Some(sink) = context.metrics {
                report(sink, source, newest, (started, started_at), &invocation);
            }
            match self.mapping.complete(&invocation) {
                Step::Checkpointed { records, ignored_failures } => {
                    self.delivered(records, context.progress);
                    if ignored_failures > 0 {
                        self.counts.ignored_failures += ignored_failures as u64;
                        tracing::warn!(
                            function,
                            ignored_failures,
                            "the function reported batchItemFailures, but its mapping lacks ReportBatchItemFailures: Lambda treats the batch as a success and those records are not retried"
                        );
                    }
                }
                Step::Retrying { checkpointed, records: retried, retry, reason } => {
                    self.delivered(checkpointed, context.progress);
                    self.counts.retries += 1;
                    tracing::warn!(function, records = retried, retry, reason, "retrying");
                    backoff(retry).await;
                }
                Step::Bisected { halves, retry, reason } => {
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
                        failure_log = %context.failures.path().display(),
                        "giving up on records after MaximumRetryAttempts; their range is in the failure log"
                    );
                    // A Kinesis mapping's range as the Kinesis stream holds it.
                    let kinesis = source.kinesis.as_deref().and_then(|arn| {
                        let stream = crate::replayer::kinesis::delivery::Stream::registered(arn)?;
                        Some(KinesisRange {
                            stream_arn: arn.to_owned(),
                            records: stream.kinesis_records(&range.records),
                        })
                    });
                    let origin = Origin {
                        function_arn: &source.function_arn,
                        mapping_uuid: &source.mapping_uuid,
                        stream_arn: context.arn,
                        shard_id: &self.shard_id,
                        kinesis: kinesis.as_ref(),
                    };
                    context.failures.record(&range, origin, SystemTime::now()).await?;
                    if let Some(sink) = context.metrics {
                        let (uuid, n, at) =
                            (&source.mapping_uuid, range.batch_size as u64, SystemTime::now());
                        sink(vec![
                            lambda_metrics::events(uuid, "DroppedEventCount", n, at),
                            lambda_metrics::events(uuid, "OnFailureDestinationDeliveredEventCount", n, at),
                        ]);
                    }
                }
            }
        }
        Ok(())
    }

    fn delivered(&mut self, records: usize, progress: &Progress) {
        self.counts.delivered += records as u64;
        add(&progress.delivered, records);
    }
}

/// What Lambda publishes about one invocation (`AWS/Lambda`): `newest` is the creation time of
/// the batch's last record, whose age as the invocation started is the iterator age.
fn report(
    sink: &MetricSink,
    source: &Source,
    newest: Option<chrono::DateTime<chrono::Utc>>,
    (started, started_at): (Instant, SystemTime),
    invocation: &Invocation,
) {
    let age = newest.map_or(0, |created| {
        (chrono::DateTime::<chrono::Utc>::from(started_at) - created).num_milliseconds().max(0)
    });
    #[allow(clippy::cast_precision_loss, reason = "an age in milliseconds is far below 2^52")]
    sink(lambda_metrics::invocation(
        source.function_name(),
        matches!(invocation, Invocation::Failed { .. }),
        started.elapsed().as_secs_f64() * 1000.0,
        age as f64,
        started_at,
    ));
}

fn add(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Ordering::Relaxed);
}

/// Invokes `source`'s function with `records`, suffering `fault`, as Lambda would: with the
/// function's timeout as its deadline, cut off there.
async fn invoke(source: &Source, records: Vec<EventRecord>, fault: Fault, counts: &mut Counts) -> Invocation {
    let invoker = &source.invoker;
    match fault {
        Fault::None => call(invoker, records, source.timeout, counts).await,
        Fault::Kill(after) => {
            counts.kills += 1;
            let deadline = Instant::now() + source.timeout;
            // Dropping the invocation's future stops it where it is, as a killed process stops:
            // its requests in flight may or may not have been applied.
            let _ = tokio::time::timeout(after, invoker(event(records), deadline)).await;
            Invocation::Failed {
                error_type: "Runtime.ExitError".into(),
                message: format!(
                    "the function's process was killed {after:?} into the invocation (injected)"
                ),
            }
        }
        Fault::Timeout(limit) => {
            counts.short_timeouts += 1;
            call(invoker, records, limit.min(source.timeout), counts).await
        }
        Fault::Duplicate => {
            counts.duplicates += 1;
            // The first answer is lost, as when Lambda invokes again with the same batch.
            let _ = call(invoker, records.clone(), source.timeout, counts).await;
            call(invoker, records, source.timeout, counts).await
        }
    }
}

/// One invocation with `timeout`, cut off at its deadline.
async fn call(
    invoker: &Invoker,
    records: Vec<EventRecord>,
    timeout: Duration,
    counts: &mut Counts,
) -> Invocation {
    let deadline = Instant::now() + timeout;
    if let Ok(invocation) = tokio::time::timeout(timeout, invoker(event(records), deadline)).await {
        return invocation;
    }
    counts.timed_out += 1;
    Invocation::Failed {
        error_type: "Sandbox.Timedout".into(),
        message: format!("Task timed out after {:.2} seconds", timeout.as_secs_f64()),
    }
}

/// A pause before retry `retry`, growing from 20 ms to 1 s.
async fn backoff(retry: u32) {
    let millis = 20_u64.saturating_mul(1 << retry.min(6)).min(1000);
    tokio::time::sleep(Duration::from_millis(millis)).await;
}
