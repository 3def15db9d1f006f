//! The one runtime every Sidestream stream function runs under.
//!
//! A function implements [`StreamFunction`]: how it is built from its environment, its pure
//! plan, and its thin I/O. The runtime owns the rest of a batch's life, the same way for every
//! function:
//!
//! 1. **Plan** ([`StreamFunction::plan`]): records in, intended writes out, synchronous. A record
//!    the plan cannot handle comes back as a [`RecordFailure`] of one of the three kinds.
//! 2. **Apply** ([`StreamFunction::apply`]): the writes, under one I/O policy ([`io_policy`]):
//!    retries with jittered backoff, attempt timeouts, and the invocation's deadline less a
//!    margin. Writes that fail come back as [`RecordFailure`]s too. A function whose batch falls
//!    into parts that share no write may plan and apply part by part, writing one part while it
//!    plans the next ([`StreamFunction::plan_and_apply`]).
//! 3. **Decide** ([`decide`]): the earliest transient or systemic failure is the checkpoint;
//!    record-permanent failures before it are parked.
//! 4. **Park** ([`parked`]): each such record goes, whole, with its error, to the parking place
//!    (an S3 prefix, `PARKING_BUCKET`/`PARKING_PREFIX`). A record that cannot be parked becomes
//!    the checkpoint instead (a transient failure): nothing is lost.
//! 5. **Conclude** ([`conclude`]): metrics as one EMF line, and the response, `batchItemFailures` holding the
//!    checkpoint's sequence number.
//!
//! Before the first batch, [`run`] primes ([`prime`]): one `DescribeTable` or `HeadBucket` per
//! resource the function names ([`StreamFunction::resources`]), failing init on a missing or
//! mis-keyed one and opening the connection.
//!
//! [`run`] runs a function under `lambda_runtime`, on the events of its [`source`] (a DynamoDB
//! stream, or a Kinesis data stream carrying the table's changes). A DynamoDB stream's event is
//! read in place from the invocation's bytes ([`crate::wire`]): the plans and the response
//! read records that point into them, and a record is decoded whole only to be parked
//! ([`whole`]). [`Runtime::handle_json`] runs one batch from its JSON as Lambda does, and
//! [`Runtime::handle`] one already decoded (the local stack and the tests).
//!
//! The crate's README shows a complete function, and is compiled and run as a doctest.

pub mod aws;
pub use io_policy;
pub use io_policy::{Budget, Failure, FailureKind};
pub use stream_record::{
    AttributeValue, Attributes, ChangeKind, ConfigError, Image, ItemWrite, Op, Record, RecordError, Vars,
    WireRecord,
};
pub use stream_record::{env, fixture, limits, record, wire, write};
pub mod combined;
pub mod conclude;
pub mod decide;
pub mod delivery;
pub mod exit;
pub mod explain;
pub mod filter;
pub mod kinesis;
pub mod metrics;
pub mod outcome;
pub mod parked;
pub mod prime;
mod runtime;
pub mod settings;
pub mod source;
pub mod task;
pub mod whole;
pub mod writer;

use std::future::Future;

pub use aws::Aws;
pub use aws_lambda_events::event::dynamodb::{Event, EventRecord};
pub use aws_lambda_events::event::streams::DynamoDbEventResponse;
pub use combined::{Combined, Member};
pub use conclude::{Checkpoint, NoCheckpoint};
pub use explain::{Explain, ExplainError, Explained, Explainer};
pub use metrics::{Metric, Metrics};
pub use outcome::{PlanFailure, PlanFailures, Skipped};
pub use prime::Resource;
pub(crate) use prime::{PrimeError, Primed};
pub use runtime::{Runtime, main, run};
pub use settings::ParkingPlace;
pub use settings::Settings;
pub use source::Source;
pub use whole::Whole;

/// How records Lambda gave up on are replayed into a function (`failures replay`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Run again through the function's own code. For a function whose writes leave the same
    /// state whatever the order and however often they come (each record's sequence number its
    /// version): a late rerun can never undo a newer write.
    Rerun,
    /// Through the stream: each record's base item is touched, so that its current image comes
    /// down the stream again, in its order. For derived state written in each item's order (the
    /// index), where a rerun of an old record could undo a newer write.
    ThroughTheStream,
}

/// A stream function: its configuration, its pure plan and its I/O.
pub trait StreamFunction: Send + Sync + Sized + 'static {
    /// The function's name (its crate and binary): the default for metrics and logs.
    const NAME: &'static str;
    /// The CloudWatch namespace of its metrics when `METRICS_NAMESPACE` is unset: by default its
    /// name.
    const NAMESPACE: &'static str = Self::NAME;
    /// Its own metrics ([`Metric::Own`]), emitted beside the runtime's on every invocation, zero
    /// included, so that an alarm on one sees a steady series. None by default. A name must not
    /// be one of the runtime's ([`Metric::ALL`]) or `Function`.
    const METRICS: &'static [&'static str] = &[];
    /// How `failures replay` replays its records, Lambda having given them up. By default
    /// through the stream (a touch of each record's base item), which is safe for any function;
    /// [`Replay::Rerun`] only for one whose writes leave the same state in any order.
    const REPLAY: Replay = Replay::ThroughTheStream;
    /// How it explains its plan without AWS (`sidestream plan`, [`explain`]). None by default:
    /// explaining it is then [`ExplainError::NotExplained`].
    const EXPLAIN: Option<explain::Explain> = None;
    /// What the plan hands to [`StreamFunction::apply`].
    type Plan: Send;
    /// The DynamoDB stream view types whose records carry what the plan reads: priming fails
    /// init when the source table's stream has another (`SOURCE_TABLE`, [`prime`]).
    const STREAM_VIEWS: &'static [&'static str];

    /// Builds the function from its environment, once, at cold start. Errors name the variable.
    fn init(vars: &Vars<'_>, aws: &Aws) -> Result<Self, ConfigError>;

    /// Whether one item's records may come out of order and more than once and leave the same
    /// state, each record's `SequenceNumber` then being its version. Only such a function may
    /// read a Kinesis data stream ([`Source::Kinesis`]); the runtime refuses the others at cold
    /// start, naming `hint`'s variable when there is one to set. Asked once, after `init`.
    fn any_order(&self) -> Result<(), AnyOrderHint> {
        Err(AnyOrderHint(None))
    }

    /// The resources it writes, checked and connected to at cold start ([`prime`]): the
    /// runtime's [`prime::Table`] and [`prime::Bucket`], or its own [`Resource`]. None by
    /// default; the parking bucket and the source table the runtime adds itself.
    fn resources(&self) -> Vec<Box<dyn Resource>> {
        Vec::new()
    }

    /// Plans a batch, its records read in place ([`crate::wire`]): pure, synchronous.
    fn plan(&self, records: &[WireRecord<'_>]) -> Planned<Self::Plan>;

    /// Applies a plan within `budget`; every AWS call goes through it.
    fn apply(&self, plan: Self::Plan, budget: &Budget) -> impl Future<Output = Applied> + Send;

    /// Plans a batch and applies the plan: what the runtime calls. By default the whole batch is
    /// planned ([`StreamFunction::plan`]), then applied ([`StreamFunction::apply`]). A function
    /// whose batch falls into parts that no write shares (the indexer's items) may override it to
    /// begin writing one part while planning the next. It must leave what the default leaves,
    /// with one freedom: before the checkpoint is known it may write records after it, and
    /// report their failures, which [`decide`] passes over (Lambda delivers those records again
    /// from the checkpoint, each item's in order, so idempotent writes end the same). The plan's
    /// failures and counts come back with the writes'.
    fn plan_and_apply<'r>(
        &'r self,
        records: &'r [WireRecord<'r>],
        budget: &'r Budget,
    ) -> impl Future<Output = Applied> + Send + 'r {
        plan_then_apply(self, records, budget)
    }
}

/// [`StreamFunction::plan_and_apply`]'s default: the whole batch planned, then applied. For an
/// override to fall back on.
pub async fn plan_then_apply<F: StreamFunction>(
    function: &F,
    records: &[WireRecord<'_>],
    budget: &Budget,
) -> Applied {
    let planned = function.plan(records);
    // Boxed: a function's I/O future can be deep, and this keeps the handler's type small.
    let applied = Box::pin(function.apply(planned.plan, budget)).await;
    Applied::after(planned.failures, planned.counts, applied)
}

/// Why a function cannot take records in any order: `Some` names the setting that would let it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnyOrderHint(pub Option<&'static str>);

/// A record that did not succeed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFailure {
    /// Its position in the batch.
    pub record: usize,
    /// What kind of failure, and what happened.
    pub failure: Failure,
}

impl RecordFailure {
    /// A failure of record `record`.
    pub fn new(record: usize, failure: Failure) -> RecordFailure {
        RecordFailure { record, failure }
    }
}

/// The failures of a plan's rejected records and of the record it stopped at, each of the kind
/// `kind` gives its error.
pub fn rejections<E: std::fmt::Display>(
    failures: crate::PlanFailures<E>,
    kind: impl Fn(&E) -> FailureKind,
) -> Vec<RecordFailure> {
    failures
        .rejected
        .into_iter()
        .chain(failures.stopped)
        .map(|r| RecordFailure::new(r.record, Failure::new(kind(&r.error), r.error.to_string())))
        .collect()
}

/// What a plan produced.
#[derive(Debug)]
pub struct Planned<P> {
    /// The writes to apply.
    pub plan: P,
    /// Records the plan could not handle. After a systemic one nothing is planned.
    pub failures: Vec<RecordFailure>,
    /// Counters the plan contributes (skipped records, values left out).
    pub counts: Vec<(Metric, u64)>,
}

/// What applying a plan did (and, from [`StreamFunction::plan_and_apply`], planning it).
#[derive(Debug, Default)]
pub struct Applied {
    /// Records whose writes failed, and why.
    pub failures: Vec<RecordFailure>,
    /// Item writes or objects that succeeded.
    pub writes: u64,
    /// Item writes or objects given up on.
    pub failed_writes: u64,
    /// Counters the I/O contributes (conflicts, say).
    pub counts: Vec<(Metric, u64)>,
}

impl Applied {
    /// `applied` after a plan's `failures` and `counts`: the plan's come first.
    pub fn after(failures: Vec<RecordFailure>, counts: Vec<(Metric, u64)>, applied: Applied) -> Applied {
        let mut all = failures;
        all.extend(applied.failures);
        let mut all_counts = counts;
        all_counts.extend(applied.counts);
        Applied { failures: all, counts: all_counts, ..applied }
    }
}

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
