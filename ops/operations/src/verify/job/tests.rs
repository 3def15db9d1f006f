//! The job's steps as the state machine sends them, its object keys, and its persisted state
//! pinned as docs/formats.md specifies it.

use serde_json::json;

use super::*;
use crate::verify::Counts;

#[test]
fn each_step_reads_as_the_state_machine_sends_it() {
    let cases = [
        (
            json!({"step": "segment", "run_id": "r", "total_segments": 4, "segment": 2}),
            Step::Segment(SegmentTask { run_id: "r".into(), total_segments: 4, segment: 2, done: false }),
        ),
        (
            json!({"step": "segment", "run_id": "r", "total_segments": 4, "segment": 2, "done": true}),
            Step::Segment(SegmentTask { run_id: "r".into(), total_segments: 4, segment: 2, done: true }),
        ),
        (
            json!({"step": "merge", "run_id": "r", "total_segments": 4}),
            Step::Merge { run_id: "r".into(), total_segments: 4 },
        ),
        (json!({"step": "confirm", "run_id": "r"}), Step::Confirm { run_id: "r".into() }),
    ];
    for (input, step) in cases {
        assert_eq!(serde_json::from_value::<Step>(input.clone()).unwrap(), step, "{input}");
    }
    for refused in [json!({"run_id": "r"}), json!({"step": "scan", "run_id": "r"}), json!({"step": "merge"})]
    {
        assert!(serde_json::from_value::<Step>(refused.clone()).is_err(), "{refused}");
    }
}

#[test]
fn objects_are_named_by_run_and_segment() {
    let results = Results { bucket: "b".into(), prefix: "verify/".into() };
    assert_eq!(results.key("run-1", &Results::segment_name(7)), "verify/run-1/segment-0007.json");
    assert_eq!(results.key("run-1", "first.json"), "verify/run-1/first.json");
}

#[test]
fn a_resume_key_goes_to_json_and_back() {
    let key: crate::verify::pass::Item = [
        ("pk".to_owned(), aws_sdk_dynamodb::types::AttributeValue::S("p#1".into())),
        ("n".to_owned(), aws_sdk_dynamodb::types::AttributeValue::N("12".into())),
    ]
    .into_iter()
    .collect();
    let text = key_to_json(key.clone()).unwrap();
    assert_eq!(text, json!({"pk": {"S": "p#1"}, "n": {"N": "12"}}));
    assert_eq!(key_from_json(&text).unwrap(), key);
    assert!(key_from_json(&json!({"pk": 1})).is_err());
}

/// A segment's state, version 1, as docs/formats.md shows it: a change here is a new version.
#[test]
fn a_segment_state_is_written_as_the_format_says() {
    let state = SegmentState {
        version: FORMAT_VERSION,
        run_id: "verify-1".into(),
        segment: 3,
        total_segments: 8,
        pass: Pass::Index,
        next: Some(json!({"pk": {"S": "P1#due"}, "sk": {"B": "AQI="}})),
        done: false,
        pages: 12,
        drift: Drift {
            index: "by-field".into(),
            table: "index-table".into(),
            entries: 2400,
            expected: 2999,
            counts: Counts { missing: 1, stale: 0, extra: 0 },
            missing: vec![json!({"pk": {"S": "P1#due"}})],
            stale: vec![],
            extra: vec![],
        },
    };
    let text = serde_json::to_string(&state).unwrap();
    assert_eq!(
        text,
        r#"{"version":1,"run_id":"verify-1","segment":3,"total_segments":8,"pass":"index","next":{"pk":{"S":"P1#due"},"sk":{"B":"AQI="}},"done":false,"pages":12,"drift":{"index":"by-field","table":"index-table","entries":2400,"expected":2999,"counts":{"missing":1,"stale":0,"extra":0},"missing":[{"pk":{"S":"P1#due"}}],"stale":[],"extra":[]}}"#
    );
    let back: SegmentState = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), text);
    let merged =
        Merged { version: 1, run_id: "verify-1".into(), exact: true, seen: 0, pause_seconds: 0, drift: None };
    assert_eq!(
        serde_json::to_string(&merged).unwrap(),
        r#"{"version":1,"run_id":"verify-1","exact":true,"seen":0,"pause_seconds":0}"#
    );
}
