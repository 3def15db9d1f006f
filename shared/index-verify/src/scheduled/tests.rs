//! The verifier's configuration and its EMF document.

use std::collections::HashMap;

use serde_json::json;
use stream_kit::Vars;

use super::{Config, Run, emf};
use crate::{Drift, Repaired};

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
            ok.namespace.as_str()
        ),
        ("issues", "cf", false, "Sidestream")
    );
    let cases: [(&[(&str, &str)], &str); 3] = [
        (&[("MULTIKEY_INDEXES", INDEXES)], "VERIFY_TABLE is not set"),
        (
            &[
                ("MULTIKEY_INDEXES", INDEXES),
                ("VERIFY_TABLE", "t"),
                ("VERIFY_REPAIR", "yes"),
            ],
            "VERIFY_REPAIR is invalid: \"yes\" is not true or false",
        ),
        (
            &[
                ("MULTIKEY_INDEXES", INDEXES),
                ("VERIFY_TABLE", "t"),
                ("VERIFY_INDEX", "x"),
            ],
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
    let run = Run {
        drift: Drift {
            index: "cf".into(),
            table: "ix".into(),
            entries: 10,
            expected: 11,
            missing: vec![json!({}), json!({})],
            stale: vec![json!({})],
            extra: vec![],
        },
        repaired: Some(Repaired { puts: 3, deletes: 0 }),
        after: None,
    };
    let doc = emf(&run, "Sidestream", 1_800_000_000_000);
    assert_eq!(
        doc,
        json!({
            "_aws": {"Timestamp": 1_800_000_000_000_u64, "CloudWatchMetrics": [{"Namespace": "Sidestream", "Dimensions": [["Index"]],
                "Metrics": [{"Name": "IndexDrift", "Unit": "Count"}, {"Name": "IndexMissing", "Unit": "Count"},
                            {"Name": "IndexStale", "Unit": "Count"}, {"Name": "IndexExtra", "Unit": "Count"},
                            {"Name": "IndexEntries", "Unit": "Count"}, {"Name": "IndexRepairs", "Unit": "Count"}]}]},
            "Index": "cf", "IndexDrift": 3, "IndexMissing": 2, "IndexStale": 1, "IndexExtra": 0, "IndexEntries": 10, "IndexRepairs": 3,
        })
    );
}
