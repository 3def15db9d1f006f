//! The verify as a job on Step Functions (the template's `VerifyStateMachine`): the steps the
//! state machine asks the verifier function for, and the state and results the function keeps
//! in S3 between them.
//!
//! A job verifies one index in `total_segments` scan segments, run by a Distributed Map with
//! at most `max_concurrency` at once:
//!
//! 1. **[`Step::Segment`]**, again and again for each segment until it answers `done`: the
//!    segment's base pass and then its index pass (`verify::pass`), page by page, until the
//!    segment ends or the invocation's deadline draws near. Its cursor (the pass, the key to
//!    resume after) and its drift so far are kept in `segment-NNNN.json`, read at the start of
//!    each invocation and written at its end: an invocation that dies leaves the last one's, and
//!    its retry repeats only its own pages.
//! 2. **[`Step::Merge`]**: every segment's drift summed into `first.json`, and the pause before
//!    the confirmation (`scheduled::pause`: at least `VERIFY_CONFIRM_SECONDS`, or the indexer's
//!    lag and as much again up to 10 s, at most 600 s; none when the index is exact), which the
//!    state machine waits in a `Wait` state, not in an invocation.
//! 3. **[`Step::Confirm`]**: each difference kept looked at again, key by key
//!    (`verify::confirm`); with `VERIFY_REPAIR=true` what persists is mended through the stream
//!    (`verify::mend`). The run goes to `report.json` and, as EMF, to the drift alarm.
//!
//! Every object is under `s3://VERIFY_BUCKET/VERIFY_PREFIX<run id>/`, in the format
//! docs/formats.md specifies ("Verify job state, version 1"). What a job holds in memory is a page,
//! its lookups and a drift (at most [`crate::verify::KEPT`] entries of each kind), whatever the
//! tables hold.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use io_policy::Policy;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use stream_runtime::{ConfigError, Vars};

use crate::job_store::{self, Store};
use crate::verify::pass::{Pass, Passes};
use crate::verify::scheduled::{Config, Run};
use crate::verify::{Drift, Mender, VerifyError};

/// The version of the objects a job writes (docs/formats.md).
pub const FORMAT_VERSION: u32 = 1;

/// No page starts later than this before the invocation's deadline: a page's calls end
/// [`job_store::OBJECT_TIME`] and the policy's margin before it ([`job_store::work_until`]), so
/// that the state is still written.
pub const STOP_BEFORE_DEADLINE: Duration = Duration::from_secs(75);

/// Segment states read at once when merging.
const READ_AT_ONCE: usize = 16;

/// Where a job keeps its segments' state and its results: `s3://bucket/prefix<run id>/…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Results {
    /// The bucket (`VERIFY_BUCKET`).
    pub bucket: String,
    /// The key prefix (`VERIFY_PREFIX`, default `verify/`).
    pub prefix: String,
}

impl Results {
    /// Reads `VERIFY_BUCKET` and `VERIFY_PREFIX`.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Results, ConfigError> {
        let bucket = vars.required(
            "VERIFY_BUCKET",
            "the bucket where a verify job keeps its segments' state and results",
        )?;
        let prefix = vars.optional("VERIFY_PREFIX").unwrap_or_else(|| "verify/".to_owned());
        Ok(Results { bucket, prefix })
    }

    /// The key of the object `name` of run `run_id`.
    pub fn key(&self, run_id: &str, name: &str) -> String {
        format!("{}{run_id}/{name}", self.prefix)
    }

    /// The name of segment `segment`'s state object.
    pub fn segment_name(segment: u32) -> String {
        format!("segment-{segment:04}.json")
    }
}

/// What the state machine asks of the verifier function: its input, by `step`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Go on with one segment.
    Segment(SegmentTask),
    /// Sum the segments' drift and say how long to pause.
    Merge {
        /// The job's run id.
        run_id: String,
        /// How many segments there are.
        total_segments: u32,
    },
    /// Look at the drift again, mend it if configured, and report.
    Confirm {
        /// The job's run id.
        run_id: String,
    },
}

/// One segment's work, as the state machine passes it to the function and back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentTask {
    /// The job's run id (the execution's name).
    pub run_id: String,
    /// How many segments each table is scanned in.
    pub total_segments: u32,
    /// The segment, from 0.
    pub segment: u32,
    /// Whether both of its passes are done (false, or absent, at first).
    #[serde(default)]
    pub done: bool,
}

/// A segment's state between invocations (`segment-NNNN.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SegmentState {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// The job's run id.
    pub run_id: String,
    /// The segment.
    pub segment: u32,
    /// How many segments there are.
    pub total_segments: u32,
    /// The pass it is in.
    pub pass: Pass,
    /// The key to resume the pass after (DynamoDB JSON); `null` from the pass's start.
    pub next: Option<Value>,
    /// Whether both passes are done.
    pub done: bool,
    /// Scan pages read so far, both passes.
    pub pages: u64,
    /// What the segment found so far.
    pub drift: Drift,
}

/// The summed drift and the pause (`first.json`), and the merge step's answer without the drift.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Merged {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// The job's run id.
    pub run_id: String,
    /// Whether the index was found exact (no confirmation needed).
    pub exact: bool,
    /// The differences found (before the confirmation).
    pub seen: usize,
    /// How long the state machine waits before the confirmation.
    pub pause_seconds: u64,
    /// Every segment's drift, summed (left out of the step's answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
}

/// What a step answers.
#[derive(Debug)]
pub enum Answer {
    /// A segment's task, its `done` set when both passes are.
    Segment(SegmentTask),
    /// The merge's answer (without the drift).
    Merged(Merged),
    /// The run: the drift found, the persistent drift, the mend.
    Confirmed(Run),
}

/// A step's answer as the function gives it: the JSON the state machine receives, and for a
/// confirmation the EMF line the drift alarm reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The step's output.
    pub output: Value,
    /// The confirmation's EMF document (`scheduled::emf`).
    pub emf: Option<Value>,
}

impl Answer {
    /// This answer as the function replies with it, `now_ms` the EMF timestamp: a confirmation
    /// answers its summary (`scheduled::summary`).
    pub fn reply(&self, config: &Config, now_ms: u64) -> Result<Reply, VerifyError> {
        let json = |v: Result<Value, serde_json::Error>| v.map_err(|e| VerifyError::Format(e.to_string()));
        Ok(match self {
            Answer::Segment(task) => Reply { output: json(serde_json::to_value(task))?, emf: None },
            Answer::Merged(merged) => Reply { output: json(serde_json::to_value(merged))?, emf: None },
            Answer::Confirmed(run) => Reply {
                output: crate::verify::scheduled::summary(run),
                emf: Some(crate::verify::scheduled::emf(run, &config.namespace, &config.function, now_ms)),
            },
        })
    }
}

/// The verifier function's work: its configuration and clients, built once at cold start.
#[derive(Debug)]
pub struct Job {
    client: aws_sdk_dynamodb::Client,
    store: Store,
    cloudwatch: aws_sdk_cloudwatch::Client,
    config: Config,
}

impl Job {
    /// A job's steps with these clients (`client` with the SDK's retries off: every call is
    /// under the I/O policy).
    pub fn new(
        client: aws_sdk_dynamodb::Client,
        s3: aws_sdk_s3::Client,
        cloudwatch: aws_sdk_cloudwatch::Client,
        config: Config,
        results: Results,
    ) -> Job {
        let store = Store::new(s3, results.bucket, results.prefix, "a verify job");
        Job { client, store, cloudwatch, config }
    }

    /// The verifier's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Runs `step`, within `deadline` (the invocation's).
    pub async fn step(&self, step: Step, deadline: Instant) -> Result<Answer, VerifyError> {
        // Each step's future is boxed: nested in the function's, their layout would otherwise go
        // deeper than the compiler's query limit.
        match step {
            Step::Segment(task) => Box::pin(self.segment(task, deadline)).await.map(Answer::Segment),
            Step::Merge { run_id, total_segments } => {
                Box::pin(self.merge(&run_id, total_segments, deadline)).await.map(Answer::Merged)
            }
            Step::Confirm { run_id } => {
                Box::pin(self.confirm(&run_id, deadline)).await.map(Answer::Confirmed)
            }
        }
    }

    /// Goes on with `task`'s segment from its saved state, a page at a time, until it is done or
    /// `deadline` draws near (at least one page an invocation), then saves the state.
    async fn segment(&self, task: SegmentTask, deadline: Instant) -> Result<SegmentTask, VerifyError> {
        let name = Results::segment_name(task.segment);
        let mut state = match self.read::<SegmentState>(&task.run_id, &name, deadline).await? {
            Some(state) => {
                if (state.version, &state.run_id, state.segment, state.total_segments)
                    != (FORMAT_VERSION, &task.run_id, task.segment, task.total_segments)
                {
                    return Err(VerifyError::Format(format!(
                        "{} holds segment {} of {} of run {} (version {}), not segment {} of {} of run {}",
                        self.store.key(&task.run_id, &name),
                        state.segment,
                        state.total_segments,
                        state.run_id,
                        state.version,
                        task.segment,
                        task.total_segments,
                        task.run_id
                    )));
                }
                state
            }
            None => SegmentState {
                version: FORMAT_VERSION,
                run_id: task.run_id.clone(),
                segment: task.segment,
                total_segments: task.total_segments,
                pass: Pass::Base,
                next: None,
                done: false,
                pages: 0,
                drift: Drift::none(&self.config.index),
            },
        };
        let stop = deadline.checked_sub(STOP_BEFORE_DEADLINE).unwrap_or(deadline);
        // A page's calls end in time for the state's write, which has its own bound after them.
        let budget = Policy::default()
            .within(job_store::work_until(deadline).saturating_duration_since(Instant::now()));
        let passes = Passes::new(
            &self.client,
            &budget,
            &self.config.indexes,
            &self.config.index,
            &self.config.table,
            &|_| {},
        )
        .paced(self.config.page_items, self.config.read_units);
        while !state.done {
            let start = state.next.take().map(|key| key_from_json(&key)).transpose()?;
            let next = passes
                .page_of(state.pass, (task.segment, task.total_segments), start, &mut state.drift)
                .await?;
            state.pages += 1;
            match (next, state.pass) {
                (Some(key), _) => state.next = Some(key_to_json(key)?),
                (None, Pass::Base) => state.pass = Pass::Index,
                (None, Pass::Index) => state.done = true,
            }
            if Instant::now() >= stop {
                break;
            }
        }
        self.write(&task.run_id, &name, &state, deadline).await?;
        tracing::info!(
            run_id = task.run_id,
            segment = task.segment,
            done = state.done,
            pages = state.pages,
            differences = state.drift.count(),
            "segment progress"
        );
        Ok(SegmentTask { done: state.done, ..task })
    }

    /// Sums every segment's drift into `first.json`, with the pause before the confirmation.
    async fn merge(
        &self,
        run_id: &str,
        total_segments: u32,
        deadline: Instant,
    ) -> Result<Merged, VerifyError> {
        let mut drift = Drift::none(&self.config.index);
        let mut states = futures_util::stream::iter(0..total_segments)
            .map(|segment| async move {
                let name = Results::segment_name(segment);
                let state = self.read::<SegmentState>(run_id, &name, deadline).await?;
                match state {
                    Some(state) if state.done => Ok(state),
                    _ => Err(VerifyError::Format(format!(
                        "{} is not a finished segment: every segment must be done before the merge",
                        self.store.key(run_id, &name)
                    ))),
                }
            })
            .buffered(READ_AT_ONCE);
        while let Some(state) = states.next().await {
            drift.merge(state?.drift);
        }
        let pause = if drift.is_exact() {
            Duration::ZERO
        } else {
            let lag = match &self.config.lag_function {
                Some(function) => crate::verify::scheduled::lag(&self.cloudwatch, function).await,
                None => None,
            };
            crate::verify::scheduled::pause(self.config.confirm_after, lag)
        };
        let merged = Merged {
            version: FORMAT_VERSION,
            run_id: run_id.to_owned(),
            exact: drift.is_exact(),
            seen: drift.count(),
            pause_seconds: pause.as_secs(),
            drift: Some(drift),
        };
        self.write(run_id, "first.json", &merged, deadline).await?;
        Ok(Merged { drift: None, ..merged })
    }

    /// Looks again at what `first.json` kept, mends what persists when repairing, and writes the
    /// run's report to `report.json`.
    async fn confirm(&self, run_id: &str, deadline: Instant) -> Result<Run, VerifyError> {
        let merged = self.read::<Merged>(run_id, "first.json", deadline).await?.ok_or_else(|| {
            VerifyError::Format(format!(
                "{} is missing: the merge step writes it",
                self.store.key(run_id, "first.json")
            ))
        })?;
        let first = merged.drift.unwrap_or_else(|| Drift::none(&self.config.index));
        let (indexes, index, table) = (&self.config.indexes, &self.config.index, self.config.table.as_str());
        let policy = Policy::default();
        let drift = if first.is_exact() {
            first.clone()
        } else {
            crate::verify::confirm(&self.client, policy, indexes, index, table, &first).await?
        };
        let mut mended = None;
        if self.config.repair && !drift.is_exact() && Instant::now() < deadline {
            let by_stream = Mender::new(self.client.clone(), indexes.clone(), table, run_id);
            mended = Some(by_stream.drift(index, &drift).await?);
        }
        let run = Run { first, drift, mended, paused: Duration::from_secs(merged.pause_seconds) };
        self.write(run_id, "report.json", &crate::verify::scheduled::summary(&run), deadline).await?;
        Ok(run)
    }

    /// The object `name` of run `run_id`, if there is one, read by `deadline`.
    async fn read<T: serde::de::DeserializeOwned>(
        &self,
        run_id: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<T>, VerifyError> {
        Ok(self.store.read(run_id, name, deadline).await?)
    }

    /// Writes `value` as the object `name` of run `run_id`, under the I/O policy, by `deadline`.
    async fn write<T: Serialize>(
        &self,
        run_id: &str,
        name: &str,
        value: &T,
        deadline: Instant,
    ) -> Result<(), VerifyError> {
        Ok(self.store.write(run_id, name, value, deadline).await?)
    }
}

/// A scan's `LastEvaluatedKey` as DynamoDB JSON, for a segment's state.
fn key_to_json(key: crate::verify::pass::Item) -> Result<Value, VerifyError> {
    serde_json::to_value(serde_dynamo::Item::from(key)).map_err(|e| VerifyError::Format(e.to_string()))
}

/// A segment state's key (DynamoDB JSON) as a scan's `ExclusiveStartKey`.
fn key_from_json(key: &Value) -> Result<crate::verify::pass::Item, VerifyError> {
    let item: serde_dynamo::Item = serde_json::from_value(key.clone())
        .map_err(|e| VerifyError::Format(format!("a segment's resume key is not DynamoDB JSON: {e}")))?;
    Ok(item.into())
}

/// The index-verifier Lambda: configured once at cold start, then a step per invocation; the
/// confirmation's drift goes to stdout as one EMF line, for the template's drift alarm.
impl stream_runtime::task::Task for Job {
    const NAME: &'static str = "index-verifier";
    const ERROR_TYPE: &'static str = "VerifyError";
    type Input = Step;
    type Output = Value;
    type Error = VerifyError;

    async fn init(
        vars: &Vars<'_>,
        sdk: &aws_types::SdkConfig,
    ) -> Result<Job, stream_runtime::task::InitError> {
        let (config, results) = (Config::from_vars(vars)?, Results::from_vars(vars)?);
        // Every DynamoDB and S3 call goes through the I/O policy, which does the retrying.
        let aws = stream_runtime::Aws::from_vars(sdk, vars)?;
        // The indexer's lag, read once a job that found drift.
        let cloudwatch = aws_sdk_cloudwatch::Client::new(sdk);
        Ok(Job::new(aws.dynamodb(), aws.s3(), cloudwatch, config, results))
    }

    async fn handle(&self, step: Step, deadline: Instant) -> Result<Value, VerifyError> {
        let answer = self.step(step, deadline).await?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let reply = answer.reply(self.config(), now)?;
        if let (Some(emf), Answer::Confirmed(run)) = (&reply.emf, &answer) {
            emit(emf);
            if run.drift.is_exact() {
                tracing::info!(summary = %reply.output, "the index is exact");
            } else {
                tracing::error!(summary = %reply.output, "the index has drifted");
            }
        }
        Ok(reply.output)
    }
}

/// EMF is delivered through stdout, where Lambda's log agent picks it up.
#[expect(clippy::print_stdout, reason = "EMF is delivered through stdout")]
fn emit(doc: &Value) {
    println!("{doc}");
}

#[cfg(test)]
mod tests;
