//! The status's pure parts: which binary a function runs, what needs an operator, the report.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;

fn target() -> Target {
    Target {
        stack: "prod".into(),
        namespace: "Sidestream".into(),
        queue_url: None,
        parking_bucket: None,
        archive: None,
        window: Duration::from_secs(900),
        verify_window: Duration::from_secs(2 * 86_400),
        max_lag: Duration::from_secs(60),
    }
}

fn function(name: &str) -> FunctionStatus {
    FunctionStatus {
        function: name.into(),
        binary: binary_of("prod", name),
        lag_ms: Some(250.0),
        events: 10,
        systemic_failures: 0,
        transient_failures: 0,
        parked: 0,
        failures_pending: 0,
        alarms: Vec::new(),
    }
}

fn healthy() -> Status {
    Status {
        stack: "prod".into(),
        checked_at: "2026-11-26T10:00:00Z".into(),
        window_seconds: 900,
        functions: vec![function("prod-IndexerFunction-ABCDEFGHIJKLM")],
        indexes: vec![IndexStatus {
            verifier: "prod-VerifierFunction-ABCDEFGHIJKLM".into(),
            drift: Some(0.0),
            verified_at: Some("2026-11-26T09:00:00Z".into()),
        }],
        given_up: vec![
            GivenUp {
                location: "s3://parking/aws/lambda/".into(),
                records_kept: true,
                pending: 0,
                by_function: BTreeMap::new(),
            },
            GivenUp {
                location: "https://sqs/q".into(),
                records_kept: false,
                pending: 0,
                by_function: BTreeMap::new(),
            },
        ],
        parked: BTreeMap::new(),
        archive: None,
        alarms: Vec::new(),
        attention: Vec::new(),
    }
}

#[test]
fn the_binary_comes_from_the_member_or_the_logical_id() {
    let cases = [
        ("prod-IndexerFunction-ABCDEFGHIJKLM", Some("multikey-indexer")),
        ("prod-ArchiverFunction-ABCDEFGHIJKLM", Some("ttl-archiver")),
        ("prod-AggregatorFunction-ABCDEFGHIJKLM", Some("counter-aggregator")),
        ("prod-IssuesStreamFunction-ABCDEFGHIJKLM/ttl-archiver", Some("ttl-archiver")),
        ("prod-IssuesStreamFunction-ABCDEFGHIJKLM", None),
        ("staging-IndexerFunction-ABCDEFGHIJKLM", None),
    ];
    for (name, binary) in cases {
        assert_eq!(binary_of("prod", name).as_deref(), binary, "{name}");
    }
}

#[test]
fn each_kind_of_trouble_needs_an_operator() {
    type Break = fn(&mut Status);
    assert!(attention(&healthy(), &target()).is_empty());
    let cases: [(&str, Break); 6] = [
        ("behind its stream", |s| s.functions[0].lag_ms = Some(61_000.0)),
        ("parked 1 record", |s| {
            s.parked.insert("multikey-indexer".into(), 1);
        }),
        ("1 range(s) given up are kept with their records", |s| {
            s.given_up[0].pending = 1;
        }),
        ("1 range(s) given up are pending at the on-failure queue", |s| {
            s.given_up[1].pending = 1;
        }),
        ("drifted", |s| s.indexes[0].drift = Some(2.0)),
        ("is in ALARM", |s| {
            s.alarms.push(AlarmStatus {
                name: "prod-IndexerParkedRecordsAlarm-X".into(),
                metric: "Sidestream/ParkedRecords".into(),
                dimensions: vec![],
                reason: "Threshold crossed".into(),
                description: "parked".into(),
            });
        }),
    ];
    for (expected, break_it) in cases {
        let mut status = healthy();
        break_it(&mut status);
        let attention = attention(&status, &target());
        assert_eq!(attention.len(), 1, "{expected}: {attention:?}");
        assert!(attention[0].contains(expected), "{expected}: {attention:?}");
    }
}

#[test]
fn the_report_says_healthy_or_lists_what_needs_an_operator() {
    let text = healthy().to_string();
    assert!(text.contains("prod-IndexerFunction-ABCDEFGHIJKLM"), "{text}");
    assert!(text.contains("250 ms"), "{text}");
    assert!(text.ends_with("Healthy: nothing needs an operator."), "{text}");
    let mut status = healthy();
    status.attention = vec!["one".into(), "two".into()];
    let text = status.to_string();
    assert!(text.contains("NEEDS AN OPERATOR:\n  - one\n  - two"), "{text}");
}

#[test]
fn a_window_ends_after_now_on_a_minute() {
    let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
    assert_eq!(minute_after(at(120)), at(180));
    assert_eq!(minute_after(at(179)), at(180));
}

#[test]
fn a_window_is_whole_minutes() {
    assert_eq!(period_of(Duration::from_secs(1)), 60);
    assert_eq!(period_of(Duration::from_secs(900)), 900);
    assert_eq!(period_of(Duration::from_secs(901)), 960);
}
