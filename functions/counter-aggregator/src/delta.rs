//! Delta writes: a counter's update applied in one conditional `UpdateItem`, without reading
//! the total item first.
//!
//! A batch knows, from the `OldImage` of its first record of each shard, what that shard held
//! just before ([`Before`]). If the total item still holds exactly that for every shard the
//! batch touches, with an older sequence number, the update is a delta:
//!
//! ```text
//! SET   shards.<k> = {v: <new>, q: <sequence number>}   for each shard k
//! ADD   total :Σ(new − before), version :1
//! IF    attribute_exists(shards) AND, for each shard k,
//!       shards.<k>.v = <before> AND shards.<k>.q < <sequence number>
//!       (a shard the batch INSERTs: absent, or holding 0 with an older sequence number)
//! ```
//!
//! The condition names only the batch's own shards, and one shard item's records are never in
//! two invocations at once, so invocations that update other shards of the same counter never
//! make it fail: they do not conflict. `total` stays the sum of `shards`, since each shard's
//! value changes by exactly what is added to it, and `version` moves, so that a concurrent
//! read-merge-write ([`crate::handler`]) sees the change. When the condition fails (a counter
//! not written yet, a batch delivered again, records given up on before) the handler falls back
//! to reading, merging and writing the whole item, which is always right.
//!
//! A counter touching many shards is split into writes of at most [`MAX_SHARDS_PER_WRITE`]
//! shards each (DynamoDB's expressions are limited to 4 KB); each is a delta of its own shards.

use std::collections::HashMap;

use formats::counter::TOTAL_ATTRIBUTE;
use serde_dynamo::AttributeValue;

use crate::plan::{Before, CounterUpdate, ShardState};
use crate::state::{SHARDS, VERSION};

/// Shards per delta write: about 80 bytes of expression each keeps it well under 4 KB.
pub(crate) const MAX_SHARDS_PER_WRITE: usize = 24;

/// One conditional `UpdateItem` of a total item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeltaWrite {
    /// The update expression.
    pub update: String,
    /// The condition expression.
    pub condition: String,
    /// Expression attribute names.
    pub names: HashMap<String, String>,
    /// Expression attribute values.
    pub values: HashMap<String, AttributeValue>,
    /// What the write adds to `total`.
    pub delta: i128,
}

/// The delta writes of `update`, or `None` when a shard's state before the batch is unknown.
pub(crate) fn delta_writes(update: &CounterUpdate) -> Option<Vec<DeltaWrite>> {
    let shards = update
        .shards
        .iter()
        .map(|(k, state)| match update.before.get(k) {
            Some(Before::Unknown) | None => None,
            Some(before) => Some((*k, state, *before)),
        })
        .collect::<Option<Vec<_>>>()?;
    Some(shards.chunks(MAX_SHARDS_PER_WRITE).map(write).collect())
}

fn write(shards: &[(u32, &ShardState, Before)]) -> DeltaWrite {
    let n = |v: i128| AttributeValue::N(v.to_string());
    let mut names = HashMap::from([
        ("#s".to_owned(), SHARDS.to_owned()),
        ("#t".to_owned(), TOTAL_ATTRIBUTE.to_owned()),
        ("#v".to_owned(), VERSION.to_owned()),
    ]);
    let mut values = HashMap::from([(":one".to_owned(), n(1))]);
    let (mut sets, mut conditions) = (Vec::new(), vec!["attribute_exists(#s)".to_owned()]);
    let mut delta = 0;
    for (i, (k, state, before)) in shards.iter().enumerate() {
        let q = state.sequence_number.to_fixed_width();
        names.insert(format!("#k{i}"), k.to_string());
        values.insert(
            format!(":s{i}"),
            AttributeValue::M(HashMap::from([
                ("v".to_owned(), n(state.value)),
                ("q".to_owned(), AttributeValue::S(q.clone())),
            ])),
        );
        values.insert(format!(":q{i}"), AttributeValue::S(q));
        sets.push(format!("#s.#k{i} = :s{i}"));
        let was = match before {
            Before::Value(v) => {
                values.insert(format!(":o{i}"), n(*v));
                conditions.push(format!("#s.#k{i}.v = :o{i} AND #s.#k{i}.q < :q{i}"));
                *v
            }
            // Unknown never gets here: `delta_writes` falls back to read-merge-write for it.
            Before::Absent | Before::Unknown => {
                values.insert(":z".to_owned(), n(0));
                conditions.push(format!(
                    "(attribute_not_exists(#s.#k{i}) OR (#s.#k{i}.v = :z AND #s.#k{i}.q < :q{i}))"
                ));
                0
            }
        };
        delta += state.value - was;
    }
    values.insert(":d".to_owned(), n(delta));
    DeltaWrite {
        update: format!("SET {} ADD #t :d, #v :one", sets.join(", ")),
        condition: conditions.join(" AND "),
        names,
        values,
        delta,
    }
}

#[cfg(test)]
mod tests;
