//! lifecycle: one stack through a life, under every fault, exact at each step it is checked.
//!
//! [`run`] deploys the stack of `template.yaml` on a table that already holds items, and takes
//! it through what a stack meets in its years, the workload of [`crate::chaos::workload`] split
//! over the eras and written by concurrent writers throughout:
//!
//! 1. **An existing table.** The first quarter is written before the indexer has a mapping
//!    (the archiver and the aggregator run from the start); the indexer's mapping then starts
//!    at `LATEST` and a backfill races the second quarter.
//! 2. **An upgrade from the previous release.** During the second quarter the deploy is a canary
//!    and is then moved back and forward again: a share of the indexer's invocations goes to the
//!    previous release's write behaviour (`chaos::previous_release`), with this
//!    release's fences on (`IndexFencePreviousRelease=true`).
//! 3. **A switch to Kinesis** (`IssuesChangeSource=Kinesis`, `IndexVersionEpoch` 1), made while
//!    the writers write: the Kinesis mapping starts at its stream's present while the stream's
//!    mapping still delivers, which is then removed mid-flight. Its mapping retries a batch once
//!    (`MaximumRetryAttempts` 1), and a bug that crashes it on a few items (fixed after the era)
//!    makes it give ranges up; the operator replays them from the on-failure destination
//!    (`failures replay`), then runs `index verify --repair`, as docs/deploying.md says. The
//!    index is checked exact here.
//! 4. **A switch back** to the DynamoDB stream (`IndexVersionEpoch` 2), its mapping from the
//!    stream's trim horizon, the Kinesis mapping removed mid-flight; then a bulk edit moves one
//!    field of `tombstones`/10 issues again and again, leaving at least `tombstones` tombstones in
//!    one index partition while the grid pages through it: every page within its bound of
//!    Queries, every page but the last full, and at the end every issue once, in order.
//!
//! The oracles of `chaos::check` then judge the index, the archive, the counters and
//! the permissions, and the report says what each era did.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use futures_util::StreamExt as _;
use multikey_indexer::Indexer;
use operations::failures::{Records, ReplayClients, Replayer};
use operations::grid::{Filter, Grid, GridSchema, Query};
use serde::Serialize;
use serde_json::json;
use sidestream_combined::Tally;
use stream_runtime::StreamFunction as _;
use stream_runtime::delivery::{Invocation, Invoker};

use crate::chaos::operations::Operator;
use crate::chaos::previous_release::{self, Canary};
use crate::chaos::{
    ChaosError, Op, Options, Progress, Target, Verdict, check, counters_of, epoch_seconds, expired_items,
    generate, wires, with_attempt_timeout, write,
};
use crate::replayer::{Pipeline, Source, Topology};
use crate::{Stack, tallied_invoker};

/// The scope and the field the bulk edit moves.
const BULK: &str = "bulk";
/// Rows a grid page asks for.
const PAGE: usize = 50;
/// The Queries a page of [`PAGE`] takes behind any run of tombstones up to 14,000, plus one
/// for each that DynamoDB stops at the 1 MB it reads (docs/grid-view.md, "What a page costs").
const QUERIES_PER_PAGE: u64 = 3;
/// Items the Kinesis era's bug crashes the indexer on.
const CRASHING: usize = 3;
/// How long a replay of one range given up may take.
const REPLAY_TIMEOUT: Duration = Duration::from_secs(60);
/// Tries of each replay: under the run's faults one may stop at a transient failure.
const REPLAY_TRIES: usize = 20;
/// How long a mapping may take to catch up with what was written.
const CATCH_UP: Duration = Duration::from_secs(600);

/// What a lifecycle run did, era by era, and the verdicts.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Ops in the workload (besides the bulk edit).
    pub ops: u64,
    /// The seed.
    pub seed: u64,
    /// Each era of the indexer's mapping.
    pub eras: Vec<Era>,
    /// Items the backfill scanned and touched.
    pub backfill: (u64, u64),
    /// The previous release's invocations, transactions written, and transactions refused by
    /// a newer head.
    pub previous_release: (u64, u64, u64),
    /// Kinesis ranges given up (records in them), and ranges replayed.
    pub kinesis_given_up: (u64, u64),
    /// Kinesis ranges replayed from the on-failure destination.
    pub kinesis_replayed: u64,
    /// Items the repairs touched and entries they deleted, at each `index verify --repair`.
    pub repairs: Vec<(u64, u64)>,
    /// The bulk edit.
    pub bulk: Bulk,
    /// Faults injected on the wire, by kind.
    pub wire_faults: Vec<(String, u64)>,
    /// Wall time, in seconds.
    pub seconds: f64,
    /// Wall time by phase, in seconds, from the first write.
    pub phases: Vec<(&'static str, f64)>,
    /// The oracles' verdicts: the checkpoint after the switch to Kinesis, then the end.
    pub verdicts: Vec<Verdict>,
}

impl Report {
    /// Whether every oracle found its part exact.
    pub fn ok(&self) -> bool {
        self.verdicts.iter().all(|v| v.ok)
    }
}

/// One era of the indexer's mapping.
#[derive(Debug, Clone, Serialize)]
pub struct Era {
    /// What it was.
    pub name: &'static str,
    /// Records its mapping passed over at its start (`StartingPosition: LATEST`).
    pub passed_over: u64,
    /// Records read and delivered, and invocations.
    pub read: u64,
    /// Records processed.
    pub delivered: u64,
    /// Invocations.
    pub invocations: u64,
    /// Whether its mapping was removed mid-flight (else settled).
    pub removed_mid_flight: bool,
}

/// The bulk edit and the grid paging through it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Bulk {
    /// Issues edited.
    pub issues: u64,
    /// Times each was edited.
    pub passes: u64,
    /// Tombstones in the edited partition once the index settled.
    pub tombstones: u64,
    /// Grid pages read while and after the edit.
    pub pages: u64,
    /// The most Queries one index page took.
    pub most_queries: u64,
    /// Queries DynamoDB stopped at the 1 MB it reads, each adding one to its page's bound.
    pub cut_at_1mb: u64,
    /// Pages over the bound of Queries.
    pub over_bound: u64,
    /// Pages with more to follow that were not full.
    pub short: u64,
}

/// Runs `options`' workload through a stack's life on the emulators at `endpoints`, the bulk
/// edit leaving at least `tombstones` tombstones.
pub async fn run(
    endpoints: &[String],
    options: &Options,
    tombstones: u64,
    progress: &Progress,
) -> Result<Report, ChaosError> {
    if options.team_table {
        return Err(ChaosError::Spec(
            "the lifecycle run is on the stack's own issues table: give --lifecycle or --team-table".into(),
        ));
    }
    let started = Instant::now();
    let (_router, proxy, direct, through) = wires(endpoints, options).await?;
    let life = Life::new(options, direct, through, tombstones);
    let first = life.deploy(Deploy::STREAM).await?;
    let base = life.base_pipeline(&first)?;
    let _ = progress.replay.set(base.progress());
    let base = base.spawn(IDLE);
    let ops = generate(options.records, options.seed, epoch_seconds());
    let expired = expired_items(&ops);
    let (issues, passes) = life.bulk_shape();
    progress.ops.store(ops.len() as u64 + issues * (passes + 1), Ordering::Relaxed);
    let counters = counters_of(options, &life.direct, &first, 0)?;
    let mut run = Run {
        life: &life,
        targets: vec![Target::of(&life.direct, &first, counters.clone())?],
        progress,
        sums: BTreeMap::new(),
        report: Report::new(options),
        lapped: Instant::now(),
        crashing: Crashing::new(),
        previous: Arc::default(),
    };
    let mut quarters = ops.chunks((ops.len() / 4).max(1)).map(<[Op]>::to_vec);
    let mut quarter = || quarters.next().unwrap_or_default();

    // 1. The existing table: written before the indexer has a mapping.
    run.write(quarter()).await?;
    run.lap("the existing table");
    let streams = run.canary(&first, quarter()).await?;
    run.lap("the canary and the backfill");
    let kinesis = run.switch_to_kinesis(streams, quarter()).await?;
    let (back, grid) = run.switch_back(&kinesis, quarter(), &first).await?;
    let _base = base.finish().await?;
    run.lap("the bulk edit, the repair and the settling");

    // The end: the grid through the settled index, then the oracles.
    let last = pages(&grid).await?;
    let mut report = run.report;
    report.bulk.add(&last.bulk);
    report.bulk.issues = issues;
    report.bulk.passes = passes;
    report.bulk.tombstones = life.tombstones(&back).await?;
    report.verdicts.push(grid_verdict(&last.ids, &report.bulk, life.tombstones));
    report.verdicts.push(check::index(&life.direct, &back, "index").await?);
    report.verdicts.push(check::archive(&life.direct, &back, &expired).await?);
    report.verdicts.push(check::counters(&counters, &run.sums, "counters").await?);
    report.verdicts.push(check::permissions(&life.direct, &back).await?);
    let drift = life.operator(&back).drift_at_end().await?;
    let previous = &run.previous;
    report.previous_release = (
        previous.invocations.load(Ordering::Relaxed),
        previous.transactions.load(Ordering::Relaxed),
        previous.refused.load(Ordering::Relaxed),
    );
    report.verdicts.push(life_verdict(&report, drift, run.crashing.crashes.load(Ordering::Relaxed)));
    report.wire_faults = proxy.counts.snapshot().into_iter().map(|(kind, n)| (kind.to_owned(), n)).collect();
    report.phases.push(("the last paging and the oracles", run.lapped.elapsed().as_secs_f64()));
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// How long a replaying pipeline pauses when it found nothing to do.
const IDLE: Duration = Duration::from_millis(100);

/// A run under way: where it writes, what it has written, and its report so far.
struct Run<'a> {
    life: &'a Life<'a>,
    targets: Vec<Target>,
    progress: &'a Progress,
    /// Each counter's acknowledged sum.
    sums: BTreeMap<String, i128>,
    report: Report,
    /// When the phase under way began.
    lapped: Instant,
    crashing: Arc<Crashing>,
    previous: Arc<previous_release::Counts>,
}

/// An era's mapping, replaying.
struct Replaying {
    running: crate::replayer::Running,
    progress: Arc<crate::replayer::Progress>,
    /// Records it passed over at its start.
    passed: u64,
}

impl Replaying {
    fn spawn((pipeline, passed): (Pipeline, u64)) -> Replaying {
        Replaying { progress: pipeline.progress(), running: pipeline.spawn(IDLE), passed }
    }

    /// Removes it mid-flight, and says what it did.
    fn remove(self, name: &'static str) -> Era {
        self.running.abandon();
        era(name, self.passed, &self.progress, true)
    }
}

impl Run<'_> {
    /// Writes `ops` with the run's writers, summing what the counters were acknowledged.
    async fn write(&mut self, ops: Vec<Op>) -> Result<(), ChaosError> {
        let sums = write(&self.targets, ops, self.life.options.writers, self.progress).await?;
        for (name, sum) in sums {
            *self.sums.entry(name).or_default() += sum;
        }
        Ok(())
    }

    /// Ends the phase under way, named.
    fn lap(&mut self, phase: &'static str) {
        self.report.phases.push((phase, self.lapped.elapsed().as_secs_f64()));
        self.lapped = Instant::now();
    }

    /// The second era: the indexer's mapping from `LATEST`, a backfill racing the writers, and a canary of
    /// this release over the previous one, moved back and forward again: each share for a
    /// third of `ops`, its records delivered before the next.
    async fn canary(&mut self, stack: &Stack, ops: Vec<Op>) -> Result<Replaying, ChaosError> {
        let life = self.life;
        let canary = Canary::new(life.options.seed);
        let streams =
            Replaying::spawn(life.indexer(stack, Some((&canary, &self.previous)), true, "streams").await?);
        let operator = life.operator(stack);
        let thirds: Vec<Vec<Op>> = ops.chunks(ops.len().div_ceil(3).max(1)).map(<[Op]>::to_vec).collect();
        let writing = async {
            for (third, share) in thirds.into_iter().zip([30, 100, 0]) {
                canary.share.store(share, Ordering::Relaxed);
                self.write(third).await?;
                life.caught_up("streams").await?;
            }
            Ok::<_, ChaosError>(())
        };
        let (written, backfilled) = tokio::join!(writing, operator.backfill());
        written?;
        self.report.backfill = backfilled?;
        Ok(streams)
    }

    /// The third era: the switch to Kinesis while the writers write. The deploy creates the new mapping at
    /// its stream's present while the old one is still delivering what was just written, and
    /// removes the old one mid-flight, just after a write: what it had not applied by then is
    /// left to the repair. Then, the bug fixed, the operator replays what was given up and
    /// repairs, as docs/deploying.md's switch says, and the index is checked.
    async fn switch_to_kinesis(&mut self, streams: Replaying, ops: Vec<Op>) -> Result<Stack, ChaosError> {
        let life = self.life;
        let stack = life.deploy(Deploy::KINESIS).await?;
        let mut overlap = ops;
        let rest = overlap.split_off(overlap.len() / 4);
        let (cut, rest) = split_at(rest, life.options.writers);
        self.write(overlap).await?;
        let kinesis = Replaying::spawn(life.kinesis_indexer(&stack, &self.crashing, "kinesis").await?);
        self.write(cut).await?;
        self.report.eras.push(streams.remove("DynamoDB stream, epoch 0, a canary of the previous release"));
        self.write([rest, self.crashing.items()].concat()).await?;
        self.lap("the switch to Kinesis");

        let pipeline = kinesis.running.finish().await?;
        let given_up = pipeline.counts().iter().map(|(_, c)| c.given_up).sum::<u64>();
        let era = era("Kinesis, epoch 1, a batch retried once", kinesis.passed, &kinesis.progress, false);
        self.report.eras.push(era);
        self.crashing.fixed.store(true, Ordering::Relaxed);
        let (ranges, replayed) = life.replay_kinesis_ranges(&stack).await?;
        self.report.kinesis_given_up = (ranges, given_up);
        self.report.kinesis_replayed = replayed;
        let repairing = pipeline.spawn(IDLE);
        self.report.repairs.push(life.operator(&stack).repair().await?);
        let _settled = repairing.finish().await?;
        self.report.verdicts.push(check::index(&life.direct, &stack, "after the switch to Kinesis").await?);
        self.lap("the replays, the repair and the checkpoint");
        Ok(stack)
    }

    /// The fourth era: the switch back, the stream's mapping from its trim horizon in epoch 2 while the
    /// Kinesis mapping (of `kinesis`) still delivers, removed mid-flight; then the bulk edit
    /// (on `first`'s issues table) with the grid paging through it, and once the mapping has
    /// caught up, the repair the switch calls for. The stack, and its grid.
    async fn switch_back(
        &mut self,
        kinesis: &Stack,
        ops: Vec<Op>,
        first: &Stack,
    ) -> Result<(Stack, Grid), ChaosError> {
        let life = self.life;
        let stack = life.deploy(Deploy::BACK).await?;
        let still = Replaying::spawn(life.kinesis_indexer(kinesis, &self.crashing, "kinesis-again").await?);
        let back = Replaying::spawn(life.indexer(&stack, None, false, "back").await?);
        let mut overlap = ops;
        let rest = overlap.split_off(overlap.len() / 4);
        let (cut, rest) = split_at(rest, life.options.writers);
        self.write(overlap).await?;
        life.caught_up("kinesis-again").await?;
        self.write(cut).await?;
        self.report.eras.push(still.remove("Kinesis, epoch 1, until the switch back"));
        self.write(rest).await?;
        self.lap("the switch back");

        let grid = life.grid(&stack)?;
        let (issues, passes) = life.bulk_shape();
        let edited = AtomicBool::new(false);
        let (edit, paged) = tokio::join!(
            async {
                let done = life.bulk_edit(first, issues, passes, self.progress).await;
                edited.store(true, Ordering::Relaxed);
                done
            },
            page_while(&grid, &edited)
        );
        edit?;
        self.report.bulk = paged?;
        life.caught_up("back").await?;
        self.report.repairs.push(life.operator(&stack).repair().await?);
        let _settled = back.running.finish().await?;
        self.report.eras.push(era(
            "DynamoDB stream, epoch 2, from the trim horizon",
            0,
            &back.progress,
            false,
        ));
        Ok((stack, grid))
    }
}

impl Report {
    fn new(options: &Options) -> Report {
        Report {
            ops: options.records,
            seed: options.seed,
            eras: Vec::new(),
            backfill: (0, 0),
            previous_release: (0, 0, 0),
            kinesis_given_up: (0, 0),
            kinesis_replayed: 0,
            repairs: Vec::new(),
            bulk: Bulk::default(),
            wire_faults: Vec::new(),
            seconds: 0.0,
            phases: Vec::new(),
            verdicts: Vec::new(),
        }
    }
}

/// The indexer's definitions in `stack`.
fn indexes(stack: &Stack) -> Result<multikey_indexer::Indexes, ChaosError> {
    let env = &stack.function(Indexer::NAME)?.environment;
    let lookup = |name: &str| env.get(name).cloned();
    multikey_indexer::Indexes::from_vars(&stream_runtime::Vars::new(&lookup))
        .map_err(|e| ChaosError::Check(format!("the indexer's configuration: {e}")))
}

/// `ops` cut after its first `n` (or all of it): the writes a mapping is removed just after.
fn split_at(mut ops: Vec<Op>, n: usize) -> (Vec<Op>, Vec<Op>) {
    let rest = ops.split_off(n.min(ops.len()));
    (ops, rest)
}

fn era(name: &'static str, passed_over: u64, progress: &crate::replayer::Progress, removed: bool) -> Era {
    Era {
        name,
        passed_over,
        read: progress.read.load(Ordering::Relaxed),
        delivered: progress.delivered.load(Ordering::Relaxed),
        invocations: progress.invocations.load(Ordering::Relaxed),
        removed_mid_flight: removed,
    }
}

/// A deploy's parameters of the issues table's source.
#[derive(Debug, Clone, Copy)]
struct Deploy {
    source: &'static str,
    epoch: &'static str,
}

impl Deploy {
    const STREAM: Deploy = Deploy { source: "DynamoDBStreams", epoch: "0" };
    const KINESIS: Deploy = Deploy { source: "Kinesis", epoch: "1" };
    const BACK: Deploy = Deploy { source: "DynamoDBStreams", epoch: "2" };
}

/// What the run works with.
struct Life<'a> {
    options: &'a Options,
    /// The application's path, without faults.
    direct: SdkConfig,
    /// The functions' and the operator's path, through the fault proxy.
    through: SdkConfig,
    tally: Arc<Tally>,
    failure_log: std::path::PathBuf,
    tombstones: u64,
    /// The deployed stack's functions' roles, watched while the run waits for a pipeline.
    watch: std::sync::Mutex<Option<crate::iam::Watch>>,
}

impl<'a> Life<'a> {
    fn new(options: &'a Options, direct: SdkConfig, through: SdkConfig, tombstones: u64) -> Life<'a> {
        let failure_log = std::env::temp_dir().join(format!("{}-failures.jsonl", options.stack));
        Life {
            options,
            direct,
            through,
            tally: Arc::default(),
            failure_log,
            tombstones,
            watch: std::sync::Mutex::default(),
        }
    }

    /// The stack deployed (created, or updated in place) with `deploy`'s source and epoch, and
    /// this release's fences on.
    async fn deploy(&self, deploy: Deploy) -> Result<Stack, ChaosError> {
        let mut parameters = self.options.parameters();
        for (name, value) in [
            ("IssuesChangeSource", deploy.source),
            ("IndexVersionEpoch", deploy.epoch),
            ("IndexFencePreviousRelease", "true"),
        ] {
            parameters.insert(name.to_owned(), value.to_owned());
        }
        let stack =
            Stack::create(&self.direct, &self.options.template, &self.options.stack, &parameters).await?;
        *self.watch.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(stack.refusal_watch(&self.direct));
        Ok(stack)
    }

    /// A function's invoker, behind the fault proxy, its metrics summed.
    fn invoker(&self, function: &crate::template::Function) -> Result<Invoker, crate::StackError> {
        tallied_invoker(&with_attempt_timeout(function), &self.through, Arc::clone(&self.tally))
    }

    /// Where the pipeline `name` writes when it last caught up.
    fn settled_file(&self, name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("{}-{name}.settled", self.options.stack))
    }

    /// Waits until the pipeline `name` has delivered everything written so far.
    /// A call refused to a function of the deployed stack stops the wait at once (the pipeline,
    /// watching too, has stopped).
    async fn caught_up(&self, name: &str) -> Result<(), ChaosError> {
        let watch = self.watch.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let file = self.settled_file(name);
        let settled = crate::replayer::wait_settled(&file, CATCH_UP);
        match watch {
            None => Ok(settled.await?),
            Some(watch) => tokio::select! {
                done = settled => Ok(done?),
                refused = watch.refused() => Err(refused.into()),
            },
        }
    }

    fn pipeline(&self, stack: &Stack, sources: Vec<Source>, sweep: bool, name: &str) -> Pipeline {
        let sweepers = if sweep { stack.sweepers(&self.direct) } else { Vec::new() };
        Pipeline::new(
            &aws_sdk_dynamodbstreams::Client::new(&self.direct),
            sources,
            sweepers,
            stack.failure_log(&self.direct, &self.failure_log),
        )
        .with_faults(self.options.faults.lambda)
        .with_topology(Topology { split_every: self.options.split_every })
        .writing_settled(self.settled_file(name))
        .watching(stack.refusal_watch(&self.direct))
    }

    /// Every mapping but the indexer's, and the TTL sweeps: they run the whole life.
    fn base_pipeline(&self, stack: &Stack) -> Result<Pipeline, ChaosError> {
        let mut sources = stack.sources(|f| self.invoker(f))?;
        sources.retain(|s| s.function != Indexer::NAME);
        for source in &mut sources {
            source.settings.parallelization_factor = self.options.parallelization;
        }
        Ok(self.pipeline(stack, sources, true, "base"))
    }

    /// The indexer's mapping of `stack` alone, its invocations shared with the previous release
    /// by `canary`, from `LATEST` when `latest` (with the records passed over), else from the
    /// trim horizon.
    async fn indexer(
        &self,
        stack: &Stack,
        canary: Option<(&Arc<Canary>, &Arc<previous_release::Counts>)>,
        latest: bool,
        name: &str,
    ) -> Result<(Pipeline, u64), ChaosError> {
        let mut sources = self.indexer_sources(stack)?;
        if let Some((canary, counts)) = canary {
            let previous = previous_release::invoker(
                indexes(stack)?,
                aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&self.through)),
                Arc::clone(counts),
            );
            for source in &mut sources {
                source.invoker = canary.invoker(Arc::clone(&source.invoker), Arc::clone(&previous));
            }
        }
        let mut pipeline = self.pipeline(stack, sources, false, name);
        let passed = if latest { pipeline.starting_at_latest().await? } else { 0 };
        Ok((pipeline, passed))
    }

    /// The Kinesis mapping from its stream's present: a batch retried once, and the indexer
    /// crashing on the items of `crashing` until it is fixed.
    async fn kinesis_indexer(
        &self,
        stack: &Stack,
        crashing: &Arc<Crashing>,
        name: &str,
    ) -> Result<(Pipeline, u64), ChaosError> {
        let mut sources = self.indexer_sources(stack)?;
        for source in &mut sources {
            source.settings.maximum_retry_attempts = Some(1);
            source.invoker = crashing.invoker(Arc::clone(&source.invoker));
        }
        let mut pipeline = self.pipeline(stack, sources, false, name);
        let passed = pipeline.starting_at_latest().await?;
        Ok((pipeline, passed))
    }

    fn indexer_sources(&self, stack: &Stack) -> Result<Vec<Source>, ChaosError> {
        let mut sources = stack.sources(|f| self.invoker(f))?;
        sources.retain(|s| s.function == Indexer::NAME);
        for source in &mut sources {
            source.settings.parallelization_factor = self.options.parallelization;
        }
        Ok(sources)
    }

    fn operator<'s>(&'s self, stack: &'s Stack) -> Operator<'s> {
        Operator {
            stack,
            sdk: &self.through,
            kept: Arc::default(),
            rerun: Vec::new(),
            repair: true,
            transitions: AtomicU64::new(0),
        }
    }

    /// `failures replay` of every Kinesis range in the on-failure destination, as an operator
    /// runs it with the indexer's configuration: (ranges found, ranges replayed and acknowledged).
    async fn replay_kinesis_ranges(&self, stack: &Stack) -> Result<(u64, u64), ChaosError> {
        let Some(crate::Destination::Bucket(bucket)) = stack.failure_destination() else {
            return Err(ChaosError::Check("the stack's mappings have no S3 on-failure destination".into()));
        };
        let failed =
            |e: operations::failures::FailureError| ChaosError::Check(format!("failures replay: {e}"));
        let sdk = io_policy::without_sdk_retries(&self.through);
        let clients = ReplayClients {
            streams: aws_sdk_dynamodbstreams::Client::new(&self.direct),
            sqs: aws_sdk_sqs::Client::new(&self.direct),
            s3: crate::s3_client(&self.direct),
        };
        let read = operations::failures::read_destination(
            &clients.s3,
            &bucket,
            operations::failures::DESTINATION_PREFIX,
        )
        .await
        .map_err(failed)?;
        let env = &stack.function(Indexer::NAME)?.environment;
        let lookup = |name: &str| env.get(name).cloned();
        let replayer = Replayer::for_function(Indexer::NAME, &stream_runtime::Vars::new(&lookup), &sdk)
            .map_err(failed)?;
        let (mut found, mut done) = (0, 0);
        for range in read.iter().filter(|f| {
            matches!(f.records, Records::Range { source: operations::failures::Source::Kinesis, .. })
        }) {
            found += 1;
            for _ in 0..REPLAY_TRIES {
                let outcome =
                    operations::failures::replay_one(range, &replayer, &clients, REPLAY_TIMEOUT).await;
                if outcome.is_ok_and(|o| o.is_done()) {
                    done += 1;
                    break;
                }
            }
        }
        Ok((found, done))
    }

    /// The bulk edit's issues and passes: at least a hundred issues, a tenth of the
    /// tombstones wanted, each moved enough times to leave them.
    fn bulk_shape(&self) -> (u64, u64) {
        let issues = (self.tombstones / 10).max(100);
        (issues, self.tombstones.div_ceil(issues).max(1))
    }

    /// Puts `issues` issues in the scope [`BULK`], then moves each one's [`BULK`] field up
    /// `passes` times: each move leaves a tombstone below every live entry.
    async fn bulk_edit(
        &self,
        stack: &Stack,
        issues: u64,
        passes: u64,
        progress: &Progress,
    ) -> Result<(), ChaosError> {
        let client = aws_sdk_dynamodb::Client::new(&self.direct);
        let table = stack.table("IssuesTable")?.name.clone();
        let writes = futures_util::stream::iter(
            (0..=passes).flat_map(|pass| (1..=issues).map(move |n| (pass, n))),
        )
        .map(|(pass, n)| {
            let (client, table) = (client.clone(), table.clone());
            async move {
                let id = format!("{BULK}-{n:05}");
                let value = bulk_value(n, pass);
                let sent = if pass == 0 {
                    let item = json!({
                        "id": id, "project": BULK, "num": n, "name": format!("Bulk {n}"), "state": "open",
                        "custom_fields": {BULK: value},
                    });
                    let item: HashMap<String, AttributeValue> =
                        serde_dynamo::to_item(item).map_err(|e| ChaosError::Check(e.to_string()))?;
                    client
                        .put_item()
                        .table_name(&table)
                        .set_item(Some(item))
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ChaosError::Check(format!("the bulk edit: {}", io_policy::describe(&e))))
                } else {
                    client
                        .update_item()
                        .table_name(&table)
                        .key("id", AttributeValue::S(id))
                        .update_expression("SET custom_fields.#f = :v")
                        .expression_attribute_names("#f", BULK)
                        .expression_attribute_values(":v", AttributeValue::N(value.to_string()))
                        .send()
                        .await
                        .map(|_| ())
                        .map_err(|e| ChaosError::Check(format!("the bulk edit: {}", io_policy::describe(&e))))
                };
                progress.written.fetch_add(1, Ordering::Relaxed);
                sent
            }
        });
        // Each pass after the one before, each issue's edits in order.
        let mut writes = Box::pin(writes.buffered(self.options.writers.max(1)));
        while let Some(done) = writes.next().await {
            done?;
        }
        Ok(())
    }

    /// The grid over `stack`'s indexes, its pages given the time moto needs.
    fn grid(&self, stack: &Stack) -> Result<Grid, ChaosError> {
        let issues = stack.table("IssuesTable")?.name.clone();
        let schema = GridSchema::new(&indexes(stack)?, None, issues, "project-num")
            .map_err(|e| ChaosError::Check(format!("the grid: {e}")))?;
        Ok(Grid::new(
            aws_sdk_dynamodb::Client::new(&self.direct),
            schema,
            formats::cursor::Signer::new(b"lifecycle", 3_600),
        )
        .with_policy(io_policy::Bounded::new(io_policy::Policy::default(), Duration::from_secs(120))))
    }

    /// Tombstones in the bulk edit's partition, counted by a Query that filters them in.
    async fn tombstones(&self, stack: &Stack) -> Result<u64, ChaosError> {
        let index = indexes(stack)?;
        let index = index.indexes.first().ok_or_else(|| ChaosError::Check("no index".into()))?;
        let client = aws_sdk_dynamodb::Client::new(&self.direct);
        let pages = client
            .query()
            .table_name(&*index.table)
            .key_condition_expression("#pk = :pk")
            .filter_expression("attribute_exists(#e)")
            .expression_attribute_names("#pk", &index.partition_key)
            .expression_attribute_names("#e", formats::tombstone::EXPIRES_ATTRIBUTE)
            .expression_attribute_values(":pk", AttributeValue::S(format!("{BULK}#{BULK}")))
            .select(aws_sdk_dynamodb::types::Select::Count)
            .into_paginator()
            .send()
            .collect::<Vec<_>>()
            .await;
        let mut count = 0;
        for page in pages {
            let page = page.map_err(|e| {
                ChaosError::Check(format!("counting tombstones: {}", io_policy::describe(&e)))
            })?;
            count += u64::try_from(page.count()).unwrap_or(0);
        }
        Ok(count)
    }
}

/// The value bulk issue `n` holds after `pass`: every pass above every earlier one, in `n`'s
/// order within a pass.
fn bulk_value(n: u64, pass: u64) -> u64 {
    pass * 1_000_000 + n
}

/// Pages through the bulk scope again and again until `done`, counting what the pages cost.
async fn page_while(grid: &Grid, done: &AtomicBool) -> Result<Bulk, ChaosError> {
    let mut bulk = Bulk::default();
    while !done.load(Ordering::Relaxed) {
        bulk.add(&pages(grid).await?.bulk);
    }
    Ok(bulk)
}

/// One paging through the bulk scope by its field.
struct Paged {
    ids: Vec<(String, String)>,
    bulk: Bulk,
}

impl Bulk {
    fn add(&mut self, other: &Bulk) {
        self.pages += other.pages;
        self.most_queries = self.most_queries.max(other.most_queries);
        self.over_bound += other.over_bound;
        self.cut_at_1mb += other.cut_at_1mb;
        self.short += other.short;
    }
}

/// Every page of the bulk scope sorted by its field: (id, value) per row, and the pages' costs.
async fn pages(grid: &Grid) -> Result<Paged, ChaosError> {
    let query = Query {
        scope: BULK.into(),
        field: BULK.into(),
        descending: false,
        limit: PAGE,
        filter: Filter::None,
        attributes: vec![],
    };
    let mut paged = Paged { ids: Vec::new(), bulk: Bulk::default() };
    let mut cursor: Option<String> = None;
    loop {
        let page = grid
            .page(&query, cursor.as_deref())
            .await
            .map_err(|e| ChaosError::Check(format!("a grid page: {e}")))?;
        let b = &mut paged.bulk;
        b.pages += 1;
        if page.phase == formats::cursor::Phase::Index {
            // The bound, and one more for each Query DynamoDB stopped at 1 MB.
            let r = page.requests;
            b.most_queries = b.most_queries.max(u64::from(r.queries));
            b.cut_at_1mb += u64::from(r.cut_at_1mb);
            b.over_bound += u64::from(u64::from(r.queries) > QUERIES_PER_PAGE + u64::from(r.cut_at_1mb));
        }
        b.short += u64::from(page.next.is_some() && page.rows.len() < PAGE);
        for row in &page.rows {
            let id = row.item["id"]["S"].as_str().unwrap_or_default().to_owned();
            let value = row.value.as_ref().and_then(|v| v["N"].as_str()).unwrap_or_default().to_owned();
            paged.ids.push((id, value));
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(paged),
        }
    }
}

/// The grid at the end: every bulk issue once, by its last value, within the bound.
fn grid_verdict(ids: &[(String, String)], bulk: &Bulk, wanted: u64) -> Verdict {
    let (issues, passes) = (bulk.issues, bulk.passes);
    let expected: Vec<(String, String)> =
        (1..=issues).map(|n| (format!("{BULK}-{n:05}"), bulk_value(n, passes).to_string())).collect();
    let mut wrong = Vec::new();
    if ids != expected.as_slice() {
        wrong.push(format!(
            "the last paging read {} rows, not the {issues} bulk issues in order at their last values (first: {:?})",
            ids.len(),
            ids.first()
        ));
    }
    if bulk.over_bound > 0 {
        wrong.push(format!(
            "{} pages took more than {QUERIES_PER_PAGE} Queries (most {})",
            bulk.over_bound, bulk.most_queries
        ));
    }
    if bulk.short > 0 {
        wrong.push(format!("{} pages came back short with more to follow", bulk.short));
    }
    if bulk.tombstones < wanted {
        wrong
            .push(format!("{} tombstones in the partition, fewer than the {wanted} wanted", bulk.tombstones));
    }
    let ok = wrong.is_empty();
    Verdict {
        oracle: "grid",
        ok,
        detail: if ok {
            format!(
                "{} pages over {issues} issues moved {passes} times ({} tombstones in the partition): each index page at most {} Queries ({} cut at 1 MB in all), none short",
                bulk.pages, bulk.tombstones, bulk.most_queries, bulk.cut_at_1mb
            )
        } else {
            wrong.join("; ")
        },
    }
}

/// Whether the life happened: the backfill touched items, the previous release wrote, Kinesis
/// ranges were given up and every one replayed, and no drift is left.
fn life_verdict(report: &Report, drift: u64, crashes: u64) -> Verdict {
    let mut wrong = Vec::new();
    if report.backfill.1 == 0 {
        wrong.push("the backfill touched nothing".to_owned());
    }
    if report.previous_release.1 == 0 {
        wrong.push("the previous release wrote no transaction".to_owned());
    }
    let (ranges, records) = report.kinesis_given_up;
    if ranges == 0 || crashes == 0 {
        wrong.push(format!("no Kinesis range was given up ({crashes} crashes)"));
    }
    if report.kinesis_replayed != ranges {
        wrong.push(format!("{} of {ranges} Kinesis ranges replayed", report.kinesis_replayed));
    }
    if drift > 0 {
        wrong.push(format!("{drift} entries of persistent drift at the end"));
    }
    let ok = wrong.is_empty();
    Verdict {
        oracle: "lifecycle",
        ok,
        detail: if ok {
            format!(
                "backfill touched {} of {} items; the previous release wrote {} transactions ({} refused); {ranges} Kinesis ranges ({records} records) given up and replayed; no drift",
                report.backfill.1, report.backfill.0, report.previous_release.1, report.previous_release.2
            )
        } else {
            wrong.join("; ")
        },
    }
}

/// A bug of the Kinesis era: the indexer crashes on any batch holding one of a few items,
/// until it is fixed.
struct Crashing {
    ids: Vec<String>,
    fixed: AtomicBool,
    crashes: AtomicU64,
}

impl Crashing {
    fn new() -> Arc<Crashing> {
        Arc::new(Crashing {
            ids: (0..CRASHING).map(|n| format!("crashing-{n}")).collect(),
            fixed: AtomicBool::new(false),
            crashes: AtomicU64::new(0),
        })
    }

    /// The crashing items' puts.
    fn items(&self) -> Vec<Op> {
        self.ids
            .iter()
            .enumerate()
            .map(|(n, id)| {
                Op::Put(json!({
                    "id": id, "project": "p00", "num": n + 1, "name": "Crashes the indexer", "state": "open",
                    "custom_fields": {"3812": n},
                }))
            })
            .collect()
    }

    fn invoker(self: &Arc<Crashing>, inner: Invoker) -> Invoker {
        let crashing = Arc::clone(self);
        Arc::new(move |event, deadline| {
            let hit = !crashing.fixed.load(Ordering::Relaxed)
                && event.records.iter().any(|r| {
                    let keys = serde_json::to_value(&r.change.keys).unwrap_or_default();
                    keys["id"]["S"].as_str().is_some_and(|id| crashing.ids.iter().any(|c| c == id))
                });
            if hit {
                crashing.crashes.fetch_add(1, Ordering::Relaxed);
                return Box::pin(async {
                    Invocation::Failed { error_type: "Crash".into(), message: "the Kinesis era's bug".into() }
                });
            }
            inner(event, deadline)
        })
    }
}
