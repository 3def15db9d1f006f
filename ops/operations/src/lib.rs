//! Sidestream's operations on a deployed stack, each a module: what the `sidestream` CLI, the
//! backfill, verify and restore Lambdas, and the local stack call.

pub mod archive;
pub mod backfill;
pub mod failures;
pub mod grid;
pub mod grid_api;
pub mod grid_server;
pub mod job_store;
pub mod oracle;
pub mod pace;
pub mod progress;
pub mod stack;
pub mod status;
pub mod verify;

/// The budget of one S3 read or listing made outside an invocation's deadline (an operator's
/// command): transient failures retried under the I/O policy for up to an hour, which only a
/// listing of millions of keys comes near. A job's step reads within its deadline instead.
pub(crate) fn s3_budget() -> io_policy::Budget {
    io_policy::Policy::default().within(std::time::Duration::from_secs(3600))
}

/// What the crate's tests share: the indexer's example configuration.
#[cfg(test)]
pub(crate) mod fixtures {
    /// `functions/multikey-indexer/indexes.example.json`, as written.
    pub(crate) const EXAMPLE_INDEXES: &str =
        include_str!("../../../functions/multikey-indexer/indexes.example.json");

    /// [`EXAMPLE_INDEXES`], read.
    pub(crate) fn example_indexes() -> formats::Indexes {
        formats::Indexes::from_json(EXAMPLE_INDEXES).unwrap()
    }

    /// The example's grid: the issues of a project, by number.
    pub(crate) fn example_grid() -> crate::grid::GridSchema {
        crate::grid::GridSchema::new(&example_indexes(), None, "issues", "project-num").unwrap()
    }
}
