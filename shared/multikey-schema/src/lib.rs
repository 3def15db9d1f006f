//! multikey-schema: the multikey index's definition, in one place for the indexer that writes the
//! index and the grid view that reads it.
//!
//! - [`config`]: `MULTIKEY_INDEXES`, parsed and checked once.
//! - [`entries`]: the entries an item image yields for one index, their keys and items (format
//!   in `docs/formats.md`), and [`has_entry`], whether an item has an entry for a member.
//! - [`head`]: an item's version head, for indexing records that come out of order.

pub mod config;
pub mod entries;
pub mod head;

pub use config::{
    ENTRY_ATTRIBUTE, INDEXES_VAR, Index, Indexes, KeyFormat, VALUE_ATTRIBUTE, VERSION_ATTRIBUTE,
};
pub use entries::{EntryKey, has_entry};
