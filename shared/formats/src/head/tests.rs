//! Tests for the head item's format: its key, its attributes, and telling heads from entries.

use serde_dynamo::{AttributeValue, Item};

use super::*;
use crate::config::Indexes;

fn example() -> Indexes {
    Indexes::from_json(include_str!("../../../../functions/multikey-indexer/indexes.example.json")).unwrap()
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

#[test]
fn the_head_item_format_is_pinned() {
    let indexes = example();
    let index = &indexes.indexes[0];
    let id = s("af34");
    let key = key(index, &[("id", &Attr::from_attribute(&id))]).unwrap();
    let image = Item::from(std::collections::HashMap::from([
        (
            "custom_fields".to_owned(),
            AttributeValue::M([("3fe6".to_owned(), AttributeValue::N("42".into()))].into()),
        ),
        ("project".to_owned(), s("35e9")),
    ]));
    let head = Head {
        version: "0000000000000000000400000000000000001500".to_owned(),
        image: Some(image.clone()),
        in_order: false,
    };
    let item = head.item(index, key);
    let json = serde_json::to_value(&item).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "pk": {"S": "%head#custom-fields#saf34%23"},
            "sk": {"S": "saf34#"},
            "sidestream_seq": {"S": "0000000000000000000400000000000000001500"},
            "sidestream_image": {"M": {"custom_fields": {"M": {"3fe6": {"N": "42"}}}, "project": {"S": "35e9"}}},
        })
    );
    assert_eq!(Head::read(&item).unwrap(), head);
    let removed = Head { version: head.version.clone(), image: None, in_order: false };
    let item = removed.item(index, super::key(index, &[("id", &Attr::from_attribute(&id))]).unwrap());
    assert!(!item.contains_key(IMAGE_ATTRIBUTE));
    assert_eq!(Head::read(&item).unwrap(), removed);
    // The in-order indexer's head: the version and its mark, no image.
    let fence = Head::in_order(head.version.clone());
    let item = fence.item(index, super::key(index, &[("id", &Attr::from_attribute(&id))]).unwrap());
    assert_eq!(
        serde_json::to_value(&item).unwrap(),
        serde_json::json!({
            "pk": {"S": "%head#custom-fields#saf34%23"},
            "sk": {"S": "saf34#"},
            "sidestream_seq": {"S": "0000000000000000000400000000000000001500"},
            "sidestream_order": {"S": "stream"},
        })
    );
    assert_eq!(Head::read(&item).unwrap(), fence);
}

#[test]
fn no_entry_partition_key_is_a_heads() {
    let indexes = example();
    let index = &indexes.indexes[0];
    for (scope, member) in [("%head", "x"), ("35e9", "%head#"), ("", "%head#custom-fields")] {
        let pk = key_codec::HierKey::new(scope).push(member).finish(key_codec::KeyKind::Partition).unwrap();
        assert!(!is_head(&pk), "{pk}");
    }
    let id = AttributeValue::N("7".into());
    assert!(is_head(&key(index, &[("id", &Attr::from_attribute(&id))]).unwrap().pk));
}

#[test]
fn a_head_reads_only_what_the_index_reads() {
    let indexes = example();
    let index = &indexes.indexes[0];
    let image = Item::from(std::collections::HashMap::from([
        ("id".to_owned(), s("af34")),
        ("custom_fields".to_owned(), AttributeValue::M(std::collections::HashMap::new())),
        ("project".to_owned(), s("35e9")),
        ("num".to_owned(), AttributeValue::N("3".into())),
        ("description".to_owned(), s("long text the index never reads")),
    ]));
    let p = projection(index, &stream_runtime::wire::WireImage::from_item(&image));
    let mut names: Vec<_> = p.keys().cloned().collect();
    names.sort();
    assert_eq!(names, ["custom_fields", "num", "project"]);
    for bad in [
        Item::default(),
        Item::from(std::collections::HashMap::from([(
            VERSION_ATTRIBUTE.to_owned(),
            AttributeValue::N("1".into()),
        )])),
        Item::from(std::collections::HashMap::from([
            (VERSION_ATTRIBUTE.to_owned(), s("1")),
            (IMAGE_ATTRIBUTE.to_owned(), s("x")),
        ])),
    ] {
        assert!(Head::read(&bad).is_err());
    }
}
