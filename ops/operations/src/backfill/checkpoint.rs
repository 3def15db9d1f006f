//! Where a backfill is: the checkpoint file (format `sidestream-backfill/2`, `docs/formats.md`;
//! `/1` files, which lack the untouchable items, are read too).
//!
//! One JSON object holds the run id and, per scan segment, the key to resume the scan after (the
//! last page's `LastEvaluatedKey`, in DynamoDB JSON), whether the segment is done, and its counts.
//! It is written after every page, to a temporary file renamed over the old one, so a process
//! killed at any point leaves the last complete page's checkpoint. A resumed backfill re-reads at
//! most one page per segment; touching those items again is a no-op (the touch is conditional on
//! the marker not already holding the run id).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::backfill::BackfillError;

/// The format tag written.
pub const FORMAT: &str = "sidestream-backfill/2";

/// The format tags read: version 1 lacks `untouchable`, which reads as none.
const READS: [&str; 2] = ["sidestream-backfill/1", FORMAT];

/// A backfill's progress, saved after each page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// [`FORMAT`].
    pub format: String,
    /// The base table.
    pub table: String,
    /// The marker value this run writes.
    pub run_id: String,
    /// The attributes whose items it touches (the indexes' sources).
    pub sources: Vec<String>,
    /// How many scan segments the table is split into.
    pub total_segments: u32,
    /// One cursor per segment, in segment order.
    pub segments: Vec<Cursor>,
}

/// Where one scan segment is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cursor {
    /// The segment, from 0.
    pub segment: u32,
    /// The key to resume the scan after (DynamoDB JSON); `null` from the segment's start.
    pub next: Option<Value>,
    /// Whether the segment has been scanned to its end.
    pub done: bool,
    /// What the segment has done so far.
    pub counts: Counts,
    /// The keys (DynamoDB JSON) of the items this segment could not touch: their content can
    /// never take the marker (an item at DynamoDB's 400 KB limit). The backfill goes on past
    /// them; `docs/operations.md` says how to index them.
    #[serde(default)]
    pub untouchable: Vec<Value>,
}

/// What a backfill (or one segment of it) has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// Items read.
    pub scanned: u64,
    /// Items touched (with `--dry-run`: items that would be).
    pub touched: u64,
    /// Items not touched because they already carry this run's marker, or were deleted or
    /// touched since the scan read them.
    pub already: u64,
    /// Items with none of the indexes' source attributes: nothing to index.
    pub unindexed: u64,
    /// Items that cannot take the marker (record-permanent: DynamoDB refused the touch for the
    /// item's content, as an item at the 400 KB limit): listed in the cursor, not indexed.
    #[serde(default)]
    pub untouchable: u64,
    /// Read capacity units the scan consumed.
    pub read_units: f64,
    /// Write capacity units the touches consumed (estimated from item sizes).
    pub write_units: f64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.scanned += other.scanned;
        self.touched += other.touched;
        self.already += other.already;
        self.unindexed += other.unindexed;
        self.untouchable += other.untouchable;
        self.read_units += other.read_units;
        self.write_units += other.write_units;
    }
}

impl Checkpoint {
    /// A run that has not started: every segment from its start.
    pub fn new(table: &str, run_id: &str, sources: &[String], total_segments: u32) -> Checkpoint {
        Checkpoint {
            format: FORMAT.to_owned(),
            table: table.to_owned(),
            run_id: run_id.to_owned(),
            sources: sources.to_vec(),
            total_segments,
            segments: (0..total_segments).map(|segment| Cursor { segment, ..Cursor::default() }).collect(),
        }
    }

    /// Every segment's counts, summed.
    pub fn counts(&self) -> Counts {
        let mut sum = Counts::default();
        for cursor in &self.segments {
            sum += cursor.counts;
        }
        sum
    }

    /// Whether every segment is done.
    pub fn is_done(&self) -> bool {
        self.segments.iter().all(|c| c.done)
    }

    /// Reads a checkpoint file; `None` when there is none.
    pub fn load(path: &Path) -> Result<Option<Checkpoint>, BackfillError> {
        let failed =
            |message: String| BackfillError::Checkpoint { path: path.display().to_string(), message };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(failed(e.to_string())),
        };
        let checkpoint: Checkpoint = serde_json::from_str(&text).map_err(|e| failed(e.to_string()))?;
        if !READS.contains(&checkpoint.format.as_str()) {
            return Err(failed(format!("format {:?}, but this version reads {READS:?}", checkpoint.format)));
        }
        let segments: Vec<u32> = checkpoint.segments.iter().map(|c| c.segment).collect();
        if segments != (0..checkpoint.total_segments).collect::<Vec<_>>() {
            return Err(failed(format!(
                "total_segments is {} but the segments listed are {segments:?}",
                checkpoint.total_segments
            )));
        }
        Ok(Some(checkpoint))
    }

    /// The keys of every item the run could not touch, segment by segment.
    pub fn untouchable(&self) -> Vec<Value> {
        self.segments.iter().flat_map(|c| c.untouchable.iter().cloned()).collect()
    }

    /// Writes the checkpoint file whole, in the current format: to `PATH.tmp`, then renamed
    /// over `path`.
    pub fn save(&self, path: &Path) -> Result<(), BackfillError> {
        let failed = |e: std::io::Error| BackfillError::Checkpoint {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let mut current = self.clone();
        FORMAT.clone_into(&mut current.format);
        let text = serde_json::to_string(&current).map_err(|e| failed(std::io::Error::other(e)))?;
        std::fs::write(&tmp, text + "\n").map_err(failed)?;
        std::fs::rename(&tmp, path).map_err(failed)
    }

    /// Checks that a saved checkpoint is for the same table, sources and segments as the run
    /// asked for.
    pub fn matches(&self, table: &str, sources: &[String], total_segments: u32) -> Result<(), String> {
        if self.table != table {
            return Err(format!("it is for table {:?}, not {table:?}", self.table));
        }
        if self.sources != sources {
            return Err(format!(
                "it touches items with {:?}, not {sources:?} (a different --index)",
                self.sources
            ));
        }
        if self.total_segments != total_segments {
            return Err(format!(
                "it splits the table into {} segments, not {total_segments} (pass --segments {})",
                self.total_segments, self.total_segments
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
