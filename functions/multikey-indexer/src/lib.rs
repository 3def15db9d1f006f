//! multikey-indexer: a MongoDB-style multikey index, kept from a DynamoDB stream.
//!
//! DynamoDB indexes hold at most one entry per item, so an app cannot page through issues sorted
//! by the value of one of their custom fields when those fields live in a map. This function
//! keeps an *index table* with one item per map entry (or per list or set element) of each base
//! item, keyed so that a `Query` returns them in value order. It follows "Document Design with
//! DynamoDB Streams" in *Grid View on DynamoDB*.
//!
//! # The index item
//!
//! With the configuration in [`config`] (the article's issue tracker), the issue
//!
//! ```text
//! id=af34 project=35e9 num=3 name="Girder needs replacing" state=open
//! custom_fields={"3fe6": 42, "47e5": "Approved"}
//! ```
//!
//! yields two items in `issue-attrib-index`:
//!
//! | pk | sk | entry | value | id | project | num | name | state |
//! |---|---|---|---|---|---|---|---|---|
//! | `35e9#3fe6` | ⟨42, 3, "af34"⟩ | `3fe6` | 42 | af34 | 35e9 | 3 | Girder… | open |
//! | `35e9#47e5` | ⟨"Approved", 3, "af34"⟩ | `47e5` | Approved | af34 | 35e9 | 3 | Girder… | open |
//!
//! - `pk` (S): the scope attributes' values, then the map key (or the element), as a `#`-joined
//!   hierarchical key (`#` and `%` inside a segment are escaped, see `key_codec::HierKey`).
//! - `sk` (S, or B with `"key_format": "binary"`): the tuple ⟨value, tiebreakers…, base key…⟩ in
//!   the key crate's order-preserving encoding (format `K1`, or `B1` for binary). Numbers sort as
//!   numbers, strings by UTF-8 bytes, and across types NULL < B < BOOL false < N < S < BOOL true. A
//!   missing tiebreaker encodes as NULL. List and set entries have no value component.
//! - `entry`: the map key (S) or the element (S or N). `value`: the map value, in full, even when
//!   the sort key holds it truncated.
//! - the base table's key, then the scope, tiebreaker and `include` attributes, copied as they are.
//!
//! So `Query pk = "35e9#3812"` pages through project 35e9's issues by custom field 3812, ties
//! broken by `num`, and renders each row from the entry alone.
//!
//! # Limits
//!
//! A string value whose component would push the sort key past 1024 bytes is truncated (at a
//! character boundary, by `key_codec::truncate_for_text`) to what fits after the tiebreakers and
//! base key; entries that share the kept prefix then sort by their tiebreakers. Any other member
//! that cannot be keyed (a nested map or list value, a partition key over 2048 bytes, a scope
//! attribute that is missing or not S/N) gets no entry: it is logged at WARN and counted as
//! `SkippedValues`, and the batch goes on.
//!
//! # Delivery
//!
//! See [`plan`] for the diffing rules and why coalesced writes are safe to send concurrently, and
//! [`handler`] for the function's I/O; failures are handled by the stream runtime
//! (`stream-runtime`): a record-permanent one (a malformed record, an entry over 400 KB, a write
//! DynamoDB rejects for its content) is parked and the batch goes on, while a transient or
//! systemic one becomes the batch's checkpoint. A parked record's item may have stale or missing
//! entries until the item changes again or the index is repaired.

pub mod config;
mod explain;
pub mod handler;
pub mod plan;
#[cfg(any(test, feature = "synthetic"))]
pub mod synthetic;

pub use formats::entries::version;
pub use formats::{Index, Indexes, KeyFormat, VERSION_ATTRIBUTE};
pub use handler::Indexer;
pub use plan::{Plan, PlanError, Skipped};
