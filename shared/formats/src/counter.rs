//! The counter items' keys: built from a counter's name and shard number, and parsed back.

use key_codec::{HierKey, KeyKind, hier};

/// The first segment of every counter key.
pub const PREFIX: &str = "COUNTER";
/// The segment before a shard's number.
pub const SHARD: &str = "SHARD";
/// The last segment of a total item's key.
pub const TOTAL: &str = "TOTAL";
/// The attribute that holds a shard's count.
pub const COUNT: &str = "count";
/// The attribute that holds a total item's total.
pub const TOTAL_ATTRIBUTE: &str = "total";
/// The partition key attribute a [`Sharding`] uses unless told otherwise.
pub const DEFAULT_PARTITION_KEY: &str = "pk";
/// The most shards a counter may have: enough for 1,000,000 writes per second.
pub(crate) const MAX_SHARDS: u32 = 1_000;
/// The most Regions that may write one global table's counters, each to its own shards.
pub(crate) const MAX_REGIONS: u32 = 32;

/// Why a key cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardingError {
    /// The shard count is outside `1..=MAX_SHARDS`.
    #[error("a counter needs 1 to {MAX_SHARDS} shards, not {0}")]
    Shards(u32),
    /// The counter's name is empty.
    #[error("a counter's name must not be empty")]
    EmptyName,
    /// The writer's Region is not one of the Regions the layout counts.
    #[error("Region {region} of {regions}: Regions are numbered from 0, and 1 to {MAX_REGIONS} of them")]
    Region {
        /// The writer's Region's number.
        region: u32,
        /// The Regions that write.
        regions: u32,
    },
    /// The key would exceed DynamoDB's partition-key limit.
    #[error("counter {name:?}: {cause}")]
    TooLong {
        /// The counter.
        name: String,
        /// The limit it exceeds.
        cause: key_codec::Error,
    },
}

/// How a table's counters are laid out.
///
/// On a global table, two Regions that `ADD` to one shard item at once conflict, and last writer
/// wins drops one of the increments. [`Sharding::in_region`] gives each Region its own shards:
/// Region `r` of `R` writes shards `r × shards` to `r × shards + shards − 1`, so no shard item
/// is written by two Regions, and the exact read sums all `R × shards`. The aggregator needs no
/// setting: it sums whatever shards it sees (`docs/global-tables.md`). A total item keeps an
/// entry of about 60 bytes per shard: keep `R × shards` within a few thousand, under DynamoDB's
/// 400 KB item limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sharding {
    /// The table's partition key attribute (a string).
    pub partition_key: String,
    /// Shards per counter, per Region.
    pub shards: u32,
    /// The Regions that write the table's counters, each to its own shards (1 when the table
    /// is not a global table).
    pub regions: u32,
    /// This writer's Region, numbered from 0.
    pub region: u32,
}

impl Sharding {
    /// A layout with `shards` shards per counter and partition key `pk`.
    pub fn new(shards: u32) -> Result<Sharding, ShardingError> {
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(ShardingError::Shards(shards));
        }
        Ok(Sharding { partition_key: DEFAULT_PARTITION_KEY.to_owned(), shards, regions: 1, region: 0 })
    }

    /// The layout for writers in Region `region` (numbered from 0, the same numbering in every
    /// Region) of the `regions` that write a global table's counters.
    pub fn in_region(mut self, region: u32, regions: u32) -> Result<Sharding, ShardingError> {
        if !(1..=MAX_REGIONS).contains(&regions) || region >= regions {
            return Err(ShardingError::Region { region, regions });
        }
        (self.region, self.regions) = (region, regions);
        Ok(self)
    }

    /// The shards this writer increments.
    pub fn written(&self) -> std::ops::Range<u32> {
        let first = self.region * self.shards;
        first..first + self.shards
    }

    /// Every shard of a counter, every Region's: what the exact read sums.
    pub fn all(&self) -> std::ops::Range<u32> {
        0..self.regions * self.shards
    }

    /// The key of shard `shard` of counter `name`.
    pub fn shard_key(&self, name: &str, shard: u32) -> Result<String, ShardingError> {
        key(name, |k| k.push(SHARD).push(&shard.to_string()))
    }

    /// The key of counter `name`'s total item.
    pub fn total_key(&self, name: &str) -> Result<String, ShardingError> {
        total_key(name)
    }
}

/// The key of counter `name`'s total item (the same in every layout).
pub fn total_key(name: &str) -> Result<String, ShardingError> {
    key(name, |k| k.push(TOTAL))
}

fn key(name: &str, rest: impl FnOnce(HierKey) -> HierKey) -> Result<String, ShardingError> {
    if name.is_empty() {
        return Err(ShardingError::EmptyName);
    }
    rest(HierKey::new(PREFIX).push(name))
        .finish(KeyKind::Partition)
        .map_err(|source| ShardingError::TooLong { name: name.to_owned(), cause: source })
}

/// What a counter table's key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterKey {
    /// Shard `shard` of counter `name`.
    Shard {
        /// The counter.
        name: String,
        /// The shard number.
        shard: u32,
    },
    /// Counter `name`'s total item.
    Total {
        /// The counter.
        name: String,
    },
}

impl CounterKey {
    /// Parses a partition key; `None` when it is not a counter key.
    pub fn parse(key: &str) -> Option<CounterKey> {
        let segments = hier::split(key).ok()?;
        match segments.as_slice() {
            [p, name, s, n] if p == PREFIX && s == SHARD && !name.is_empty() => {
                let canonical = !n.is_empty() && (n == "0" || !n.starts_with('0'));
                let shard = n.parse().ok().filter(|_| canonical && n.bytes().all(|b| b.is_ascii_digit()))?;
                Some(CounterKey::Shard { name: name.clone(), shard })
            }
            [p, name, t] if p == PREFIX && t == TOTAL && !name.is_empty() => {
                Some(CounterKey::Total { name: name.clone() })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
