//! Tests for parsing and validating `MULTIKEY_INDEXES`.

use stream_record::Vars;

use super::*;

#[test]
fn the_worked_example_parses_with_defaults() {
    let ix = Indexes::from_json(include_str!("../../../../functions/multikey-indexer/indexes.example.json"))
        .unwrap();
    assert_eq!(ix.base_key, ["id"]);
    let i = &ix.indexes[0];
    assert_eq!(
        (i.name.as_str(), &*i.table, i.source.as_str()),
        ("custom-fields", "issue-attrib-index", "custom_fields")
    );
    assert_eq!((i.partition_key.as_str(), i.sort_key.as_str(), i.key_format), ("pk", "sk", KeyFormat::Text));
    assert_eq!(
        (i.scope.clone(), i.tiebreakers.clone(), i.include.clone()),
        (vec!["project".to_owned()], vec!["num".to_owned()], vec!["name".to_owned(), "state".to_owned()])
    );
}

#[test]
fn invalid_definitions_say_which_field_is_wrong() {
    let one = |extra: &str| {
        format!(r#"{{"base_key":["id"],"indexes":[{{"name":"a","table":"t","source":"m"{extra}}}]}}"#)
    };
    #[rustfmt::skip]
    let cases: &[(String, &str)] = &[
        ("[]".to_owned(), "not valid index JSON: invalid length 0, expected struct RawIndexes"),
        (r#"{"base_key":[],"indexes":[]}"#.to_owned(), "base_key must name 1 or 2 attributes, found 0"),
        (r#"{"base_key":["a","a"],"indexes":[]}"#.to_owned(), r#"base_key names "a" twice"#),
        (r#"{"base_key":["id"],"indexes":[]}"#.to_owned(), "indexes is empty"),
        (one(r#","bogus":1"#), "unknown field `bogus`"),
        (one(r#","key_format":"hex""#), "unknown variant `hex`"),
        (r#"{"base_key":["id"],"indexes":[{"name":"a","table":" ","source":"m"}]}"#.to_owned(), "indexes[0].table is empty"),
        (one(r#","include":["num"],"tiebreakers":["num"]"#), r#"indexes[0]: attribute "num" appears as tiebreakers and as include"#),
        (one(r#","include":["value"]"#), r#"attribute "value" appears as the value attribute and as include"#),
        (one(r#","partition_key":"id""#), r#"attribute "id" appears as partition_key and as base_key"#),
        (one(r#","scope":[""]"#), "indexes[0].scope[0] is an empty attribute name"),
        (one(r#","tiebreakers":["m"]"#), r#"indexes[0].source "m" is also a key, scope or tiebreaker attribute"#),
        (r#"{"base_key":["id"],"indexes":[{"name":"a","table":"t","source":"m"},{"name":"a","table":"u","source":"m"}]}"#.to_owned(),
            r#"indexes[1].name "a" is used by an earlier index"#),
        (r#"{"base_key":["id"],"indexes":[{"name":"a","table":"t","source":"m"},{"name":"b","table":"t","source":"n"}]}"#.to_owned(),
            r#"indexes[1].table "t" is used by an earlier index"#),
    ];
    for (json, expected) in cases {
        let err = Indexes::from_json(json).unwrap_err();
        assert!(err.contains(expected), "{json}\n  got: {err}\n  expected: {expected}");
    }
}

#[test]
fn the_variable_is_named_in_errors() {
    let unset = |_: &str| None;
    let err = Indexes::from_vars(&Vars::new(&unset)).unwrap_err().to_string();
    assert!(err.starts_with("environment variable MULTIKEY_INDEXES is not set"), "{err}");
    let bad = |_: &str| Some("{".to_owned());
    let err = Indexes::from_vars(&Vars::new(&bad)).unwrap_err().to_string();
    assert!(
        err.starts_with("environment variable MULTIKEY_INDEXES is invalid: not valid index JSON"),
        "{err}"
    );
}

/// `MULTIKEY_VERSION_EPOCH`: 0 when unset, 0 to 99, a wrong value named.
#[test]
fn the_version_epoch_is_read_and_bounded() {
    let indexes = r#"{"base_key": ["id"], "indexes": [{"name": "cf", "table": "t", "source": "f"}]}"#;
    let read = |epoch: Option<&str>| {
        let epoch = epoch.map(str::to_owned);
        let lookup = move |name: &str| match name {
            "MULTIKEY_INDEXES" => Some(indexes.to_owned()),
            "MULTIKEY_VERSION_EPOCH" => epoch.clone(),
            _ => None,
        };
        Indexes::from_vars(&Vars::new(&lookup)).map(|i| i.version_epoch).map_err(|e| e.to_string())
    };
    assert_eq!(read(None), Ok(0));
    assert_eq!(read(Some("3")), Ok(3));
    assert_eq!(read(Some("99")), Ok(99));
    for wrong in ["100", "-1", "one"] {
        let err = read(Some(wrong)).unwrap_err();
        assert!(err.contains("MULTIKEY_VERSION_EPOCH"), "{wrong}: {err}");
    }
}

/// An index may leave its table out: it is then `MULTIKEY_INDEX_TABLE`'s, the stack's index
/// table; without that variable, the field is named.
#[test]
fn an_index_without_a_table_is_in_the_stacks_index_table() {
    let json = r#"{"base_key": ["PK", "SK"], "indexes": [{"name": "fields", "source": "fields",
                   "scope": ["projectId"], "tiebreakers": ["seq"]}]}"#;
    let with = |table: Option<&'static str>| {
        move |var: &str| match var {
            "MULTIKEY_INDEXES" => Some(json.to_owned()),
            "MULTIKEY_INDEX_TABLE" => table.map(str::to_owned),
            _ => None,
        }
    };
    let lookup = with(Some("stack-index"));
    let indexes = Indexes::from_vars(&Vars::new(&lookup)).unwrap();
    assert_eq!(&*indexes.indexes[0].table, "stack-index");
    assert_eq!(indexes.base_key, ["PK", "SK"]);
    let lookup = with(None);
    let err = Indexes::from_vars(&Vars::new(&lookup)).unwrap_err().to_string();
    assert!(err.contains("indexes[0].table is missing") && err.contains("MULTIKEY_INDEX_TABLE"), "{err}");
    let named = json.replace(r#""source""#, r#""table": "own", "source""#);
    assert_eq!(&*Indexes::from_json_in(&named, Some("stack-index")).unwrap().indexes[0].table, "own");
}
