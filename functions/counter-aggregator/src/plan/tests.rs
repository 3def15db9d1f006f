//! Table-driven tests of the aggregation plan on the fixture events.

use stream_runtime::{Event, EventRecord};

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../../../events/counter-aggregator/", $name))
    };
}

fn records(json: &str) -> Vec<EventRecord> {
    serde_json::from_str::<Event>(json).unwrap().records
}

/// `name: k=value@seq-suffix, …` for each update, in order.
fn describe(plan: &Plan) -> Vec<String> {
    plan.updates
        .iter()
        .map(|u| {
            let shards: Vec<String> = u
                .shards
                .iter()
                .map(|(k, s)| {
                    let seq = s.sequence_number.as_str();
                    format!("{k}={}@{}", s.value, &seq[seq.len() - 2..])
                })
                .collect();
            format!("{} (from record {}): {}", u.name, u.first_record, shards.join(" "))
        })
        .collect()
}

#[test]
fn fixtures_collapse_to_one_update_per_counter() {
    #[rustfmt::skip]
    let cases: [(&str, &[&str], &[usize]); 4] = [
        (fixture!("increments.json"), &["votes/alice (from record 0): 0=5@07 1=1@02 2=5@05", "votes/bob (from record 2): 0=1@06 3=1@08"], &[]),
        (fixture!("duplicate.json"), &["likes/post-7 (from record 0): 0=2@11 1=1@10"], &[]),
        (fixture!("shard-removal.json"), &["visits/home (from record 0): 0=4@12 1=0@14"], &[]),
        (fixture!("foreign.json"), &["votes/carol (from record 2): 0=2@18"], &[0, 1]),
    ];
    for (json, updates, skipped) in cases {
        let plan = Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(&records(json)));
        assert_eq!(describe(&plan), updates, "{}", &json[..200]);
        let got: Vec<usize> = plan.skipped.iter().map(|s| s.record).collect();
        assert_eq!((got.as_slice(), &plan.failures.stopped), (skipped, &None));
    }
}

#[test]
fn a_shard_without_a_count_holds_zero() {
    let mut batch = records(fixture!("increments.json"));
    let mut v = serde_json::to_value(&batch[0]).unwrap();
    v["dynamodb"]["NewImage"].as_object_mut().unwrap().remove("count");
    batch[0] = serde_json::from_value(v).unwrap();
    let plan = Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(&batch[..1]));
    assert_eq!(describe(&plan), ["votes/alice (from record 0): 0=0@01"]);
}

#[test]
fn skips_say_why() {
    let plan =
        Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(&records(fixture!("foreign.json"))));
    let reasons: Vec<String> = plan.skipped.iter().map(|s| s.reason.to_string()).collect();
    assert_eq!(
        reasons,
        [
            "key ISSUE#af34 is not a counter shard (COUNTER#<name>#SHARD#<k>)",
            "the total item of counter \"votes/alice\"",
        ]
    );
}

#[test]
fn a_backfill_touch_is_skipped_but_a_count_change_with_it_is_not() {
    let base = records(fixture!("increments.json"));
    let touch = |edit_count: bool| {
        let mut v = serde_json::to_value(&base[3]).unwrap();
        let mut old = v["dynamodb"]["NewImage"].clone();
        if edit_count {
            old["count"] = serde_json::json!({"N": "0"});
        }
        v["dynamodb"]["OldImage"] = old;
        v["dynamodb"]["NewImage"][formats::touch::TOUCH_ATTRIBUTE] = serde_json::json!({"S": "run-1"});
        v["eventName"] = serde_json::json!("MODIFY");
        serde_json::from_value::<EventRecord>(v).unwrap()
    };
    let plan = Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(&[touch(false)]));
    let reasons: Vec<String> = plan.skipped.iter().map(|s| s.reason.to_string()).collect();
    assert_eq!(
        (reasons.as_slice(), plan.updates.len()),
        (["key COUNTER#votes/alice#SHARD#0: a backfill's touch, no count changed".to_owned()].as_slice(), 0)
    );
    let plan = Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(&[touch(true)]));
    assert_eq!((plan.skipped.len(), plan.updates.len()), (0, 1));
}

#[test]
fn unreadable_shard_records_stop_the_plan() {
    let base = records(fixture!("increments.json"));
    let with = |i: usize, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut batch = base.clone();
        let mut v = serde_json::to_value(&batch[i]).unwrap();
        edit(&mut v);
        batch[i] = serde_json::from_value(v).unwrap();
        batch
    };
    #[rustfmt::skip]
    let cases: Vec<(Vec<EventRecord>, &str)> = vec![
        (with(3, &|v| v["dynamodb"]["NewImage"]["count"] = serde_json::json!({"N": "1.5"})), "shard COUNTER#votes/alice#SHARD#0 has N \"1.5\" where an integer `count` belongs"),
        (with(3, &|v| v["dynamodb"]["NewImage"]["count"] = serde_json::json!({"S": "7"})), "has S(\"7\") where an integer `count` belongs"),
        (with(3, &|v| v["dynamodb"]["NewImage"]["count"] = serde_json::json!({"NULL": true})), "has Null where an integer `count` belongs"),
        (with(3, &|v| { v["dynamodb"].as_object_mut().unwrap().remove("NewImage"); }), "MODIFY record has no NewImage"),
        (with(3, &|v| v["dynamodb"]["SequenceNumber"] = serde_json::json!("x")), "SequenceNumber \"x\" is not a stream sequence number"),
        (with(3, &|v| v["eventName"] = serde_json::json!("UPSERT")), "eventName \"UPSERT\" is not INSERT, MODIFY or REMOVE"),
    ];
    for (batch, expected) in cases {
        let plan = Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(&batch));
        let (rejected, kind) = match (&plan.failures.stopped, plan.failures.rejected.as_slice()) {
            (Some(stopped), []) => (stopped.clone(), FailureKind::Systemic),
            (None, [rejected]) => (rejected.clone(), FailureKind::RecordPermanent),
            other => panic!("expected one rejected record, got {other:?}"),
        };
        assert_eq!((rejected.record, rejected.error.kind()), (3, kind));
        assert!(
            rejected.error.to_string().contains(expected),
            "got: {}\n  expected: {expected}",
            rejected.error
        );
        if kind == FailureKind::Systemic {
            // Only what came before the stop: alice's shards 0 and 1, and bob's shard 3.
            assert_eq!(plan.failures.stopped.as_ref().map(|s| s.record), Some(3));
            assert_eq!(
                describe(&plan),
                ["votes/alice (from record 0): 0=1@01 1=1@02", "votes/bob (from record 2): 3=2@03"]
            );
        } else {
            // Planning went on: everything but record 3, as if it had not been delivered.
            let mut without = batch.clone();
            without.remove(3);
            let expected = Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(&without));
            assert_eq!(
                plan.updates.iter().map(|u| &u.shards).collect::<Vec<_>>(),
                expected.updates.iter().map(|u| &u.shards).collect::<Vec<_>>()
            );
        }
    }
}

/// A batch, and for each counter it updates, what each shard held before.
type BeforeCase = (Vec<EventRecord>, Vec<Vec<(u32, Before)>>);

#[test]
fn before_is_what_the_first_record_of_each_shard_says_it_held() {
    let batch = records(fixture!("increments.json"));
    let befores = |batch: &[EventRecord]| -> Vec<Vec<(u32, Before)>> {
        Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(batch))
            .updates
            .iter()
            .map(|u| u.before.iter().map(|(k, b)| (*k, *b)).collect())
            .collect()
    };
    let mut no_old_image = serde_json::to_value(&batch[3]).unwrap();
    no_old_image["dynamodb"].as_object_mut().unwrap().remove("OldImage");
    let mut text_count = serde_json::to_value(&batch[3]).unwrap();
    text_count["dynamodb"]["OldImage"]["count"] = serde_json::json!({"S": "1"});
    let with_record_3 = |v: serde_json::Value| {
        let mut b = batch[3..].to_vec();
        b[0] = serde_json::from_value(v).unwrap();
        b
    };
    #[rustfmt::skip]
    let cases: [BeforeCase; 4] = [
        (batch.clone(), vec![
            vec![(0, Before::Absent), (1, Before::Absent), (2, Before::Absent)],
            vec![(0, Before::Absent), (3, Before::Absent)],
        ]),
        (batch[3..].to_vec(), vec![
            vec![(0, Before::Value(1)), (2, Before::Absent)],
            vec![(0, Before::Absent), (3, Before::Value(2))],
        ]),
        (with_record_3(no_old_image), vec![
            vec![(0, Before::Unknown), (2, Before::Absent)],
            vec![(0, Before::Absent), (3, Before::Value(2))],
        ]),
        (with_record_3(text_count), vec![
            vec![(0, Before::Unknown), (2, Before::Absent)],
            vec![(0, Before::Absent), (3, Before::Value(2))],
        ]),
    ];
    for (batch, expected) in cases {
        assert_eq!(befores(&batch), expected);
    }
}
