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
//! An INSERT has no old image and a REMOVE no new one, so they put and remove every entry. A
//! backfill's touch (`formats::touch`) puts every entry of the new image too, changed or not:
//! the item was written before the indexer existed, so its old image's entries may never have been.
//!
//! **Versions and tombstones.** Every write carries the version of the record it came from (its
//! sequence number, `VERSION_ATTRIBUTE`, 40 digits), and every write is a whole-item put: an
//! entry, or, where an entry is removed, its *tombstone* (`formats::tombstone`: the key, the
//! version and when the index table's TTL may delete it). The handler puts each on the condition
//! that the stored item is absent or older, so each key ends holding its newest write whatever
//! order the writes land in: a write landing late, or a record delivered again, can never undo a
//! newer one. A record without a version or a change time (none that AWS delivers) is written
//! as it was before versions: puts and deletes, unguarded.
//!
//! **Why a record's own old image is enough, in any order.** An item's records form a chain: each
//! one's old image is the previous one's new image. An entry is present after the newest record
//! exactly when that record's new image has it; the last record to change the entry is the one
//! that put it (it is present) or took it out (a tombstone), and it has the highest version of
//! all the writes to that key. Records that left an entry as it was write nothing to it, and none
//! come between two writes of a key unseen. So diffing each record against its own old image and
//! keeping each key's newest write gives the index the newest image's entries, in whatever order
//! the records come ([`Order::Any`]).
//!
//! **Coalescing.** Applying a batch's writes leaves the same index as applying, for each key, only
//! its newest write. The plan keeps exactly that: one write per index key (the newest version; in
//! order, the last), tagged with the record it came from. The writes no longer depend on order,
//! so they can be sent concurrently. A removal of an entry put earlier in the same batch is kept,
//! not dropped: if an earlier delivery of the batch wrote that entry before failing, the tombstone
//! is what removes it. Each write is kept by reference into the batch until the whole batch is
//! planned, and only the writes that remain are built into items.
//!
//! **Rejecting.** A record that cannot be planned is rejected with a [`PlanError`] of one of two
//! kinds ([`PlanError::kind`]). A malformed record (an unknown event name, no keys) is
//! record-permanent: it is left out and planning goes on (the runtime parks it). A stream or
//! configuration that does not match the table (a view type without the image the change needs,
//! a record without a `base_key` attribute) is systemic: planning stops there, and it and the
//! records after it are left for Lambda to redeliver once an operator has fixed the cause.
//!
//! **Limits.** Every entry put is measured against DynamoDB's 400 KB item limit as it is planned,
//! before anything is built or sent (so a record is rejected even when a later record in the
//! batch replaces its entry). An entry over it (an `include` naming a big attribute, say) cannot
//! be written: its key is removed instead, so that no stale entry stays behind, and its record is
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

/// How the indexer takes one item's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// In order, as a DynamoDB stream delivers them (`stream`, the default).
    #[default]
    Stream,
    /// In any order and more than once (`any`), as a Kinesis data stream may: every record must
    /// have a version ([`PlanError::NoVersion`]), and a key's newest write wins in a batch.
    Any,
}

/// What a batch of records asks of the index tables.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// One write per index key, in the order keys were first touched: versioned puts (entries
    /// and tombstones, `VERSION_ATTRIBUTE` set), and for records without a version, plain puts
    /// and deletes.
    pub writes: Vec<ItemWrite>,
    /// Members left out of the index; planning went on.
    pub skipped: Vec<Skipped>,
    /// Records rejected as record-permanent, and the record planning stopped at.
    pub failures: PlanFailures<PlanError>,
    /// Records that touch no index (neither image has any index's source attribute).
    pub unindexed_records: usize,
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
}

impl PlanError {
    /// Whether the record's content is at fault (record-permanent: it is parked) or the stream
    /// or configuration (systemic: planning stops).
    pub fn kind(&self) -> FailureKind {
        match self {
            PlanError::Record(e) => e.kind(),
            PlanError::MissingKeyAttribute { .. } => FailureKind::Systemic,
            PlanError::EntryTooLarge { .. } | PlanError::NoVersion => FailureKind::RecordPermanent,
        }
    }
}

impl Plan {
    /// Plans a batch read in place ([`stream_runtime::wire`]) in order, its tombstones'
    /// lifetimes counted from their records' change times alone (`now` 0 in [`Plan::in_order`]).
    pub fn from_wire(indexes: &Indexes, records: &[WireRecord<'_>]) -> Plan {
        Plan::in_order(indexes, records, Order::Stream, 0)
    }

    /// Plans a batch whose records of one item come in `order`, to be written at `now` (seconds
    /// since the epoch): a tombstone expires its lifetime after the later of its record's change
    /// and `now` ([`formats::tombstone`]), so that one written long after its change (a mapping
    /// catching up) still outlives every late write older than it.
    pub fn in_order(indexes: &Indexes, records: &[WireRecord<'_>], order: Order, now: u64) -> Plan {
        Plan::of(indexes, (order, now), records.len(), records.iter().enumerate())
    }

    /// Plans the records of a batch at `positions` (in the batch's order), each write and
    /// failure naming its position in the batch: for records that hold every record of their
    /// items (a step, [`steps`]), exactly what [`Plan::in_order`] plans for those items.
    pub fn from_wire_at(
        indexes: &Indexes,
        records: &[WireRecord<'_>],
        positions: &[usize],
        order: Order,
        now: u64,
    ) -> Plan {
        Plan::of(
            indexes,
            (order, now),
            positions.len(),
            positions.iter().filter_map(|&at| Some((at, records.get(at)?))),
        )
    }

    fn of<'r, 'w: 'r>(
        indexes: &Indexes,
        (order, now): (Order, u64),
        count: usize,
        records: impl IntoIterator<Item = (usize, &'r WireRecord<'w>)>,
    ) -> Plan {
        let mut planner = Planner::new(indexes);
        planner.order = order;
        planner.now = now;
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
    /// The record's version, and when its change was made (seconds since the epoch): what a
    /// tombstone holds. `None` for a record without either: its writes are not versioned.
    version: Option<(String, u64)>,
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
    /// The current record's version (its sequence number), which every entry it puts carries,
    /// and its change time (seconds since the epoch), which its tombstones' lifetime starts from.
    version: Option<String>,
    changed_at: Option<u64>,
    order: Order,
    /// When the writes are sent (seconds since the epoch), or 0 for the change times alone.
    now: u64,
    /// With `MULTIKEY_FENCE_HEADS`: each item's fence (`formats::head`) by index and head key,
    /// the newest record's.
    fences: HashMap<SlotKey, Fence<'a>, foldhash::fast::RandomState>,
}

/// An item's fence in one index: the newest record's version, its new image (none after a
/// REMOVE), and the record.
struct Fence<'a> {
    version: String,
    image: Option<&'a WireImage<'a>>,
    origin: usize,
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
            changed_at: None,
            order: Order::Stream,
            now: 0,
            fences: HashMap::default(),
        }
    }

    /// The plan: each slot's write built into its item (a tombstone, or a key for a delete,
    /// where the entry is removed), in order.
    fn finish(self) -> Plan {
        let Planner { indexes, mut plan, slots, pending, carried, now, fences, order, .. } = self;
        let lifetime = formats::tombstone::lifetime(indexes);
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
                let op = match (write.put, write.version) {
                    (Some((parts, at)), _) => Op::Put(parts.item(index, key, &carried[at])),
                    (None, Some((version, changed_at))) => Op::Put(formats::tombstone::item(
                        index,
                        key,
                        version,
                        changed_at.max(now).saturating_add(lifetime),
                    )),
                    (None, None) => Op::Delete(key_item(index, key)),
                };
                ItemWrite { table: Arc::clone(&index.table), op, origin: write.origin }
            })
            .collect();
        // The fences last, each on the same condition as an entry: a fence older than the head
        // there is refused, and changes nothing.
        let mut fences: Vec<(SlotKey, Fence<'_>)> = fences.into_iter().collect();
        fences.sort_unstable_by_key(|(_, fence)| fence.origin);
        plan.writes.extend(fences.into_iter().map(|((ix, key), fence)| {
            let index = &indexes.indexes[ix];
            let held = match order {
                Order::Stream => formats::head::Held::InOrder,
                Order::Any => formats::head::Held::Image(fence.image),
            };
            let item = formats::head::fence(index, key, fence.version, held);
            ItemWrite { table: Arc::clone(&index.table), op: Op::Put(item), origin: fence.origin }
        }));
        plan
    }

    fn record(&mut self, origin: usize, record: &'a WireRecord<'a>) -> Result<(), PlanError> {
        let change = record.change()?;
        let (before, after) = (change.before, change.after);
        let base_key = base_key(self.indexes, change.keys)?;
        let backfill_touch = formats::touch::is_touched(before, after);
        let epoch = self.indexes.version_epoch;
        self.version = record.sequence_number().and_then(|seq| formats::entries::version_in(epoch, seq));
        if self.version.is_none() && self.order == Order::Any {
            return Err(PlanError::NoVersion);
        }
        // The epoch stands for a record without a change time.
        self.changed_at =
            u64::try_from(record.approximate_creation_date_time.timestamp()).ok().filter(|&t| t > 0);
        let mut indexed = false;
        for (ix, index) in self.indexes.indexes.iter().enumerate() {
            // Each attribute the index reads is looked up once per image.
            let old = before.map(|image| IndexView::new(index, image));
            let new = after.map(|image| IndexView::new(index, image));
            let reads = old.iter().chain(&new).any(|view| view.source().is_some());
            indexed |= reads;
            self.diff(origin, ix, index, &base_key, (old, new), backfill_touch);
            if reads && self.indexes.fence_heads {
                self.fence(origin, ix, index, &base_key, after);
            }
        }
        if !indexed {
            self.plan.unindexed_records += 1;
        }
        self.commit()
    }

    /// Keeps the item's fence in `index` at this record's version, unless a newer record of the
    /// batch set it. An item whose key no head can hold had none in the release that kept
    /// heads, and gets none.
    fn fence(
        &mut self,
        origin: usize,
        ix: usize,
        index: &Index,
        base_key: &[(&'a str, &'a Attr<'a>)],
        image: Option<&'a WireImage<'a>>,
    ) {
        let (Some(version), Ok(key)) = (&self.version, formats::head::key(index, base_key)) else {
            return;
        };
        let fence = Fence { version: version.clone(), image, origin };
        match self.fences.entry((ix, key)) {
            Entry::Occupied(mut at) => {
                if at.get().version <= fence.version {
                    at.insert(fence);
                }
            }
            Entry::Vacant(at) => {
                at.insert(fence);
            }
        }
    }

    /// Commits the current record's staged writes and skips: a write to a key already written
    /// in the batch replaces it unless it is older (in any order). Fails when one of its entries
    /// was too large (and removed).
    fn commit(&mut self) -> Result<(), PlanError> {
        for (slot, write) in self.staged.drain(..) {
            // One lookup (one hash of the key) whether or not the key was written before.
            match self.slots.entry(slot) {
                Entry::Occupied(at) => {
                    let kept = &mut self.pending[*at.get()];
                    let older = matches!((&write.version, &kept.version), (Some((new, _)), Some((old, _))) if new < old);
                    if !older {
                        *kept = write;
                    }
                }
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
        let version = self.version.clone().zip(self.changed_at);
        self.staged.push(((ix, key), Pending { put, origin, version }));
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

pub mod steps;
