//! Runs functions on a local emulator the way Lambda's event source mapping
//! runs them on AWS, for DynamoDB streams.
//!
//! - [`mapping`]: the rules, pure: batches of `BatchSize`, `batchItemFailures`, bisection on a
//!   function error, `MaximumRetryAttempts`, and the range given up on.
//! - [`pipeline`]: the loop over streams and mappings; `FilterCriteria` are applied with
//!   [`Pattern::matches`](crate::template::Pattern::matches) from `stream_runtime::filter`, through `local_stack::template`.
//! - streams are read with `stream_runtime::delivery::StreamReader`, as `failures replay` reads them.
//! - [`sweeper`]: TTL for emulators that never expire items, with the service identity on the
//!   resulting REMOVE records.
//! - [`invoke`]: Lambda's Invoke API over HTTP (`cargo lambda watch`); the [`Invoker`]
//!   interface and in-process invokers are `stream_runtime::delivery`'s.
//! - [`failures`]: the local failure log, in the shape of Lambda's on-failure records.
//! - [`kinesis`]: Kinesis Data Streams for DynamoDB, emulated: changes written as it writes
//!   them, delivered out of order and more than once.
//! - [`global`]: a global table's two Regions, emulated: replication with a delay, last writer
//!   wins, TTL deletes replicated with or without the service identity.
//! - [`lambda_metrics`]: what Lambda publishes about a mapping's invocations (`AWS/Lambda`).
//! - [`faults`]: Lambda-side faults to inject (killed processes, timeouts, duplicate
//!   deliveries) and split shard topologies.
//! - [`resources`]: creates the tables and buckets a template declares.

mod error;
pub mod failures;
pub mod faults;
pub mod global;
pub mod invoke;
pub mod kinesis;
pub mod lambda_metrics;
mod lane;
pub mod mapping;
pub mod pipeline;
pub mod resources;
pub mod sweeper;

pub use error::ReplayError;
pub use failures::FailureLog;
pub use faults::{LambdaFaults, Topology};
pub use mapping::{FailedRange, Mapping, Settings, Step};
pub use pipeline::{Counts, Pipeline, Progress, Running, Source, wait_settled};
pub use stream_runtime::delivery::{Invocation, Invoker};
pub use sweeper::Sweeper;
