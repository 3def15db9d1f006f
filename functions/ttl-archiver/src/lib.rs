//! ttl-archiver: archives the items DynamoDB's TTL process deletes to S3, restorably.
//!
//! TTL deletes old items for free, but many tables must keep their history longer than their
//! hot data. DynamoDB puts every TTL delete on the table's stream as a REMOVE record whose
//! `userIdentity` is `{"type":"Service","principalId":"dynamodb.amazonaws.com"}`; this function
//! consumes the stream and writes those items to S3 ("Time to live for archival building block"
//! in *Data modeling building blocks*). Deletes made by users and applications are not archived,
//! and that is checked here, in code, whatever the event source mapping's filter says: a
//! misconfigured filter or a `sam local invoke` can never archive a user's delete. On a global
//! table's archiving Region, `ARCHIVE_REPLICATED_TTL_ATTRIBUTE` also takes a `REMOVE` without
//! an identity whose TTL value had passed at the deletion: a TTL delete replicated from another
//! Region ([`plan::replicated_ttl_delete`]; `docs/global-tables.md`).
//!
//! # Archive format, version 1
//!
//! A batch's TTL deletes are cut into runs of consecutive records with the same source table and
//! UTC deletion day; each run becomes an item object (`{"Item":…}` lines, DynamoDB's own
//! `DYNAMODB_JSON` export format, so Import from S3 restores it natively) and a metadata object
//! under `_meta/`, both named by the run's first record. The format is specified, with vectors,
//! in `docs/formats.md` at the repository's root; [`format`](mod@format) implements it, and the golden tests
//! in `plan/tests.rs` pin it.
//!
//! # Modules
//!
//! - [`config`]: environment configuration.
//! - [`format`](mod@format): the persisted format: object keys, line encoding and decoding.
//! - [`plan`]: records in, compressed objects out; pure.
//! - [`handler`]: the S3 shell and the batch response.
//! - [`synthetic`]: generated TTL batches for benchmarks and tests.

pub mod config;
mod explain;
pub mod handler;
pub mod plan;
#[cfg(any(test, feature = "synthetic"))]
pub mod synthetic;

pub use config::{Config, ObjectSettings};
pub use handler::Archiver;
pub use plan::{Object, Plan, PlanError, SkipReason, Skipped};
