//! Write-sharded counters on DynamoDB ("Write sharding building block" in *Data modeling building
//! blocks*).
//!
//! One partition key takes at most about 1,000 writes per second. A counter that must take more
//! (votes for one contestant, say) is spread over `N` **shard items** whose keys carry a suffix
//! `0..N`: each increment goes to a random shard. Readers then either read one **total item**
//! that the counter-aggregator keeps equal to the sum of the shards (cheap, a little behind), or
//! sum the shards themselves (exact, `N` strongly consistent reads).
//!
//! # Items
//!
//! In a table whose partition key (`pk` by default, a string) holds hierarchical keys
//! (`key_codec::HierKey`, so `#` and `%` in a counter's name are escaped):
//!
//! | item | `pk` | attributes |
//! |---|---|---|
//! | shard `k` of counter `votes/alice` | `COUNTER#votes/alice#SHARD#k` | `count` (N): the shard's running sum |
//! | the total | `COUNTER#votes/alice#TOTAL` | `total` (N), kept by the counter-aggregator |
//!
//! Increments are DynamoDB `ADD`s on `count`, each sent as a one-item `TransactWriteItems` with a
//! client token, so that a retried increment counts once ([`Counters::increment_shard`]); counts are
//! integers of up to 38 digits.
//!
//! - [`formats::counter`]: the keys, built and parsed (pure).
//! - [`client`]: increment, fast read and exact read through the AWS SDK.

pub mod client;

pub use client::{CounterError, Counters};
