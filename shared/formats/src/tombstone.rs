//! A removed entry's tombstone: what the indexer puts in place of an entry it removes, so that
//! the removal is guarded by its version as a put is (format in `docs/formats.md`,
//! "Tombstones").
//!
//! Every index write is a put on the condition that the stored item is absent or older
//! (`stream_runtime::writer::Writer::write_versioned`). A plain delete would leave nothing to
//! compare with, and a late put of an older version would bring the entry back; a tombstone
//! holds the remover's version, so that put is refused. It holds the entry's key, that version
//! and [`EXPIRES_ATTRIBUTE`], the time after which the index table's TTL deletes it (TTL deletes
//! cost no write units) — and that attribute is what tells a tombstone from an entry, which
//! never has it. Readers (the grid, `index verify`, the oracle) leave tombstones out.
//!
//! **Its lifetime.** A tombstone must outlive every write older than it that can still land. Its
//! lifetime counts from when it is
//! written, or from its record's change (`ApproximateCreationDateTime`) if that is later (a clock
//! behind): a mapping catching up hours behind writes tombstones hours after their changes, and
//! they must still outlive what is in flight then.
//!
//! It lasts [`Indexes::tombstone_seconds`], the mapping's record age plus [`MARGIN_SECONDS`], in
//! either order, because in either an older record of its key can be delivered again until its
//! mapping gives it up, `MaximumRecordAgeInSeconds` after it reached the stream, and a request it
//! caused lands within its invocation's timeout (900 s at most) after that:
//!
//! - *In any order* (a Kinesis data stream), an older record can come after it at any time.
//!   This holds as long as every copy of an older record reaches the stream less than
//!   [`MARGIN_SECONDS`] less the timeout (45 minutes) after the tombstone is written: AWS says
//!   DynamoDB publishes changes to Kinesis "in near-real time" and gives no bound
//!   (docs/formats.md, "Tombstones").
//! - *In order* (a DynamoDB stream), Lambda delivers an item's records again only from a
//!   checkpoint onward, in order, but **a bisected batch is retried in halves**: a batch whose
//!   newest record of a key wrote its tombstone, then failed, is split, and the half holding an
//!   older put of that key can be retried alone for as long as the record age
//!   (`MaximumRetryAttempts` -1) before the later half comes again. Until issue 76 the in-order
//!   lifetime was one hour, an invocation's longest, and that put landed once the tombstone was
//!   gone, until the later half was delivered again.
//!
//! DynamoDB deletes an expired item within days, never before it expires, so a tombstone can only
//! last longer. A replay or a backfill never sends an old record again: they touch the base item
//! (`crate::touch`), which makes a new one.

use serde_dynamo::AttributeValue;
use stream_record::Attributes;

use crate::config::{Index, Indexes, VERSION_ATTRIBUTE};
use crate::entries::EntryKey;

/// The attribute of a tombstone, and of nothing else in an index table: when it expires (N,
/// seconds since the Unix epoch), the index table's TTL attribute.
pub const EXPIRES_ATTRIBUTE: &str = "sidestream_expires";

/// What a tombstone outlives the record age by: Lambda's longest timeout, 900 seconds, and
/// room besides.
pub const MARGIN_SECONDS: u64 = 3_600;

/// How long a tombstone lasts past its writing (or its record's change, if later), in seconds:
/// the record age plus [`MARGIN_SECONDS`], in either order (module documentation).
pub fn lifetime(indexes: &Indexes) -> u64 {
    indexes.tombstone_seconds
}

/// The tombstone of the entry under `key` in `index`, removed by the record of `version`,
/// expiring at `expires` (seconds since the epoch: the later of its writing and its record's
/// change, plus its [`lifetime`]).
pub fn item(index: &Index, key: EntryKey, version: String, expires: u64) -> Attributes {
    let mut item = Attributes::with_capacity(4);
    item.push(index.partition_key.as_str(), AttributeValue::S(key.pk));
    item.push(index.sort_key.as_str(), key.sk.into_attribute());
    item.push(VERSION_ATTRIBUTE, AttributeValue::S(version));
    item.push(EXPIRES_ATTRIBUTE, AttributeValue::N(expires.to_string()));
    item
}

/// Whether an index table's item, known by its attribute names, is a tombstone.
pub fn is_tombstone<'n>(mut names: impl Iterator<Item = &'n str>) -> bool {
    names.any(|name| name == EXPIRES_ATTRIBUTE)
}

#[cfg(test)]
mod tests;
