//! A batch cut into steps by item, so that its writes can begin before the whole batch is
//! planned, and no write is made twice.
//!
//! An index entry's sort key ends with its item's key (`formats::entries::item_key`), so
//! two items never write the same entry. A step that holds every record of a set of items
//! therefore plans exactly the writes that the whole batch's plan makes for those items,
//! coalescing included ([`crate::plan::Plan::from_wire_at`]), and steps need no order between
//! them: their writes can be sent while later steps are planned, in any order, in the same
//! requests. Cutting by position instead would split an item's records across steps, and an entry
//! a later step writes again would be written twice (docs/benchmarks.md, the write path).

use std::hash::BuildHasher;

use stream_runtime::wire::WireRecord;

use crate::config::Indexes;
use crate::plan::base_key;

/// About how many records a step holds: small enough that a step's plan (about 2 ms for 512
/// of the bench's records) barely delays the writes waiting for it.
pub const STEP_RECORDS: usize = 512;

/// `records` cut into `⌈len / per_step⌉` steps (at least one), each holding every record of its
/// items, the positions in each in the batch's order; an item's step is a hash of its key. A
/// record whose item key cannot be read goes to the first step (its plan rejects it, or keys it
/// as the whole batch's plan would).
pub fn by_item(indexes: &Indexes, records: &[WireRecord<'_>], per_step: usize) -> Vec<Vec<usize>> {
    let count = records.len().div_ceil(per_step.max(1)).max(1);
    let mut steps: Vec<Vec<usize>> =
        (0..count).map(|_| Vec::with_capacity(records.len() / count + 1)).collect();
    if count == 1 {
        steps[0].extend(0..records.len());
        return steps;
    }
    // A fixed seed: the same batch is cut the same way in every process.
    let hasher = foldhash::fast::FixedState::with_seed(0x5eed);
    for (at, record) in records.iter().enumerate() {
        let step = item_of(indexes, record)
            .map_or(0, |key| usize::try_from(hasher.hash_one(key.as_bytes()) % count as u64).unwrap_or(0));
        steps[step].push(at);
    }
    steps
}

/// The record's item key, as its entries' sort keys end with it.
fn item_of(indexes: &Indexes, record: &WireRecord<'_>) -> Option<String> {
    let change = record.change().ok()?;
    let key = base_key(indexes, change.keys).ok()?;
    formats::entries::item_key(&key).ok()
}

#[cfg(test)]
mod tests;
