//! The function's input and configuration.

use std::collections::HashMap;

use stream_runtime::Vars;

use super::{Task, target_from_vars};

#[test]
fn a_first_task_needs_only_the_run_and_the_segment() {
    let task: Task =
        serde_json::from_str(r#"{"run_id":"bf-1","total_segments":16,"segment":3,"next":null}"#).unwrap();
    assert_eq!((task.cursor.segment, task.cursor.done, task.cursor.counts.scanned), (3, false, 0));
    let again: Task = serde_json::from_value(serde_json::to_value(&task).unwrap()).unwrap();
    assert_eq!(again, task);
}

#[test]
fn configuration_errors_name_the_variable() {
    let indexes = r#"{"base_key":["id"],"indexes":[{"name":"cf","table":"ix","source":"custom_fields"}]}"#;
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[("MULTIKEY_INDEXES", indexes)], "BACKFILL_TABLE is not set"),
        (
            &[("MULTIKEY_INDEXES", indexes), ("BACKFILL_TABLE", "t"), ("BACKFILL_INDEX", "nope")],
            "BACKFILL_INDEX is invalid: MULTIKEY_INDEXES has no index \"nope\"",
        ),
        (
            &[("MULTIKEY_INDEXES", indexes), ("BACKFILL_TABLE", "t"), ("BACKFILL_WRITE_UNITS", "-1")],
            "BACKFILL_WRITE_UNITS is invalid: \"-1\" is not a positive number",
        ),
        (&[("BACKFILL_TABLE", "t")], "MULTIKEY_INDEXES"),
    ];
    for (vars, message) in cases {
        let map: HashMap<&str, &str> = vars.iter().copied().collect();
        let lookup = |name: &str| map.get(name).map(|v| (*v).to_owned());
        let error = target_from_vars(&Vars::new(&lookup)).unwrap_err().to_string();
        assert!(error.contains(message), "{error}\n  expected: {message}");
    }
    let map: HashMap<&str, &str> =
        [("MULTIKEY_INDEXES", indexes), ("BACKFILL_TABLE", "t"), ("BACKFILL_READ_UNITS", "50")].into();
    let lookup = |name: &str| map.get(name).map(|v| (*v).to_owned());
    let (target, settings) = target_from_vars(&Vars::new(&lookup)).unwrap();
    assert_eq!(
        (target.table.as_str(), target.sources.as_slice(), settings.read_units_per_second),
        ("t", ["custom_fields".to_owned()].as_slice(), Some(50.0))
    );
}
