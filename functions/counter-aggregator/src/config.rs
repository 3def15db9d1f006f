//! The aggregator's configuration from environment variables, validated once at cold start.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `COUNTER_TABLE` | required | The table that holds the counters' shards and totals. |
//! | `COUNTER_PARTITION_KEY` | `pk` | Its partition key attribute (totals have no sort key). |
//!
//! The runtime's own settings (parking, the I/O policy, metrics) are read by `stream-runtime`.

use formats::counter::DEFAULT_PARTITION_KEY;
use stream_runtime::{ConfigError, Vars};

/// Everything the aggregator reads from its environment at cold start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `COUNTER_TABLE`.
    pub table: String,
    /// `COUNTER_PARTITION_KEY`: all the plan needs ([`partition_key`]).
    pub partition_key: String,
}

impl Config {
    /// Reads the configuration; errors name the variable.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        let table = vars
            .required("COUNTER_TABLE", "the name of the table that holds the counters' shards and totals")?;
        Ok(Config { table, partition_key: partition_key(vars) })
    }
}

/// Reads `COUNTER_PARTITION_KEY` alone: what the plan needs, to explain it without a table.
pub fn partition_key(vars: &Vars<'_>) -> String {
    vars.optional("COUNTER_PARTITION_KEY").unwrap_or_else(|| DEFAULT_PARTITION_KEY.to_owned())
}
