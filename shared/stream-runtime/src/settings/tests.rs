//! Tests of the runtime's settings: read once with defaults, errors naming the variable.

use std::collections::HashMap;
use std::time::Duration;

use crate::Vars;

use super::Settings;

fn settings(env: &[(&str, &str)]) -> Result<Settings, String> {
    let env: HashMap<String, String> = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let lookup = move |name: &str| env.get(name).cloned();
    Settings::from_vars(&Vars::new(&lookup), "f", "f").map_err(|e| e.to_string())
}

#[test]
fn variables_are_read_once_with_defaults() {
    let s = settings(&[("PARKING_BUCKET", "parked-records")]).unwrap();
    assert_eq!((s.parking.bucket.as_str(), s.parking.prefix.as_str()), ("parked-records", "parked/"));
    assert_eq!(s.policy, io_policy::Policy::default());
    assert!(!s.force_path_style);

    let s = settings(&[
        ("PARKING_BUCKET", "b-1"),
        ("PARKING_PREFIX", "x/parked"),
        ("WRITE_CONCURRENCY", "16"),
        ("WRITE_MAX_ATTEMPTS", "3"),
        ("ATTEMPT_TIMEOUT_MS", "1500"),
        ("DEADLINE_MARGIN_MS", "500"),
        ("S3_FORCE_PATH_STYLE", "1"),
    ])
    .unwrap();
    assert_eq!(s.parking.prefix, "x/parked/");
    assert_eq!(
        (s.policy.concurrency, s.policy.max_attempts, s.policy.attempt_timeout, s.policy.margin),
        (16, 3, Duration::from_millis(1500), Duration::from_millis(500))
    );
    assert!(s.force_path_style);
    assert_eq!(s.source_table, None);
    let s = settings(&[("PARKING_BUCKET", "b-1"), ("SOURCE_TABLE", "issues")]).unwrap();
    assert_eq!(s.source_table.as_deref(), Some("issues"));
}

#[test]
fn errors_name_the_variable() {
    let cases: [(&[(&str, &str)], &str); 7] = [
        (&[], "PARKING_BUCKET is not set"),
        (&[("PARKING_BUCKET", "Bad_Bucket")], "PARKING_BUCKET is invalid"),
        (&[("PARKING_BUCKET", "ok-bucket"), ("PARKING_PREFIX", "/abs")], "PARKING_PREFIX is invalid"),
        (&[("PARKING_BUCKET", "ok-bucket"), ("WRITE_CONCURRENCY", "0")], "WRITE_CONCURRENCY is invalid"),
        (&[("PARKING_BUCKET", "ok-bucket"), ("DEADLINE_MARGIN_MS", "5")], "DEADLINE_MARGIN_MS is invalid"),
        (
            &[("PARKING_BUCKET", "ok-bucket"), ("S3_FORCE_PATH_STYLE", "yes")],
            "S3_FORCE_PATH_STYLE is invalid",
        ),
        (&[("PARKING_BUCKET", "ok-bucket"), ("SOURCE_TABLE", "issues/stream")], "SOURCE_TABLE is invalid"),
    ];
    for (env, expected) in cases {
        let err = settings(env).unwrap_err();
        assert!(err.contains(expected), "{env:?}: {err}");
    }
}
