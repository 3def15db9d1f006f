//! Table-driven tests of the archive plan, on the fixture events and on synthetic batches.

use serde_json::{Value, json};
use stream_runtime::{Event, EventRecord};

use super::*;
use crate::synthetic;
use formats::archive::{Line, read};

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../../../events/ttl-archiver/", $name))
    };
}

fn records(json: &str) -> Vec<EventRecord> {
    serde_json::from_str::<Event>(json).unwrap().records
}

fn layout() -> ObjectSettings {
    ObjectSettings { prefix: "archive/".to_owned(), gzip_level: 6, replicated_ttl_attribute: None }
}

/// The object name for a fixture record's sequence number and event ID.
fn name(first: &str, last: &str, event_id: &str) -> String {
    format!("{first:0>40}-{last:0>40}-{event_id}")
}

/// An object as the tests see it: its key, its first and last record, and its decompressed
/// lines as JSON.
#[derive(Debug, PartialEq)]
struct Seen {
    key: String,
    range: (usize, usize),
    items: Vec<Value>,
    meta: Vec<Value>,
}

fn lines(object: &[u8]) -> Vec<Value> {
    let text = flate2::read::MultiGzDecoder::new(object);
    std::io::BufRead::lines(std::io::BufReader::new(text))
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

fn seen(plan: &Plan) -> Vec<Seen> {
    plan.objects
        .iter()
        .map(|o| Seen {
            key: o.data_key.clone(),
            range: (o.first_record, o.last_record),
            items: lines(&o.data),
            meta: lines(&o.meta),
        })
        .collect()
}

/// What a fixture's record `i` should archive: its `OldImage` line and its metadata line.
fn expected(records: &[EventRecord], i: usize, deleted_at: &str) -> (Value, Value) {
    let raw = serde_json::to_value(&records[i]).unwrap();
    let d = &raw["dynamodb"];
    let item = json!({"Item": d["OldImage"]});
    let meta = json!({
        "v": 2, "eventID": records[i].event_id, "sequenceNumber": d["SequenceNumber"],
        "deletedAt": deleted_at, "table": "issues", "keys": d["Keys"], "keysOnly": records[i].change.old_image.is_empty(),
    });
    (item, meta)
}

/// An expected object: partition, first and last record, and (record, `deletedAt`) per line.
type ExpectedObject = (&'static str, (usize, usize), Vec<(usize, &'static str)>);

#[test]
fn fixtures_archive_exactly_the_ttl_deletes() {
    const DAY1: &str = "table=issues/year=2026/month=11/day=20/";
    const DAY2: &str = "table=issues/year=2026/month=11/day=21/";
    struct Case {
        fixture: &'static str,
        /// Per object: partition, first and last record, and (record, deletedAt) of each line.
        objects: Vec<ExpectedObject>,
        skipped: Vec<usize>,
        keys_only: Vec<usize>,
    }
    #[rustfmt::skip]
    let cases = [
        Case { fixture: fixture!("ttl-remove.json"), objects: vec![(DAY1, (0, 0), vec![(0, "2026-11-20T10:00:00Z")])], skipped: vec![], keys_only: vec![] },
        Case { fixture: fixture!("user-remove.json"), objects: vec![], skipped: vec![0], keys_only: vec![] },
        Case { fixture: fixture!("every-type.json"), objects: vec![(DAY1, (0, 0), vec![(0, "2026-11-20T10:00:00Z")])], skipped: vec![], keys_only: vec![] },
        Case {
            fixture: fixture!("mixed.json"),
            objects: vec![
                (DAY1, (1, 6), vec![(1, "2026-11-20T10:00:00Z"), (6, "2026-11-20T10:05:00Z")]),
                (DAY2, (7, 7), vec![(7, "2026-11-21T01:40:00Z")]),
            ],
            skipped: vec![0, 2, 3, 4, 5],
            keys_only: vec![],
        },
        Case {
            fixture: fixture!("keys-only.json"),
            objects: vec![(DAY1, (0, 1), vec![(0, "2026-11-20T10:00:00Z"), (1, "2026-11-20T10:00:00Z")])],
            skipped: vec![],
            keys_only: vec![0, 1],
        },
    ];
    for case in cases {
        let records = records(case.fixture);
        let plan = Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&records));
        let want: Vec<Seen> = case
            .objects
            .iter()
            .map(|(partition, range, lines)| {
                let first = &records[range.0];
                let seq = first.change.sequence_number.as_deref().unwrap();
                let last = records[range.1].change.sequence_number.as_deref().unwrap();
                let (items, meta): (Vec<_>, Vec<_>) =
                    lines.iter().map(|&(i, at)| expected(&records, i, at)).unzip();
                Seen {
                    key: format!("archive/{partition}{}.json.gz", name(seq, last, &first.event_id)),
                    range: *range,
                    items: items
                        .into_iter()
                        .zip(&meta)
                        .filter(|(_, m)| m["keysOnly"] == false)
                        .map(|(i, _)| i)
                        .collect(),
                    meta,
                }
            })
            .collect();
        assert_eq!(seen(&plan), want, "{}", &case.fixture[..80]);
        let skipped: Vec<usize> = plan.skipped.iter().map(|s| s.record).collect();
        assert_eq!(
            (skipped, plan.keys_only.clone(), plan.failures.stopped.clone()),
            (case.skipped, case.keys_only, None)
        );
    }
}

#[test]
fn skips_say_why() {
    let plan =
        Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&records(fixture!("mixed.json"))));
    let reasons: Vec<String> = plan.skipped.iter().map(|s| s.reason.to_string()).collect();
    assert_eq!(
        reasons,
        [
            "INSERT record, not a delete",
            "MODIFY record, not a delete",
            "REMOVE made by a user or application (no userIdentity), not by TTL",
            "REMOVE made by Service/events.amazonaws.com, not by TTL",
            "REMOVE made by User/dynamodb.amazonaws.com, not by TTL",
        ]
    );
}

#[test]
fn a_backfill_touch_is_not_archived() {
    let mut v = serde_json::to_value(&records(fixture!("ttl-remove.json"))[0]).unwrap();
    let mut new = v["dynamodb"]["OldImage"].clone();
    new[formats::touch::TOUCH_ATTRIBUTE] = serde_json::json!({"S": "run-1"});
    v["dynamodb"]["NewImage"] = new;
    v["eventName"] = serde_json::json!("MODIFY");
    v.as_object_mut().unwrap().remove("userIdentity");
    let plan = Plan::from_wire(
        &layout(),
        &stream_runtime::WireRecord::view_all(&[serde_json::from_value(v).unwrap()]),
    );
    let reasons: Vec<String> = plan.skipped.iter().map(|s| s.reason.to_string()).collect();
    assert_eq!(
        (reasons.as_slice(), plan.objects.len()),
        (["MODIFY record, not a delete".to_owned()].as_slice(), 0)
    );
}

/// The persisted format, byte for byte: a change here is a new format version.
#[test]
fn golden_every_type_lines() {
    let records = records(fixture!("every-type.json"));
    let plan = Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&records));
    let object = &plan.objects[0];
    assert_eq!(
        object.data_key,
        "archive/table=issues/year=2026/month=11/day=20/0000000000000000000400000000000000000030-0000000000000000000400000000000000000030-e0030.json.gz"
    );
    assert_eq!(
        object.meta_key,
        "archive/_meta/table=issues/year=2026/month=11/day=20/0000000000000000000400000000000000000030-0000000000000000000400000000000000000030-e0030.json.gz"
    );
    let text = |gz: &[u8]| {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(gz), &mut s).unwrap();
        s
    };
    assert_eq!(
        text(&object.data),
        concat!(
            r#"{"Item":{"b":{"B":"AAEC/w=="},"bs":{"BS":["AQ==","Ag=="]},"empty":{"S":""},"id":{"S":"e005"},"#,
            r#""l":{"L":[{"S":"a"},{"N":"1"},{"BOOL":false},{"NULL":true},{"M":{}},{"L":[]},{"B":"AQ=="}]},"#,
            r#""m":{"M":{"list":{"L":[{"N":"1"},{"S":"two"}]},"nested":{"M":{"deep":{"S":"x"}}},"z":{"NULL":true}}},"#,
            r#""n":{"N":"-12.5"},"n38":{"N":"12345678901234567890123456789012345678"},"no":{"BOOL":false},"#,
            r#""nothing":{"NULL":true},"ns":{"NS":["1","2.5","-3"]},"#,
            r#""s":{"S":"text with \"quotes\", \\ and ünïcödé ✓"},"ss":{"SS":["open","closed"]},"yes":{"BOOL":true}}}"#,
            "\n"
        )
    );
    assert_eq!(
        text(&object.meta),
        concat!(
            r#"{"v":2,"eventID":"e0030","sequenceNumber":"400000000000000000030","deletedAt":"2026-11-20T10:00:00Z","#,
            r#""table":"issues","keys":{"id":{"S":"e005"}},"keysOnly":false}"#,
            "\n"
        )
    );
    // And it reads back as the very item that was deleted.
    let Line::Item(item) = &read(&object.data).unwrap()[0] else { panic!("an item line") };
    assert_eq!(item, &records[0].change.old_image);
}

#[test]
fn a_malformed_record_is_rejected_and_the_run_goes_on_around_it() {
    let records = records(fixture!("poison.json"));
    let plan = Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&records));
    assert_eq!(seen(&plan).iter().map(|s| s.range).collect::<Vec<_>>(), [(0, 2)]);
    assert_eq!(plan.objects[0].records, 2);
    assert_eq!(plan.failures.stopped, None);
    let [rejected] = plan.failures.rejected.as_slice() else { panic!("{:?}", plan.failures.rejected) };
    assert_eq!(rejected.record, 1);
    assert_eq!(rejected.error, PlanError::SourceTable(String::new()));
    assert_eq!(rejected.error.kind(), io_policy::FailureKind::RecordPermanent);
}

#[test]
fn unreadable_ttl_deletes_are_rejected_with_a_reason() {
    let base = records(fixture!("ttl-remove.json")).remove(0);
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut v = serde_json::to_value(&base).unwrap();
        edit(&mut v);
        serde_json::from_value::<EventRecord>(v).unwrap()
    };
    #[rustfmt::skip]
    let cases: Vec<(EventRecord, &str)> = vec![
        (with(&|v| v["eventName"] = json!("DELETE")), r#"eventName "DELETE" is not INSERT, MODIFY or REMOVE"#),
        (with(&|v| v["dynamodb"]["Keys"] = json!({})), "REMOVE record has no Keys"),
        (with(&|v| v["dynamodb"]["SequenceNumber"] = json!("")), r#"SequenceNumber "" is not a stream sequence number"#),
        (with(&|v| v["dynamodb"]["SequenceNumber"] = json!("12ab")), r#"SequenceNumber "12ab" is not"#),
        (with(&|v| v["eventSourceARN"] = json!("arn:aws:dynamodb:us-east-1:1:table/a b/stream/x")), "does not name a DynamoDB table"),
        (with(&|v| v["eventSourceARN"] = json!("arn:aws:kinesis:us-east-1:1:stream/x")), "does not name a DynamoDB table"),
        (with(&|v| { v["dynamodb"].as_object_mut().unwrap().remove("ApproximateCreationDateTime"); }), "no ApproximateCreationDateTime"),
    ];
    for (record, expected) in cases {
        let plan =
            Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(std::slice::from_ref(&record)));
        let stopped = plan.failures.rejected.first().expect("rejected");
        assert_eq!(stopped.record, 0);
        assert_eq!(stopped.error.kind(), io_policy::FailureKind::RecordPermanent);
        assert!(
            stopped.error.to_string().contains(expected),
            "got: {}\n  expected: {expected}",
            stopped.error
        );
        assert!(plan.objects.is_empty());
    }
}

#[test]
fn stream_arns_name_their_table() {
    #[rustfmt::skip]
    let cases = [
        ("arn:aws:dynamodb:us-east-1:123456789012:table/issues/stream/2026-11-21T00:00:00.000", Some("issues")),
        ("arn:aws-cn:dynamodb:cn-north-1:1:table/My_Table.v-2/stream/x", Some("My_Table.v-2")),
        ("arn:aws:dynamodb:us-east-1:1:table/ab/stream/x", None),
        ("arn:aws:dynamodb:us-east-1:1:table//stream/x", None),
        ("", None),
    ];
    for (arn, table) in cases {
        assert_eq!(table_of_arn(arn), table, "{arn}");
    }
}

/// Runs are contiguous: a batch whose deletion days go 1, 2, 1 yields three objects, so a failed
/// upload of the second never leaves records after it written by the third.
#[test]
fn runs_are_contiguous_ranges_of_the_batch() {
    let mut records = synthetic::ttl_batch(6, 7, 1_795_168_800, 60.0).records;
    records[2].change.approximate_creation_date_time += chrono::Duration::days(1);
    records[3].change.approximate_creation_date_time += chrono::Duration::days(1);
    let plan = Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&records));
    let runs: Vec<_> = plan
        .objects
        .iter()
        .map(|o| (o.partition.date.to_string(), o.first_record, o.last_record, o.records))
        .collect();
    assert_eq!(
        runs,
        [
            ("2026-11-20".to_owned(), 0, 1, 2),
            ("2026-11-21".to_owned(), 2, 3, 2),
            ("2026-11-20".to_owned(), 4, 5, 2)
        ]
    );
}

/// Redelivery: the same batch yields the same objects, byte for byte; a batch retried from its
/// middle names its object after its own first record; a bisected batch's first half names
/// another object than the whole's, so its smaller object never replaces the larger one (whose
/// second half may have been given up since: it would then survive only in a noncurrent
/// version).
#[test]
fn redelivery_reuses_names() {
    let records = synthetic::ttl_batch(50, 3, 1_795_168_800, 1.0).records;
    let whole = Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&records));
    assert_eq!(whole, Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&records)));
    let (head, tail) = (
        Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&records[..25])),
        Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&records[25..])),
    );
    assert_ne!(head.objects[0].data_key, whole.objects[0].data_key);
    let seq = |i: usize| records[i].change.sequence_number.as_deref().unwrap();
    assert!(
        head.objects[0]
            .data_key
            .ends_with(&format!("/{}.json.gz", name(seq(0), seq(24), &records[0].event_id)))
    );
    let first_of_tail = name(seq(25), seq(49), &records[25].event_id);
    assert!(tail.objects[0].data_key.ends_with(&format!("/{first_of_tail}.json.gz")));
    // The halves hold every record of the whole exactly once.
    let all: Vec<Value> = [&head, &tail].iter().flat_map(|p| lines(&p.objects[0].data)).collect();
    assert_eq!(all, lines(&whole.objects[0].data));
}

#[test]
fn synthetic_batches_archive_every_record() {
    let event = synthetic::ttl_batch(2_000, 11, 1_795_168_800, 0.5);
    let plan = Plan::from_wire(&layout(), &stream_runtime::WireRecord::view_all(&event.records));
    assert_eq!(plan.objects.len(), 1);
    let o = &plan.objects[0];
    assert_eq!((o.records, o.items, o.first_record, o.last_record), (2_000, 2_000, 0, 1_999));
    let items: Vec<Line> = read(&o.data).unwrap();
    let want: Vec<Line> = event.records.iter().map(|r| Line::Item(r.change.old_image.clone())).collect();
    assert_eq!(items, want);
    assert!(o.data.len() * 3 < o.raw_bytes, "gzip shrinks JSON lines at least threefold");
}

/// On a global table's archiving Region (`ARCHIVE_REPLICATED_TTL_ATTRIBUTE`), a `REMOVE` without
/// the TTL service's identity is archived when its TTL value had passed at the deletion (a TTL
/// delete replicated from another Region, if replication drops the identity); without the
/// setting, only the identity counts.
#[test]
fn replicated_ttl_deletes_are_archived_by_their_expired_ttl_when_asked() {
    let base = serde_json::to_value(&records(fixture!("ttl-remove.json"))[0]).unwrap();
    // Deleted at 1_795_168_800.
    let with = |name: &str, identity: Option<Value>, expires_at: Option<Value>| {
        let mut v = base.clone();
        v["eventName"] = json!(name);
        match identity {
            Some(id) => v["userIdentity"] = id,
            None => drop(v.as_object_mut().unwrap().remove("userIdentity")),
        }
        let old = v["dynamodb"]["OldImage"].as_object_mut().unwrap();
        match expires_at {
            Some(value) => drop(old.insert("expires_at".to_owned(), value)),
            None => drop(old.remove("expires_at")),
        }
        if name != "REMOVE" {
            v["dynamodb"]["NewImage"] = v["dynamodb"]["OldImage"].clone();
        }
        serde_json::from_value::<EventRecord>(v).unwrap()
    };
    let ttl = json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
    let n = |v: i64| Some(json!({ "N": v.to_string() }));
    // (record, archived by default, archived with the attribute)
    let cases = [
        (with("REMOVE", Some(ttl), n(1_795_168_000)), true, true),
        (with("REMOVE", None, n(1_795_168_000)), false, true),
        (with("REMOVE", None, n(1_795_168_800)), false, true),
        (with("REMOVE", None, n(1_795_168_860)), false, false),
        (with("REMOVE", None, n(1_795_168_800 - 6 * 365 * 86_400)), false, false),
        (with("REMOVE", None, Some(json!({"S": "1795168000"}))), false, false),
        (with("REMOVE", None, None), false, false),
        (with("REMOVE", Some(json!({"type": "User", "principalId": "x"})), n(1_795_168_000)), false, false),
        (with("MODIFY", None, n(1_795_168_000)), false, false),
    ];
    let global = ObjectSettings { replicated_ttl_attribute: Some("expires_at".to_owned()), ..layout() };
    for (i, (record, by_default, with_attribute)) in cases.into_iter().enumerate() {
        for (settings, expected) in [(layout(), by_default), (global.clone(), with_attribute)] {
            let plan = Plan::from_wire(
                &settings,
                &stream_runtime::WireRecord::view_all(std::slice::from_ref(&record)),
            );
            let archived: usize = plan.objects.iter().map(|o| lines(&o.data).len()).sum();
            assert_eq!(
                archived,
                usize::from(expected),
                "case {i} with {:?}",
                settings.replicated_ttl_attribute
            );
            assert!(plan.failures.stopped.is_none() && plan.failures.rejected.is_empty(), "case {i}");
        }
    }
}
