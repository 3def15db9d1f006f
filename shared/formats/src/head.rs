//! An item's version head: what the order-insensitive indexer last applied for one base item in
//! one index, kept in the index's table beside the entries (format in `docs/formats.md`).
//!
//! A head holds the version (sequence number) of the newest record applied for the item, and
//! the attributes that index reads from that record's new image (none after a REMOVE). With it,
//! a record older than the head, or equal to it (a duplicate), changes nothing, and a newer one
//! is diffed against the image the index holds instead of the record's own old image, which
//! may not be what the index holds when records come out of order.
//!
//! The in-order indexer keeps a head too, holding only the version ([`Head::in_order`]): it is the
//! fence of the item's entry writes, put in the same transaction as they are and conditioned on
//! not being newer, so that a write landing late (its invocation superseded) cannot undo a newer
//! record's writes.
//!
//! A head's partition key starts with `%head#`. An entry's never can: a hierarchical key holds a
//! `%` only as the escape `%23` or `%25` (`key_codec::HierKey`), so grid queries never meet a
//! head, and whoever reads the whole table (`index verify`, the oracle) tells them apart with
//! [`is_head`].

use serde_dynamo::{AttributeValue, Item};
use stream_runtime::wire::{Attr, WireImage};

use crate::config::{Index, KeyFormat, VERSION_ATTRIBUTE};
use crate::entries::{EntryKey, KeyBuf, Unkeyable};
use key_codec::{HierKey, KeyKind};

/// What every head's partition key starts with.
pub const HEAD_PREFIX: &str = "%head#";

/// The head's attribute holding the applied image's indexed attributes (M); absent after a
/// REMOVE.
pub(crate) const IMAGE_ATTRIBUTE: &str = "sidestream_image";

/// The attribute that marks a head written by the in-order indexer (`stream`): it holds only the
/// version, the fence of the item's entry writes, and no image.
pub(crate) const ORDER_ATTRIBUTE: &str = "sidestream_order";

/// Whether an index table's partition key value is a head's.
pub fn is_head(partition_key: &str) -> bool {
    partition_key.starts_with(HEAD_PREFIX)
}

/// The key of the head of the item whose key is `base_key`, in `index`:
/// `%head#<index name>#<K1 of the base key>`, and as sort key the base key in the index's key
/// format.
pub fn key(index: &Index, base_key: &[(&str, &Attr<'_>)]) -> Result<EntryKey, Unkeyable> {
    let mut text = KeyBuf::new(KeyFormat::Text);
    let mut sort = KeyBuf::new(index.key_format);
    for (name, value) in base_key {
        let e = |e: Unkeyable| format!("key attribute {name:?}: {e}");
        text.push(value).map_err(e)?;
        sort.push(value).map_err(e)?;
    }
    let KeyBuf::Text(text) = text else { unreachable!("built as text") };
    let pk = HierKey::new(&index.name)
        .push(text.as_str())
        .finish(KeyKind::Partition)
        .map(|k| format!("{HEAD_PREFIX}{k}"))
        .map_err(|e| format!("its head's partition key does not fit: {e}"))?;
    if pk.len() > KeyKind::Partition.max_bytes() {
        return Err(format!(
            "its head's partition key is {} bytes; a partition key holds at most {}",
            pk.len(),
            KeyKind::Partition.max_bytes()
        ));
    }
    Ok(EntryKey { pk, sk: sort.finish()? })
}

/// The attributes of `image` that `index` reads: its source, scope, tiebreaker and `include`
/// attributes, those present.
pub fn projection(index: &Index, image: &WireImage<'_>) -> Item {
    let mut out = Item::default();
    for name in
        std::iter::once(&index.source).chain(&index.scope).chain(&index.tiebreakers).chain(&index.include)
    {
        if let Some(value) = image.get(name) {
            out.insert(name.clone(), value.to_attribute());
        }
    }
    out
}

/// What a head says.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// The applied record's version (40 digits, `crate::entries::version`).
    pub version: String,
    /// The indexed attributes of its new image; `None` after a REMOVE, and in an in-order head.
    pub image: Option<Item>,
    /// Written by the in-order indexer: the version only, as the fence of the item's writes; the
    /// image the index holds is not known from it.
    pub in_order: bool,
}

impl Head {
    /// The head item under `key` in `index`'s table.
    pub fn item(&self, index: &Index, key: EntryKey) -> Item {
        let mut item = Item::default();
        item.insert(index.partition_key.clone(), AttributeValue::S(key.pk));
        item.insert(index.sort_key.clone(), key.sk.into_attribute());
        item.insert(VERSION_ATTRIBUTE.to_owned(), AttributeValue::S(self.version.clone()));
        if let Some(image) = &self.image {
            let map = image.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            item.insert(IMAGE_ATTRIBUTE.to_owned(), AttributeValue::M(map));
        }
        if self.in_order {
            item.insert(ORDER_ATTRIBUTE.to_owned(), AttributeValue::S("stream".to_owned()));
        }
        item
    }

    /// The in-order head of version `version`: the fence of an item's entry writes.
    pub fn in_order(version: String) -> Head {
        Head { version, image: None, in_order: true }
    }

    /// Reads a head item of `index`'s table.
    pub fn read(item: &Item) -> Result<Head, String> {
        let Some(AttributeValue::S(version)) = item.get(VERSION_ATTRIBUTE) else {
            return Err(format!("a head without its {VERSION_ATTRIBUTE} (S)"));
        };
        let image = match item.get(IMAGE_ATTRIBUTE) {
            None => None,
            Some(AttributeValue::M(map)) => Some(Item::from(map.clone())),
            Some(_) => return Err(format!("a head whose {IMAGE_ATTRIBUTE} is not a map")),
        };
        let in_order = match item.get(ORDER_ATTRIBUTE) {
            None => false,
            Some(AttributeValue::S(order)) if order == "stream" => true,
            Some(other) => {
                return Err(format!("a head whose {ORDER_ATTRIBUTE} is {other:?}, not \"stream\""));
            }
        };
        Ok(Head { version: version.clone(), image, in_order })
    }
}

#[cfg(test)]
mod tests;
