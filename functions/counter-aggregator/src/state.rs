//! The total item: each shard's last applied state, their sum, and a version for optimistic
//! concurrency; and the merge of a batch's update into it.
//!
//! ```text
//! pk      = COUNTER#<name>#TOTAL
//! total   = N   the sum of the shards' values
//! shards  = M   {"<k>": {"v": N <count>, "q": S <sequence number, 40 digits>}, …}
//! version = N   incremented by every write; the write's condition
//! ```

use std::collections::{BTreeMap, HashMap};

use formats::counter::TOTAL_ATTRIBUTE;
use key_codec::SequenceNumber;
use serde_dynamo::{AttributeValue, Item};

use crate::plan::{CounterUpdate, ShardState};

/// The attribute holding the shards' states.
pub const SHARDS: &str = "shards";
/// The attribute holding the version.
pub const VERSION: &str = "version";

/// A total item that cannot be read: it was written by something else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("total item {key:?}: {reason}")]
pub struct StateError {
    /// The item's key.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

/// A counter's total item, as this function keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Total {
    /// Each shard's last applied state.
    pub shards: BTreeMap<u32, ShardState>,
    /// 0 for an item not yet written.
    pub version: u64,
}

impl Total {
    /// The counter's total: the sum of its shards' values.
    pub fn sum(&self) -> i128 {
        self.shards.values().map(|s| s.value).sum()
    }

    /// The state with `update` applied: each shard state that is newer than the stored one
    /// replaces it. `None` when nothing is newer (a duplicate, or a retry of what was applied).
    pub fn merge(&self, update: &CounterUpdate) -> Option<Total> {
        let mut merged = self.clone();
        let mut changed = false;
        for (shard, state) in &update.shards {
            let newer =
                merged.shards.get(shard).is_none_or(|kept| kept.sequence_number < state.sequence_number);
            if newer {
                merged.shards.insert(*shard, state.clone());
                changed = true;
            }
        }
        changed.then(|| {
            merged.version += 1;
            merged
        })
    }

    /// Reads a stored total item (its attributes other than the key).
    pub fn from_item(key: &str, item: &HashMap<String, AttributeValue>) -> Result<Total, StateError> {
        let fail = |reason: String| StateError { key: key.to_owned(), reason };
        let version = match item.get(VERSION) {
            Some(AttributeValue::N(n)) => {
                n.parse().map_err(|_| fail(format!("version {n:?} is not a count")))?
            }
            other => return Err(fail(format!("version is {other:?}, not a number"))),
        };
        let Some(AttributeValue::M(shards)) = item.get(SHARDS) else {
            return Err(fail("it has no shards map".to_owned()));
        };
        let mut total = Total { shards: BTreeMap::new(), version };
        for (k, state) in shards {
            let shard: u32 = k.parse().map_err(|_| fail(format!("shards has a key {k:?}")))?;
            let (Some(AttributeValue::N(v)), Some(AttributeValue::S(q))) =
                (field(state, "v"), field(state, "q"))
            else {
                return Err(fail(format!("shards.{k} is not {{v: N, q: S}}")));
            };
            let value = v.parse().map_err(|_| fail(format!("shards.{k}.v = {v:?} is not an integer")))?;
            let sequence_number = SequenceNumber::from_fixed_width(q)
                .map_err(|_| fail(format!("shards.{k}.q = {q:?} is not a 40-digit sequence number")))?;
            total.shards.insert(shard, ShardState { value, sequence_number });
        }
        Ok(total)
    }

    /// The item to write: the key, `total`, `shards` and `version`.
    pub fn to_item(&self, partition_key: &str, key: &str) -> Item {
        let shards = self
            .shards
            .iter()
            .map(|(k, s)| {
                let state = HashMap::from([
                    ("v".to_owned(), AttributeValue::N(s.value.to_string())),
                    ("q".to_owned(), AttributeValue::S(s.sequence_number.to_fixed_width())),
                ]);
                (k.to_string(), AttributeValue::M(state))
            })
            .collect();
        Item::from(HashMap::from([
            (partition_key.to_owned(), AttributeValue::S(key.to_owned())),
            (TOTAL_ATTRIBUTE.to_owned(), AttributeValue::N(self.sum().to_string())),
            (SHARDS.to_owned(), AttributeValue::M(shards)),
            (VERSION.to_owned(), AttributeValue::N(self.version.to_string())),
        ]))
    }
}

fn field<'a>(state: &'a AttributeValue, name: &str) -> Option<&'a AttributeValue> {
    match state {
        AttributeValue::M(m) => m.get(name),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
