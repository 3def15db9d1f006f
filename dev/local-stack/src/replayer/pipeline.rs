//! The replay loop: for each stream, sweep expired items, read new records, filter them for each
//! function's mapping and deliver them in batches until every mapping has caught up.
//!
//! Streams are replayed concurrently, and so are the mappings of one stream (as Lambda runs one
//! mapping per function and stream); within a mapping, shards and parallel batches go at once
//! and each item's records strictly in order (see [`crate::replayer::lane`]).
//!
//! Lambda-side faults ([`LambdaFaults`]) and a split shard topology ([`Topology`]) are opt-in.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::template::Pattern;
use futures_util::FutureExt as _;
use futures_util::future::try_join_all;

use crate::replayer::failures::FailureLog;
use crate::replayer::faults::{LambdaFaults, Topology, hash};
use crate::replayer::lambda_metrics::{self, MetricSink};
use crate::replayer::lane::{Context, Lane, Place};
use crate::replayer::sweeper::Sweeper;
use crate::replayer::{ReplayError, Settings};
use stream_runtime::delivery::Invoker;
use stream_runtime::delivery::reader::{StreamReader, record_json};

/// How often [`Pipeline::run_until`] sweeps expired items.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// One function's event source mapping on one stream.
pub struct Source {
    /// The function's name (its binary's), for logs and counts.
    pub function: String,
    /// The function's ARN as deployed (`…:function:<stack>-<LogicalId>-<suffix>`, as
    /// CloudFormation names a function without a `FunctionName`), for the failure log.
    pub function_arn: String,
    /// The stream's ARN on the emulator.
    pub stream_arn: String,
    /// Batching and retry settings.
    pub settings: Settings,
    /// `FilterCriteria`: a record goes to the function if any pattern matches (or there are
    /// none).
    pub filters: Vec<Pattern>,
    /// How to invoke the function.
    pub invoker: Invoker,
    /// The function's `Timeout`: each invocation's deadline is this far from its start.
    pub timeout: Duration,
    /// The mapping's UUID, as its `AWS/Lambda` event counts and its S3 on-failure objects name
    /// it.
    pub mapping_uuid: String,
    /// The Kinesis data stream's ARN when the mapping reads the table's changes from one (the
    /// replayer reads them from the table's DynamoDB stream and delivers them as Kinesis would):
    /// a range given up is then reported as Lambda reports a Kinesis mapping's.
    pub kinesis: Option<String>,
    /// `StartingPosition: LATEST`: the mapping reads only the records written after it was
    /// created (here, after the pipeline first read the stream), and never the ones before.
    pub latest: bool,
}

impl Source {
    /// The function's name: its ARN's last part, as `AWS_LAMBDA_FUNCTION_NAME` and the
    /// `FunctionName` dimension give it.
    pub fn function_name(&self) -> &str {
        self.function_arn.rsplit(':').next().unwrap_or(&self.function_arn)
    }
}

/// What one mapping has done so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Records read from the stream.
    pub read: u64,
    /// Records written before a `LATEST` mapping was created: never read by it.
    pub passed_over: u64,
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
    /// Lanes of delivery opened: one per shard and parallel batch (`ParallelizationFactor`),
    /// while it has records.
    pub lanes: u64,
    /// Invocations cut off at their deadline (`Sandbox.Timedout`).
    pub timed_out: u64,
    /// Injected: processes killed mid-batch.
    pub kills: u64,
    /// Injected: invocations given a short timeout.
    pub short_timeouts: u64,
    /// Injected: batches delivered twice.
    pub duplicates: u64,
}

impl std::ops::Add for Counts {
    type Output = Counts;

    fn add(self, other: Counts) -> Counts {
        /// Each field of the two, summed.
        macro_rules! summed {
            ($($field:ident),*) => { Counts { $($field: self.$field + other.$field),* } };
        }
        summed! {
            read, passed_over, filtered_out, delivered, invocations, retries, bisections, given_up, ignored_failures,
            lanes, timed_out, kills, short_timeouts, duplicates
        }
    }
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
        if self.passed_over > 0 {
            write!(f, ", {} written before the LATEST mapping passed over", self.passed_over)?;
        }
        if self.ignored_failures > 0 {
            write!(f, ", {} reported failures ignored", self.ignored_failures)?;
        }
        if self.timed_out > 0 {
            write!(f, ", {} timed out", self.timed_out)?;
        }
        if self.kills + self.short_timeouts + self.duplicates > 0 {
            write!(
                f,
                "; injected: {} kills, {} short timeouts, {} duplicate deliveries",
                self.kills, self.short_timeouts, self.duplicates
            )?;
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
    faults: LambdaFaults,
    metrics: Option<MetricSink>,
    /// Where [`Pipeline::run_until`] writes when it last caught up ([`Pipeline::writing_settled`]).
    settled: Option<std::path::PathBuf>,
    /// The functions' roles, watched for a refused call while the pipeline settles or runs.
    watch: Option<crate::iam::Watch>,
}

struct Stream {
    reader: StreamReader,
    sweeper: Option<Sweeper>,
    lanes: Vec<Lane>,
    topology: Topology,
    /// Records read so far, which places the next one in the topology.
    seen: u64,
    /// Where each shard ended when the stream was first read (its last sequence number), for
    /// its `LATEST` mappings: `None` until then.
    created_at: Option<Vec<(String, String)>>,
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
            let lane = Lane::new(source, 0);
            match streams.iter_mut().find(|s| s.reader.arn() == lane.source.stream_arn) {
                Some(stream) => stream.lanes.push(lane),
                None => streams.push(Stream {
                    reader: StreamReader::new(client.clone(), lane.source.stream_arn.clone()),
                    sweeper: None,
                    lanes: vec![lane],
                    topology: Topology::default(),
                    seen: 0,
                    created_at: None,
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
                    topology: Topology::default(),
                    seen: 0,
                    created_at: None,
                }),
            }
        }
        Pipeline {
            streams,
            failures,
            progress: Arc::default(),
            faults: LambdaFaults::NONE,
            metrics: None,
            settled: None,
            watch: None,
        }
    }

    /// Hands what Lambda would publish about the invocations (`AWS/Lambda`: each function's
    /// invocations, errors, duration and iterator age; each mapping's event counts) to `sink`.
    #[must_use]
    pub fn with_metrics(mut self, sink: MetricSink) -> Pipeline {
        self.metrics = Some(sink);
        self
    }

    /// While [`Pipeline::run_until`] runs, each time a round that swept finds nothing to do, the
    /// time it began (milliseconds since the epoch) is written to `file`: everything written to
    /// the tables before then, and everything expired by then, has been delivered. Another
    /// process waits on it ([`wait_settled`]).
    #[must_use]
    pub fn writing_settled(mut self, file: std::path::PathBuf) -> Pipeline {
        // Its folder made now; a failure shows at the first write, which names the file.
        if let Some(folder) = file.parent() {
            let _ = std::fs::create_dir_all(folder);
        }
        self.settled = Some(file);
        self
    }

    /// Stops [`Pipeline::settle`] and [`Pipeline::run_until`] with [`ReplayError::Refused`] as
    /// soon as `watch` reports a refused call.
    #[must_use]
    pub fn watching(mut self, watch: crate::iam::Watch) -> Pipeline {
        self.watch = Some(watch);
        self
    }

    /// Injects `faults` into the invocations from now on.
    #[must_use]
    pub(crate) fn with_faults(mut self, faults: LambdaFaults) -> Pipeline {
        self.faults = faults;
        for stream in &mut self.streams {
            for lane in &mut stream.lanes {
                lane.reseed(faults.seed);
            }
        }
        self
    }

    /// Emulates no TTL: no table is swept for expired items. For a scenario with nothing to
    /// expire on a table large enough that a sweep's whole-table scan would be most of the work.
    #[must_use]
    pub fn without_ttl_sweeps(mut self) -> Pipeline {
        for stream in &mut self.streams {
            stream.sweeper = None;
        }
        self
    }

    /// Lays `topology` over every stream's shards (before the first round).
    #[must_use]
    pub fn with_topology(mut self, topology: Topology) -> Pipeline {
        for stream in &mut self.streams {
            stream.topology = topology;
        }
        self
    }

    /// Places every stream's reading at its end, as a mapping created with `StartingPosition:
    /// LATEST` begins: the records written so far are read and passed over (their TTLs still
    /// observed by the sweepers), never delivered. How many were passed over.
    pub async fn starting_at_latest(&mut self) -> Result<u64, ReplayError> {
        let mut passed = 0;
        for stream in &mut self.streams {
            loop {
                let records = stream.reader.poll().await?;
                if records.is_empty() {
                    break;
                }
                if let Some(sweeper) = &mut stream.sweeper {
                    for (_, record) in &records {
                        sweeper.observe(record);
                    }
                }
                passed += records.len() as u64;
            }
        }
        Ok(passed)
    }

    /// Running totals, to show progress from another task.
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// Empty pages the streams answered, summed over every stream read: the readers read
    /// through them.
    pub fn empty_pages(&self) -> u64 {
        self.streams.iter().map(|s| s.reader.empty_pages()).sum()
    }

    /// Each mapping's counts, by function name.
    pub fn counts(&self) -> Vec<(&str, Counts)> {
        self.streams.iter().flat_map(|s| &s.lanes).map(|l| (l.source.function.as_str(), l.counts())).collect()
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
        let context = Context {
            arn: "",
            failures: &self.failures,
            progress: &self.progress,
            faults: &self.faults,
            metrics: self.metrics.as_ref(),
        };
        let moved = try_join_all(self.streams.iter_mut().map(|s| s.step(now, sweep, context))).await?;
        Ok(moved.into_iter().any(|m| m))
    }

    /// Rounds until one finds nothing to do: everything written so far has been delivered, and
    /// everything expired so far swept and delivered.
    pub async fn settle(&mut self) -> Result<(), ReplayError> {
        let watch = self.watch.clone();
        watched(watch.as_ref(), self.settle_unwatched()).await
    }

    async fn settle_unwatched(&mut self) -> Result<(), ReplayError> {
        while self.step().await? {}
        Ok(())
    }

    /// Replays in a background task, as [`Pipeline::run_until`] does, until
    /// [`Running::finish`].
    pub fn spawn(self, idle: Duration) -> Running {
        let stop = Arc::new(tokio::sync::Notify::new());
        let stopped = Arc::clone(&stop);
        let mut pipeline = self;
        let task = tokio::spawn(async move {
            pipeline.run_until(stopped.notified_owned(), idle).await.map(|()| pipeline)
        });
        Running { stop, task }
    }

    /// Rounds until `stop` completes, pausing `idle` whenever a round found nothing, and sweeping
    /// expired items at most once a second; then settles (sweeping every round).
    pub async fn run_until(
        &mut self,
        stop: impl Future<Output = ()>,
        idle: Duration,
    ) -> Result<(), ReplayError> {
        let watch = self.watch.clone();
        watched(watch.as_ref(), self.run_until_unwatched(stop, idle)).await
    }

    async fn run_until_unwatched(
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
            let began = SystemTime::now();
            let moved = self.round(sweep).await?;
            if sweep
                && !moved
                && let Some(file) = &self.settled
            {
                let ms = began.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
                std::fs::write(file, ms.to_string())
                    .map_err(|e| ReplayError::Settled(format!("cannot write {}: {e}", file.display())))?;
            }
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
        self.settle_unwatched().await
    }
}

/// `work`, stopped with the first refused call `watch` reports.
async fn watched<T>(
    watch: Option<&crate::iam::Watch>,
    work: impl Future<Output = Result<T, ReplayError>>,
) -> Result<T, ReplayError> {
    match watch {
        None => work.await,
        Some(watch) => tokio::select! {
            done = work => done,
            refused = watch.refused() => Err(refused),
        },
    }
}

/// Waits until the pipeline writing `file` ([`Pipeline::writing_settled`]) has caught up with
/// everything written before this call, polling every 100 ms for at most `limit`.
pub async fn wait_settled(file: &std::path::Path, limit: Duration) -> Result<(), ReplayError> {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let until = Instant::now() + limit;
    loop {
        let at = std::fs::read_to_string(file).ok().and_then(|t| t.trim().parse::<u128>().ok());
        if at.is_some_and(|at| at >= since) {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(ReplayError::Settled(format!(
                "the local stack has not caught up in {} s: is `sidestream-local run` running, writing {}?",
                limit.as_secs(),
                file.display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A pipeline replaying in a background task.
pub struct Running {
    stop: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<Result<Pipeline, ReplayError>>,
}

impl Running {
    /// Stops the replay where it is, as deleting a mapping does: an invocation in flight is cut
    /// off (its writes sent so far may land, a held one later), and what was read but not
    /// delivered never is.
    pub fn abandon(self) {
        self.task.abort();
    }

    /// Stops the replay once everything written so far has been delivered (everything expired
    /// swept and delivered too), and gives the pipeline back.
    pub async fn finish(self) -> Result<Pipeline, ReplayError> {
        // A permit is stored if the task is not waiting yet, so the stop is never missed.
        self.stop.notify_one();
        self.task
            .await
            .map_err(|e| ReplayError::unexpected("the replayer", format!("its task failed: {e}")))?
    }
}

impl Stream {
    /// One round of this stream, delivering in `context` (its `arn` set here).
    async fn step(&mut self, now: i64, sweep: bool, context: Context<'_>) -> Result<bool, ReplayError> {
        let progress = context.progress;
        let mut swept = 0;
        if let Some(sweeper) = self.sweeper.as_mut().filter(|_| sweep) {
            swept = sweeper.sweep(now).await?;
            if swept > 0 {
                tracing::info!(table = sweeper.table(), items = swept, "TTL sweep deleted expired items");
            }
            progress.swept.fetch_add(swept as u64, Ordering::Relaxed);
        }
        if self.created_at.is_none() && self.lanes.iter().any(|l| l.source.latest) {
            self.created_at = Some(self.reader.ends().await?);
        }
        let records = self.reader.poll().await?;
        if let Some(sweeper) = &mut self.sweeper {
            for (_, record) in &records {
                sweeper.observe(record);
            }
        }
        progress.read.fetch_add(records.len() as u64, Ordering::Relaxed);
        let before: Vec<Counts> = self.lanes.iter().map(|l| l.counts).collect();
        for (shard, record) in &records {
            let json = record_json(record);
            // The item's key, as canonical JSON (ordered by attribute name).
            let key_hash = hash(json["dynamodb"]["Keys"].to_string().as_bytes());
            let (generation, number) = self.topology.place(self.seen, key_hash);
            self.seen += 1;
            let place = Place { shard_id: shard, generation, shard: number, key_hash };
            let sequence = json["dynamodb"]["SequenceNumber"].as_str().unwrap_or_default();
            let before_creation = self.created_at.as_ref().is_some_and(|ends| {
                ends.iter().any(|(id, last)| id == shard && !sequence_after(sequence, last))
            });
            for lane in &mut self.lanes {
                if lane.source.latest && before_creation {
                    lane.counts.passed_over += 1;
                    continue;
                }
                lane.counts.read += 1;
                let source = &lane.source;
                if source.filters.is_empty() || source.filters.iter().any(|p| p.matches(&json)) {
                    lane.push(place, record.clone());
                } else {
                    lane.counts.filtered_out += 1;
                }
            }
        }
        if let Some(sink) = context.metrics.filter(|_| !records.is_empty()) {
            let at = SystemTime::now();
            for (lane, before) in self.lanes.iter().zip(before) {
                let uuid = &lane.source.mapping_uuid;
                sink(vec![
                    lambda_metrics::events(uuid, "PolledEventCount", lane.counts.read - before.read, at),
                    lambda_metrics::events(
                        uuid,
                        "FilteredOutEventCount",
                        lane.counts.filtered_out - before.filtered_out,
                        at,
                    ),
                ]);
            }
        }
        let context = Context { arn: self.reader.arn(), ..context };
        try_join_all(self.lanes.iter_mut().map(|l| l.drain(context))).await?;
        Ok(swept > 0 || !records.is_empty())
    }
}

/// Whether the stream sequence number `a` comes after `b` in their shard: both are decimal
/// numbers of up to 40 digits, without leading zeros.
fn sequence_after(a: &str, b: &str) -> bool {
    (a.len(), a) > (b.len(), b)
}
