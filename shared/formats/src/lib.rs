//! Sidestream's persisted formats, each in one place: a module per section of
//! `docs/formats.md`, and each pinned by its golden tests. The keys themselves (K1, B1) are the
//! `key-codec` crate's.
//!
//! - [`config`]: the index's definition, `MULTIKEY_INDEXES`, parsed and checked once.
//! - [`entries`]: the entries an item image yields for one index, their keys and items ("Index
//!   items"), and [`has_entry`], whether an item has an entry for a member.
//! - [`tombstone`]: a removed entry's tombstone, which guards the removal as a version guards a
//!   put ("Tombstones"); [`head`]: the version heads earlier versions wrote, read only to be
//!   left out.
//! - [`archive`]: the TTL archive's objects ("TTL archive, version 2").
//! - [`counter`]: sharded counters' keys and total items ("Counter total items").
//! - [`cursor`]: the grid's signed cursor ("Grid cursor, g1").
//! - [`touch`]: the marker a backfill or a replay sets to send an item down the stream ("Touch
//!   marker").
//!
//! And one name that is not persisted but read back the same way: [`METRICS_NAMESPACE`], the
//! CloudWatch namespace Sidestream's functions emit to and its alarms, dashboard and `status`
//! read.
//!
//! The parked record is the runtime's own (`stream_runtime::parked`, "Parked records"): every
//! function's runtime writes it, below this crate. The backfill's checkpoint is the backfill's
//! (`operations::backfill::checkpoint`): only a backfill reads or writes it.

pub mod archive;
pub mod config;
pub mod counter;
pub mod cursor;
pub mod entries;
pub mod head;
pub mod tombstone;
pub mod touch;

/// The CloudWatch namespace of Sidestream's metrics when `METRICS_NAMESPACE` is unset (the
/// template's `MetricsNamespace` parameter defaults to it).
pub const METRICS_NAMESPACE: &str = "Sidestream";

pub use config::{Index, Indexes, KeyFormat, VALUE_ATTRIBUTE, VERSION_ATTRIBUTE};
pub use entries::{EntryKey, has_entry};
