//! Pure planning: stream records in, coalesced index puts and deletes out.
//!
//! For each record and each index, the members of the item's old and new images are compared:
//!
//! - a member only in the old image: delete its entry;
//! - a member only in the new image: put its entry;
//! - a member in both: nothing when neither it nor the attributes copied into entries changed;
//!   otherwise put the new entry, and delete the old one first when its key changed (the value, a
//!   tiebreaker or a scope attribute changed: a re-key).
//!
//! An INSERT has no old image and a REMOVE no new one, so they put and delete every entry. A
//! backfill's touch (`formats::touch`) puts every entry of the new image too, changed or not:
//! the item was written before the indexer existed, so its old image's entries may never have been.
//!
//! **Coalescing.** Every write is a whole-item put or a delete by key, so applying a batch's writes
//! in order leaves the same index as applying, for each key, only the last write to it. The plan
//! keeps exactly that: one write per index key, tagged with the record it came from. The writes no
//! longer depend on order, so they can be sent concurrently. A delete for an entry put earlier in
//! the same batch is kept, not dropped: if an earlier delivery of the batch wrote that entry before
//! failing, the delete is what removes it. Each write is kept by reference into the batch until
//! the whole batch is planned, and only the writes that remain are built into items.
//!
//! **Rejecting.** A record that cannot be planned is rejected with a [`PlanError`] of one of two
//! kinds ([`PlanError::kind`]). A malformed record (an unknown event name, no keys) is
//! record-permanent: it is left out and planning goes on (the runtime parks it). A stream or
//! configuration that does not match the table (a view type without the image the change needs,
//! a record without a `base_key` attribute) is systemic: planning stops there, and it and the
//! records after it are left for Lambda to redeliver once an operator has fixed the cause.
//!
//! **Versions.** Every entry put carries the sequence number of the record it came from
//! (`VERSION_ATTRIBUTE`, 40 digits). The indexer itself never reads it: it orders the writes of
//! one entry for whoever else must delete one (a verify's repair, a replay), whose deletes are
//! conditioned on it so that they can never remove an entry a newer record has put since.
//!
//! **Limits.** Every entry put is measured against DynamoDB's 400 KB item limit as it is planned,
//! before anything is built or sent (so a record is rejected even when a later record in the
//! batch replaces its entry). An entry over it (an `include` naming a big attribute, say) cannot
//! be written: its key is deleted instead, so that no stale entry stays behind, and its record is
//! rejected as record-permanent, naming the entry's key, the index, the size and the limit. The
//! record's other entries are written.
//!
//! **Skipping.** A member that cannot be keyed (a nested map value, a key over DynamoDB's limits,
//! a missing scope attribute) gets no entry; it is reported in [`Plan::skipped`] and does not stop
//! the batch.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use io_policy::FailureKind;
use serde_dynamo::AttributeValue;
use stream_runtime::limits::MAX_ITEM_BYTES;
use stream_runtime::wire::{Attr, WireImage, WireRecord};
use stream_runtime::{Attributes, ItemWrite, Op, PlanFailures, RecordError};

use crate::config::{Index, Indexes};
use formats::entries::{Carried, EntryKey, EntryParts, ImageEntries, IndexView, Member};

/// What a batch of records asks of the index tables.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// One write per index key, in the order keys were first touched.
    pub writes: Vec<ItemWrite>,
    /// For each write, the fence (a position in `fences`) its item's writes are sent behind;
    /// `None` for a record without a version, or an item whose head cannot be keyed.
    pub fenced_by: Vec<Option<usize>>,
    /// Each item's fence: its head, and the version of its newest record the plan applied.
    pub fences: Vec<PlannedFence>,
    /// Members left out of the index; planning went on.
    pub skipped: Vec<Skipped>,
    /// Records rejected as record-permanent, and the record planning stopped at.
    pub failures: PlanFailures<PlanError>,
    /// Records that touch no index (neither image has any index's source attribute).
    pub unindexed_records: usize,
}

/// The fence of one item's writes in one index: its version head is put with them, in one
/// transaction, on the condition that it is not newer than `version` (the handler sends them,
/// `crate::handler`), so that a write landing late cannot undo a newer record's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFence {
    /// The index's position in the configuration.
    pub index: usize,
    /// The item's head key.
    pub head: EntryKey,
    /// The version of the newest record of the item whose writes the plan holds.
    pub version: String,
    /// That record's position in the batch.
    pub origin: usize,
}

/// A member that has no index entry, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The record's position in the batch.
    pub record: usize,
    /// The index's name.
    pub index: String,
    /// The map key, the element, or the source attribute.
    pub member: String,
    /// Why it cannot be keyed.
    pub reason: String,
}

/// Why a record cannot be planned. Retrying does not help: the record is malformed, or the
/// stream or configuration does not match the table ([`PlanError::kind`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The record itself is unusable.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// `Keys` lacks a configured base-table key attribute.
    #[error(
        "the record's Keys has no {attribute:?}, which base_key names; is MULTIKEY_INDEXES set for this table?"
    )]
    MissingKeyAttribute {
        /// The attribute.
        attribute: String,
    },
    /// An index entry would exceed DynamoDB's item size limit.
    #[error(
        "index {index}: the entry pk={pk:?} of this item is {size} bytes, over DynamoDB's item limit of {limit} bytes; \
         its key is deleted instead (is a large attribute in `include`?)"
    )]
    EntryTooLarge {
        /// The index's name.
        index: String,
        /// The entry's partition key.
        pk: String,
        /// Its size in bytes.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Order-insensitive indexing orders an item's records by version, and this record has none.
    #[error(
        "the record has no sequence number to order it by; order-insensitive indexing (MULTIKEY_ORDER=any) needs one"
    )]
    NoVersion,
    /// The item's key cannot key its version head.
    #[error("index {index}: this item's version head cannot be keyed: {reason}")]
    HeadUnkeyable {
        /// The index's name.
        index: String,
        /// Why.
        reason: String,
    },
    /// The item's version head would exceed DynamoDB's item size limit.
    #[error(
        "index {index}: this item's version head pk={pk:?} is {size} bytes, over DynamoDB's item limit of {limit} bytes \
         (it holds the attributes the index reads); its entries are written, its head is not"
    )]
    HeadTooLarge {
        /// The index's name.
        index: String,
        /// The head's partition key.
        pk: String,
        /// Its size in bytes.
        size: usize,
        /// The limit.
        limit: usize,
    },
}

impl PlanError {
    /// Whether the record's content is at fault (record-permanent: it is parked) or the stream
    /// or configuration (systemic: planning stops).
    pub fn kind(&self) -> FailureKind {
        match self {
            PlanError::Record(e) => e.kind(),
            PlanError::MissingKeyAttribute { .. } => FailureKind::Systemic,
            PlanError::EntryTooLarge { .. }
            | PlanError::NoVersion
            | PlanError::HeadUnkeyable { .. }
            | PlanError::HeadTooLarge { .. } => FailureKind::RecordPermanent,
        }
    }
}

impl Plan {
    /// Plans a batch read in place ([`stream_runtime::wire`]): the runtime's path.
    pub fn from_wire(indexes: &Indexes, records: &[WireRecord<'_>]) -> Plan {
        Plan::of(indexes, records.len(), records.iter().enumerate())
    }

    /// Plans the records of a batch at `positions` (in the batch's order), each write and
    /// failure naming its position in the batch: for records that hold every record of their
    /// items (a step, [`steps`]), exactly what [`Plan::from_wire`] plans for those items.
    pub fn from_wire_at(indexes: &Indexes, records: &[WireRecord<'_>], positions: &[usize]) -> Plan {
        Plan::of(indexes, positions.len(), positions.iter().filter_map(|&at| Some((at, records.get(at)?))))
    }

    fn of<'r, 'w: 'r>(
        indexes: &Indexes,
        count: usize,
        records: impl IntoIterator<Item = (usize, &'r WireRecord<'w>)>,
    ) -> Plan {
        let mut planner = Planner::new(indexes);
        // About one write a record, so the map rarely grows (each growth hashes every key again).
        planner.slots.reserve(count);
        planner.pending.reserve(count);
        let failures = PlanFailures::plan_these(records, PlanError::kind, |i, raw| planner.record(i, raw));
        let mut plan = planner.finish();
        plan.failures = failures;
        plan
    }

    /// How many writes are puts and deletes.
    pub fn counts(&self) -> (usize, usize) {
        let puts = self.writes.iter().filter(|w| matches!(w.op, Op::Put(_))).count();
        (puts, self.writes.len() - puts)
    }
}

/// The index's position and the entry's key: one write slot.
type SlotKey = (usize, EntryKey);

/// A write planned for a slot, kept by reference into the batch until the batch is planned:
/// a later record's write to the same key replaces it, so only the writes that remain are built
/// into items (batches that edit the same items again and again replace many).
struct Pending<'a> {
    /// A put of the entry, or a delete of the slot's key.
    put: Option<(EntryParts<'a>, CarriedAt)>,
    origin: usize,
    /// The fence of the write's item, a position in `Planner::fences`.
    fence: Option<usize>,
}

/// A position in `Planner::carried`.
type CarriedAt = usize;

struct Planner<'a> {
    indexes: &'a Indexes,
    plan: Plan,
    /// Each key's position in `pending`. Hashed once per write: foldhash, seeded at random per
    /// process, rather than `SipHash` (docs/benchmarks.md, the decode path).
    slots: HashMap<SlotKey, usize, foldhash::fast::RandomState>,
    /// One write per slot, in the order slots were first written.
    pending: Vec<Pending<'a>>,
    /// What each image's entries carry (base key, copied attributes, version), once per image.
    carried: Vec<Carried<'a>>,
    /// The current record's writes, committed only if the whole record plans.
    staged: Vec<(SlotKey, Pending<'a>)>,
    staged_skips: Vec<Skipped>,
    /// The current record's first entry over the item size limit.
    staged_too_large: Option<PlanError>,
    /// The current record's version (its sequence number), which every entry it puts carries.
    version: Option<String>,
    /// Each item's fence, by index and head partition key, and in the order first met.
    fence_at: HashMap<(usize, String), usize, foldhash::fast::RandomState>,
    fences: Vec<PlannedFence>,
    /// The fence of the item being diffed.
    fence: Option<usize>,
}

impl<'a> Planner<'a> {
    fn new(indexes: &'a Indexes) -> Planner<'a> {
        Planner {
            indexes,
            plan: Plan::default(),
            slots: HashMap::default(),
            pending: Vec::new(),
            carried: Vec::new(),
            staged: Vec::new(),
            staged_skips: Vec::new(),
            staged_too_large: None,
            version: None,
            fence_at: HashMap::default(),
            fences: Vec::new(),
            fence: None,
        }
    }

    /// The fence of the item keyed `base_key` in the index at `ix`, moved to the current record
    /// (`origin`, and its version, which is newer than any before it in order and in any order
    /// alike: one change per item and index there); `None` without a version or a head key.
    fn fence_of(
        &mut self,
        ix: usize,
        index: &Index,
        base_key: &[(&str, &Attr<'_>)],
        origin: usize,
    ) -> Option<usize> {
        let version = self.version.clone()?;
        let head = formats::head::key(index, base_key).ok()?;
        match self.fence_at.entry((ix, head.pk.clone())) {
            Entry::Occupied(at) => {
                let fence = &mut self.fences[*at.get()];
                fence.version = version;
                fence.origin = origin;
                Some(*at.get())
            }
            Entry::Vacant(at) => {
                at.insert(self.fences.len());
                self.fences.push(PlannedFence { index: ix, head, version, origin });
                Some(self.fences.len() - 1)
            }
        }
    }

    /// The plan: each slot's write built into its item (or its key, for a delete), in order.
    fn finish(self) -> Plan {
        let Planner { indexes, mut plan, slots, pending, carried, fences, .. } = self;
        plan.fenced_by = pending.iter().map(|p| p.fence).collect();
        plan.fences = fences;
        // Each position in `pending` has exactly one key in `slots`.
        let mut keys: Vec<(SlotKey, usize)> = slots.into_iter().collect();
        keys.sort_unstable_by_key(|(_, at)| *at);
        plan.writes = keys
            .into_iter()
            .zip(pending)
            .enumerate()
            .map(|(position, (((ix, key), at), write))| {
                debug_assert_eq!(position, at, "a slot without its write");
                let index = &indexes.indexes[ix];
                let op = match write.put {
                    Some((parts, at)) => Op::Put(parts.item(index, key, &carried[at])),
                    None => Op::Delete(key_item(index, key)),
                };
                ItemWrite { table: Arc::clone(&index.table), op, origin: write.origin }
            })
            .collect();
        plan
    }

    fn record(&mut self, origin: usize, record: &'a WireRecord<'a>) -> Result<(), PlanError> {
        let change = record.change()?;
        let (before, after) = (change.before, change.after);
        let base_key = base_key(self.indexes, change.keys)?;
        let backfill_touch = formats::touch::is_touched(before, after);
        self.version = record.sequence_number().and_then(formats::entries::version);
        let mut indexed = false;
        for (ix, index) in self.indexes.indexes.iter().enumerate() {
            // Each attribute the index reads is looked up once per image.
            let old = before.map(|image| IndexView::new(index, image));
            let new = after.map(|image| IndexView::new(index, image));
            indexed |= old.iter().chain(&new).any(|view| view.source().is_some());
            self.diff(origin, ix, index, &base_key, (old, new), backfill_touch);
        }
        if !indexed {
            self.plan.unindexed_records += 1;
        }
        self.commit()
    }

    /// Commits the current record's staged writes and skips: a write to a key already written
    /// in the batch replaces it. Fails when one of its entries was too large (and deleted).
    fn commit(&mut self) -> Result<(), PlanError> {
        for (slot, write) in self.staged.drain(..) {
            // One lookup (one hash of the key) whether or not the key was written before.
            match self.slots.entry(slot) {
                Entry::Occupied(at) => self.pending[*at.get()] = write,
                Entry::Vacant(at) => {
                    at.insert(self.pending.len());
                    self.pending.push(write);
                }
            }
        }
        self.plan.skipped.append(&mut self.staged_skips);
        // The record's other writes stand; the one too large was turned into a delete.
        self.staged_too_large.take().map_or(Ok(()), Err)
    }

    fn diff(
        &mut self,
        origin: usize,
        ix: usize,
        index: &Index,
        base_key: &[(&'a str, &'a Attr<'a>)],
        (before, after): (Option<IndexView<'a>>, Option<IndexView<'a>>),
        touched: bool,
    ) {
        // Nothing the index reads changed.
        if let (Some(old), Some(new)) = (&before, &after)
            && !touched
            && old == new
        {
            return;
        }
        self.fence = self.fence_of(ix, index, base_key, origin);
        let same_keying = matches!((&before, &after), (Some(o), Some(n)) if o.same_keying(n));
        let old = before.map(|view| ImageEntries::from_view(base_key, view));
        let new = after.map(|view| ImageEntries::from_view(base_key, view));
        if let Some(new) = &new {
            for (member, reason) in &new.unkeyable_members {
                self.skip(origin, index, member, reason.clone());
            }
        }
        // What the new image's entries carry, gathered once for all of them.
        let carried = new.as_ref().filter(|n| !n.members.is_empty()).map(|n| {
            self.carried.push(Carried::new(base_key, n.view(), self.version.clone()));
            self.carried.len() - 1
        });
        let none: &[Member<'_>] = &[];
        let old_members = old.as_ref().map_or(none, |o| &o.members[..]);
        let new_members = new.as_ref().map_or(none, |n| &n.members[..]);
        // A touch re-puts every entry, as if nothing had been written before.
        let copied_unchanged =
            !touched && matches!((&old, &new), (Some(o), Some(n)) if o.view().same_copied(n.view()));
        // Members are sorted by id: walk both images in step.
        let (mut a, mut b) = (old_members.iter().peekable(), new_members.iter().peekable());
        loop {
            let order = match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(o), Some(n)) => o.id.cmp(&n.id),
            };
            let (o, n) = match order {
                Ordering::Less => (a.next(), None),
                Ordering::Greater => (None, b.next()),
                Ordering::Equal => (a.next(), b.next()),
            };
            if let (Some(o), Some(n)) = (o, n)
                && copied_unchanged
                && o == n
            {
                continue;
            }
            // The old key, to delete when it is not the new one. A member with no key in the old
            // image was never written. One with the same id and value under the same scope and
            // tiebreakers has the same key in both images, so its old key is not even encoded.
            let same_key = same_keying && matches!((o, n), (Some(o), Some(n)) if o.value == n.value);
            let old_key = o.filter(|_| !same_key).zip(old.as_ref()).and_then(|(o, image)| image.key(o).ok());
            let new_key = n.zip(new.as_ref()).map(|(n, image)| (n, image.key(n)));
            match new_key {
                Some((n, Ok(key))) => {
                    if let Some(old_key) = old_key.filter(|k| *k != key) {
                        self.stage(ix, index, old_key, None, origin);
                    }
                    // `carried` is there: the new image has this member.
                    let put = carried.map(|at| (n.parts(), at));
                    self.stage(ix, index, key, put, origin);
                }
                Some((n, Err(reason))) => {
                    self.skip(origin, index, &n.id, reason);
                    if let Some(old_key) = old_key {
                        self.stage(ix, index, old_key, None, origin);
                    }
                }
                None => {
                    if let Some(old_key) = old_key {
                        self.stage(ix, index, old_key, None, origin);
                    }
                }
            }
        }
    }

    /// Stages a put of an entry under `key`, or a delete of `key` when there is none. A put is
    /// measured now, so that a record whose entry is too large is rejected even when a later
    /// record's write replaces it.
    fn stage(
        &mut self,
        ix: usize,
        index: &Index,
        key: EntryKey,
        put: Option<(EntryParts<'a>, CarriedAt)>,
        origin: usize,
    ) {
        let put = put.filter(|(parts, at)| {
            let size = parts.size(index, &key, &self.carried[*at]);
            if size > MAX_ITEM_BYTES {
                self.staged_too_large.get_or_insert(PlanError::EntryTooLarge {
                    index: index.name.clone(),
                    pk: key.pk.clone(),
                    size,
                    limit: MAX_ITEM_BYTES,
                });
            }
            size <= MAX_ITEM_BYTES
        });
        self.staged.push(((ix, key), Pending { put, origin, fence: self.fence }));
    }

    fn skip(&mut self, record: usize, index: &Index, member: &str, reason: String) {
        self.staged_skips.push(Skipped {
            record,
            index: index.name.clone(),
            member: member.to_owned(),
            reason,
        });
    }
}

/// The base table's key attributes of a record's `Keys`, in `base_key`'s order.
pub(crate) fn base_key<'k, 'a>(
    indexes: &'k Indexes,
    keys: &'k WireImage<'a>,
) -> Result<Vec<(&'k str, &'k Attr<'a>)>, PlanError> {
    indexes
        .base_key
        .iter()
        .map(|name| {
            keys.get(name)
                .map(|v| (name.as_str(), v))
                .ok_or_else(|| PlanError::MissingKeyAttribute { attribute: name.clone() })
        })
        .collect()
}

/// The key item (partition and sort key only) for a delete.
fn key_item(index: &Index, key: EntryKey) -> Attributes {
    let mut item = Attributes::with_capacity(2);
    item.push(index.partition_key.as_str(), AttributeValue::S(key.pk));
    item.push(index.sort_key.as_str(), key.sk.into_attribute());
    item
}

#[cfg(test)]
mod tests;

pub mod any_order;
pub mod steps;
