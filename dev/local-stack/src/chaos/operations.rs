//! The operations phase: what an operator runs against a live table, run while the workload
//! writes and the functions replay under faults, so that the oracles check the operations too.
//!
//! - **the scheduled verify job with repair**, again and again (the template's
//!   `VerifyStateMachine`, its verifier steps in process, with `VERIFY_REPAIR=true`): persistent
//!   drift mended through the stream;
//! - **a backfill** of the whole issues table (`index_backfill`), touching every item;
//! - **replays of old records**: records the functions were invoked with earlier in the run, of
//!   items changed since, replayed as `failures replay` does: the indexer's through the stream
//!   (`operations::verify::Mender::records`), the aggregator's and the archiver's rerun through the
//!   function (`operations::failures::rerun`).
//!
//! None of it may change what the oracles find: every one of these writes goes through the
//! stream in the item's order or is conditioned so that it cannot undo a newer write. After the
//! replay has settled, one last verification must find no persistent drift.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use serde::Serialize;
use stream_runtime::delivery::{Invoker, in_process};
use stream_runtime::filter::Pattern;
use stream_runtime::{EventRecord, Vars};

use crate::Stack;

use crate::chaos::ChaosError;
use multikey_indexer::Indexer;
use stream_runtime::StreamFunction as _;

/// The most records kept per function for replays: enough to replay old records of every
/// kind, few enough to keep in memory.
const KEPT_PER_FUNCTION: usize = 400;

/// Every how many records one is kept for a replay.
const KEEP_EVERY: u64 = 7;

/// How often the operations look at the workload's progress.
const BETWEEN_RUNS: Duration = Duration::from_millis(500);

/// Verifications while the workload is written: one as it starts, then one at each of these
/// parts of it (at most; one that takes longer than a part runs straight into the next). By
/// progress, not back to back: a verification scans both tables whole, so back-to-back runs
/// took whatever the emulator had to spare, more of them the faster it was, and a run's work
/// depended on its speed.
const VERIFY_PARTS: u64 = 8;

/// How long, once the workload is written, the operations wait for a record of each function to
/// be kept, if none was replayed yet: the mappings are still delivering then (under load a
/// function can lag the writers by minutes, and the archiver sees only TTL deletes, which come
/// late).
const LAST_REPLAY_WAIT: Duration = Duration::from_secs(600);

/// How many times a rerun that stopped at a (transient) failure is tried.
const RERUN_TRIES: usize = 20;

/// What the operations phase did.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Operations {
    /// Whether the verifications repaired what they found (`--no-repair`: they only looked).
    pub repair: bool,
    /// Scheduled verifications run (each one or two scans of both tables).
    pub verifications: u64,
    /// Persistent drift seen, summed over the verifications during the run (entries the stream
    /// had not caught up with twice in a row; each mended when repairing).
    pub drift_during_run: u64,
    /// Base items the repairs touched.
    pub repair_touches: u64,
    /// Index entries the repairs deleted.
    pub repair_deletes: u64,
    /// Repair deletes refused because the entry was called for again or written since.
    pub repair_deletes_refused: u64,
    /// Items the backfill touched.
    pub backfill_touches: u64,
    /// Items the backfill scanned.
    pub backfill_scanned: u64,
    /// Old records replayed: the indexer's through the stream.
    pub indexer_records_replayed: u64,
    /// Items the indexer's replays touched.
    pub replay_touches: u64,
    /// Entries the indexer's replays deleted (older than their record).
    pub replay_deletes: u64,
    /// Old records rerun through the aggregator and the archiver.
    pub records_rerun: u64,
    /// The persistent drift a last verification found after everything settled: 0.
    pub drift_at_end: u64,
}

/// Records kept from the functions' invocations, by function, for replays.
#[derive(Debug, Default)]
pub struct Kept {
    records: Mutex<BTreeMap<String, Vec<EventRecord>>>,
    /// Records seen, per function: each function's sample is every [`KEEP_EVERY`]th of its own.
    seen: Mutex<BTreeMap<String, u64>>,
}

impl Kept {
    /// `inner`, keeping every [`KEEP_EVERY`]th record it is invoked with (at most
    /// [`KEPT_PER_FUNCTION`]) for each of `functions` (one, or a combined function's), each
    /// from the records its patterns pass (none: all).
    pub fn keeping(self: &Arc<Kept>, functions: Vec<(String, Vec<Pattern>)>, inner: Invoker) -> Invoker {
        let (kept, functions) = (Arc::clone(self), Arc::new(functions));
        in_process(move |event, deadline| {
            let (inner, kept, functions) = (Arc::clone(&inner), Arc::clone(&kept), Arc::clone(&functions));
            async move {
                for (function, patterns) in functions.iter() {
                    let mine = stream_runtime::combined::select(&event.records, patterns);
                    kept.keep(function, mine.into_iter().map(|i| &event.records[i]));
                }
                inner(event, deadline).await
            }
        })
    }

    fn keep<'r>(&self, function: &str, records: impl Iterator<Item = &'r EventRecord>) {
        let mut all = self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (mine, seen) =
            (all.entry(function.to_owned()).or_default(), seen.entry(function.to_owned()).or_default());
        for record in records {
            if seen.is_multiple_of(KEEP_EVERY) && mine.len() < KEPT_PER_FUNCTION {
                mine.push(record.clone());
            }
            *seen += 1;
        }
    }

    /// Whether a record of `function` is kept now.
    fn has(&self, function: &str) -> bool {
        let all = self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        all.get(function).is_some_and(|r| !r.is_empty())
    }

    /// The records kept of `function` so far, taken (so each is replayed once).
    fn take(&self, function: &str) -> Vec<EventRecord> {
        let mut all = self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        all.get_mut(function).map(std::mem::take).unwrap_or_default()
    }
}

/// What the operations work with.
pub(crate) struct Operator<'a> {
    /// The stack.
    pub(crate) stack: &'a Stack,
    /// The SDK the operations use (through the fault proxy, as the functions do).
    pub(crate) sdk: &'a SdkConfig,
    /// The records kept for replays.
    pub(crate) kept: Arc<Kept>,
    /// The aggregator and the archiver, as invokers, for reruns.
    pub(crate) rerun: Vec<(String, Invoker)>,
    /// Whether the verifications repair what they find.
    pub(crate) repair: bool,
    /// The state transitions of the verify jobs run so far ([`Operator::state_transitions`]).
    pub(crate) transitions: AtomicU64,
}

impl Operator<'_> {
    /// The state transitions the verify jobs' executions have made, as Step Functions bills
    /// them.
    pub(crate) fn state_transitions(&self) -> u64 {
        self.transitions.load(Ordering::Relaxed)
    }

    /// Runs the operations until `done` is set (the workload is written), each at least once;
    /// the backfill starts once half the workload is written, so that it races the writers, and
    /// a verification (with the replays of kept records after it) at each of [`VERIFY_PARTS`]
    /// parts of the workload.
    pub(crate) async fn run(
        &self,
        done: &AtomicBool,
        progress: &crate::chaos::Progress,
    ) -> Result<Operations, ChaosError> {
        let mut ops = Operations { repair: self.repair, ..Operations::default() };
        let backfill = async {
            while !done.load(Ordering::Relaxed)
                && progress.written.load(Ordering::Relaxed) * 2 < progress.ops.load(Ordering::Relaxed)
            {
                tokio::time::sleep(BETWEEN_RUNS).await;
            }
            self.backfill().await
        };
        let repeat = async {
            loop {
                let run = self.verify(self.repair).await?;
                ops.verifications += 1;
                ops.drift_during_run += run.drift.count() as u64;
                if let Some(m) = run.mended {
                    ops.repair_touches += m.touched as u64;
                    ops.repair_deletes += m.deleted as u64;
                    ops.repair_deletes_refused += (m.called_for + m.newer) as u64;
                }
                self.replay(&mut ops).await?;
                let part = (progress.ops.load(Ordering::Relaxed) / VERIFY_PARTS).max(1);
                let next = (progress.written.load(Ordering::Relaxed) / part + 1) * part;
                loop {
                    if done.load(Ordering::Relaxed) {
                        self.last_replay(&mut ops).await?;
                        return Ok::<_, ChaosError>(ops);
                    }
                    if progress.written.load(Ordering::Relaxed) >= next {
                        break;
                    }
                    tokio::time::sleep(BETWEEN_RUNS).await;
                }
            }
        };
        let (backfilled, repeated) = tokio::join!(backfill, repeat);
        let (scanned, touched) = backfilled?;
        let mut ops = repeated?;
        ops.backfill_scanned = scanned;
        ops.backfill_touches = touched;
        Ok(ops)
    }

    /// Once the workload is written, and while the mappings still deliver: a replay of each
    /// function none of whose records has been replayed yet, once a record of it is kept, so
    /// that every way of replaying runs in every run however the functions lagged the
    /// verifications. An error if a function had no record kept within [`LAST_REPLAY_WAIT`].
    async fn last_replay(&self, ops: &mut Operations) -> Result<(), ChaosError> {
        let waited = Instant::now();
        loop {
            let mut missing = Vec::new();
            if ops.indexer_records_replayed == 0 && !self.kept.has(Indexer::NAME) {
                missing.push(Indexer::NAME.to_owned());
            }
            // Any one rerun function's records will do: a rerun is a rerun.
            if ops.records_rerun == 0 && !self.rerun.iter().any(|(f, _)| self.kept.has(f)) {
                missing.extend(self.rerun.iter().map(|(f, _)| f.clone()));
            }
            if missing.is_empty() {
                return self.replay(ops).await;
            }
            if waited.elapsed() > LAST_REPLAY_WAIT {
                return Err(ChaosError::Check(format!(
                    "no record of {} was kept for a replay within {} s of the workload's end",
                    missing.join(", "),
                    LAST_REPLAY_WAIT.as_secs()
                )));
            }
            tokio::time::sleep(BETWEEN_RUNS).await;
        }
    }

    /// The persistent drift of one last verification (run once the replay has settled).
    pub(crate) async fn drift_at_end(&self) -> Result<u64, ChaosError> {
        Ok(self.verify(false).await?.drift.count() as u64)
    }

    /// One run of the template's verify job (its state machine run in process, the verifier's
    /// steps too), repairing or not, with a 1 s least pause before the confirmation.
    async fn verify(&self, repair: bool) -> Result<operations::verify::scheduled::Run, ChaosError> {
        // The pause lasts the indexer's lag, read from the emulator's CloudWatch.
        let lag = self.stack.function(Indexer::NAME)?.environment.get(crate::FUNCTION_NAME_VAR).cloned();
        let repair = repair.to_string();
        let mut overrides = vec![("VERIFY_REPAIR", repair.as_str()), ("VERIFY_CONFIRM_SECONDS", "1")];
        if let Some(lag) = &lag {
            overrides.push(("VERIFY_LAG_FUNCTION", lag.as_str()));
        }
        let invocations = Arc::new(AtomicU64::new(0));
        let job = crate::verify_job(self.sdk, self.stack, &overrides, Duration::from_secs(900), &invocations)
            .await
            .map_err(|e| ChaosError::Check(format!("the verify job: {e}")))?;
        self.transitions.fetch_add(job.transitions, Ordering::Relaxed);
        Ok(job.run)
    }

    /// A client for calls under the I/O policy: the SDK's retries off.
    fn client(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(self.sdk))
    }

    /// The indexer's definitions, from its configuration.
    pub(crate) fn indexes(&self) -> Result<multikey_indexer::Indexes, ChaosError> {
        let function = self.stack.function(Indexer::NAME)?;
        let lookup = |name: &str| function.environment.get(name).cloned();
        multikey_indexer::Indexes::from_vars(&Vars::new(&lookup))
            .map_err(|e| ChaosError::Check(format!("the indexer's configuration: {e}")))
    }

    /// One run of the verify job with repair, as `sidestream index verify --repair` runs it:
    /// (items touched, entries deleted).
    pub(crate) async fn repair(&self) -> Result<(u64, u64), ChaosError> {
        let run = self.verify(true).await?;
        Ok(run.mended.map_or((0, 0), |m| (m.touched as u64, m.deleted as u64)))
    }

    /// One backfill of the whole issues table; (items scanned, items touched).
    pub(crate) async fn backfill(&self) -> Result<(u64, u64), ChaosError> {
        let indexes = self.indexes()?;
        let issues = self.stack.issues_table()?;
        let target = operations::backfill::Target::new(&issues, &indexes, None)
            .map_err(|e| ChaosError::Check(format!("the backfill: {e}")))?;
        let mut checkpoint = operations::backfill::Checkpoint::new(&issues, "bf-chaos", &target.sources, 2);
        let writer = self.client();
        operations::backfill::Backfill::new(writer, target, operations::backfill::Settings::default())
            .run(&mut checkpoint, &mut |_| Ok(()), &mut |_| {})
            .await
            .map_err(|e| ChaosError::Check(format!("the backfill: {e}")))?;
        let counts = checkpoint.counts();
        Ok((counts.scanned, counts.touched))
    }

    /// The indexer's kept records as it read them: from a Kinesis data stream, each versioned by
    /// its change time (the replayer keeps them as the table's DynamoDB stream holds them).
    fn as_read(&self, records: Vec<EventRecord>) -> Result<Vec<EventRecord>, ChaosError> {
        let arn = &self.stack.function(Indexer::NAME)?.streams[0].stream;
        let Some(stream) = crate::replayer::kinesis::delivery::Stream::registered(arn) else {
            return Ok(records);
        };
        records
            .iter()
            .map(|r| {
                stream.as_read(r).ok_or_else(|| {
                    ChaosError::Check(format!(
                        "the record {} was delivered but never written to {arn}",
                        r.event_id
                    ))
                })
            })
            .collect()
    }

    /// Replays the records kept since the last replay: the indexer's through the stream, the
    /// others rerun through their functions.
    async fn replay(&self, ops: &mut Operations) -> Result<(), ChaosError> {
        let records = self.as_read(self.kept.take(Indexer::NAME))?;
        if !records.is_empty() {
            let indexes = self.indexes()?;
            let writer = self.client();
            let table = self.stack.issues_table()?;
            let through_stream = operations::verify::Mender::new(
                writer,
                indexes,
                &table,
                &format!("chaos-replay-{}", ops.verifications),
            );
            let mended = through_stream
                .records(&records)
                .await
                .map_err(|e| ChaosError::Check(format!("replaying the indexer's records: {e}")))?;
            ops.indexer_records_replayed += records.len() as u64;
            ops.replay_touches += mended.touched as u64;
            ops.replay_deletes += mended.deleted as u64;
        }
        for (function, invoker) in &self.rerun {
            let records = self.kept.take(function);
            if records.is_empty() {
                continue;
            }
            let count = records.len() as u64;
            // Under the run's faults a rerun can stop at a transient failure, as any delivery
            // can: it is tried again, as Lambda would.
            let mut rerun = None;
            for _ in 0..RERUN_TRIES {
                let answer =
                    operations::failures::rerun(records.clone(), invoker, Duration::from_secs(60)).await;
                let done = answer.is_done();
                rerun = Some(answer);
                if done {
                    break;
                }
            }
            match rerun {
                Some(answer) if answer.is_done() => ops.records_rerun += count,
                other => {
                    return Err(ChaosError::Check(format!("rerunning {function}'s old records: {other:?}")));
                }
            }
        }
        Ok(())
    }
}
