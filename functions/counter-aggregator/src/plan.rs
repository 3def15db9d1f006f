//! The pure plan: a batch's records in, one update per counter out.
//!
//! Every record of a counter shard says "shard `k` of counter `c` held `v` as of sequence number
//! `q`" (`v` is `NewImage.count`, 0 when the image has none, and 0 for a REMOVE). The plan keeps, per shard, the state with
//! the highest sequence number, and groups shards by counter. Records that are not counter shards
//! (other keys, the total items this function writes itself, and a backfill's touches, which
//! change no count) are skipped and counted. A record
//! that cannot be read is rejected: a malformed one (a count that is not an integer, no sequence
//! number) is left out and planning goes on, to be parked; a stream without the `NewImage` a
//! change needs stops the plan, and the updates hold only what came before it.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use formats::counter::COUNT;
use formats::counter::CounterKey;
use io_policy::FailureKind;
use key_codec::SequenceNumber;
use stream_runtime::wire::{Attr, WireRecord};
use stream_runtime::{ChangeKind, Image, PlanFailures, Record, RecordError};

/// A shard's absolute count as of a stream record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardState {
    /// The shard's count after the record (0 once the shard is removed).
    pub value: i128,
    /// The record's sequence number.
    pub sequence_number: SequenceNumber,
}

/// What a shard held just before the batch's first record of it, as that record's `OldImage`
/// says: the stored state a delta write expects (see [`crate::delta`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// The record is an INSERT: the shard item did not exist (its stored state, if any, is 0).
    Absent,
    /// The shard's count (0 when the image has none).
    Value(i128),
    /// No usable `OldImage` (a `NEW_IMAGE` stream, or a count that is not an integer).
    Unknown,
}

/// What a batch says about one counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterUpdate {
    /// The counter's name.
    pub name: String,
    /// The latest state of each shard the batch touched.
    pub shards: BTreeMap<u32, ShardState>,
    /// What each of those shards held before the batch's first record of it.
    pub before: BTreeMap<u32, Before>,
    /// The earliest record in the batch that touched the counter: the checkpoint if its write
    /// fails.
    pub first_record: usize,
    /// Every record in the batch that touched the counter, in order (parked together if the
    /// counter's total can never be written).
    pub records: Vec<usize>,
}

/// Why a record was not aggregated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// Its key is not a counter key.
    NotACounter(String),
    /// It is a counter's total item (this function's own write).
    Total(String),
    /// A backfill's touch (`formats::touch`): only the marker changed, not the count.
    Touch(String),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::NotACounter(key) => {
                write!(f, "key {key} is not a counter shard (COUNTER#<name>#SHARD#<k>)")
            }
            SkipReason::Total(name) => write!(f, "the total item of counter {name:?}"),
            SkipReason::Touch(key) => write!(f, "key {key}: a backfill's touch, no count changed"),
        }
    }
}

/// A record not aggregated.
pub type Skipped = stream_runtime::Skipped<SkipReason>;

/// Why a counter shard's record cannot be aggregated. None of these go away on retry; see
/// [`PlanError::kind`] for which are the record's fault and which the stream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The record is malformed, or the stream lacks the `NewImage` an INSERT or MODIFY needs.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The shard's `count` is not an integer.
    #[error("shard {key} has {found} where an integer `count` belongs")]
    Count {
        /// The shard's key.
        key: String,
        /// What the image holds.
        found: String,
    },
}

impl PlanError {
    /// A malformed record or count is record-permanent (the record is parked and the batch goes
    /// on); a stream without the image a change needs is systemic (planning stops).
    pub fn kind(&self) -> FailureKind {
        match self {
            PlanError::Record(e) => e.kind(),
            PlanError::Count { .. } => FailureKind::RecordPermanent,
        }
    }
}

/// What to apply for a batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// One update per counter, in order of the counters' first records.
    pub updates: Vec<CounterUpdate>,
    /// Records skipped, in order.
    pub skipped: Vec<Skipped>,
    /// Records rejected as record-permanent, and the record planning stopped at.
    pub failures: PlanFailures<PlanError>,
}

impl Plan {
    /// Plans a batch read in place ([`stream_runtime::wire`]) from a table whose partition key
    /// attribute is `partition_key`: the runtime's path.
    pub fn from_wire(partition_key: &str, records: &[WireRecord<'_>]) -> Plan {
        let mut plan = Plan::default();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let (updates, skipped) = (&mut plan.updates, &mut plan.skipped);
        let failures = PlanFailures::plan_each(records, PlanError::kind, |i, raw| {
            match read(partition_key, raw)? {
                Read::Shard { name, shard, state, before } => {
                    let slot = *by_name.entry(name.clone()).or_insert_with(|| {
                        updates.push(CounterUpdate {
                            name,
                            shards: BTreeMap::new(),
                            before: BTreeMap::new(),
                            first_record: i,
                            records: Vec::new(),
                        });
                        updates.len() - 1
                    });
                    let update = &mut updates[slot];
                    update.records.push(i);
                    // A shard item's records come in order: its first one here is its earliest.
                    update.before.entry(shard).or_insert(before);
                    let shards = &mut update.shards;
                    match shards.get(&shard) {
                        Some(kept) if kept.sequence_number >= state.sequence_number => {}
                        _ => {
                            shards.insert(shard, state);
                        }
                    }
                }
                Read::Skip(reason) => skipped.push(Skipped { record: i, reason }),
            }
            Ok(())
        });
        plan.failures = failures;
        plan
    }
}

enum Read {
    Shard { name: String, shard: u32, state: ShardState, before: Before },
    Skip(SkipReason),
}

fn read(partition_key: &str, raw: &WireRecord<'_>) -> Result<Read, PlanError> {
    let record = Record::new(raw)?;
    let key = match record.keys()?.get(partition_key) {
        Some(Attr::S(key)) => key.as_ref(),
        other => {
            let shown = other.map_or_else(|| format!("(no {partition_key})"), |v| format!("{v:?}"));
            return Ok(Read::Skip(SkipReason::NotACounter(shown)));
        }
    };
    let (name, shard) = match CounterKey::parse(key) {
        Some(CounterKey::Shard { name, shard }) => (name, shard),
        Some(CounterKey::Total { name }) => return Ok(Read::Skip(SkipReason::Total(name))),
        None => return Ok(Read::Skip(SkipReason::NotACounter(key.to_owned()))),
    };
    // Without an old image (a NEW_IMAGE stream) no change can be told to be a touch; counting
    // it is harmless, since a touch carries the count the shard already had.
    if formats::touch::is_touch_only(record.before().ok().flatten(), record.after().ok().flatten()) {
        return Ok(Read::Skip(SkipReason::Touch(key.to_owned())));
    }
    let sequence_number = record.sequence()?;
    let value = match record.kind() {
        ChangeKind::Remove => 0,
        ChangeKind::Insert | ChangeKind::Modify => {
            let image = record.image(Image::New)?;
            // A shard without `count` holds 0, as `ADD` would take it (moto, for one, streams the
            // item an `ADD` creates as a key-only INSERT followed by a MODIFY with the count).
            match image.get(COUNT) {
                None => 0,
                Some(Attr::N(n)) => n
                    .parse()
                    .map_err(|_| PlanError::Count { key: key.to_owned(), found: format!("N {n:?}") })?,
                Some(other) => {
                    return Err(PlanError::Count { key: key.to_owned(), found: format!("{other:?}") });
                }
            }
        }
    };
    Ok(Read::Shard { name, shard, state: ShardState { value, sequence_number }, before: before(&record) })
}

/// What the shard held before `record`, from its `OldImage`.
fn before(record: &Record<'_, '_>) -> Before {
    if record.kind() == ChangeKind::Insert {
        return Before::Absent;
    }
    match record.before() {
        Ok(Some(old)) => match old.get(COUNT) {
            None => Before::Value(0),
            Some(Attr::N(n)) => n.parse().map_or(Before::Unknown, Before::Value),
            Some(_) => Before::Unknown,
        },
        _ => Before::Unknown,
    }
}

#[cfg(test)]
mod tests;
