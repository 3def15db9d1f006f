//! The tombstone's format, pinned.

use super::*;
use crate::config::Indexes;
use crate::entries::SortKey;

fn example() -> Indexes {
    Indexes::from_json(include_str!("../../../../functions/multikey-indexer/indexes.example.json")).unwrap()
}

#[test]
fn the_tombstone_format_is_pinned() {
    let indexes = example();
    let index = &indexes.indexes[0];
    let key = EntryKey { pk: "35e9#3fe6".to_owned(), sk: SortKey::Text("n42#n3#saf34#".to_owned()) };
    let expires = 1_764_000_000 + lifetime(&indexes);
    let item = item(index, key, "0000000000000000000400000000000000001500".to_owned(), expires);
    let json = serde_json::to_value(item.clone().into_item()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "pk": {"S": "35e9#3fe6"},
            "sk": {"S": "n42#n3#saf34#"},
            "sidestream_seq": {"S": "0000000000000000000400000000000000001500"},
            // 1,764,000,000 + 7 days and an hour: in any order, MULTIKEY_MAX_RECORD_AGE_SECONDS unset.
            "sidestream_expires": {"N": "1764608400"},
        })
    );
    assert!(is_tombstone(item.iter().map(|(name, _)| name)));
}

#[test]
fn an_entry_is_not_a_tombstone() {
    assert!(!is_tombstone(["pk", "sk", "entry", "value", "id", "sidestream_seq"].into_iter()));
    assert!(is_tombstone(["pk", "sk", "sidestream_seq", "sidestream_expires"].into_iter()));
}

#[test]
fn the_lifetime_is_the_record_age_and_the_margin() {
    let vars = |age: Option<&str>| {
        let mut map = std::collections::HashMap::from([(
            "MULTIKEY_INDEXES".to_owned(),
            include_str!("../../../../functions/multikey-indexer/indexes.example.json").to_owned(),
        )]);
        if let Some(age) = age {
            map.insert("MULTIKEY_MAX_RECORD_AGE_SECONDS".to_owned(), age.to_owned());
        }
        map
    };
    let read = |age| {
        let map = vars(age);
        let lookup = move |name: &str| map.get(name).cloned();
        Indexes::from_vars(&stream_record::Vars::new(&lookup)).map(|i| i.tombstone_seconds)
    };
    assert_eq!(read(None).unwrap(), 604_800 + 3_600);
    assert_eq!(read(Some("43200")).unwrap(), 43_200 + 3_600);
    // In either order the record age and an hour: in order too, a bisected batch's older half
    // can be retried alone until the record age (issue 76, finding 6).
    let indexes = example();
    assert_eq!(lifetime(&indexes), indexes.tombstone_seconds);
    let wrong = read(Some("a day")).unwrap_err().to_string();
    assert!(wrong.contains("MULTIKEY_MAX_RECORD_AGE_SECONDS"), "{wrong}");
}
