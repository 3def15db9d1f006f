//! Order-insensitive planning (`MULTIKEY_ORDER=any`): one item's records may come out of order
//! and more than once (as from a Kinesis data stream) and the index ends as if they had come in
//! order.
//!
//! Each item has a *version head* per index (`formats::head`): the version of the newest
//! record applied to it and the indexed attributes of that record's new image. Planning is pure
//! and has two steps, with the heads read in between:
//!
//! 1. [`Changes::new`] keeps, for each item and index, the batch's newest record (by version, the
//!    record's sequence number), with the attributes the index reads from its images. Older ones
//!    and duplicates are superseded: the newest carries the item's whole state.
//! 2. [`resolve`] takes the heads. A change whose version is not above its head's changes
//!    nothing (it is stale: older, or a duplicate). Any other is diffed, by the same rules as in
//!    order ([`super`]), against the image its head holds, which is what the index holds, rather
//!    than against its own old image, which records that have not arrived yet may stand between.
//!    An item with no head yet (none of its records applied out of order yet), or with an
//!    in-order head (an index kept in order until now: it holds a version, not an image), puts
//!    every entry of the new image, and deletes those of its own old image that the new one
//!    lacks. Each applied change writes its item's new head, in the transaction of its entry
//!    writes (the handler's fence).
//!
//! **Why it is exact.** An item's entries are a function of its newest applied image, and the
//! head says which image that is. Applying record `v` over head `h < v` turns the entries of
//! `h`'s image into those of `v`'s, whatever came between; a record at or below the head is
//! already reflected. The new head is written in the same transaction as its record's entry
//! writes, on the condition that the head is still older than the record: they are applied
//! together or not at all, so a failure leaves the old head and the record, redelivered, is
//! applied again; and a write landing late, or a second invocation that read the same head,
//! finds a newer head and is refused.
//!
//! **What it costs.** For each item and index the batch touches: a head read (`BatchGetItem`, 100
//! heads a request) and the head's put in its item's transaction, and one head item in the index
//! table per item ever indexed, a REMOVE's head included (so that a late older record is still
//! stale).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use formats::entries::IndexView;
use formats::head::{self, Head};
use serde_dynamo::{AttributeValue, Item};
use stream_runtime::limits::{MAX_ITEM_BYTES, item_size};
use stream_runtime::wire::{Attr, WireImage, WireRecord};
use stream_runtime::{EventRecord, ItemWrite, Op, PlanFailure, PlanFailures, Record};

use super::{Plan, PlanError, Planner, base_key};
use crate::config::Indexes;
use formats::EntryKey;

/// A batch's changes, one per item and index: the newest record of each.
#[derive(Debug, Default)]
pub struct Changes {
    /// In the order of their records.
    pub items: Vec<Change>,
    /// Records left out because a newer record of the same item is in the batch (or the same
    /// record again).
    pub superseded: usize,
    /// Records that touch no index.
    pub unindexed_records: usize,
    /// Records rejected, and the record planning stopped at.
    pub failures: PlanFailures<PlanError>,
}

/// One item's newest record in a batch, for one index.
#[derive(Debug, Clone)]
pub struct Change {
    /// The index's position in the configuration.
    pub index: usize,
    /// The record's position in the batch.
    pub origin: usize,
    /// Its version (40 digits).
    pub version: String,
    /// The key of the item's head.
    pub head: EntryKey,
    base_key: Vec<(String, AttributeValue)>,
    /// The attributes the index reads, from the old and new images.
    before: Option<Item>,
    after: Option<Item>,
    touched: bool,
}

impl Changes {
    /// [`Changes::from_wire`] of `aws_lambda_events` records.
    pub fn new(indexes: &Indexes, records: &[EventRecord]) -> Changes {
        let wire = WireRecord::view_all(records);
        Changes::from_wire(indexes, &wire)
    }

    /// The batch's changes, read in place: for each item and index, the newest record.
    pub fn from_wire(indexes: &Indexes, records: &[WireRecord<'_>]) -> Changes {
        let mut changes = Changes::default();
        let mut newest: HashMap<String, usize> = HashMap::new();
        let mut indexed_records = 0;
        let failures = PlanFailures::plan_each(records, PlanError::kind, |origin, raw| {
            let staged = Change::of_record(indexes, origin, raw)?;
            if staged.is_empty() {
                changes.unindexed_records += 1;
                return Ok(());
            }
            indexed_records += 1;
            for change in staged {
                match newest.get(&change.head.pk) {
                    Some(&at) if changes.items[at].version >= change.version => {}
                    Some(&at) => changes.items[at] = change,
                    None => {
                        newest.insert(change.head.pk.clone(), changes.items.len());
                        changes.items.push(change);
                    }
                }
            }
            Ok(())
        });
        let mut kept: Vec<usize> = changes.items.iter().map(|c| c.origin).collect();
        kept.sort_unstable();
        kept.dedup();
        changes.superseded = indexed_records - kept.len();
        changes.failures = failures;
        changes.items.sort_by_key(|c| c.origin);
        changes
    }

    /// The heads to read, per index table.
    pub(crate) fn heads_by_table(&self, indexes: &Indexes) -> Vec<(Arc<str>, Vec<Item>)> {
        let mut tables: Vec<(Arc<str>, Vec<Item>)> = Vec::new();
        for change in &self.items {
            let index = &indexes.indexes[change.index];
            let mut key = Item::default();
            key.insert(index.partition_key.clone(), AttributeValue::S(change.head.pk.clone()));
            key.insert(index.sort_key.clone(), change.head.sk.clone().into_attribute());
            match tables.iter_mut().find(|(t, _)| *t == index.table) {
                Some((_, keys)) => keys.push(key),
                None => tables.push((Arc::clone(&index.table), vec![key])),
            }
        }
        tables
    }
}

impl Change {
    /// The changes one record makes, one per index whose source attribute either image has.
    fn of_record(indexes: &Indexes, origin: usize, raw: &WireRecord<'_>) -> Result<Vec<Change>, PlanError> {
        let record = Record::new(raw)?;
        let keys = record.keys()?;
        let (before, after) = (record.before()?, record.after()?);
        let base_key = base_key(indexes, keys)?;
        let version =
            record.sequence_number().and_then(formats::entries::version).ok_or(PlanError::NoVersion)?;
        let touched = formats::touch::is_touched(before, after);
        let mut changes = Vec::new();
        for (ix, index) in indexes.indexes.iter().enumerate() {
            let has = |image: Option<&WireImage<'_>>| image.is_some_and(|i| i.contains_key(&index.source));
            if !has(before) && !has(after) {
                continue;
            }
            let head = head::key(index, &base_key)
                .map_err(|reason| PlanError::HeadUnkeyable { index: index.name.clone(), reason })?;
            changes.push(Change {
                index: ix,
                origin,
                version: version.clone(),
                head,
                base_key: base_key.iter().map(|(n, v)| ((*n).to_owned(), v.to_attribute())).collect(),
                before: before.map(|i| head::projection(index, i)),
                after: after.map(|i| head::projection(index, i)),
                touched,
            });
        }
        Ok(changes)
    }
}

/// What the heads make of a batch's changes.
#[derive(Debug, Default)]
pub struct Resolved {
    /// The entry writes, with the skipped members and rejected records; `Plan::failures` holds
    /// `Changes::failures` too.
    pub plan: Plan,
    /// Each applied change's new head, the fence of its entry writes: put in the same
    /// transaction as they are, on the condition that the head read is still the newest.
    pub heads: Vec<ResolvedHead>,
    /// Changes at or below their head: nothing to do.
    pub stale: usize,
}

/// A change's new head.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedHead {
    /// The index's position in the configuration.
    pub index: usize,
    /// The head's partition key (the planner's fence for it has the same).
    pub pk: String,
    /// The change's version.
    pub version: String,
    /// The put of the head.
    pub write: ItemWrite,
}

/// Resolves `changes` against `heads` (the heads read, by partition key; a missing one has
/// never been written).
pub fn resolve<S: BuildHasher>(
    indexes: &Indexes,
    changes: Changes,
    heads: &HashMap<String, Head, S>,
) -> Resolved {
    let mut resolved = Resolved::default();
    // A change at or below its item's head has been applied already.
    let fresh: Vec<bool> =
        changes.items.iter().map(|c| heads.get(&c.head.pk).is_none_or(|h| h.version < c.version)).collect();
    // An in-order head orders records but does not say what the index holds: taken as none.
    let known = |pk: &str| heads.get(pk).filter(|h| !h.in_order);
    resolved.stale = fresh.iter().filter(|f| !**f).count();
    // Each change's key and images read in place, for the planner to borrow until it finishes.
    let read: Vec<_> = changes
        .items
        .iter()
        .map(|change| {
            let old = match known(&change.head.pk) {
                Some(h) => h.image.as_ref(),
                None => change.before.as_ref(),
            };
            let key_values: Vec<Attr<'_>> =
                change.base_key.iter().map(|(_, v)| Attr::from_attribute(v)).collect();
            let images = (old.map(WireImage::from_item), change.after.as_ref().map(WireImage::from_item));
            (key_values, images)
        })
        .collect();
    let mut planner = Planner::new(indexes);
    let mut rejected: Vec<PlanFailure<PlanError>> = Vec::new();
    for ((change, (key_values, (old, new))), _) in
        changes.items.iter().zip(&read).zip(&fresh).filter(|(_, f)| **f)
    {
        let index = &indexes.indexes[change.index];
        let head = known(&change.head.pk);
        let base_key: Vec<(&str, &Attr<'_>)> =
            change.base_key.iter().zip(key_values).map(|((n, _), v)| (n.as_str(), v)).collect();
        planner.version = Some(change.version.clone());
        planner.diff(
            change.origin,
            change.index,
            index,
            &base_key,
            (
                old.as_ref().map(|image| IndexView::new(index, image)),
                new.as_ref().map(|image| IndexView::new(index, image)),
            ),
            // Without a head, what the index holds is unknown: nothing, if the item's records
            // have only ever come out of order, or its old image, if they came in order until
            // now. Putting every entry is right for both.
            change.touched || head.is_none(),
        );
        if let Err(error) = planner.commit() {
            rejected.push(PlanFailure { record: change.origin, error });
        }
    }
    let mut plan = planner.finish();
    drop(read);
    for (change, _) in changes.items.into_iter().zip(fresh).filter(|(_, f)| *f) {
        match new_head(indexes, change) {
            Ok(head) => resolved.heads.push(head),
            Err(failure) => rejected.push(failure),
        }
    }
    plan.unindexed_records = changes.unindexed_records;
    plan.failures = changes.failures;
    plan.failures.rejected.extend(rejected);
    plan.failures.rejected.sort_by_key(|f| f.record);
    resolved.plan = plan;
    resolved
}

/// The head an applied change writes: its version and the indexed attributes of its new image;
/// refused when the head would be over DynamoDB's item limit.
fn new_head(indexes: &Indexes, change: Change) -> Result<ResolvedHead, PlanFailure<PlanError>> {
    let index = &indexes.indexes[change.index];
    let new = Head { version: change.version.clone(), image: change.after, in_order: false };
    let pk = change.head.pk.clone();
    let item = new.item(index, change.head);
    let size = item_size(&item);
    if size > MAX_ITEM_BYTES {
        return Err(PlanFailure {
            record: change.origin,
            error: PlanError::HeadTooLarge { index: index.name.clone(), pk, size, limit: MAX_ITEM_BYTES },
        });
    }
    Ok(ResolvedHead {
        index: change.index,
        pk,
        version: change.version,
        write: ItemWrite { table: Arc::clone(&index.table), op: Op::Put(item.into()), origin: change.origin },
    })
}

#[cfg(test)]
mod tests;
