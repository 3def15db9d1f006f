//! ttl-archiver: archives the items DynamoDB's TTL process deletes to S3, restorably.
//!
//! TTL deletes old items for free, but many tables must keep their history longer than their
//! hot data. DynamoDB puts every TTL delete on the table's stream as a REMOVE record whose
//! `userIdentity` is `{"type":"Service","principalId":"dynamodb.amazonaws.com"}`; this function
//! consumes the stream and writes those items to S3 ("Time to live for archival building block"
//! in *Data modeling building blocks*). Deletes made by users and applications are not archived,
//! and that is checked here, in code, whatever the event source mapping's filter says: a
//! misconfigured filter or a `sam local invoke` can never archive a user's delete.
//!
//! # Archive format, version 1
//!
//! A batch's TTL deletes are cut into *runs*: consecutive records (in stream order) that share a
//! source table and a UTC deletion day. Each run becomes two objects with the same name:
//!
//! ```text
//! {prefix}table={table}/year={YYYY}/month={MM}/day={DD}/{name}.json.gz          items
//! {prefix}_meta/table={table}/year={YYYY}/month={MM}/day={DD}/{name}.json.gz    record metadata
//! ```
//!
//! - `prefix` is `ARCHIVE_PREFIX` (empty, or ending in `/`). `table` is the source table's name,
//!   taken from the record's `eventSourceARN`. The date is the record's
//!   `ApproximateCreationDateTime` (when TTL deleted the item), in UTC. The partitions are
//!   Hive-style, so Athena can prune by table and day.
//! - `name` is the run's first sequence number, zero-padded to 40 digits, then `-` and the first
//!   record's `eventID` (letters, digits and `-` kept): `0000000000000000000400000000000000002100-e2100`.
//!   Names sort in stream order within a day, and a retried batch writes its runs under the same
//!   names, so it overwrites its own objects instead of adding copies (see [`plan`]).
//! - **Items** (`*.json.gz` outside `_meta/`): gzip, one line per deleted item,
//!   `{"Item":<OldImage in DynamoDB JSON>}\n`: the `DYNAMODB_JSON` format of DynamoDB's export,
//!   Import from S3 (`InputFormat DYNAMODB_JSON`, `InputCompressionType GZIP`) and
//!   `StartBulkPutItems`. Attributes are written in byte order of their names, maps likewise;
//!   binary values are standard base64; numbers are DynamoDB's strings, unchanged. So an import of
//!   `{prefix}table={table}/` restores the table's archived items natively.
//! - **Metadata** (`_meta/…`): gzip, one line per archived record, in stream order:
//!   `{"v":1,"eventID":…,"sequenceNumber":…,"deletedAt":"2026-11-21T10:00:00Z","table":…,"keys":<Keys in DynamoDB JSON>,"keysOnly":false}`.
//!   The metadata lives under its own `_meta/` tree so that item objects stay importable (an
//!   import reads every object under its prefix, and would reject these lines) and Athena, which
//!   skips paths that start with `_`, does not mistake them for items. The lines with
//!   `"keysOnly":false` correspond one to one, in order, to the item object's lines.
//! - A REMOVE without an `OldImage` (the stream's view type is `KEYS_ONLY`) has no item to write:
//!   its keys are archived in the metadata with `"keysOnly":true`, it gets no item line (an item
//!   of keys alone would restore as a stub), and it is logged at WARN and counted as
//!   `KeysOnlyRecords`. A run of nothing but such records has a metadata object and no item
//!   object.
//! - Object metadata: `x-amz-meta-sidestream-archive: 1` (the format version), and the run's
//!   first and last sequence numbers and record count. Storage class: `ARCHIVE_STORAGE_CLASS`.
//!
//! The layout is pinned by golden tests (`plan/tests.rs`); a change to it is a new version.
//!
//! # Modules
//!
//! - [`config`]: environment configuration.
//! - [`format`]: the persisted format: object keys, line encoding and decoding.
//! - [`plan`]: records in, compressed objects out; pure.
//! - [`handler`]: the S3 shell and the batch response.
//! - [`synthetic`]: generated TTL batches for benchmarks and tests.

pub mod config;
pub mod format;
pub mod handler;
pub mod plan;
pub mod synthetic;

pub use config::{ArchiveConfig, Config, Layout};
pub use format::{FormatError, Line, MetaLine, Partition};
pub use handler::Archiver;
pub use plan::{Object, Plan, PlanError, SkipReason, Skipped, Stopped};
