//! The version heads that Sidestream's indexer wrote before tombstones (`docs/formats.md`,
//! "Version heads (retired)"): one item per base item and index, whose partition key starts with
//! `%head#`. An index table written by such a release still holds them, so whoever reads the
//! whole table (`index verify`, the oracle) leaves them out with [`is_head`]. No entry's
//! partition key can start so: a hierarchical key holds a `%` only as the escape `%23` or `%25`
//! (`key_codec::HierKey`), so grid queries never meet one.
//!
//! **Fences.** That release wrote an item's entries in one `TransactWriteItems` with a put of
//! its head conditioned on the head being older, and the entry writes themselves unconditioned.
//! While it may still run beside this one (an invocation of it superseded, whose transaction
//! lands late; the alias moved back), this release writes a *fence* for each item it indexes
//! (`MULTIKEY_FENCE_HEADS`): the head, as that release wrote it, holding the version of the
//! newest record applied, so that such a transaction finds it newer and is refused whole
//! (docs/deploying.md, "Upgrading").

use serde_dynamo::AttributeValue;
use stream_record::Attributes;
use stream_record::wire::{Attr, WireImage};

use crate::config::{Index, KeyFormat, VERSION_ATTRIBUTE};
use crate::entries::{EntryKey, KeyBuf, Unkeyable};
use key_codec::{HierKey, KeyKind};

/// What every head's partition key starts with.
pub const HEAD_PREFIX: &str = "%head#";

/// The head's attribute holding the applied image's indexed attributes (M), in any order.
pub const IMAGE_ATTRIBUTE: &str = "sidestream_image";

/// The attribute that marks an in-order head (`stream`): the version only, and no image.
pub const ORDER_ATTRIBUTE: &str = "sidestream_order";

/// Whether an index table's partition key value is a head's.
pub fn is_head(partition_key: &str) -> bool {
    partition_key.starts_with(HEAD_PREFIX)
}

/// The key of the head of the item whose key is `base_key`, in `index`:
/// `%head#<index name>#<K1 of the base key>`, and as sort key the base key in the index's key
/// format (as the release before tombstones keyed it).
pub fn key(index: &Index, base_key: &[(&str, &Attr<'_>)]) -> Result<EntryKey, Unkeyable> {
    let mut text = KeyBuf::new(KeyFormat::Text);
    let mut sort = KeyBuf::new(index.key_format);
    for (name, value) in base_key {
        let e = |e: Unkeyable| format!("key attribute {name:?}: {e}");
        text.push(value).map_err(e)?;
        sort.push(value).map_err(e)?;
    }
    let KeyBuf::Text(text) = text else {
        return Err("a text key built as binary".to_owned());
    };
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

/// What a fence holds besides its version, as the previous release's heads did.
#[derive(Debug, Clone, Copy)]
pub enum Held<'i, 'a> {
    /// In order: `sidestream_order: stream`.
    InOrder,
    /// In any order, the newest record's new image: the attributes the index reads from it (none
    /// after a REMOVE, `None`), so that the previous release diffs against what the index holds
    /// if it runs again.
    Image(Option<&'i WireImage<'a>>),
}

/// The fence of the item under `key` in `index`: its head holding `version`, the newest record's
/// applied, and what `held` says.
pub fn fence(index: &Index, key: EntryKey, version: String, held: Held<'_, '_>) -> Attributes {
    let mut item = Attributes::with_capacity(4);
    item.push(index.partition_key.as_str(), AttributeValue::S(key.pk));
    item.push(index.sort_key.as_str(), key.sk.into_attribute());
    item.push(VERSION_ATTRIBUTE, AttributeValue::S(version));
    match held {
        Held::InOrder => item.push(ORDER_ATTRIBUTE, AttributeValue::S("stream".to_owned())),
        Held::Image(None) => {}
        Held::Image(Some(image)) => {
            let read = std::iter::once(&index.source)
                .chain(&index.scope)
                .chain(&index.tiebreakers)
                .chain(&index.include);
            let map = read.filter_map(|name| Some((name.clone(), image.get(name)?.to_attribute()))).collect();
            item.push(IMAGE_ATTRIBUTE, AttributeValue::M(map));
        }
    }
    item
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_told_from_an_entry_by_its_partition_key() {
        assert!(is_head("%head#custom-fields#saf34%23"));
        assert!(!is_head("35e9#3fe6"));
        // An entry whose scope value starts with "%head#" has it escaped.
        let escaped =
            key_codec::HierKey::new("%head").push("x").finish(key_codec::KeyKind::Partition).unwrap();
        assert!(!is_head(&escaped), "{escaped}");
    }
}
