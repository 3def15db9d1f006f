//! The indexer's configuration from environment variables, validated once at cold start.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `MULTIKEY_INDEXES` | required | The indexes to keep, as JSON ([`formats::config`], which the operations that check and rebuild the index read too). |
//! | `MULTIKEY_MAX_RECORD_AGE_SECONDS` | 604800 | The mapping's `MaximumRecordAgeInSeconds`: how long a removed entry's tombstone must last. |
//! | `MULTIKEY_VERSION_EPOCH` | 0 | The versions' epoch, 0 to 99: raised with each switch of the change source (docs/formats.md, "Versions across a stack's life"). |
//! | `MULTIKEY_FENCE_HEADS` | `false` | `true` while a release from before tombstones may still run: each item's version head is written as its fence ([`formats::head`]). |
//! | `MULTIKEY_ORDER` | `stream` | `stream`: each item's records in order, as a DynamoDB stream gives them; `any`: in any order and more than once, as a Kinesis data stream may ([`Order`]). |
//!
//! The runtime's own settings (parking, the I/O policy, metrics) are read by `stream-runtime`.

pub use formats::config::*;
use stream_runtime::{ConfigError, Vars};

pub use crate::plan::Order;

/// The variable that chooses in-order or order-insensitive indexing.
pub(crate) const ORDER_VAR: &str = "MULTIKEY_ORDER";

impl Order {
    /// Reads `MULTIKEY_ORDER`.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Order, ConfigError> {
        vars.choice(ORDER_VAR, &[("stream", Order::Stream), ("any", Order::Any)])
    }
}

/// Everything the indexer reads from its environment at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// `MULTIKEY_INDEXES` and `MULTIKEY_MAX_RECORD_AGE_SECONDS`.
    pub indexes: Indexes,
    /// `MULTIKEY_ORDER`.
    pub order: Order,
}

impl Config {
    /// Reads the configuration; errors name the variable.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        Ok(Config { indexes: Indexes::from_vars(vars)?, order: Order::from_vars(vars)? })
    }
}

#[cfg(test)]
mod tests;
