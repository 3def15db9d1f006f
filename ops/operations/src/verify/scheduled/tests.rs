//! The verifier's configuration and its EMF document.

use std::collections::HashMap;

use serde_json::json;
use stream_runtime::Vars;

use super::{Config, Run, emf};
use crate::verify::{Drift, Mended};

const INDEXES: &str =
    r#"{"base_key":["id"],"indexes":[{"name":"cf","table":"ix","source":"custom_fields"}]}"#;

#[test]
fn configuration_is_read_once_and_errors_name_the_variable() {
    let config = |pairs: &[(&str, &str)]| {
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        let lookup = |name: &str| map.get(name).map(|v| (*v).to_owned());
        Config::from_vars(&Vars::new(&lookup)).map_err(|e| e.to_string())
    };
    let ok = config(&[("MULTIKEY_INDEXES", INDEXES), ("VERIFY_TABLE", "issues")]).unwrap();
    assert_eq!(
        (
            ok.table.as_str(),
            ok.index.name.as_str(),
            ok.repair,
            ok.confirm_after.as_secs(),
            ok.namespace.as_str()
        ),
        ("issues", "cf", false, 60, "Sidestream")
    );
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[("MULTIKEY_INDEXES", INDEXES), ("VERIFY_TABLE", "t"), ("VERIFY_CONFIRM_SECONDS", "601")],
            "VERIFY_CONFIRM_SECONDS",
        ),
        (&[("MULTIKEY_INDEXES", INDEXES)], "VERIFY_TABLE is not set"),
        (
            &[("MULTIKEY_INDEXES", INDEXES), ("VERIFY_TABLE", "t"), ("VERIFY_REPAIR", "yes")],
            "VERIFY_REPAIR is invalid: \"yes\" is not true or false",
        ),
        (
            &[("MULTIKEY_INDEXES", INDEXES), ("VERIFY_TABLE", "t"), ("VERIFY_INDEX", "x")],
            "VERIFY_INDEX is invalid",
        ),
    ];
    for (pairs, message) in cases {
        let error = config(pairs).unwrap_err();
        assert!(error.contains(message), "{error}\n  expected: {message}");
    }
}

#[test]
fn the_emf_document_carries_each_kind_and_the_sum_the_alarm_watches() {
    let drift = Drift {
        index: "cf".into(),
        table: "ix".into(),
        entries: 10,
        expected: 11,
        missing: vec![json!({}), json!({})],
        stale: vec![json!({})],
        extra: vec![],
    };
    let mut first = drift.clone();
    first.extra = vec![json!({"in flight": true}); 4];
    let run = Run { first, drift, mended: Some(Mended { touched: 2, deleted: 1, ..Mended::default() }) };
    let doc = emf(&run, "Sidestream", "prod-VerifierFunction-X", 1_800_000_000_000);
    assert_eq!(
        doc,
        json!({
            "_aws": {"Timestamp": 1_800_000_000_000_u64, "CloudWatchMetrics": [{"Namespace": "Sidestream", "Dimensions": [["Function"]],
                "Metrics": [{"Name": "IndexDrift", "Unit": "Count"}, {"Name": "IndexMissing", "Unit": "Count"},
                            {"Name": "IndexStale", "Unit": "Count"}, {"Name": "IndexExtra", "Unit": "Count"},
                            {"Name": "IndexDriftSeen", "Unit": "Count"},
                            {"Name": "IndexEntries", "Unit": "Count"}, {"Name": "IndexRepairs", "Unit": "Count"}]}]},
            "level": "FATAL", "timestamp": "2027-01-15T08:00:00.000Z",
            "Function": "prod-VerifierFunction-X", "Index": "cf", "IndexDrift": 3, "IndexMissing": 2, "IndexStale": 1, "IndexExtra": 0, "IndexDriftSeen": 7,
            "IndexEntries": 10, "IndexRepairs": 3,
        })
    );
}

#[test]
fn only_drift_both_verifications_saw_persists() {
    let drift = |missing: Vec<serde_json::Value>, extra: Vec<serde_json::Value>| Drift {
        index: "cf".into(),
        table: "ix".into(),
        entries: 3,
        expected: 3,
        missing,
        stale: vec![],
        extra,
    };
    let a = json!({"pk": {"S": "a"}});
    let b = json!({"pk": {"S": "b"}});
    let extra_v1 = json!({"pk": {"S": "x"}, "sidestream_seq": {"S": "1"}});
    let extra_v2 = json!({"pk": {"S": "x"}, "sidestream_seq": {"S": "2"}});
    let first = drift(vec![a.clone(), b.clone()], vec![extra_v1]);
    let second = drift(vec![b.clone()], vec![extra_v2]);
    let persistent = crate::verify::persistent(&first, &second);
    // a was mended by the stream in between; x was written again (a new version): neither persists.
    assert_eq!((persistent.missing, persistent.extra.len()), (vec![b], 0));
}
