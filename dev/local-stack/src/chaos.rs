//! chaos: Sidestream under every fault AWS and Lambda produce, checked end to end.
//!
//! [`run`] creates the stack of `template.yaml` on the emulator, starts the fault proxy between
//! the functions and the emulator (AWS faults on the wire), and a fault-free router for
//! everything else; with two emulators (two motos, one core each), the issues table and its
//! stream are held by the first and every other table and service by the second. It starts the replayer with Lambda-side
//! faults (killed processes, timeouts, batches delivered twice), several shards split parent to
//! children and `ParallelizationFactor` batches per shard. Concurrent writers then make a
//! generated workload ([`workload`]) while the three functions run in process. When every
//! stream has been replayed, independent oracles ([`check`]) compare what the functions kept
//! with what the workload calls for, and the [`Report`] says what was injected, what it cost,
//! and each oracle's verdict.
//!
//! While the workload is written, the [`operations`] phase runs what an operator would against
//! the live table (the scheduled verifier with repair, a backfill, replays of old records), and
//! the oracles check it too.
//!
//! The template's parameters choose the deployment: `Consumers=Combined` puts the indexer and
//! the archiver behind one mapping; `IssuesChangeSource` and `CounterChangeSource` = `Kinesis`
//! have the tables' changes read from emulated Kinesis data streams, out of order and twice
//! (`crate::replayer::kinesis::delivery`), and the report says how much ([`KinesisStream`]).
//! With [`Options::regions`] 2, a second stack in `eu-west-1` shares the issues and counter
//! tables with the first through an emulated global table (`crate::replayer::global`): the
//! workload writes in both Regions, and the oracles check both.
//!
//! - [`spec`]: the `--faults` spec, both halves.
//! - [`workload`]: the generated ops.
//! - [`operations`]: the operations phase.
//! - [`check`]: the oracles.
//! - [`lifecycle`]: one stack through a life (a backfill, an upgrade, source switches, a bulk
//!   edit), the same faults and oracles; `previous_release`, the indexer it upgrades from.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::replayer::global::{Replica, Replication, ReplicationCounts};
use crate::replayer::{Counts, FailureLog, Pipeline, Topology};
use aws_config::SdkConfig;
use formats::counter::Sharding;
use serde::Serialize;
use serde_json::Value;
use sharded_counter::Counters;
use stream_runtime::Metric;
use stream_runtime::delivery::StreamReader;

use crate::cloudwatch::Feed;
use crate::{Stack, tallied_invoker};
use counter_aggregator::Aggregator;
use sidestream_combined::MetricsTo;
use sidestream_combined::Tally;
use stream_runtime::StreamFunction as _;
use ttl_archiver::Archiver;

mod check;
pub mod lifecycle;
pub mod operations;
mod previous_release;
pub mod spec;
pub mod team;
pub mod workload;

pub use operations::Operations;

pub use spec::Faults;
pub use workload::{Op, generate};

/// Shards of each hot counter.
const COUNTER_SHARDS: u32 = 16;

/// The attempt timeout a chaos stack gives its functions (`ATTEMPT_TIMEOUT_MS`), so that a
/// stalled request costs a second, not the default ten.
const ATTEMPT_TIMEOUT_MS: &str = "1000";

/// How long a workload writer's request may wait for the emulator.
const WRITER_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(600);

/// A chaos run that could not be carried out (a difference found is not an error: it is in the
/// [`Report`]).
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// The `--faults` spec is unusable.
    #[error("{0}")]
    Spec(String),
    /// The stack could not be created or read.
    #[error(transparent)]
    Stack(#[from] crate::StackError),
    /// The replayer failed.
    #[error(transparent)]
    Replay(#[from] crate::replayer::ReplayError),
    /// A counter could not be written or read.
    #[error(transparent)]
    Counter(#[from] sharded_counter::CounterError),
    /// The archive could not be read.
    #[error(transparent)]
    Archive(#[from] ::operations::archive::ArchiveError),
    /// The fault proxy could not start.
    #[error("the fault proxy: {0}")]
    Proxy(std::io::Error),
    /// The environment names no emulator.
    #[error("{0}")]
    Endpoints(&'static str),
    /// More emulators than the run can split its tables over.
    #[error("{0} emulators: a chaos run splits its tables over one or two")]
    Emulators(usize),
    /// An oracle could not read what it checks.
    #[error("a check: {0}")]
    Check(String),
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Ops in the workload (each makes one stream record, or two for a counter increment).
    pub records: u64,
    /// Seeds the workload and the faults.
    pub seed: u64,
    /// The faults.
    pub faults: Faults,
    /// `ParallelizationFactor` of every mapping.
    pub parallelization: u8,
    /// Shards split after this many records of a stream (see [`Topology`]).
    pub split_every: Option<u64>,
    /// Concurrent workload writers.
    pub writers: usize,
    /// The template.
    pub template: PathBuf,
    /// The stack's name: its tables and bucket are named after it.
    pub stack: String,
    /// Template parameters (`BatchSize` …).
    pub parameters: BTreeMap<String, String>,
    /// Regions of a global table: 1, or 2 ([`REGIONS`]): the issues and counter tables
    /// replicated between two stacks (`crate::replayer::global`), deployed as
    /// docs/global-tables.md says (`Consumers=Combined`, the first Region archiving and summing,
    /// the counters' shards per Region).
    pub regions: u8,
    /// Whether the scheduled verifications during the run repair what they find (the default).
    /// Without repair, an exact end means the functions' own writes left the index right.
    pub repair: bool,
    /// The workload goes into a team's own single-table design ([`team`]): a table keyed
    /// `PK`/`SK` with its own names, made before the stack, which is deployed around it by
    /// parameters. One Region.
    pub team_table: bool,
}

/// The Regions of a two-Region run; the first archives and sums.
pub const REGIONS: [&str; 2] = ["us-east-1", "eu-west-1"];

/// How long after a write its replica in the other Region gets it.
const REPLICATION_DELAY: Duration = Duration::from_millis(200);

impl Options {
    /// `records` ops from `seed` under `faults`, with 4 parallel batches per shard, shards
    /// split eight times over the run, and 16 writers.
    pub fn new(records: u64, seed: u64, faults: Faults, template: PathBuf, stack: String) -> Options {
        Options {
            records,
            seed,
            faults,
            parallelization: 4,
            split_every: Some((records / 8).max(50)),
            writers: 16,
            template,
            stack,
            parameters: BTreeMap::new(),
            regions: 1,
            repair: true,
            team_table: false,
        }
    }

    /// The template parameters of the run: `parameters`, a verify schedule that may repair, and
    /// for two Regions the global-table deployment where they do not say otherwise.
    pub(crate) fn parameters(&self) -> BTreeMap<String, String> {
        let mut parameters = self.parameters.clone();
        // The verify job the operations phase runs (its state machine, function and bucket),
        // with the repairs it makes: the verifier's role may touch and delete only with
        // IndexVerifyRepair (the emulator's IAM check refuses them otherwise, as AWS would).
        parameters.entry("IndexVerifySchedule".to_owned()).or_insert_with(|| "rate(1 day)".to_owned());
        parameters.entry("IndexVerifyRepair".to_owned()).or_insert_with(|| "true".to_owned());
        if self.regions == 2 {
            for (name, value) in
                [("Consumers", "Combined"), ("ArchiveRegion", REGIONS[0]), ("AggregatorRegion", REGIONS[0])]
            {
                parameters.entry(name.to_owned()).or_insert_with(|| value.to_owned());
            }
        }
        parameters
    }

    /// Each Region's counter sharding: 16 shards, a Region's own with two Regions.
    fn sharding(&self, region: usize) -> Result<Sharding, ChaosError> {
        let sharding = Sharding::new(COUNTER_SHARDS).map_err(|e| ChaosError::Check(e.to_string()))?;
        if self.regions < 2 {
            return Ok(sharding);
        }
        let region = u32::try_from(region).unwrap_or(0);
        sharding.in_region(region, 2).map_err(|e| ChaosError::Check(e.to_string()))
    }
}

/// How far a run has got, readable while it runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Ops in the workload.
    pub ops: AtomicU64,
    /// Ops written.
    pub written: AtomicU64,
    /// Whether the workload is written and the replayer is catching up.
    pub settling: AtomicBool,
    /// The replayer's progress, once it has started.
    pub replay: std::sync::OnceLock<Arc<crate::replayer::Progress>>,
}

/// One oracle's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// Which.
    pub oracle: &'static str,
    /// Whether what it checked is exact.
    pub ok: bool,
    /// Counts, or the differences.
    pub detail: String,
}

/// What the functions' runtimes did, summed over every invocation.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RuntimeTotals {
    /// Requests sent to DynamoDB and S3.
    pub requests: u64,
    /// Requests sent again (throttled, failed, unprocessed, timed out).
    pub retries: u64,
    /// Records parked as record-permanent failures.
    pub parked: u64,
    /// Invocations stopped at a transient failure after their retries.
    pub transient_stops: u64,
    /// Invocations stopped at a systemic failure.
    pub systemic_stops: u64,
    /// Counter totals that lost a version race and were merged again.
    pub conflicts: u64,
}

/// One mapping's replay counts.
#[derive(Debug, Clone, Serialize)]
pub struct Mapping {
    /// The function.
    pub function: String,
    /// Records read, delivered, filtered out, given up.
    pub read: u64,
    /// Records delivered.
    pub delivered: u64,
    /// Records the filters left out.
    pub filtered_out: u64,
    /// Invocations.
    pub invocations: u64,
    /// Batch retries.
    pub retries: u64,
    /// Bisections.
    pub bisections: u64,
    /// Records given up on.
    pub given_up: u64,
    /// Invocations cut off at their deadline.
    pub timed_out: u64,
    /// Injected kills.
    pub kills: u64,
    /// Injected short timeouts.
    pub short_timeouts: u64,
    /// Injected duplicate deliveries.
    pub duplicates: u64,
}

impl Mapping {
    /// Each of `pipeline`'s mappings.
    fn all(pipeline: &Pipeline) -> Vec<Mapping> {
        pipeline.counts().into_iter().map(|(function, counts)| Mapping::new(function, counts)).collect()
    }

    fn new(function: &str, c: Counts) -> Mapping {
        Mapping {
            function: function.to_owned(),
            read: c.read,
            delivered: c.delivered,
            filtered_out: c.filtered_out,
            invocations: c.invocations,
            retries: c.retries,
            bisections: c.bisections,
            given_up: c.given_up,
            timed_out: c.timed_out,
            kills: c.kills,
            short_timeouts: c.short_timeouts,
            duplicates: c.duplicates,
        }
    }
}

/// One table's replication between two Regions.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicationReport {
    /// The table's logical id.
    pub table: String,
    /// What its replication did.
    #[serde(flatten)]
    pub counts: ReplicationCounts,
}

/// The replication between two Regions, running in a background task until stopped.
struct Replicating {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result<Vec<(String, Replication)>, ChaosError>>,
}

impl Replicating {
    fn start(mut replications: Vec<(String, Replication)>) -> Replicating {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            while !stopped.load(Ordering::Relaxed) {
                for (_, replication) in &mut replications {
                    replication.step().await?;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(replications)
        });
        Replicating { stop, task }
    }

    async fn stop(self) -> Result<Vec<(String, Replication)>, ChaosError> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.map_err(|e| ChaosError::Check(format!("the replication's task failed: {e}")))?
    }
}

/// The second Region after the run: what the oracles read.
struct Settled {
    direct: SdkConfig,
    stack: Stack,
    pipeline: Pipeline,
    replication: Vec<ReplicationReport>,
}

/// Replicates and replays both Regions until nothing moves: what one Region's functions, sweeper
/// or operations wrote reaches the other, whose functions take it in turn.
async fn settle_both(
    first: &mut Pipeline,
    mut second: Pipeline,
    mut replications: Vec<(String, Replication)>,
    direct: SdkConfig,
    stack: Stack,
) -> Result<Settled, ChaosError> {
    for _ in 0..4 {
        for (_, replication) in &mut replications {
            replication.settle(Duration::from_secs(300)).await?;
        }
        first.settle().await?;
        second.settle().await?;
    }
    for (_, replication) in &mut replications {
        replication.settle(Duration::from_secs(300)).await?;
    }
    let replication = replications
        .iter()
        .map(|(table, r)| ReplicationReport { table: table.clone(), counts: r.counts() })
        .collect();
    Ok(Settled { direct, stack, pipeline: second, replication })
}

impl Settled {
    /// The second Region's own index, the totals replicated to it, and its replicas against
    /// the first's.
    async fn checks(
        &self,
        options: &Options,
        sums: &BTreeMap<String, i128>,
        first: (&SdkConfig, &Stack),
    ) -> Result<Vec<Verdict>, ChaosError> {
        let counters = counters_of(options, &self.direct, &self.stack, 1)?;
        Ok(vec![
            check::index(&self.direct, &self.stack, "index (eu-west-1)").await?,
            check::counters(&counters, sums, "counters (eu-west-1)").await?,
            check::replicas(first, (&self.direct, &self.stack)).await?,
        ])
    }

    /// Its mappings' counts, named with the Region.
    fn mappings(&self) -> Vec<Mapping> {
        self.pipeline
            .counts()
            .into_iter()
            .map(|(function, counts)| Mapping::new(&format!("{}/{function}", REGIONS[1]), counts))
            .collect()
    }
}

/// The counters client of the application in Region `region` (0 or 1) of `stack`.
///
/// The workload's writers are the application, writing to the emulator directly. An `ADD`
/// whose attempt is cut off after moto applied it would be applied again by the retry, and the
/// sum acknowledged would undercount: they wait for moto (one DynamoDB request at a time, slow
/// under the operations' scans) instead of timing attempts out.
pub(crate) fn counters_of(
    options: &Options,
    sdk: &SdkConfig,
    stack: &Stack,
    region: usize,
) -> Result<Counters, ChaosError> {
    let patient =
        io_policy::Policy { attempt_timeout: WRITER_ATTEMPT_TIMEOUT, ..io_policy::Policy::default() };
    Ok(Counters::new(
        aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(sdk)),
        &stack.table("CounterTable")?.name,
        options.sharding(region)?,
    )
    .with_policy(io_policy::Bounded::new(patient, WRITER_ATTEMPT_TIMEOUT * 2)))
}

/// The aggregator and the archiver as invokers, for the operations' reruns of old records.
fn reruns(
    stack: &Stack,
    through: &SdkConfig,
    tally: &Arc<Tally>,
) -> Result<Vec<(String, crate::replayer::Invoker)>, ChaosError> {
    [Aggregator::NAME, Archiver::NAME]
        .into_iter()
        .map(|binary| {
            let invoker = tallied_invoker(stack.function(binary)?, through, Arc::clone(tally))?;
            Ok((binary.to_owned(), invoker))
        })
        .collect()
}

/// One Region's application: where its ops go.
pub(crate) struct Target {
    client: aws_sdk_dynamodb::Client,
    issues: String,
    counters: Counters,
    /// The issues table is a team's ([`team`]): the workload's items renamed on their way.
    team: bool,
}

impl Target {
    pub(crate) fn of(sdk: &SdkConfig, stack: &Stack, counters: Counters) -> Result<Target, ChaosError> {
        Ok(Target {
            client: aws_sdk_dynamodb::Client::new(sdk),
            issues: stack.issues_table()?,
            counters,
            team: stack.table("IssuesTable").is_err(),
        })
    }
}

/// One emulated Kinesis data stream: what its mappings delivered out of order.
#[derive(Debug, Clone, Serialize)]
pub struct KinesisStream {
    /// Its ARN.
    pub stream: String,
    /// Pairs of one item's records delivered after a later change of it.
    pub crossed: u64,
    /// Records delivered twice within a batch.
    pub duplicated: u64,
    /// Invocations made (each batch cut in up to two).
    pub invocations: u64,
    /// Records its mappings' filters left out (a Kinesis mapping reads every record and filters
    /// them itself).
    pub filtered: u64,
}

impl KinesisStream {
    /// The Kinesis streams `stack`'s mappings read.
    fn of(stack: &Stack) -> Vec<KinesisStream> {
        let mut arns: Vec<&str> = stack
            .functions
            .iter()
            .flat_map(|f| &f.streams)
            .map(|s| s.stream.as_str())
            .filter(|arn| arn.contains(":kinesis:"))
            .collect();
        arns.sort_unstable();
        arns.dedup();
        arns.into_iter()
            .filter_map(crate::replayer::kinesis::delivery::Stream::registered)
            .map(|s| {
                let disorder = s.disorder();
                KinesisStream {
                    stream: s.arn().to_owned(),
                    crossed: disorder.crossed as u64,
                    duplicated: disorder.duplicated as u64,
                    invocations: s.invocations(),
                    filtered: s.filtered(),
                }
            })
            .collect()
    }
}

/// What a run did and found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Ops written.
    pub ops: u64,
    /// The seed.
    pub seed: u64,
    /// The issues table the workload wrote: the stack's, or a team's ([`team`]), and its key.
    pub issues_table: (String, Vec<String>),
    /// Stream records read across every table.
    pub stream_records: u64,
    /// Faults the proxy injected, by kind, and the requests it forwarded.
    pub wire_faults: BTreeMap<&'static str, u64>,
    /// Of the writes the `late` fault sent upstream after their invocation had given up on them,
    /// those DynamoDB refused: a version guard or a condition found a newer write of the key.
    pub late_refused: u64,
    /// Requests sent to each emulator, by the fault proxy and the router together.
    pub emulator_requests: Vec<u64>,
    /// Each mapping's counts, Lambda-side faults included.
    pub mappings: Vec<Mapping>,
    /// With two Regions, each replicated table's replication.
    pub replication: Vec<ReplicationReport>,
    /// Each Kinesis data stream a table wrote to (`IssuesChangeSource`, `CounterChangeSource`):
    /// the disorder its mappings delivered.
    pub kinesis: Vec<KinesisStream>,
    /// The runtimes' totals.
    pub runtime: RuntimeTotals,
    /// Wall time from the first write to the last check.
    pub seconds: f64,
    /// Where that time went.
    pub phases: Phases,
    /// Stream records per second over the run.
    pub records_per_second: f64,
    /// What the operations phase did.
    pub operations: Operations,
    /// Each oracle's verdict.
    pub verdicts: Vec<Verdict>,
    /// The first Region's stack as `sidestream status` sees it at the end: what the run left for
    /// an operator (parked records, ranges given up, alarms), shown, not judged.
    pub status: ::operations::status::Status,
    /// What the run was billed, by the emulators' meters (docs/cost.md).
    pub bill: crate::bench::cost::RunBill,
}

impl Report {
    /// Whether every oracle found exactly what it expected.
    pub fn ok(&self) -> bool {
        self.verdicts.iter().all(|v| v.ok)
    }
}

/// Runs the workload of `options` on the emulators at `endpoints` (one moto, or two that split
/// the tables between them), reporting how far it has got in `progress`. Every request goes
/// through the run's own router or its fault proxy, with the credentials and region of the
/// environment.
pub async fn run(endpoints: &[String], options: &Options, progress: &Progress) -> Result<Report, ChaosError> {
    let setup = set_up(endpoints, options).await?;
    // The bill starts now: the stack's creation is not the run's.
    let metered_before = metered_at(endpoints).await?;
    let Setup { direct, through, stack, pipeline, .. } = setup;
    let sdk = &direct;
    let _ = progress.replay.set(pipeline.progress());

    let started = Instant::now();
    let replay = pipeline.spawn(Duration::from_millis(100));
    let second = setup.second.map(SecondRegion::spawn);

    let counters = counters_of(options, sdk, &stack, 0)?;
    // The application writes in both Regions: each item in one, each Region its own shards.
    let mut targets = vec![Target::of(sdk, &stack, counters.clone())?];
    if let Some(s) = &second {
        targets.push(Target::of(&s.direct, &s.stack, counters_of(options, &s.direct, &s.stack, 1)?)?);
    }
    let ops = generate(options.records, options.seed, epoch_seconds());
    progress.ops.store(ops.len() as u64, Ordering::Relaxed);
    let expired = expired_items(&ops);
    let operator = operations::Operator {
        stack: &stack,
        sdk: &through,
        kept: setup.kept,
        rerun: reruns(&stack, &through, &setup.tally)?,
        repair: options.repair,
        transitions: std::sync::atomic::AtomicU64::new(0),
    };
    let written_all = AtomicBool::new(false);
    let mut phases = Phases::default();
    let workload = async {
        tokio::join!(
            async {
                let written = write(&targets, ops, options.writers, progress).await;
                written_all.store(true, Ordering::Relaxed);
                (written, started.elapsed())
            },
            operator.run(&written_all, progress)
        )
    };
    let ((written, writing), operated) = unless_refused(&stack.refusal_watch(sdk), workload).await?;
    phases.writing = writing.as_secs_f64();
    phases.operating = started.elapsed().saturating_sub(writing).as_secs_f64();
    progress.settling.store(true, Ordering::Relaxed);
    let settling = Instant::now();
    let mut pipeline = replay.finish().await?;
    let second = match second {
        Some(s) => Some(s.finish(&mut pipeline).await?),
        None => None,
    };
    phases.settling = settling.elapsed().as_secs_f64();
    let checking = Instant::now();
    let sums = written?;
    let mut operations = operated?;
    operations.drift_at_end = operator.drift_at_end().await?;

    let mut verdicts = vec![
        check::index(sdk, &stack, "index").await?,
        check::archive(sdk, &stack, &expired).await?,
        check::counters(&counters, &sums, "counters").await?,
        check::operations(&operations),
        check::permissions(sdk, &stack).await?,
    ];
    let mut mappings = Mapping::all(&pipeline);
    let mut replication = Vec::new();
    if let Some(second) = &second {
        verdicts.extend(second.checks(options, &sums, (sdk, &stack)).await?);
        mappings.extend(second.mappings());
        replication = second.replication.clone();
    }
    let runtime = RuntimeTotals::from(&*setup.tally);
    verdicts.push(nothing_lost(&mappings, &runtime, &setup.failure_log));
    phases.checking = checking.elapsed().as_secs_f64();
    // What an operator would see now: shown, not judged.
    let status = crate::status(sdk, &stack, &setup.feed).await?;
    let seconds = started.elapsed().as_secs_f64();
    let stream_records = pipeline.progress().read.load(Ordering::Relaxed);
    let metered = metered_at(endpoints).await?.since(&metered_before).only(&options.stack);
    let invocations = mappings.iter().map(|m| m.invocations).sum();
    let bill =
        crate::bench::cost::RunBill::of(&metered, invocations, operator.state_transitions(), stream_records)
            .map_err(|e| ChaosError::Check(format!("the bill: {e}")))?;
    Ok(Report {
        ops: options.records,
        seed: options.seed,
        issues_table: (stack.issues_table()?, operator.indexes()?.base_key),
        stream_records,
        wire_faults: setup.proxy.counts.snapshot().into_iter().collect(),
        late_refused: setup.proxy.counts.late_refused.load(Ordering::Relaxed),
        emulator_requests: setup.proxy.upstreams.sent(),
        mappings,
        replication,
        kinesis: KinesisStream::of(&stack),
        runtime,
        seconds,
        phases,
        #[expect(clippy::cast_precision_loss, reason = "a rate for people")]
        records_per_second: stream_records as f64 / seconds.max(f64::EPSILON),
        operations,
        verdicts,
        status,
        bill,
    })
}

/// A run's wall time by phase, in seconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Phases {
    /// From the first write to the last: the replay and the operations run beside it.
    pub writing: f64,
    /// The operations' last round, after the last write.
    pub operating: f64,
    /// The replay delivering what was left, and sweeping what expired.
    pub settling: f64,
    /// The last verification and the oracles.
    pub checking: f64,
}

impl From<&Tally> for RuntimeTotals {
    fn from(tally: &Tally) -> RuntimeTotals {
        RuntimeTotals {
            requests: tally.get(Metric::Requests),
            retries: tally.get(Metric::Retries),
            parked: tally.get(Metric::ParkedRecords),
            transient_stops: tally.get(Metric::TransientFailures),
            systemic_stops: tally.get(Metric::SystemicFailures),
            conflicts: tally.get(Metric::Conflicts),
        }
    }
}

/// What a run works with.
struct Setup {
    proxy: crate::fault_proxy::Proxy,
    /// The SDK configuration through the router, without faults: the application's path.
    direct: SdkConfig,
    /// The SDK configuration through the proxy.
    through: SdkConfig,
    stack: Stack,
    /// The emulator's CloudWatch, fed with the first Region's metrics.
    feed: Feed,
    tally: Arc<Tally>,
    pipeline: Pipeline,
    failure_log: PathBuf,
    /// Records the functions were invoked with, kept for the operations' replays.
    kept: Arc<operations::Kept>,
    /// With two Regions, the second.
    second: Option<SecondRegion>,
}

/// The items the workload puts already expired, by `id`: what the archive must hold.
pub(crate) fn expired_items(ops: &[Op]) -> BTreeMap<String, Value> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Expiring { item, expired: true } => Some((op.subject().to_owned(), item.clone())),
            _ => None,
        })
        .collect()
}

impl SecondRegion {
    /// Its replayer and the replication, started.
    fn spawn(self) -> Spawned {
        Spawned {
            replicating: Replicating::start(self.replications),
            replay: self.pipeline.spawn(Duration::from_millis(100)),
            direct: self.direct,
            stack: self.stack,
        }
    }
}

/// The second Region while the run goes.
struct Spawned {
    direct: SdkConfig,
    stack: Stack,
    replay: crate::replayer::Running,
    replicating: Replicating,
}

impl Spawned {
    /// Stops its replayer and the replication, then settles both Regions (`first`: the first
    /// Region's replayer, stopped).
    async fn finish(self, first: &mut Pipeline) -> Result<Settled, ChaosError> {
        let second = self.replay.finish().await?;
        let replications = self.replicating.stop().await?;
        settle_both(first, second, replications, self.direct, self.stack).await
    }
}

/// The second Region of a two-Region run.
struct SecondRegion {
    /// Its SDK configuration through the router.
    direct: SdkConfig,
    stack: Stack,
    pipeline: Pipeline,
    /// The issues and counter tables' replication between the Regions, by logical id.
    replications: Vec<(String, Replication)>,
}

/// The router and the fault proxy, a fresh stack, and the replayer over it with the functions
/// in process behind the proxy, their metrics summed.
async fn set_up(endpoints: &[String], options: &Options) -> Result<Setup, ChaosError> {
    if options.team_table && options.regions > 1 {
        return Err(ChaosError::Spec(
            "a team's table is one Region's: give --team-table or --regions 2".into(),
        ));
    }
    let (router, proxy, direct, through) = wires(endpoints, options).await?;
    let sdk = &direct;
    let mut parameters = options.parameters();
    if options.team_table {
        let stream = team::create(&aws_sdk_dynamodb::Client::new(sdk), &options.stack).await?;
        parameters.extend(team::parameters(&stream).map(|(name, value)| (name.to_owned(), value)));
    }
    let stack = Stack::create(sdk, &options.template, &options.stack, &parameters).await?;
    let tally = Arc::new(Tally::default());
    // The functions' metrics are summed for the oracles, and fed to the emulator's CloudWatch as
    // Lambda would, for the status at the end.
    let feed = Feed::start(sdk);
    let summed_and_fed: Arc<dyn Fn(&stream_runtime::Metrics) + Send + Sync> = {
        let (tally, to_cloudwatch) = (Arc::clone(&tally), feed.metrics());
        Arc::new(move |metrics| {
            tally.add(metrics);
            to_cloudwatch(metrics);
        })
    };
    let kept = Arc::new(operations::Kept::default());
    let mut sources = stack.sources(|function| {
        let function = with_attempt_timeout(function);
        let invoker = crate::invoker(&function, &through, MetricsTo::Each(Arc::clone(&summed_and_fed)))?;
        // A combined function's records are its functions' records, each the ones its own
        // patterns pass (`COMBINED_FILTERS`), as the combined function picks them.
        let binary = function.binary.as_deref().unwrap_or_default();
        let filters = function.environment.get(stream_runtime::combined::FILTERS_VAR).map(String::as_str);
        let mut members = Vec::new();
        for member in stack.members.iter().filter(|m| m.logical_id == function.logical_id) {
            let name = member.binary.clone().unwrap_or_default();
            let patterns = stream_runtime::combined::patterns_for(filters, &name)
                .map_err(|e| crate::StackError::Unusable(format!("{}: {e}", function.logical_id)))?;
            members.push((name, patterns));
        }
        if members.is_empty() {
            members.push((binary.to_owned(), Vec::new()));
        }
        Ok(kept.keeping(members, invoker))
    })?;
    for source in &mut sources {
        source.settings.parallelization_factor = options.parallelization;
    }
    let failure_log = std::env::temp_dir().join(format!("{}-failures.jsonl", options.stack));
    let pipeline = Pipeline::new(
        &aws_sdk_dynamodbstreams::Client::new(sdk),
        sources,
        stack.sweepers(sdk),
        stack.failure_log(sdk, &failure_log),
    )
    .with_metrics(feed.lambda())
    .with_faults(options.faults.lambda)
    .with_topology(Topology { split_every: options.split_every })
    .watching(stack.refusal_watch(sdk));
    let second = if options.regions == 2 {
        let at = (router.addr, proxy.addr);
        Some(second_region(at, options, &parameters, (&direct, &stack), &tally, &failure_log).await?)
    } else {
        None
    };
    Ok(Setup { proxy, direct, through, stack, feed, tally, pipeline, failure_log, kept, second })
}

/// `work`, unless a call refused to a function comes first: a systemic failure, which every retry
/// would meet alike, stops the run at once rather than after the whole workload is written (the
/// replay, watching too, stops itself).
async fn unless_refused<T>(
    watch: &crate::iam::Watch,
    work: impl Future<Output = T>,
) -> Result<T, ChaosError> {
    tokio::select! {
        done = work => Ok(done),
        refused = watch.refused() => Err(refused.into()),
    }
}

/// The router (no faults) and the fault proxy over the emulators at `endpoints`, and an SDK
/// configuration through each: the application's path and the functions'.
pub(crate) async fn wires(
    endpoints: &[String],
    options: &Options,
) -> Result<(crate::fault_proxy::Proxy, crate::fault_proxy::Proxy, SdkConfig, SdkConfig), ChaosError> {
    let upstreams = upstreams(endpoints, &options.stack)?;
    let router = crate::fault_proxy::start_routed(upstreams.clone(), crate::fault_proxy::Spec::none())
        .await
        .map_err(ChaosError::Proxy)?;
    let proxy =
        crate::fault_proxy::start_routed(upstreams, options.faults.wire).await.map_err(ChaosError::Proxy)?;
    // With two Regions, the first is named; with one, the environment's.
    let region = (options.regions == 2).then_some(REGIONS[0]);
    let direct = sdk_at(router.addr, region).await;
    let through = sdk_at(proxy.addr, region).await;
    Ok((router, proxy, direct, through))
}

/// `function` with the run's attempt timeout: the faults stall calls, and an attempt gives up
/// on a stalled one soon.
pub(crate) fn with_attempt_timeout(function: &crate::template::Function) -> crate::template::Function {
    let mut function = function.clone();
    function.environment.insert("ATTEMPT_TIMEOUT_MS".into(), ATTEMPT_TIMEOUT_MS.into());
    function
}

/// An SDK configuration for the endpoint `addr` (which wins over `AWS_ENDPOINT_URL`), in
/// `region` or the environment's.
async fn sdk_at(addr: std::net::SocketAddr, region: Option<&'static str>) -> SdkConfig {
    let mut loader =
        aws_config::defaults(aws_config::BehaviorVersion::latest()).endpoint_url(format!("http://{addr}"));
    if let Some(region) = region {
        loader = loader.region(aws_config::Region::new(region));
    }
    loader.load().await
}

/// The second Region of a global table: its stack (`<stack>-eu-west-1`) with its functions
/// behind the same fault proxy and summed into the same `tally`, its replayer, and the
/// replication of the issues and counter tables between it and the first (`first`: its SDK
/// through the router, and its stack). Replication is AWS's own: it goes through the router,
/// without faults, and a replicated TTL delete loses the TTL identity (the harder of AWS's two
/// possible answers: the archiving Region must recognise it by its passed TTL).
async fn second_region(
    (router, proxy): (std::net::SocketAddr, std::net::SocketAddr),
    options: &Options,
    parameters: &BTreeMap<String, String>,
    (first_sdk, first): (&SdkConfig, &Stack),
    tally: &Arc<Tally>,
    failure_log: &std::path::Path,
) -> Result<SecondRegion, ChaosError> {
    let direct = sdk_at(router, Some(REGIONS[1])).await;
    let through = sdk_at(proxy, Some(REGIONS[1])).await;
    let name = format!("{}-{}", options.stack, REGIONS[1]);
    let stack = Stack::create(&direct, &options.template, &name, parameters).await?;
    let mut sources = stack
        .sources(|function| tallied_invoker(&with_attempt_timeout(function), &through, Arc::clone(tally)))?;
    for source in &mut sources {
        source.settings.parallelization_factor = options.parallelization;
    }
    let pipeline = Pipeline::new(
        &aws_sdk_dynamodbstreams::Client::new(&direct),
        sources,
        stack.sweepers(&direct),
        FailureLog::new(failure_log),
    )
    .with_faults(options.faults.lambda)
    .with_topology(Topology { split_every: options.split_every })
    .watching(stack.refusal_watch(&direct));
    let mut replications = Vec::new();
    for logical in ["IssuesTable", "CounterTable"] {
        let replica = |sdk: &SdkConfig, stack: &Stack, region: &str| -> Result<Replica, ChaosError> {
            let table = stack.table(logical)?.name.clone();
            let arn = stack.streams.get(&table).cloned().unwrap_or_default();
            let reader = StreamReader::new(aws_sdk_dynamodbstreams::Client::new(sdk), arn);
            Ok(Replica::new(region, aws_sdk_dynamodb::Client::new(sdk), &table, reader))
        };
        let (a, b) = (replica(first_sdk, first, REGIONS[0])?, replica(&direct, &stack, REGIONS[1])?);
        replications.push((
            logical.to_owned(),
            // The operations' touches add an attribute in bursts: the replication must know it
            // before its stream shows it.
            Replication::new(a, b, REPLICATION_DELAY, false).expecting(&formats::touch::MARKERS),
        ));
    }
    Ok(SecondRegion { direct, stack, pipeline, replications })
}

/// The emulators' endpoints from the environment: `SIDESTREAM_MOTO_ENDPOINTS` (space-separated,
/// set by `scripts/moto`), or else `AWS_ENDPOINT_URL`.
pub fn endpoints_from_env() -> Result<Vec<String>, ChaosError> {
    let list = std::env::var("SIDESTREAM_MOTO_ENDPOINTS")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .map_err(|_| {
            ChaosError::Endpoints(
                "neither SIDESTREAM_MOTO_ENDPOINTS nor AWS_ENDPOINT_URL is set: run under scripts/moto",
            )
        })?;
    let endpoints: Vec<String> = list.split_whitespace().map(str::to_owned).collect();
    if endpoints.is_empty() {
        return Err(ChaosError::Endpoints(
            "SIDESTREAM_MOTO_ENDPOINTS is empty: give the emulators' URLs, space-separated",
        ));
    }
    Ok(endpoints)
}

/// The meters' totals of the emulators at `endpoints`, together.
async fn metered_at(endpoints: &[String]) -> Result<crate::meter::Metered, ChaosError> {
    let mut metered = crate::meter::Metered::default();
    for endpoint in endpoints {
        metered.add(&crate::meter::read_at(endpoint).await?);
    }
    Ok(metered)
}

/// The emulators at `endpoints`: with two, the first holds the stack's issues table (the
/// busiest: the workload's items, two readers of its stream, the sweeper's deletes, the
/// operations' touches) and the second every other table, the bucket and the queues. In the
/// 10,000-op profile of docs/local.md, that split is about 60:40 of moto's time.
fn upstreams(endpoints: &[String], stack: &str) -> Result<crate::fault_proxy::Upstreams, ChaosError> {
    match endpoints {
        [one] => Ok(crate::fault_proxy::Upstreams::one(one)),
        [_, _] => {
            let (issues, team) = (crate::resource_name(stack, "IssuesTable"), team::table(stack));
            Ok(crate::fault_proxy::Upstreams::by_table(
                endpoints.to_vec(),
                move |table| usize::from(table != issues && table != team),
                1,
            ))
        }
        _ => Err(ChaosError::Emulators(endpoints.len())),
    }
}

/// Nothing given up by the replayer, nothing parked, every record read delivered or filtered.
fn nothing_lost(mappings: &[Mapping], runtime: &RuntimeTotals, failure_log: &std::path::Path) -> Verdict {
    let mut wrong = Vec::new();
    for m in mappings {
        if m.given_up > 0 || m.delivered + m.filtered_out != m.read {
            wrong.push(format!(
                "{}: {} read, {} delivered, {} filtered out, {} given up",
                m.function, m.read, m.delivered, m.filtered_out, m.given_up
            ));
        }
    }
    if runtime.parked > 0 {
        wrong.push(format!("{} records parked, though every fault injected is transient", runtime.parked));
    }
    let logged = std::fs::read_to_string(failure_log).map_or(0, |t| t.lines().count());
    if logged > 0 {
        wrong.push(format!("{logged} ranges in the failure log {}", failure_log.display()));
    }
    let ok = wrong.is_empty();
    Verdict {
        oracle: "delivery",
        ok,
        detail: if ok {
            "every record delivered; nothing given up, parked or logged as failed".to_owned()
        } else {
            wrong.join("; ")
        },
    }
}

/// Makes `ops` with `writers` concurrent writers, each item's ops in order by one writer and in
/// one Region (`targets`: one per Region); returns each counter's acknowledged sum.
pub(crate) async fn write(
    targets: &[Target],
    ops: Vec<Op>,
    writers: usize,
    progress: &Progress,
) -> Result<BTreeMap<String, i128>, ChaosError> {
    let writers = writers.max(1);
    let mut queues: Vec<Vec<(usize, Op)>> = vec![Vec::new(); writers];
    let spread = |n: u64, over: usize| usize::try_from(n % over.max(1) as u64).unwrap_or(0);
    for (n, op) in ops.into_iter().enumerate() {
        // Increments of one counter commute: any writer, any Region; an item's ops: always the
        // same writer, in the same Region.
        let (lane, region) = if let Op::Increment { .. } = op {
            (n % writers, n % targets.len())
        } else {
            let hash = crate::replayer::faults::hash(op.subject().as_bytes());
            (spread(hash, writers), spread(hash / 7, targets.len()))
        };
        queues[lane].push((region, op));
    }
    let sums = futures_util::future::try_join_all(queues.into_iter().map(|queue| async move {
        let mut sums: BTreeMap<String, i128> = BTreeMap::new();
        for (region, op) in queue {
            let target = &targets[region];
            apply(target, &op, &mut sums).await?;
            progress.written.fetch_add(1, Ordering::Relaxed);
        }
        Ok::<_, ChaosError>(sums)
    }))
    .await?;
    let mut total: BTreeMap<String, i128> = BTreeMap::new();
    for (name, sum) in sums.into_iter().flatten() {
        *total.entry(name).or_default() += sum;
    }
    Ok(total)
}

async fn apply(target: &Target, op: &Op, sums: &mut BTreeMap<String, i128>) -> Result<(), ChaosError> {
    let Target { client, issues, .. } = target;
    match op {
        Op::Put(item) | Op::Expiring { item, .. } if target.team => {
            crate::put_json(client, issues, &team::item(item)).await?;
        }
        Op::Put(item) | Op::Expiring { item, .. } => crate::put_json(client, issues, item).await?,
        Op::Delete(id) if target.team => crate::delete_json(client, issues, &team::key(id)).await?,
        Op::Delete(id) => crate::delete_json(client, issues, &serde_json::json!({"id": id})).await?,
        Op::Increment { counter, by } => {
            target.counters.increment(counter, *by).await?;
            *sums.entry(counter.clone()).or_default() += i128::from(*by);
        }
    }
    Ok(())
}

pub(crate) fn epoch_seconds() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
