//! Table-driven tests of stream-record diffing, on the fixture events and on synthetic batches.

use std::collections::BTreeMap;

use key_codec::Value;
use serde_dynamo::{AttributeValue, Item};
use serde_json::json;
use stream_runtime::{EventRecord, ItemWrite, Op, RecordError};

use super::*;
use crate::config::Indexes;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../../../events/multikey-indexer/", $name))
    };
}

fn article() -> Indexes {
    Indexes::from_json(include_str!("../../indexes.example.json")).unwrap()
}

fn records(json: &str) -> Vec<EventRecord> {
    serde_json::from_str::<stream_runtime::Event>(json).unwrap().records
}

fn component(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => n.to_string(),
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn sort_key(v: &AttributeValue) -> String {
    let parts = match v {
        AttributeValue::S(s) => key_codec::text::decode(s).unwrap(),
        AttributeValue::B(b) => key_codec::binary::decode(b).unwrap(),
        other => panic!("sort key is {other:?}"),
    };
    let parts: Vec<String> = parts.iter().map(|(v, _)| component(v)).collect();
    format!("({})", parts.join(", "))
}

/// `put 35e9#3812 ("2023-05-01", 1, "020e") @0`: the op (`put`, `remove` for a tombstone's put,
/// `delete` for a record without a version), partition key, decoded sort key and origin.
fn describe(w: &ItemWrite) -> String {
    let (name, item) = match &w.op {
        Op::Put(item) if item.get(formats::tombstone::EXPIRES_ATTRIBUTE).is_some() => ("remove", item),
        Op::Put(item) => ("put", item),
        Op::Delete(key) => ("delete", key),
    };
    let AttributeValue::S(pk) = &item["pk"] else { panic!("pk is not S") };
    format!("{name} {pk} {} @{}", sort_key(&item["sk"]), w.origin)
}

fn check(
    indexes: &Indexes,
    records: &[EventRecord],
    writes: &[&str],
    skipped: &[&str],
    stopped: Option<(usize, &str)>,
) {
    let plan = Plan::from_wire(indexes, &stream_runtime::WireRecord::view_all(records));
    let got: Vec<String> = plan.writes.iter().map(describe).collect();
    assert_eq!(got, writes, "writes");
    let got: Vec<String> =
        plan.skipped.iter().map(|s| format!("{} {}: {}", s.record, s.member, s.reason)).collect();
    assert_eq!(got, skipped, "skipped");
    // The first record rejected (record-permanent) or stopped at (systemic).
    let got = plan
        .failures
        .rejected
        .first()
        .or(plan.failures.stopped.as_ref())
        .map(|s| (s.record, s.error.to_string()));
    assert_eq!(got.as_ref().map(|(r, e)| (*r, e.as_str())), stopped, "rejected or stopped");
}

/// What, event JSON, writes, skipped members, where planning stopped.
type Case<'a> = (&'a str, &'a str, &'a [&'a str], &'a [&'a str], Option<(usize, &'a str)>);

#[test]
fn the_fixture_events() {
    let ix = article();
    #[rustfmt::skip]
    let cases: &[Case<'_>] = &[
        ("insert: the article's five sample issues; two have no custom fields", fixture!("insert.json"), &[
            r#"put 35e9#3812 ("2023-05-01", 1, "020e") @0"#,
            r#"put 35e9#882a ("2023-06-01", 1, "020e") @0"#,
            r#"put 35e9#3812 ("2023-05-02", 2, "67d1") @2"#,
            r#"put 35e9#882a ("2023-06-02", 2, "67d1") @2"#,
            r#"put 35e9#3fe6 (42, 3, "af34") @4"#,
            r#"put 35e9#47e5 ("Approved", 3, "af34") @4"#,
        ], &[], None),
        ("a value changed: re-key", fixture!("modify-value.json"), &[
            r#"remove 35e9#3812 ("2023-05-01", 1, "020e") @0"#,
            r#"put 35e9#3812 ("2023-05-15", 1, "020e") @0"#,
        ], &[], None),
        ("a tiebreaker changed: every entry re-keyed", fixture!("modify-tiebreaker.json"), &[
            r#"remove 35e9#3812 ("2023-05-02", 2, "67d1") @0"#,
            r#"put 35e9#3812 ("2023-05-02", 7, "67d1") @0"#,
            r#"remove 35e9#882a ("2023-06-02", 2, "67d1") @0"#,
            r#"put 35e9#882a ("2023-06-02", 7, "67d1") @0"#,
        ], &[], None),
        ("a projected attribute changed: rewritten in place", fixture!("modify-projected.json"), &[
            r#"put 35e9#3fe6 (42, 3, "af34") @0"#,
            r#"put 35e9#47e5 ("Approved", 3, "af34") @0"#,
        ], &[], None),
        ("nothing the index reads changed", fixture!("modify-unrelated.json"), &[], &[], None),
        ("a field removed and another added", fixture!("modify-fields.json"), &[
            r#"remove 35e9#3fe6 (42, 3, "af34") @0"#,
            r#"put 35e9#882a ("2023-06-30", 3, "af34") @0"#,
        ], &[], None),
        ("remove", fixture!("remove.json"), &[
            r#"remove 35e9#3812 ("2023-05-01", 1, "020e") @0"#,
            r#"remove 35e9#882a ("2023-06-01", 1, "020e") @0"#,
        ], &[], None),
        ("a KEYS_ONLY stream is a configuration error", fixture!("keys-only.json"), &[], &[], Some((0,
            "MODIFY record has no OldImage: the stream's view type is KEYS_ONLY, and this function needs \
             NEW_AND_OLD_IMAGES (or one that includes OldImage)"))),
        ("a nested map value is skipped; its sibling is indexed", fixture!("poison.json"), &[
            r#"put 7b7e#3812 ("2023-05-03", 2, "83a4") @0"#,
        ], &["0 9c0d: its value is M, which cannot be part of a key"], None),
    ];
    for (what, json, writes, skipped, stopped) in cases {
        println!("{what}");
        check(&ix, &records(json), writes, skipped, *stopped);
    }
}

#[test]
fn an_entry_carries_its_keys_member_value_base_key_and_copied_attributes() {
    let plan =
        Plan::from_wire(&article(), &stream_runtime::WireRecord::view_all(&records(fixture!("insert.json"))));
    let Op::Put(item) = &plan.writes[4].op else { panic!("not a put") };
    let got = serde_json::to_value(item).unwrap();
    // The sort key's bytes are pinned: index items persist them (key-codec format K1).
    let sk = got["sk"]["S"].as_str().unwrap().to_owned();
    assert_eq!(
        got,
        json!({
            "pk": {"S": "35e9#3fe6"}, "sk": {"S": sk},
            "entry": {"S": "3fe6"}, "value": {"N": "42"},
            "id": {"S": "af34"}, "project": {"S": "35e9"}, "num": {"N": "3"},
            "name": {"S": "Girder needs replacing"}, "state": {"S": "open"},
            // The sequence number of the record that wrote it, 400000000000000001500, as 40 digits.
            "sidestream_seq": {"S": "0000000000000000000400000000000000001500"},
        })
    );
    assert_eq!(sort_key(&AttributeValue::S(sk.clone())), r#"(42, 3, "af34")"#);
    assert_eq!(sk, GOLDEN_AF34_3FE6, "the K1 encoding of (42, 3, \"af34\") changed");
}

#[test]
fn versions_are_sequence_numbers_that_compare_as_strings() {
    use formats::entries::version;
    let cases = [
        ("1", Some("0000000000000000000000000000000000000001")),
        ("400000000000000001100", Some("0000000000000000000400000000000000001100")),
        (&"9".repeat(40), Some(&*"9".repeat(40))),
        (&"9".repeat(41), None),
        ("", None),
        ("12a", None),
        ("-1", None),
    ];
    for (sequence, want) in cases {
        assert_eq!(version(sequence).as_deref(), want, "{sequence:?}");
    }
    // A later record's version sorts after an earlier one's, whatever their lengths.
    assert!(version("99").unwrap() < version("100").unwrap());
    assert!(version("400000000000000001100").unwrap() < version("1000000000000000000000").unwrap());
}

/// Versions across a switch of the change source (issue 76, finding 1): a Kinesis change time
/// (16 digits) reads as older than any DynamoDB stream sequence number (21 to 40), so in one
/// epoch a switch froze every existing key. Each epoch's versions sort after every earlier
/// epoch's, whatever their digits; epoch 0 is the format every version had before epochs.
#[test]
fn a_later_epochs_versions_are_newer_than_any_earlier_epochs() {
    use formats::entries::{LAST_EPOCH, version, version_in};
    let stream = "9000000000000000000400000000000000001100"; // a stream sequence number, 40 digits
    let kinesis = "1795000000123456"; // a change time, microseconds
    // The finding: in one epoch, the Kinesis write is refused as older.
    assert!(version(kinesis).unwrap() < version(stream).unwrap());
    // Golden values (docs/formats.md, "Versions across a stack's life").
    let cases = [
        (0, kinesis, Some("0000000000000000000000001795000000123456")),
        (1, kinesis, Some("E010000000000000000000000001795000000123456")),
        (42, "1", Some("E420000000000000000000000000000000000000001")),
        (LAST_EPOCH + 1, "1", None),
        (1, "12a", None),
    ];
    for (epoch, sequence, want) in cases {
        assert_eq!(version_in(epoch, sequence).as_deref(), want, "{epoch} {sequence}");
    }
    assert_eq!(version_in(0, stream), version(stream), "epoch 0 is the old format");
    // Every version of a later epoch sorts after every one of an earlier epoch.
    let max = "9".repeat(40);
    for (earlier, later) in [(0, 1), (1, 2), (9, 10), (10, 11), (98, 99)] {
        assert!(version_in(earlier, &max).unwrap() < version_in(later, "1").unwrap(), "{earlier} < {later}");
    }
    // Within an epoch, as the positions compare.
    assert!(version_in(3, "99").unwrap() < version_in(3, "100").unwrap());
}

/// `(42, 3, "af34")` in key-codec's text format K1.
const GOLDEN_AF34_3FE6: &str = "nB42#nA3#saf34#";

fn item(pairs: serde_json::Value) -> Item {
    serde_json::from_value(pairs).unwrap()
}

pub(super) fn record(
    name: &str,
    old: Option<serde_json::Value>,
    new: Option<serde_json::Value>,
    seq: u32,
) -> EventRecord {
    record_at(name, old, new, seq, None)
}

/// [`record`], with a change time (`ApproximateCreationDateTime`, seconds) when given.
fn record_at(
    name: &str,
    old: Option<serde_json::Value>,
    new: Option<serde_json::Value>,
    seq: u32,
    changed_at: Option<u64>,
) -> EventRecord {
    let any = new.clone().or(old.clone()).unwrap();
    let mut dynamodb = json!({
        "Keys": {"id": any["id"]}, "SequenceNumber": seq.to_string(), "SizeBytes": 1,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    });
    if let Some(at) = changed_at {
        dynamodb["ApproximateCreationDateTime"] = json!(at);
    }
    if let Some(old) = old {
        dynamodb["OldImage"] = old;
    }
    if let Some(new) = new {
        dynamodb["NewImage"] = new;
    }
    serde_json::from_value(json!({"awsRegion": "r", "eventID": "e", "eventName": name, "dynamodb": dynamodb}))
        .unwrap()
}

pub(super) fn issue(id: &str, num: u32, fields: &serde_json::Value) -> serde_json::Value {
    json!({"id": {"S": id}, "project": {"S": "p1"}, "num": {"N": num.to_string()}, "name": {"S": "n"},
           "state": {"S": "open"}, "custom_fields": {"M": fields}})
}

#[test]
fn records_for_one_item_coalesce_to_one_write_per_key() {
    let a = issue("i1", 1, &json!({"f": {"S": "a"}}));
    let b = issue("i1", 1, &json!({"f": {"S": "b"}}));
    let c = issue("i1", 2, &json!({"f": {"S": "b"}}));
    let batch = [
        record("INSERT", None, Some(a.clone()), 10),
        record("MODIFY", Some(a), Some(b.clone()), 20),
        record("MODIFY", Some(b), Some(c.clone()), 30),
    ];
    // The earlier keys go; the last is put or, after a remove, deleted too. An insert then a
    // remove in one batch still deletes: an earlier, failed delivery may have written the entry.
    let earlier = [r#"delete p1#f ("a", 1, "i1") @1"#, r#"delete p1#f ("b", 1, "i1") @2"#];
    let removed = record("REMOVE", Some(c), None, 40);
    for (batch, last) in [
        (batch.to_vec(), r#"put p1#f ("b", 2, "i1") @2"#),
        ([&batch[..], &[removed]].concat(), r#"delete p1#f ("b", 2, "i1") @3"#),
    ] {
        let want = [earlier[0], earlier[1], last];
        check(&article(), &batch, &want, &[], None);
    }
}

#[test]
fn a_touch_puts_every_entry_of_the_item_and_a_untouched_no_op_puts_none() {
    let fields = json!({"f": {"S": "a"}, "g": {"N": "7"}});
    let untouched = issue("i1", 1, &fields);
    let mut touched = untouched.clone();
    touched[formats::touch::TOUCH_ATTRIBUTE] = json!({"S": "run-1"});
    let mut renamed_after = touched.clone();
    renamed_after["custom_fields"]["M"]["f"] = json!({"S": "b"});
    let both = [r#"put p1#f ("a", 1, "i1") @0"#, r#"put p1#g (7, 1, "i1") @0"#];
    // (what, before, after, writes)
    let cases: [(&str, &serde_json::Value, &serde_json::Value, &[&str]); 4] = [
        ("a touch re-puts every entry", &untouched, &touched, &both),
        ("a change with nothing indexed in it writes nothing", &untouched, &untouched, &[]),
        (
            "a user's change after a touch is a untouched diff",
            &touched,
            &renamed_after,
            &[r#"delete p1#f ("a", 1, "i1") @0"#, r#"put p1#f ("b", 1, "i1") @0"#],
        ),
        (
            "a second touch re-puts every entry again",
            &renamed_after,
            &{
                let mut again = renamed_after.clone();
                again[formats::touch::TOUCH_ATTRIBUTE] = json!({"S": "run-2"});
                again
            },
            &[r#"put p1#f ("b", 1, "i1") @0"#, r#"put p1#g (7, 1, "i1") @0"#],
        ),
    ];
    for (what, before, after, writes) in cases {
        let batch = [record("MODIFY", Some(before.clone()), Some(after.clone()), 10)];
        let plan = Plan::from_wire(&article(), &stream_runtime::WireRecord::view_all(&batch));
        let mut got: Vec<String> = plan.writes.iter().map(describe).collect();
        got.sort();
        assert_eq!(got, *writes, "{what}");
    }
}

#[test]
fn a_malformed_record_is_rejected_and_planning_goes_on_but_a_misconfiguration_stops_it() {
    let ok = record("INSERT", None, Some(issue("i1", 1, &json!({"f": {"N": "1"}}))), 10);
    let mut unknown = ok.clone();
    unknown.event_name = "UPSERT".to_owned();
    let mut no_key = record("INSERT", None, Some(issue("i2", 1, &json!({"f": {"N": "2"}}))), 30);
    no_key.change.keys = item(json!({"pk": {"S": "i2"}}));
    let later = record("INSERT", None, Some(issue("i3", 1, &json!({"f": {"N": "3"}}))), 40);

    let ix = article();
    check(
        &ix,
        &[ok.clone(), unknown, later.clone()],
        &[r#"put p1#f (1, 1, "i1") @0"#, r#"put p1#f (3, 1, "i3") @2"#],
        &[],
        Some((1, r#"eventName "UPSERT" is not INSERT, MODIFY or REMOVE"#)),
    );
    check(
        &ix,
        &[ok, no_key, later],
        &[r#"put p1#f (1, 1, "i1") @0"#],
        &[],
        Some((
            1,
            r#"the record's Keys has no "id", which base_key names; is MULTIKEY_INDEXES set for this table?"#,
        )),
    );
    let plan = Plan::from_wire(&ix, &stream_runtime::WireRecord::view_all(&[]));
    assert_eq!(plan, Plan::default());
    assert!(matches!(
        PlanError::from(RecordError::MissingKeys(stream_runtime::ChangeKind::Insert)),
        PlanError::Record(_)
    ));
}

#[test]
fn values_that_cannot_be_keyed_are_skipped_and_long_strings_truncated() {
    let long = "x".repeat(2000);
    let long_key = "k".repeat(3000);
    let new = issue(
        "i1",
        1,
        &json!({
            "long": {"S": long}, "list": {"L": [{"S": "a"}]}, "null": {"NULL": true}, "flag": {"BOOL": true},
            long_key.clone(): {"S": "v"}, "bin": {"B": "AAEC"},
        }),
    );
    let plan = Plan::from_wire(
        &article(),
        &stream_runtime::WireRecord::view_all(&[record("INSERT", None, Some(new), 1)]),
    );
    let got: Vec<String> = plan.writes.iter().map(describe).collect();
    assert_eq!(
        got[..2],
        [
            r#"put p1#bin (Binary([0, 1, 2]), 1, "i1") @0"#.to_owned(),
            r#"put p1#flag (true, 1, "i1") @0"#.to_owned(),
        ]
    );
    assert!(
        got[2].starts_with(r#"put p1#long ("xxxxxxxxxx"#) && got[2].ends_with(r#"x", 1, "i1") @0"#),
        "{}",
        got[2]
    );
    let Op::Put(truncated) = &plan.writes[2].op else { panic!() };
    let AttributeValue::S(sk) = &truncated["sk"] else { panic!() };
    assert!(sk.len() <= 1024 && sk.len() > 1000, "{}", sk.len());
    assert_eq!(truncated["value"], AttributeValue::S("x".repeat(2000)), "the full value is kept");
    assert_eq!(got[3], r#"put p1#null (null, 1, "i1") @0"#);
    assert_eq!(got.len(), 4);
    let skipped: Vec<(String, String)> =
        plan.skipped.iter().map(|s| (s.member.chars().take(5).collect(), s.reason.clone())).collect();
    assert_eq!(skipped, [
        ("list".to_owned(), "its value is L, which cannot be part of a key".to_owned()),
        ("kkkkk".to_owned(), "its partition key does not fit: partition key is 3003 bytes; DynamoDB allows at most 2048 bytes".to_owned()),
    ]);
}

#[test]
fn missing_scope_and_unkeyable_tiebreakers_skip_every_member() {
    let mut no_project = issue("i1", 1, &json!({"f": {"S": "a"}, "g": {"S": "b"}}));
    no_project.as_object_mut().unwrap().remove("project");
    let mut map_num = issue("i2", 1, &json!({"f": {"S": "a"}}));
    map_num["num"] = json!({"M": {}});
    check(
        &article(),
        &[record("INSERT", None, Some(no_project), 1), record("INSERT", None, Some(map_num), 2)],
        &[],
        &[
            "0 f: the item has no scope attribute \"project\"",
            "0 g: the item has no scope attribute \"project\"",
            "1 f: tiebreaker \"num\": M cannot be part of a key",
        ],
        None,
    );
}

#[test]
fn lists_and_sets_index_each_distinct_element() {
    let ix = Indexes::from_json(r#"{"base_key":["id"],"indexes":[{"name":"tags","table":"tags","source":"tags","tiebreakers":["num"]}]}"#).unwrap();
    let old = json!({"id": {"S": "i1"}, "num": {"N": "5"}, "tags": {"L": [{"S": "bug"}, {"S": "ui"}, {"S": "bug"}, {"M": {}}]}});
    let new = json!({"id": {"S": "i1"}, "num": {"N": "5"}, "tags": {"SS": ["bug", "perf"]}});
    let nums = json!({"id": {"S": "i2"}, "num": {"N": "6"}, "tags": {"NS": ["1.50", "1.5", "2"]}});
    check(
        &ix,
        &[record("INSERT", None, Some(old.clone()), 1)],
        &[r#"put bug (5, "i1") @0"#, r#"put ui (5, "i1") @0"#],
        &["0 [3]: the element is M; list elements are indexed when they are S or N"],
        None,
    );
    check(
        &ix,
        &[record("MODIFY", Some(old), Some(new), 1), record("INSERT", None, Some(nums), 2)],
        &[
            r#"put perf (5, "i1") @0"#,
            r#"delete ui (5, "i1") @0"#,
            r#"put 1.5 (6, "i2") @1"#,
            r#"put 2 (6, "i2") @1"#,
        ],
        &[],
        None,
    );
}

#[test]
fn binary_sort_keys() {
    let ix = Indexes::from_json(r#"{"base_key":["id"],"indexes":[{"name":"b","table":"t","source":"custom_fields","key_format":"binary","tiebreakers":["num"]}]}"#).unwrap();
    let plan = Plan::from_wire(
        &ix,
        &stream_runtime::WireRecord::view_all(&[record(
            "INSERT",
            None,
            Some(issue("i1", 7, &json!({"f": {"N": "-2.5"}}))),
            1,
        )]),
    );
    assert_eq!(plan.writes.iter().map(describe).collect::<Vec<_>>(), [r#"put f (-2.5, 7, "i1") @0"#]);
    let Op::Put(item) = &plan.writes[0].op else { panic!() };
    assert!(matches!(item["sk"], AttributeValue::B(_)));
}

/// A model index table: what applying writes leaves.
pub(super) type Model = BTreeMap<(String, Vec<u8>), Item>;

pub(super) fn key_of(
    item: &impl for<'k> std::ops::Index<&'k str, Output = AttributeValue>,
) -> (String, Vec<u8>) {
    let AttributeValue::S(pk) = &item["pk"] else { panic!() };
    let sk = match &item["sk"] {
        AttributeValue::S(s) => s.as_bytes().to_vec(),
        AttributeValue::B(b) => b.clone(),
        _ => panic!(),
    };
    (pk.clone(), sk)
}

pub(super) fn apply<'a>(model: &mut Model, writes: impl IntoIterator<Item = &'a ItemWrite>) {
    for w in writes {
        match &w.op {
            Op::Put(item) => {
                model.insert(key_of(item), item.clone().into_item());
            }
            Op::Delete(key) => {
                model.remove(&key_of(key));
            }
        }
    }
}

/// The index the records describe, applied one record at a time from an empty table.
fn sequential(ix: &Indexes, records: &[EventRecord]) -> Model {
    let mut model = Model::new();
    for r in records {
        apply(
            &mut model,
            &Plan::from_wire(ix, &stream_runtime::WireRecord::view_all(std::slice::from_ref(r))).writes,
        );
    }
    model
}

fn synthetic(n: usize, issues: usize, seed: u64) -> Vec<EventRecord> {
    crate::synthetic::batch(n, issues, seed).records
}

#[test]
fn coalesced_plans_equal_record_by_record_application() {
    let ix = Indexes::from_json(crate::synthetic::INDEXES_JSON).unwrap();
    for seed in 0..8 {
        let batch = synthetic(300, 40, seed);
        let plan = Plan::from_wire(&ix, &stream_runtime::WireRecord::view_all(&batch));
        assert_eq!(plan.failures.stopped, None);
        let mut model = Model::new();
        apply(&mut model, &plan.writes);
        assert_eq!(model, sequential(&ix, &batch), "seed {seed}");
        // One write per key.
        let keys: std::collections::BTreeSet<_> = plan
            .writes
            .iter()
            .map(|w| match &w.op {
                Op::Put(i) | Op::Delete(i) => key_of(i),
            })
            .collect();
        assert_eq!(keys.len(), plan.writes.len());
    }
}

#[test]
fn replayed_and_partly_retried_batches_leave_the_same_index() {
    let ix = Indexes::from_json(crate::synthetic::INDEXES_JSON).unwrap();
    let batch = synthetic(400, 30, 42);
    let expected = sequential(&ix, &batch);
    let plan = Plan::from_wire(&ix, &stream_runtime::WireRecord::view_all(&batch));

    // Duplicate delivery: the whole batch, twice.
    let mut model = Model::new();
    apply(&mut model, &plan.writes);
    apply(&mut model, &plan.writes);
    assert_eq!(model, expected);

    // A delivery whose writes for records >= k partly failed (every third one), then the batch
    // retried from record k.
    for k in [0, 1, 57, 200, 399] {
        let mut model = sequential(&ix, &[]);
        apply(
            &mut model,
            plan.writes.iter().enumerate().filter(|(i, w)| w.origin < k || i % 3 != 0).map(|(_, w)| w),
        );
        apply(&mut model, &Plan::from_wire(&ix, &stream_runtime::WireRecord::view_all(&batch[k..])).writes);
        assert_eq!(model, expected, "retried from {k}");
    }
}

#[test]
fn the_event_read_in_place_plans_as_the_decoded_event_does() {
    let indexes = Indexes::from_json(crate::synthetic::INDEXES_JSON).unwrap();
    let mut fixtures: Vec<String> = [
        fixture!("insert.json"),
        fixture!("modify-fields.json"),
        fixture!("keys-only.json"),
        fixture!("poison.json"),
    ]
    .map(str::to_owned)
    .to_vec();
    fixtures.push(serde_json::to_string(&crate::synthetic::batch(2_000, 300, 11)).unwrap());
    let mut writes = 0;
    for json in &fixtures {
        for indexes in [&indexes, &article()] {
            let batch = stream_runtime::wire::Batch::parse(json).unwrap();
            let wire = Plan::from_wire(indexes, &batch.records);
            assert_eq!(wire, Plan::from_wire(indexes, &stream_runtime::WireRecord::view_all(&records(json))));
            writes += wire.writes.len();
        }
    }
    // The synthetic batch alone plans thousands of writes: the comparison saw real plans.
    assert!(writes > 1_000, "{writes} writes compared");
}

#[test]
fn an_entry_is_re_keyed_exactly_when_what_keys_it_changed() {
    let before = issue("i1", 1, &json!({"f": {"S": "a"}, "g": {"N": "7"}}));
    let changed = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut after = before.clone();
        edit(&mut after);
        after
    };
    // (what, after, writes)
    let cases: [(&str, serde_json::Value, &[&str]); 5] = [
        (
            "a copied attribute changed: both entries rewritten under their keys",
            changed(&|a| a["name"] = json!({"S": "renamed"})),
            &[r#"put p1#f ("a", 1, "i1") @0"#, r#"put p1#g (7, 1, "i1") @0"#],
        ),
        (
            "a number's text changed, not its value: the same key, rewritten",
            changed(&|a| a["custom_fields"]["M"]["g"] = json!({"N": "7.0"})),
            &[r#"put p1#g (7, 1, "i1") @0"#],
        ),
        (
            "the scope changed: every entry moves",
            changed(&|a| a["project"] = json!({"S": "p2"})),
            &[
                r#"delete p1#f ("a", 1, "i1") @0"#,
                r#"put p2#f ("a", 1, "i1") @0"#,
                r#"delete p1#g (7, 1, "i1") @0"#,
                r#"put p2#g (7, 1, "i1") @0"#,
            ],
        ),
        (
            "a value and a copied attribute changed: that entry moves, the other is rewritten",
            changed(&|a| {
                a["custom_fields"]["M"]["f"] = json!({"S": "b"});
                a["state"] = json!({"S": "closed"});
            }),
            &[
                r#"delete p1#f ("a", 1, "i1") @0"#,
                r#"put p1#f ("b", 1, "i1") @0"#,
                r#"put p1#g (7, 1, "i1") @0"#,
            ],
        ),
        (
            "a tiebreaker removed: it keys as null",
            changed(&|a| {
                a.as_object_mut().unwrap().remove("num");
            }),
            &[
                r#"delete p1#f ("a", 1, "i1") @0"#,
                r#"put p1#f ("a", null, "i1") @0"#,
                r#"delete p1#g (7, 1, "i1") @0"#,
                r#"put p1#g (7, null, "i1") @0"#,
            ],
        ),
    ];
    for (what, after, writes) in cases {
        println!("{what}");
        let batch = [record("MODIFY", Some(before.clone()), Some(after), 10)];
        check(&article(), &batch, writes, &[], None);
    }
}

#[test]
fn an_entry_is_measured_before_it_is_built_to_the_byte_and_even_when_replaced() {
    let with_name = |name: &str| {
        let mut image = issue("i1", 1, &json!({"f": {"S": "a"}}));
        image["name"] = json!({"S": name});
        image
    };
    let put_size = |plan: &Plan| match &plan.writes[..] {
        [ItemWrite { op: Op::Put(item), .. }] => item.size(),
        other => panic!("not one put: {other:?}"),
    };
    // `name` is copied into the entry and keys nothing: its length moves the entry's size alone.
    let small = Plan::from_wire(
        &article(),
        &stream_runtime::WireRecord::view_all(&[record("INSERT", None, Some(with_name("n")), 10)]),
    );
    let at_limit = MAX_ITEM_BYTES - (put_size(&small) - 1);
    let plan = Plan::from_wire(
        &article(),
        &stream_runtime::WireRecord::view_all(&[record(
            "INSERT",
            None,
            Some(with_name(&"x".repeat(at_limit))),
            10,
        )]),
    );
    assert_eq!(put_size(&plan), MAX_ITEM_BYTES, "the entry at the limit is written");
    assert!(plan.failures.rejected.is_empty());

    let over = with_name(&"x".repeat(at_limit + 1));
    let plan = Plan::from_wire(
        &article(),
        &stream_runtime::WireRecord::view_all(&[record("INSERT", None, Some(over.clone()), 10)]),
    );
    assert_eq!(
        plan.failures.rejected[0].error,
        PlanError::EntryTooLarge {
            index: "custom-fields".to_owned(),
            pk: "p1#f".to_owned(),
            size: MAX_ITEM_BYTES + 1,
            limit: MAX_ITEM_BYTES,
        }
    );
    assert!(matches!(plan.writes[..], [ItemWrite { op: Op::Delete(_), .. }]), "its key is deleted instead");

    // A later record in the batch writes the same entry: the write is its, and the record over
    // the limit is still rejected.
    let batch = [
        record("INSERT", None, Some(over.clone()), 10),
        record("MODIFY", Some(over), Some(with_name("n")), 20),
    ];
    let plan = Plan::from_wire(&article(), &stream_runtime::WireRecord::view_all(&batch));
    assert_eq!(plan.failures.rejected.len(), 1);
    assert_eq!(plan.failures.rejected[0].record, 0);
    assert_eq!(plan.writes.len(), 1);
    assert_eq!((plan.writes[0].origin, put_size(&plan)), (1, put_size(&small)));
}

/// DynamoDB's guarded put, as `Writer::write_versioned` sends it: applied only where the stored
/// item is absent or holds an older `sidestream_seq`. Counts the puts refused.
fn apply_guarded<'a>(model: &mut Model, writes: impl IntoIterator<Item = &'a ItemWrite>) -> usize {
    let version = |item: &Item| match item.get(crate::VERSION_ATTRIBUTE) {
        Some(AttributeValue::S(v)) => v.clone(),
        other => panic!("a guarded put without a version: {other:?}"),
    };
    let mut refused = 0;
    for w in writes {
        let Op::Put(item) = &w.op else { panic!("a versioned plan deletes: {w:?}") };
        let item = item.clone().into_item();
        let key = key_of(&Attributes::from(item.clone()));
        match model.get(&key) {
            Some(stored) if version(stored) >= version(&item) => refused += 1,
            _ => {
                model.insert(key, item);
            }
        }
    }
    refused
}

/// The live entries of a model (tombstones left out), described as `pk (sort key)`.
fn live(model: &Model) -> Vec<String> {
    model
        .iter()
        .filter(|(_, item)| !item.contains_key(formats::tombstone::EXPIRES_ATTRIBUTE))
        .map(|((pk, _), item)| format!("{pk} {}", sort_key(&item["sk"])))
        .collect()
}

/// One item's records, each a change of the last: field `f` put, taken out, put back (the same
/// entry removed and re-added), moved; field `g` moved; then the item removed and inserted again.
fn chain() -> Vec<EventRecord> {
    let images = [
        None,
        Some(json!({"f": {"S": "a"}, "g": {"S": "x"}})),
        Some(json!({"g": {"S": "x"}})),
        Some(json!({"f": {"S": "a"}, "g": {"S": "x"}})),
        Some(json!({"f": {"S": "b"}, "g": {"S": "y"}})),
        None,
        Some(json!({"f": {"S": "a"}})),
    ];
    images
        .windows(2)
        .enumerate()
        .map(|(at, pair)| {
            let image = |fields: &Option<serde_json::Value>| fields.as_ref().map(|f| issue("i1", 1, f));
            let (old, new) = (image(&pair[0]), image(&pair[1]));
            let name = match (&old, &new) {
                (None, _) => "INSERT",
                (_, None) => "REMOVE",
                _ => "MODIFY",
            };
            let seq = 100 + u32::try_from(at).unwrap();
            record_at(name, old, new, seq, Some(1_764_000_000 + u64::from(seq)))
        })
        .collect()
}

/// Every order of delivery, each record a batch of its own and each delivered twice (a late
/// copy landing after the others), ends with the entries of the newest image, in any order
/// mode: each key's newest write, an entry or a tombstone, is the one that stays.
#[test]
fn records_applied_in_any_order_end_as_the_newest_image_says() {
    let ix = article_like();
    let records = chain();
    // Each prefix of the chain, the entries its last image has (written by hand, not planned).
    let want_after: [&[&str]; 6] = [
        &[r#"p1#f ("a", 1, "i1")"#, r#"p1#g ("x", 1, "i1")"#],
        &[r#"p1#g ("x", 1, "i1")"#],
        &[r#"p1#f ("a", 1, "i1")"#, r#"p1#g ("x", 1, "i1")"#],
        &[r#"p1#f ("b", 1, "i1")"#, r#"p1#g ("y", 1, "i1")"#],
        &[],
        &[r#"p1#f ("a", 1, "i1")"#],
    ];
    let plan_one = |r: &EventRecord| {
        let plan = Plan::in_order(
            &ix,
            &stream_runtime::WireRecord::view_all(std::slice::from_ref(r)),
            Order::Any,
            0,
        );
        assert!(plan.failures.rejected.is_empty() && plan.failures.stopped.is_none(), "{:?}", plan.failures);
        plan.writes
    };
    let mut orders = 0;
    let mut refused = 0;
    for n in 1..=records.len() {
        let prefix = &records[..n];
        let mut order: Vec<usize> = (0..n).collect();
        for_each_permutation(&mut order, &mut |order: &[usize]| {
            let mut model = Model::new();
            for &at in order {
                refused += apply_guarded(&mut model, &plan_one(&prefix[at]));
            }
            // A late copy of each, landing after everything else.
            for &at in order {
                refused += apply_guarded(&mut model, &plan_one(&prefix[at]));
            }
            assert_eq!(live(&model), want_after[n - 1], "records delivered in the order {order:?}");
            orders += 1;
        });
        // The whole prefix as one batch, shuffled: the newest write of each key is kept.
        let mut shuffled = prefix.to_vec();
        shuffled.reverse();
        let batch = Plan::in_order(&ix, &stream_runtime::WireRecord::view_all(&shuffled), Order::Any, 0);
        let mut model = Model::new();
        apply_guarded(&mut model, &batch.writes);
        assert_eq!(live(&model), want_after[n - 1], "the first {n} records in one batch, newest first");
    }
    // 1! + 2! + … + 6! orders, and the late copies were refused, not applied.
    assert_eq!(orders, 1 + 2 + 6 + 24 + 120 + 720);
    assert!(refused > orders, "late copies refused: {refused}");
}

/// In any order, a record without a version cannot be ordered: it is rejected, not guessed at.
#[test]
fn in_any_order_a_record_without_a_version_is_rejected() {
    let ix = article_like();
    let mut r = chain().remove(0);
    r.change.sequence_number = None;
    let plan =
        Plan::in_order(&ix, &stream_runtime::WireRecord::view_all(std::slice::from_ref(&r)), Order::Any, 0);
    assert_eq!(plan.failures.rejected.len(), 1);
    assert!(matches!(plan.failures.rejected[0].error, PlanError::NoVersion));
    assert!(plan.writes.is_empty());
}

/// A removed entry's tombstone expires its lifetime after its record's change, or after it is
/// written if that is later: in any order the record age and an hour, in order an hour
/// (`formats::tombstone`).
#[test]
fn a_tombstone_expires_its_lifetime_after_its_change_or_its_writing_if_later() {
    let ix = article_like();
    let records = chain();
    let changed = 1_764_000_000 + 101;
    // Written at once (the clock a little behind the change, or not given), and written a day
    // after the change (a mapping catching up): its lifetime counts from the later.
    for now in [0, changed - 5, changed + 86_400] {
        for (order, lifetime) in [(Order::Any, ix.tombstone_seconds), (Order::Stream, ix.tombstone_seconds)] {
            let plan = Plan::in_order(&ix, &stream_runtime::WireRecord::view_all(&records[1..2]), order, now);
            let tombstones: Vec<&Attributes> = plan
                .writes
                .iter()
                .filter_map(|w| match &w.op {
                    Op::Put(item) if item.get(formats::tombstone::EXPIRES_ATTRIBUTE).is_some() => Some(item),
                    _ => None,
                })
                .collect();
            assert_eq!(tombstones.len(), 1);
            let expires = changed.max(now) + lifetime;
            assert_eq!(
                tombstones[0].get(formats::tombstone::EXPIRES_ATTRIBUTE),
                Some(&AttributeValue::N(expires.to_string())),
                "{order:?} at {now}"
            );
            assert_eq!(tombstones[0].iter().count(), 4, "key, version and expiry only: {:?}", tombstones[0]);
        }
    }
}

fn article_like() -> Indexes {
    Indexes::from_json(
        r#"{"base_key": ["id"], "indexes": [{"name": "cf", "table": "t", "source": "custom_fields",
            "scope": ["project"], "tiebreakers": ["num"]}]}"#,
    )
    .unwrap()
}

/// Calls `each` with every permutation of `items` (Heap's algorithm).
fn for_each_permutation(items: &mut [usize], each: &mut dyn FnMut(&[usize])) {
    fn heap(k: usize, items: &mut [usize], each: &mut dyn FnMut(&[usize])) {
        if k <= 1 {
            each(items);
            return;
        }
        for i in 0..k {
            heap(k - 1, items, each);
            let j = if k.is_multiple_of(2) { i } else { 0 };
            items.swap(j, k - 1);
        }
    }
    heap(items.len(), items, each);
}

/// An item of 150 entries (more than a transaction's 100 actions, which the fence before the
/// version guard cut into parts): inserted, half its entries moved, then removed, in every order
/// of delivery and each record twice. The guard is per entry, so no order leaves a mix of two
/// records' entries: the index ends as the newest image says.
#[test]
fn an_item_of_many_entries_ends_right_in_every_order() {
    let ix = article_like();
    let image = |moved: bool| {
        let fields: serde_json::Map<String, serde_json::Value> = (0..150)
            .map(|i| {
                let v = if moved && i % 2 == 0 { format!("b{i}") } else { format!("a{i}") };
                (format!("f{i:03}"), json!({"S": v}))
            })
            .collect();
        issue("i1", 1, &serde_json::Value::Object(fields))
    };
    let records = [
        record_at("INSERT", None, Some(image(false)), 200, Some(1_764_000_000)),
        record_at("MODIFY", Some(image(false)), Some(image(true)), 201, Some(1_764_000_001)),
        record_at("REMOVE", Some(image(true)), None, 202, Some(1_764_000_002)),
    ];
    let plan_one = |r: &EventRecord| {
        Plan::in_order(&ix, &stream_runtime::WireRecord::view_all(std::slice::from_ref(r)), Order::Any, 0)
            .writes
    };
    let moved: Vec<String> = (0..150)
        .map(|i| {
            let v = if i % 2 == 0 { format!("b{i}") } else { format!("a{i}") };
            format!("p1#f{i:03} ({v:?}, 1, \"i1\")")
        })
        .collect();
    for (n, want) in [(2, moved), (3, Vec::new())] {
        let mut order: Vec<usize> = (0..n).collect();
        let mut orders = 0;
        for_each_permutation(&mut order, &mut |order: &[usize]| {
            let mut model = Model::new();
            for &at in order.iter().chain(order) {
                apply_guarded(&mut model, &plan_one(&records[at]));
            }
            let mut got = live(&model);
            got.sort();
            let mut want = want.clone();
            want.sort();
            assert_eq!(got, want, "the first {n} records in the order {order:?}");
            orders += 1;
        });
        assert_eq!(orders, if n == 2 { 2 } else { 6 });
    }
    // Every write of the item is a put of its own: 150 entries, then 75 moved (75 tombstones and
    // 75 puts), then 150 tombstones.
    let counts: Vec<usize> = records.iter().map(|r| plan_one(r).len()).collect();
    assert_eq!(counts, [150, 150, 150]);
}

/// With `MULTIKEY_FENCE_HEADS`, each item gets one fence per index that reads it, at the newest
/// record's version, keyed as the release before tombstones keyed its head; in order with
/// `sidestream_order`, in any order with the newest record's indexed attributes (none after a
/// REMOVE). Without it, none.
#[test]
fn fences_hold_each_items_newest_version_as_its_head() {
    let records = chain();
    let views = stream_runtime::WireRecord::view_all(&records);
    let fences = |ix: &Indexes, order, upto: usize| {
        let plan = Plan::in_order(ix, &views[..upto], order, 0);
        plan.writes
            .into_iter()
            .filter_map(|w| match w.op {
                Op::Put(item) if matches!(item.get("pk"), Some(AttributeValue::S(pk)) if pk.starts_with("%head#")) => {
                    Some(item)
                }
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let off = article_like();
    assert!(fences(&off, Order::Stream, records.len()).is_empty(), "off by default");
    let on = Indexes { fence_heads: true, ..article_like() };
    // (order, records, the version, the image's f)
    let cases = [
        (Order::Stream, 2, "0000000000000000000000000000000000000101", None),
        (Order::Any, 2, "0000000000000000000000000000000000000101", Some(None)),
        (Order::Any, 4, "0000000000000000000000000000000000000103", Some(Some("b"))),
    ];
    for (order, upto, version, image) in cases {
        let written = fences(&on, order, upto);
        assert_eq!(written.len(), 1, "{order:?} {upto}: one fence for the item: {written:?}");
        let fence = &written[0];
        assert_eq!(fence.get("pk"), Some(&AttributeValue::S("%head#cf#si1%23".into())), "{order:?}");
        assert_eq!(fence.get("sk"), Some(&AttributeValue::S("si1#".into())));
        assert_eq!(fence.get("sidestream_seq"), Some(&AttributeValue::S(version.into())), "{order:?} {upto}");
        match image {
            None => assert_eq!(fence.get("sidestream_order"), Some(&AttributeValue::S("stream".into()))),
            Some(f) => {
                let Some(AttributeValue::M(held)) = fence.get("sidestream_image") else {
                    panic!("an image in any order: {fence:?}");
                };
                let held_f = held.get("custom_fields").and_then(|v| match v {
                    AttributeValue::M(m) => m.get("f").cloned(),
                    _ => None,
                });
                assert_eq!(held_f, f.map(|f: &str| AttributeValue::S(f.into())), "{upto}");
            }
        }
    }
}
