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
pub mod status;
pub mod verify;
