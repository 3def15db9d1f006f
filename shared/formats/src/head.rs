//! The version heads that Sidestream's indexer wrote before tombstones (`docs/formats.md`,
//! "Version heads (retired)"): one item per base item and index, whose partition key starts with
//! `%head#`. Nothing writes them now; an index table written by an earlier version still holds
//! them, so whoever reads the whole table (`index verify`, the oracle) leaves them out with
//! [`is_head`]. No entry's partition key can start so: a hierarchical key holds a `%` only as the
//! escape `%23` or `%25` (`key_codec::HierKey`), so grid queries never meet one.

/// What every head's partition key starts with.
pub const HEAD_PREFIX: &str = "%head#";

/// Whether an index table's partition key value is a head's.
pub fn is_head(partition_key: &str) -> bool {
    partition_key.starts_with(HEAD_PREFIX)
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
