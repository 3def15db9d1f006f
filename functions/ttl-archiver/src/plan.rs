//! The pure plan: a batch's records in, the compressed archive objects to write out.
//!
//! Records are read in order. A TTL delete joins the current run when it shares the run's
//! partition (table and deletion day), and starts a new run otherwise, so every object holds a
//! contiguous range of the batch. Anything else (inserts, modifications, deletes made by users)
//! is skipped and counted. A record that cannot be read (malformed: no keys, no usable sequence
//! number, no deletion time) is rejected and left out of the runs, and planning goes on: the
//! runtime parks it.
//!
//! Contiguous runs are what make retries safe. The shell writes the objects in order and stops at
//! the first that fails, so when Lambda redelivers from a checkpoint nothing at or after it has
//! been written by this invocation, and each redelivered run is named after its own first record.
//! A batch redelivered from its start (after a timeout, say) rewrites the same names; a batch
//! that Lambda bisects writes its first half under the original name (replacing the longer
//! object) and its second half under the name of the second half's first record.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use io_policy::FailureKind;
use key_codec::SequenceNumber;
use stream_runtime::wire::{Attr, WireRecord};
use stream_runtime::{ChangeKind, Image, PlanFailure, PlanFailures, Record, RecordError};

use crate::config::ObjectSettings;
use formats::archive::{
    self, GzLines, ImageJson, ItemLineRef, MetaLineRef, Partition, data_key, meta_key, object_name,
};

/// One archive object pair to write: the items and their metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The table and day.
    pub partition: Partition,
    /// The item object's key.
    pub data_key: String,
    /// The metadata object's key.
    pub meta_key: String,
    /// The item object: gzip, `{"Item":…}` lines.
    pub data: Vec<u8>,
    /// The metadata object: gzip, one line per record.
    pub meta: Vec<u8>,
    /// Position in the batch of the run's first record (the checkpoint if this object fails).
    pub first_record: usize,
    /// Position in the batch of the run's last record.
    pub last_record: usize,
    /// The first record's sequence number.
    pub first_sequence_number: String,
    /// The last record's sequence number.
    pub last_sequence_number: String,
    /// Records archived (item lines plus keys-only records).
    pub records: usize,
    /// Item lines.
    pub items: usize,
    /// Uncompressed bytes of the item object.
    pub raw_bytes: usize,
}

/// Why a record was not archived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// An INSERT or MODIFY.
    NotRemove(ChangeKind),
    /// A REMOVE made by a user or application, not by TTL.
    UserDelete {
        /// Who deleted it, as the record states (`type/principalId`), if it does.
        identity: Option<String>,
    },
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::NotRemove(kind) => write!(f, "{kind} record, not a delete"),
            SkipReason::UserDelete { identity: None } => {
                f.write_str("REMOVE made by a user or application (no userIdentity), not by TTL")
            }
            SkipReason::UserDelete { identity: Some(id) } => write!(f, "REMOVE made by {id}, not by TTL"),
        }
    }
}

/// A record deliberately not archived.
pub type Skipped = stream_runtime::Skipped<SkipReason>;

/// Why a TTL delete cannot be archived. None of these go away on retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The record itself is malformed (unknown eventName, no Keys).
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The source table cannot be read from `eventSourceARN`.
    #[error(
        "eventSourceARN {0:?} does not name a DynamoDB table (arn:aws:dynamodb:…:table/NAME/stream/…); \
         the archive is partitioned by source table"
    )]
    SourceTable(String),
    /// No `ApproximateCreationDateTime`.
    #[error("the record has no ApproximateCreationDateTime; the archive is partitioned by deletion day")]
    DeletionTime,
    /// An object could not be encoded (only out of memory can cause this).
    #[error("cannot encode the archive: {0}")]
    Encode(String),
}

impl PlanError {
    /// A malformed record is record-permanent (it is parked and the batch goes on); failing to
    /// encode can only be for want of memory, and a retry may get past it.
    pub fn kind(&self) -> FailureKind {
        match self {
            PlanError::Record(e) => e.kind(),
            PlanError::SourceTable(_) | PlanError::DeletionTime => FailureKind::RecordPermanent,
            PlanError::Encode(_) => FailureKind::Transient,
        }
    }
}

/// What to write for a batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The objects, in stream order of their runs.
    pub objects: Vec<Object>,
    /// Records skipped, in order.
    pub skipped: Vec<Skipped>,
    /// TTL deletes archived with their keys only (no `OldImage` in the stream).
    pub keys_only: Vec<usize>,
    /// Records rejected as record-permanent, and the record planning stopped at (nothing at or
    /// after it is planned).
    pub failures: PlanFailures<PlanError>,
}

impl Plan {
    /// Plans a batch read in place ([`stream_runtime::wire`]): the runtime's path.
    pub fn from_wire(layout: &ObjectSettings, records: &[WireRecord<'_>]) -> Plan {
        let mut plan = Plan::default();
        // Runs are finished (compressed to the end) only once planning is done, so that a run
        // that cannot be finished stops the batch at its own first record.
        let mut runs: Vec<Run> = Vec::new();
        let (skipped, keys_only) = (&mut plan.skipped, &mut plan.keys_only);
        plan.failures = PlanFailures::plan_each(records, PlanError::kind, |i, raw| {
            let Some(ttl) = read(layout, raw)? else {
                skipped.push(Skipped { record: i, reason: skip_reason(raw) });
                return Ok(());
            };
            let run = match runs.last_mut() {
                Some(run) if run.partition == ttl.partition => run,
                _ => {
                    runs.push(Run::new(layout, i, &ttl));
                    let last = runs.len() - 1;
                    &mut runs[last]
                }
            };
            if run.push(i, &ttl).map_err(|e| PlanError::Encode(e.to_string()))? {
                keys_only.push(i);
            }
            Ok(())
        });
        for run in runs {
            let first_record = run.first_record;
            match run.finish() {
                Ok(object) => plan.objects.push(object),
                Err(error) => {
                    // Compressing into memory fails only for want of it; nothing from this run's
                    // first record on is archived.
                    let stop = PlanFailure { record: first_record, error };
                    plan.failures.rejected.retain(|r| r.record < first_record);
                    plan.keys_only.retain(|&k| k < first_record);
                    plan.failures.stopped = Some(stop);
                    break;
                }
            }
        }
        plan
    }
}

/// A TTL delete, read and checked.
struct TtlDelete<'r, 'a> {
    record: Record<'r, 'a>,
    partition: Partition,
    sequence_number: SequenceNumber,
    deleted_at: DateTime<Utc>,
}

/// Reads a record: `None` when it is not a TTL delete (with `layout`'s replicated-TTL attribute,
/// nor a replicated one: [`replicated_ttl_delete`]).
fn read<'r, 'a>(
    layout: &ObjectSettings,
    raw: &'r WireRecord<'a>,
) -> Result<Option<TtlDelete<'r, 'a>>, PlanError> {
    let record = Record::new(raw)?;
    let replicated = layout
        .replicated_ttl_attribute
        .as_deref()
        .is_some_and(|attribute| replicated_ttl_delete(&record, attribute));
    if !record.is_ttl_delete() && !replicated {
        return Ok(None);
    }
    record.keys()?;
    let sequence_number = record.sequence()?;
    let arn = raw.event_source_arn.as_deref().unwrap_or_default();
    let table = table_of_arn(arn).ok_or_else(|| PlanError::SourceTable(arn.to_owned()))?;
    let deleted_at = raw.approximate_creation_date_time;
    if deleted_at == DateTime::UNIX_EPOCH {
        return Err(PlanError::DeletionTime);
    }
    Ok(Some(TtlDelete {
        record,
        partition: Partition { table: table.to_owned(), date: deleted_at.date_naive() },
        sequence_number,
        deleted_at,
    }))
}

/// DynamoDB ignores a TTL value more than five years in the past.
const TTL_IGNORED_AFTER_SECONDS: f64 = 5.0 * 365.0 * 24.0 * 3600.0;

/// Whether `record` is a `REMOVE` without the TTL service's identity whose old image's TTL value
/// (`attribute`, a Number of epoch seconds) had passed when the item was deleted, and was not so
/// old that DynamoDB ignores it: on a global table, a TTL delete replicated from another Region
/// if replication drops the identity. A user's delete of an item that had expired but was not yet
/// swept reads the same, and is archived too: the item was due for deletion by TTL.
pub(crate) fn replicated_ttl_delete(record: &Record<'_, '_>, attribute: &str) -> bool {
    if record.kind() != ChangeKind::Remove || record.raw().user_identity.is_some() {
        return false;
    }
    let Ok(Some(old)) = record.before() else {
        return false;
    };
    let Some(Attr::N(value)) = old.get(attribute) else {
        return false;
    };
    #[expect(clippy::cast_precision_loss, reason = "epoch seconds are far below 2^52")]
    let deleted_at = record.raw().approximate_creation_date_time.timestamp() as f64;
    value.parse::<f64>().is_ok_and(|expiry| {
        expiry.is_finite() && expiry <= deleted_at && deleted_at - expiry <= TTL_IGNORED_AFTER_SECONDS
    })
}

/// The table name in a stream ARN (`arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL`),
/// when it is a valid DynamoDB table name (3-255 of `A-Z a-z 0-9 _ - .`), so it is safe in a key.
pub(crate) fn table_of_arn(arn: &str) -> Option<&str> {
    let (_, rest) = arn.split_once(":table/")?;
    let name = rest.split('/').next()?;
    let valid = (3..=255).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    valid.then_some(name)
}

fn skip_reason(raw: &WireRecord<'_>) -> SkipReason {
    match Record::new(raw).map(|r| r.kind()) {
        Ok(kind @ (ChangeKind::Insert | ChangeKind::Modify)) => SkipReason::NotRemove(kind),
        _ => SkipReason::UserDelete {
            identity: raw.user_identity.as_ref().map(|id| format!("{}/{}", id.type_, id.principal_id)),
        },
    }
}

/// An object being built.
struct Run {
    partition: Partition,
    prefix: String,
    first_event_id: String,
    data: GzLines,
    meta: GzLines,
    first_record: usize,
    last_record: usize,
    first_sequence_number: SequenceNumber,
    last_sequence_number: SequenceNumber,
}

impl Run {
    fn new(layout: &ObjectSettings, i: usize, first: &TtlDelete<'_, '_>) -> Run {
        Run {
            prefix: layout.prefix.clone(),
            first_event_id: first.record.raw().event_id.to_string(),
            partition: first.partition.clone(),
            data: GzLines::new(layout.gzip_level),
            meta: GzLines::new(layout.gzip_level),
            first_record: i,
            last_record: i,
            first_sequence_number: first.sequence_number.clone(),
            last_sequence_number: first.sequence_number.clone(),
        }
    }

    /// Appends a record; returns whether it was archived with its keys only.
    fn push(&mut self, i: usize, ttl: &TtlDelete<'_, '_>) -> std::io::Result<bool> {
        let raw = ttl.record.raw();
        let old = ttl.record.image(Image::Old).ok();
        if let Some(item) = old {
            self.data.push(&ItemLineRef { item: ImageJson(item) })?;
        }
        let deleted_at = ttl.deleted_at.to_rfc3339_opts(SecondsFormat::AutoSi, true);
        self.meta.push(&MetaLineRef {
            v: archive::VERSION,
            event_id: &raw.event_id,
            sequence_number: ttl.sequence_number.as_str(),
            deleted_at: &deleted_at,
            table: &ttl.partition.table,
            keys: ImageJson(&raw.keys),
            keys_only: old.is_none(),
        })?;
        self.last_record = i;
        self.last_sequence_number.clone_from(&ttl.sequence_number);
        Ok(old.is_none())
    }

    fn finish(self) -> Result<Object, PlanError> {
        let fail = |e: std::io::Error| PlanError::Encode(e.to_string());
        // Named by both ends of the run, known only now.
        let name = object_name(&self.first_sequence_number, &self.last_sequence_number, &self.first_event_id);
        let (records, items, raw_bytes) = (self.meta.lines(), self.data.lines(), self.data.raw_bytes());
        let data = self.data.finish().map_err(fail)?;
        let meta = self.meta.finish().map_err(fail)?;
        Ok(Object {
            data_key: data_key(&self.prefix, &self.partition, &name),
            meta_key: meta_key(&self.prefix, &self.partition, &name),
            partition: self.partition,
            data,
            meta,
            first_record: self.first_record,
            last_record: self.last_record,
            first_sequence_number: self.first_sequence_number.as_str().to_owned(),
            last_sequence_number: self.last_sequence_number.as_str().to_owned(),
            records,
            items,
            raw_bytes,
        })
    }
}

#[cfg(test)]
mod tests;
