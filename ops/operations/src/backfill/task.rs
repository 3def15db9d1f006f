//! One scan segment as a Lambda invocation: the backfill function's configuration, input and
//! output, shared by the function (`ops/index-backfiller`) and the local stack that runs
//! the template's state machine in process.
//!
//! The state machine's Distributed Map gives each segment a [`Task`] from its start; the
//! function scans and touches pages until the segment ends or its invocation is about to, and
//! returns the task with the segment's cursor moved on. The state machine invokes it again with
//! that output until `done`: a segment may take any number of 15-minute invocations.

use std::time::{Duration, Instant};

use formats::Indexes;
use serde::{Deserialize, Serialize};
use stream_runtime::{ConfigError, Vars};

use crate::backfill::checkpoint::{Counts, Cursor};
use crate::backfill::{Backfill, BackfillError, Settings, Target};

/// The variable naming the base table.
pub(crate) const TABLE_VAR: &str = "BACKFILL_TABLE";
/// The variable naming the index to backfill (every index when unset).
pub(crate) const INDEX_VAR: &str = "BACKFILL_INDEX";
/// Read capacity units per second, per invocation (unset: no limit).
pub(crate) const READ_UNITS_VAR: &str = "BACKFILL_READ_UNITS";
/// Write capacity units per second, per invocation (unset: no limit).
pub(crate) const WRITE_UNITS_VAR: &str = "BACKFILL_WRITE_UNITS";

/// Items per scan page (default 500).
pub(crate) const PAGE_SIZE_VAR: &str = "BACKFILL_PAGE_SIZE";

/// No page starts later than this before the invocation's deadline: a page's calls are bounded
/// by a minute, and the answer must still be returned.
pub const STOP_BEFORE_DEADLINE: Duration = Duration::from_secs(75);

/// One segment's work, as the state machine passes it to the function and back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// The marker value this run writes.
    pub run_id: String,
    /// How many segments the table is split into.
    pub total_segments: u32,
    /// The segment and where it is.
    #[serde(flatten)]
    pub cursor: TaskCursor,
}

/// A [`Cursor`] whose progress fields may be left out (a segment's first task).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskCursor {
    /// The segment, from 0.
    pub segment: u32,
    /// The key to resume after; absent or `null` from the start.
    #[serde(default)]
    pub next: Option<serde_json::Value>,
    /// Whether the segment is done.
    #[serde(default)]
    pub done: bool,
    /// What the segment has done so far.
    #[serde(default)]
    pub counts: Counts,
    /// The keys of the items the segment could not touch, so far (left out while none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untouchable: Vec<serde_json::Value>,
}

/// The backfill function's configuration, read once at cold start.
pub fn target_from_vars(vars: &Vars<'_>) -> Result<(Target, Settings), ConfigError> {
    let indexes = Indexes::from_vars(vars)?;
    let table = vars.required(TABLE_VAR, "the base table whose items the backfill touches")?;
    let index = vars.optional(INDEX_VAR);
    let target = Target::new(&table, &indexes, index.as_deref())
        .map_err(|e| ConfigError::Invalid { var: INDEX_VAR, reason: e.to_string() })?;
    let settings = Settings {
        page_size: vars.integer(PAGE_SIZE_VAR, 500, 1, 10_000)?,
        read_units_per_second: vars.rate(READ_UNITS_VAR)?,
        write_units_per_second: vars.rate(WRITE_UNITS_VAR)?,
        ..Settings::default()
    };
    Ok((target, settings))
}

impl Backfill {
    /// Runs `task`'s segment until it ends or `deadline` draws near, and returns the task with
    /// its cursor moved on.
    pub async fn task(&self, task: Task, deadline: Instant) -> Result<Task, BackfillError> {
        let Task { run_id, total_segments, cursor } = task;
        let mut cursor = Cursor {
            segment: cursor.segment,
            next: cursor.next,
            done: cursor.done,
            counts: cursor.counts,
            untouchable: cursor.untouchable,
        };
        let stop = deadline.checked_sub(STOP_BEFORE_DEADLINE).unwrap_or(deadline);
        self.segment(&run_id, total_segments, &mut cursor, Some(stop), &mut |_| Ok(())).await?;
        tracing::info!(
            run_id,
            segment = cursor.segment,
            done = cursor.done,
            scanned = cursor.counts.scanned,
            touched = cursor.counts.touched,
            untouchable = cursor.counts.untouchable,
            "segment progress"
        );
        Ok(Task {
            run_id,
            total_segments,
            cursor: TaskCursor {
                segment: cursor.segment,
                next: cursor.next,
                done: cursor.done,
                counts: cursor.counts,
                untouchable: cursor.untouchable,
            },
        })
    }
}

/// The index-backfiller Lambda: configured once at cold start from `MULTIKEY_INDEXES` and
/// `BACKFILL_*` (the client under the I/O policy, the SDK's retries off), then one scan segment
/// per invocation.
impl stream_runtime::task::Task for Backfill {
    const NAME: &'static str = "index-backfiller";
    const ERROR_TYPE: &'static str = "BackfillError";
    type Input = Task;
    type Output = Task;
    type Error = BackfillError;

    async fn init(
        vars: &Vars<'_>,
        sdk: &aws_types::SdkConfig,
    ) -> Result<Backfill, stream_runtime::task::InitError> {
        let (target, settings) = target_from_vars(vars)?;
        let client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(sdk));
        Ok(Backfill::new(client, target, settings))
    }

    async fn handle(&self, task: Task, deadline: Instant) -> Result<Task, BackfillError> {
        self.task(task, deadline).await
    }
}

#[cfg(test)]
mod tests;
