//! The verifier's configuration and its EMF document.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;
use stream_runtime::Vars;

use super::{Config, LAG_MARGIN, MAX_PAUSE, Run, emf, pause};

use crate::verify::{Counts, Drift, KEPT, Kind, Mended};

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
        counts: Counts { missing: 2, stale: 1, extra: 0 },
        missing: vec![json!({}), json!({})],
        stale: vec![json!({})],
        extra: vec![],
    };
    let mut first = drift.clone();
    first.extra = vec![json!({"in flight": true}); 4];
    first.counts.extra = 4;
    let run = Run {
        first,
        drift,
        mended: Some(Mended { touched: 2, deleted: 1, ..Mended::default() }),
        paused: Duration::from_secs(60),
    };
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
fn a_drift_counts_every_difference_and_keeps_the_first_of_each_kind() {
    let mut drift = Drift {
        index: "cf".into(),
        table: "ix".into(),
        entries: 0,
        expected: 0,
        counts: Counts::default(),
        missing: vec![],
        stale: vec![],
        extra: vec![],
    };
    for i in 0..KEPT + 5 {
        drift.note(Kind::Missing, json!({"pk": {"S": i.to_string()}}));
    }
    drift.note(Kind::Extra, json!({"pk": {"S": "x"}}));
    assert_eq!(drift.counts, Counts { missing: KEPT + 5, stale: 0, extra: 1 });
    assert_eq!((drift.missing.len(), drift.extra.len(), drift.count()), (KEPT, 1, KEPT + 6));
    assert!(drift.truncated() && !drift.is_exact());
    assert_eq!(drift.missing[0], json!({"pk": {"S": "0"}}), "the first ones are kept");
}

#[test]
fn the_pause_lasts_the_indexers_lag_within_bounds() {
    let secs = Duration::from_secs;
    assert_eq!(pause(secs(60), None), secs(60), "no lag known: the configured pause");
    assert_eq!(pause(secs(60), Some(secs(5))), secs(60), "a short lag: the configured pause");
    assert_eq!(pause(secs(1), Some(secs(120))), secs(120) + LAG_MARGIN, "the lag and the margin");
    assert_eq!(pause(secs(1), Some(secs(4))), secs(8), "a short lag, twice");
    assert_eq!(pause(secs(1), Some(Duration::ZERO)), secs(1), "a stream caught up adds nothing");
    assert_eq!(pause(secs(1), Some(secs(3600))), MAX_PAUSE, "never longer than an invocation allows");
}
