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
//! An INSERT has no old image and a REMOVE no new one, so they put and delete every entry.
//!
//! **Coalescing.** Every write is a whole-item put or a delete by key, so applying a batch's writes
//! in order leaves the same index as applying, for each key, only the last write to it. The plan
//! keeps exactly that: one write per index key, tagged with the record it came from. The writes no
//! longer depend on order, so they can be sent concurrently. A delete for an entry put earlier in
//! the same batch is kept, not dropped: if an earlier delivery of the batch wrote that entry before
//! failing, the delete is what removes it.
//!
//! **Stopping.** A record that cannot be planned (an unknown event name, no keys, or a stream view
//! type without the image the change needs) stops planning: it and the records after it are left
//! for Lambda to redeliver, and the records before it are planned as usual.
//!
//! **Skipping.** A member that cannot be keyed (a nested map value, a key over DynamoDB's limits,
//! a missing scope attribute) gets no entry; it is reported in [`Plan::skipped`] and does not stop
//! the batch.

use std::collections::HashMap;
use std::sync::Arc;

use serde_dynamo::{AttributeValue, Item};
use stream_kit::{EventRecord, Op, Record, RecordError, Write};

use crate::config::{Index, Indexes};
use crate::entries::{EntryKey, ImageEntries, Member};

/// What a batch of records asks of the index tables.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// One write per index key, in the order keys were first touched.
    pub writes: Vec<Write>,
    /// Members left out of the index; planning went on.
    pub skipped: Vec<Skipped>,
    /// The record planning stopped at, if it did.
    pub stopped: Option<Stopped>,
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

/// The record planning stopped at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// Its position in the batch.
    pub record: usize,
    /// Why it cannot be planned.
    pub error: PlanError,
}

/// Why a record cannot be planned. Retrying does not help: these are poison records or a
/// misconfigured stream.
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
}

impl Plan {
    /// Plans a batch.
    pub fn new(indexes: &Indexes, records: &[EventRecord]) -> Plan {
        let mut planner = Planner::new(indexes);
        for (i, raw) in records.iter().enumerate() {
            if let Err(error) = planner.record(i, raw) {
                planner.plan.stopped = Some(Stopped { record: i, error });
                break;
            }
        }
        planner.plan
    }

    /// How many writes are puts and deletes.
    pub fn counts(&self) -> (usize, usize) {
        let puts = self.writes.iter().filter(|w| matches!(w.op, Op::Put(_))).count();
        (puts, self.writes.len() - puts)
    }
}

/// Index position, partition key, sort key bytes.
type SlotKey = (usize, String, Vec<u8>);

struct Planner<'c> {
    indexes: &'c Indexes,
    plan: Plan,
    slots: HashMap<SlotKey, usize>,
    /// The current record's writes, committed only if the whole record plans.
    staged: Vec<(SlotKey, Write)>,
    staged_skips: Vec<Skipped>,
}

impl<'c> Planner<'c> {
    fn new(indexes: &'c Indexes) -> Planner<'c> {
        Planner {
            indexes,
            plan: Plan::default(),
            slots: HashMap::new(),
            staged: Vec::new(),
            staged_skips: Vec::new(),
        }
    }

    fn record(&mut self, origin: usize, raw: &EventRecord) -> Result<(), PlanError> {
        let record = Record::new(raw)?;
        let keys = record.keys()?;
        let before = record.before()?;
        let after = record.after()?;
        let base_key = self
            .indexes
            .base_key
            .iter()
            .map(|name| {
                keys.get(name)
                    .map(|v| (name.as_str(), v))
                    .ok_or_else(|| PlanError::MissingKeyAttribute {
                        attribute: name.clone(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (ix, index) in self.indexes.indexes.iter().enumerate() {
            self.diff(origin, ix, index, &base_key, before, after);
        }
        for (slot, write) in self.staged.drain(..) {
            if let Some(&at) = self.slots.get(&slot) {
                self.plan.writes[at] = write;
            } else {
                self.slots.insert(slot, self.plan.writes.len());
                self.plan.writes.push(write);
            }
        }
        self.plan.skipped.append(&mut self.staged_skips);
        Ok(())
    }

    fn diff(
        &mut self,
        origin: usize,
        ix: usize,
        index: &Index,
        base_key: &[(&str, &AttributeValue)],
        before: Option<&Item>,
        after: Option<&Item>,
    ) {
        if let (Some(old), Some(new)) = (before, after)
            && relevant_unchanged(index, old, new)
        {
            return;
        }
        let old = before.map(|image| ImageEntries::new(index, base_key, image));
        let new = after.map(|image| ImageEntries::new(index, base_key, image));
        if let Some(new) = &new {
            for (member, reason) in &new.unkeyable_members {
                self.skip(origin, index, member, reason.clone());
            }
        }
        match (&old, &new) {
            (None, None) => {}
            (Some(old), None) => {
                for m in &old.members {
                    self.delete(origin, ix, index, old, m);
                }
            }
            (None, Some(new)) => {
                for m in &new.members {
                    self.put(origin, ix, index, new, m);
                }
            }
            (Some(old), Some(new)) => {
                let copied_unchanged = old.copied == new.copied;
                let old_by_id: HashMap<&str, &Member<'_>> = old.members.iter().map(|m| (&*m.id, m)).collect();
                for m in &new.members {
                    match old_by_id.get(&*m.id) {
                        Some(o) if copied_unchanged && **o == *m => {}
                        Some(o) => {
                            let new_key = self.put(origin, ix, index, new, m);
                            let old_key = old.key(o).ok();
                            if old_key.is_some() && old_key != new_key {
                                self.delete(origin, ix, index, old, o);
                            }
                        }
                        None => {
                            self.put(origin, ix, index, new, m);
                        }
                    }
                }
                let new_ids: std::collections::HashSet<&str> = new.members.iter().map(|m| &*m.id).collect();
                for o in old.members.iter().filter(|o| !new_ids.contains(&*o.id)) {
                    self.delete(origin, ix, index, old, o);
                }
            }
        }
    }

    /// Stages a put of `member`'s entry; returns its key, or `None` when it has none.
    fn put(
        &mut self,
        origin: usize,
        ix: usize,
        index: &Index,
        image: &ImageEntries<'_>,
        member: &Member<'_>,
    ) -> Option<EntryKey> {
        match image.key(member) {
            Ok(key) => {
                let slot = (ix, key.pk.clone(), key.sk.as_bytes().to_vec());
                let returned = key.clone();
                let item = image.item(member, key);
                self.staged.push((slot, write(index, Op::Put(item), origin)));
                Some(returned)
            }
            Err(reason) => {
                self.skip(origin, index, &member.id, reason);
                None
            }
        }
    }

    /// Stages a delete of `member`'s entry. A member with no key was never written: nothing to do.
    fn delete(
        &mut self,
        origin: usize,
        ix: usize,
        index: &Index,
        image: &ImageEntries<'_>,
        member: &Member<'_>,
    ) {
        if let Ok(key) = image.key(member) {
            let slot = (ix, key.pk.clone(), key.sk.as_bytes().to_vec());
            self.staged
                .push((slot, write(index, Op::Delete(image.key_item(key)), origin)));
        }
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

fn write(index: &Index, op: Op, origin: usize) -> Write {
    Write {
        table: Arc::clone(&index.table),
        op,
        origin,
    }
}

/// Whether every attribute the index reads is the same in both images.
fn relevant_unchanged(index: &Index, old: &Item, new: &Item) -> bool {
    std::iter::once(&index.source)
        .chain(&index.scope)
        .chain(&index.tiebreakers)
        .chain(&index.include)
        .all(|name| old.get(name) == new.get(name))
}

#[cfg(test)]
mod tests;
