//! Tests of the archive format's keys and lines, independent of any stream record.

use super::*;
use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::Write as _;

fn item(json: serde_json::Value) -> Item {
    serde_json::from_value(json).unwrap()
}

fn partition() -> Partition {
    Partition { table: "issues".to_owned(), date: NaiveDate::from_ymd_opt(2026, 3, 9).unwrap() }
}

#[test]
fn keys_follow_the_layout() {
    let seq = SequenceNumber::parse("4000012").unwrap();
    let last = SequenceNumber::parse("4000019").unwrap();
    let name = object_name(&seq, &last, "c4ca/42 38?");
    assert_eq!(name, format!("{}-{}-c4ca4238", "0".repeat(33) + "4000012", "0".repeat(33) + "4000019"));
    assert_eq!(object_name(&seq, &seq, ""), format!("{0}-{0}", "0".repeat(33) + "4000012"));
    // A retry that archives fewer records of the run names another object.
    assert_ne!(object_name(&seq, &seq, "e"), object_name(&seq, &last, "e"));
    assert_eq!(
        data_key("archive/", &partition(), "n"),
        "archive/table=issues/year=2026/month=03/day=09/n.json.gz"
    );
    assert_eq!(meta_key("", &partition(), "n"), "_meta/table=issues/year=2026/month=03/day=09/n.json.gz");
}

#[test]
fn an_item_object_names_its_metadata_object() {
    for prefix in ["", "archive/", "a/b/"] {
        let data = data_key(prefix, &partition(), "n");
        assert_eq!(meta_key_of(&data), Some(meta_key(prefix, &partition(), "n")), "{data}");
    }
    assert_eq!(meta_key_of("archive/xtable=t/n.json.gz"), None);
    assert_eq!(meta_key_of("archive/n.json.gz"), None);
}

#[test]
fn meta_keys_and_tables_are_recognised() {
    #[rustfmt::skip]
    let cases = [
        ("archive/table=issues/year=2026/month=03/day=09/n.json.gz", false, Some("issues")),
        ("archive/_meta/table=issues/year=2026/month=03/day=09/n.json.gz", true, Some("issues")),
        ("_meta/table=t.v-1/x.json.gz", true, Some("t.v-1")),
        ("archive/_meta", false, None),
        ("x_meta/y.json.gz", false, None),
    ];
    for (key, meta, table) in cases {
        assert_eq!((is_meta_key(key), table_of_key(key)), (meta, table), "{key}");
    }
}

#[test]
fn items_encode_sorted_and_read_back_unchanged() {
    let every = item(serde_json::json!({
        "z": {"S": ""}, "a": {"N": "12345678901234567890123456789012345678"},
        "b": {"B": "AAEC/w=="}, "m": {"M": {"y": {"NULL": true}, "x": {"L": [{"BOOL": false}, {"BS": ["AQ=="]}]}}},
        "ss": {"SS": ["q", "p"]}, "ns": {"NS": ["2", "1"]}
    }));
    let line = serde_json::to_string(&ItemLineRef { item: DynamoJson(&every) }).unwrap();
    assert_eq!(
        line,
        r#"{"Item":{"a":{"N":"12345678901234567890123456789012345678"},"b":{"B":"AAEC/w=="},"m":{"M":{"x":{"L":[{"BOOL":false},{"BS":["AQ=="]}]},"y":{"NULL":true}}},"ns":{"NS":["2","1"]},"ss":{"SS":["q","p"]},"z":{"S":""}}}"#
    );
    // The archiver writes images read in place: the same bytes.
    let image = WireImage::from_item(&every);
    assert_eq!(serde_json::to_string(&ItemLineRef { item: ImageJson(&image) }).unwrap(), line);
    let mut lines = GzLines::new(6);
    lines.push(&ItemLineRef { item: DynamoJson(&every) }).unwrap();
    lines.push(&ItemLineRef { item: DynamoJson(&Item::default()) }).unwrap();
    assert_eq!((lines.lines(), lines.raw_bytes()), (2, line.len() + 1 + 12));
    let object = lines.finish().unwrap();
    assert_eq!(read(&object).unwrap(), [Line::Item(every), Line::Item(Item::default())]);
}

#[test]
fn the_same_lines_always_compress_to_the_same_bytes() {
    let one = item(
        serde_json::json!({"id": {"S": "a"}, "n": {"N": "1"}, "m": {"M": {"b": {"S": "x"}, "a": {"S": "y"}}}}),
    );
    let compress = |level| {
        let mut lines = GzLines::new(level);
        for _ in 0..3 {
            lines.push(&ItemLineRef { item: DynamoJson(&one) }).unwrap();
        }
        lines.finish().unwrap()
    };
    assert_eq!(compress(6), compress(6));
    assert_eq!(&compress(1)[..4], [0x1f, 0x8b, 8, 0], "gzip, deflate, no flags");
}

#[test]
fn metadata_lines_read_back() {
    let keys = item(serde_json::json!({"id": {"S": "a"}}));
    let mut lines = GzLines::new(6);
    lines
        .push(&MetaLineRef {
            v: VERSION,
            event_id: "e1",
            sequence_number: "42",
            deleted_at: "2026-03-09T10:00:00Z",
            table: "issues",
            keys: DynamoJson(&keys),
            keys_only: true,
        })
        .unwrap();
    assert_eq!(
        read(&lines.finish().unwrap()).unwrap(),
        [Line::Meta(MetaLine {
            v: 2,
            event_id: "e1".to_owned(),
            sequence_number: "42".to_owned(),
            deleted_at: "2026-03-09T10:00:00Z".to_owned(),
            table: "issues".to_owned(),
            keys,
            keys_only: true,
        })]
    );
}

/// Version 1 objects (named by their first record alone) have the same lines: they still read.
#[test]
fn version_1_metadata_lines_read_back() {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(
        br#"{"v":1,"eventID":"e1","sequenceNumber":"42","deletedAt":"2026-03-09T10:00:00Z","table":"issues","keys":{"id":{"S":"a"}},"keysOnly":true}
"#,
    )
    .unwrap();
    let lines = read(&e.finish().unwrap()).unwrap();
    assert!(matches!(&lines[..], [Line::Meta(MetaLine { v: 1, keys_only: true, .. })]), "{lines:?}");
}

#[test]
fn unreadable_objects_say_where_and_why() {
    let gz = |text: &str| {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    #[rustfmt::skip]
    let cases: [(Vec<u8>, &str); 5] = [
        (b"{\"Item\":{}}\n".to_vec(), "not a readable gzip stream"),
        (gz("{\"Item\":{\"a\":{\"S\":\"x\"}}}\n{\"Item\":{\"a\":{\"Q\":1}}}\n"), "line 2: The key 'Q' is not a known DynamoDB prefix"),
        (gz("{\"v\":3,\"eventID\":\"e\"}\n"), "line 1: archive format version 3, but this build reads versions [1, 2]"),
        (gz("\"text\"\n"), "line 1: invalid type: string"),
        (gz("{\"v\":1,\"eventID\":\"e\"}\n"), "line 1: missing field"),
    ];
    for (object, expected) in cases {
        let err = read(&object).unwrap_err().to_string();
        assert!(err.contains(expected), "got: {err}\n  expected: {expected}");
    }
}
