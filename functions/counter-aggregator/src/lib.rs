//! counter-aggregator: keeps each write-sharded counter's total item equal to the sum of its
//! shards, exactly, from the counter table's stream.
//!
//! # Why not `ADD` the deltas
//!
//! The obvious aggregator adds each record's change (`NewImage.count - OldImage.count`) to the
//! total. Lambda delivers stream records at least once and retries a batch from its checkpoint,
//! so a redelivered record would be added twice, and nothing in the total could tell.
//!
//! # What this does instead
//!
//! The total item remembers, for every shard, the shard's **absolute** count as of the latest
//! stream record applied, and that record's sequence number (zero-padded to 40 digits,
//! `key_codec::SequenceNumber`). Its `total` is the sum of those counts. Applying a record means
//! "shard `k` held `v` as of sequence number `q`": if the stored `q` for `k` is not older, the
//! record changes nothing. So a duplicate delivery, a batch retried from its middle, or an old
//! record seen after a newer one can never count twice or go back in time; a REMOVE of a shard
//! sets its count to 0 (subtracting it exactly once) and keeps its sequence number, so an older
//! record cannot bring it back.
//!
//! Records of one shard arrive in order, but the shards of one counter hash to different stream
//! shards (or `ParallelizationFactor` lanes) and so to concurrent invocations. Two ways of
//! writing keep them from overwriting each other's shards:
//!
//! - **A delta write** ([`delta`]), the usual case: one `UpdateItem` that sets the batch's
//!   shards and adds their change to `total`, on condition that each of those shards still holds
//!   what the batch's first record of it says it held before. Invocations that update other
//!   shards of the same counter do not make it fail, so hot counters do not conflict.
//! - **Read, merge, write** ([`state`]), when that condition fails (a new counter, a batch
//!   delivered again, records given up on earlier): read the total item, merge the batch's newer
//!   shard states, and write the item back only if its `version` is unchanged, retrying on a
//!   conflict.
//!
//! A batch collapses to one state per shard and one update per counter ([`plan`]): usually one
//! write per counter per batch, however many increments it holds.

pub mod config;
pub mod delta;
mod explain;
pub mod handler;
pub mod plan;
pub mod state;
#[cfg(any(test, feature = "synthetic"))]
pub mod synthetic;

pub use handler::Aggregator;
pub use plan::{Before, CounterUpdate, Plan, PlanError, SkipReason, Skipped};
pub use state::Total;
