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
        unseen: None,
        archive: None,
        alarms: Vec::new(),
        insufficient_data: Vec::new(),
        attention: Vec::new(),
    }
}

/// The verify heartbeat, `IndexVerifyMissingAlarm`, as `DescribeAlarms` returns it in
/// `INSUFFICIENT_DATA`, for `reason`, having changed state at `transitioned` (CloudWatch's
/// `StateTransitionedTimestamp`, which moto does not return) and been configured at 1,000.
fn heartbeat(reason: &str, transitioned: Option<i64>) -> MetricAlarm {
    MetricAlarm::builder()
        .alarm_name("prod-IndexVerifyMissingAlarm-ABCDEFGHIJKLM")
        .alarm_description("INSUFFICIENT_DATA after OK: no index verification has reported")
        .namespace("Sidestream")
        .metric_name("IndexDrift")
        .dimensions(
            Dimension::builder().name("Function").value("prod-VerifierFunction-ABCDEFGHIJKLM").build(),
        )
        .insufficient_data_actions("arn:aws:sns:us-east-1:123456789012:prod-alarmtopic")
        .state_value(StateValue::InsufficientData)
        .state_reason(reason)
        .alarm_configuration_updated_timestamp(DateTime::from_secs(1000))
        .state_updated_timestamp(DateTime::from_secs(transitioned.unwrap_or(1000)))
        .set_state_transitioned_timestamp(transitioned.map(DateTime::from_secs))
        .build()
}

/// [`heartbeat`] as the status lists it.
fn listed(alarm: &MetricAlarm) -> InsufficientDataAlarm {
    InsufficientDataAlarm {
        alarm: AlarmStatus::of(alarm),
        since: alarm.state_transitioned_timestamp().or(alarm.state_updated_timestamp()).map(rfc3339_of),
        since_created: since_created(alarm),
    }
}

const STOPPED: &str = "Insufficient Data: 26 out of the last 26 datapoints were unknown";

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
    let cases: [(&str, Break); 7] = [
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
        ("is in INSUFFICIENT_DATA since 1970-01-01T01:00:00Z after having had data", |s| {
            s.insufficient_data.push(listed(&heartbeat(STOPPED, Some(3600))));
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

/// An alarm in `INSUFFICIENT_DATA` since its creation, as CloudWatch shows it (its state unchanged
/// since its configuration, whatever the reason; or the creation's reason, its timestamps a
/// moment apart), as the emulator does (the reason only), or since its configuration was updated
/// (the case read wrongly: after OK); and one gone there after OK, as either shows it.
#[test]
fn insufficient_data_since_creation_is_told_from_insufficient_data_after_ok() {
    let created = [
        heartbeat(CREATED, Some(1000)),
        heartbeat(CREATED, None),
        heartbeat(CREATED, Some(1001)),
        heartbeat(STOPPED, Some(1000)),
        heartbeat(STOPPED, Some(999)),
    ];
    for alarm in &created {
        assert!(since_created(alarm), "{alarm:?}");
    }
    for alarm in [heartbeat(STOPPED, Some(1001)), heartbeat(STOPPED, None)] {
        assert!(!since_created(&alarm), "{alarm:?}");
    }
}

/// A new stack: the verify heartbeat in `INSUFFICIENT_DATA` since its creation is said, as
/// information ("not verified yet"), and needs no operator; in JSON, beside the alarm's fields.
#[test]
fn a_verify_heartbeat_since_creation_is_not_verified_yet_and_healthy() {
    let mut status = healthy();
    status.insufficient_data.push(listed(&heartbeat(CREATED, Some(1000))));
    assert!(attention(&status, &target()).is_empty());
    let text = status.to_string();
    assert!(
        text.contains(
            "alarms in INSUFFICIENT_DATA:\n    prod-IndexVerifyMissingAlarm-ABCDEFGHIJKLM (Sidestream/IndexDrift): not verified yet"
        ),
        "{text}"
    );
    assert!(text.contains("since the alarm was created (1970-01-01T00:16:40Z)"), "{text}");
    assert!(text.ends_with("Healthy: nothing needs an operator."), "{text}");
    let json = serde_json::to_value(&status).unwrap();
    let entry = &json["insufficient_data"][0];
    assert_eq!(entry["name"], "prod-IndexVerifyMissingAlarm-ABCDEFGHIJKLM", "{json}");
    assert_eq!(entry["metric"], "Sidestream/IndexDrift", "{json}");
    assert_eq!(entry["since_created"], true, "{json}");
    assert_eq!(entry["since"], "1970-01-01T00:16:40Z", "{json}");
}

/// A stopped schedule: the heartbeat gone to `INSUFFICIENT_DATA` after OK needs an operator, and
/// the report says since when and why.
#[test]
fn a_verify_heartbeat_after_ok_needs_an_operator() {
    let mut status = healthy();
    status.insufficient_data.push(listed(&heartbeat(STOPPED, Some(3600))));
    status.attention = attention(&status, &target());
    assert_eq!(status.attention.len(), 1, "{:?}", status.attention);
    assert!(status.attention[0].contains("no index verification has reported"), "{:?}", status.attention);
    let text = status.to_string();
    assert!(
        text.contains("(Sidestream/IndexDrift): no data since 1970-01-01T01:00:00Z, after having had data: Insufficient Data"),
        "{text}"
    );
    assert!(text.contains("NEEDS AN OPERATOR:"), "{text}");
    assert_eq!(serde_json::to_value(&status).unwrap()["insufficient_data"][0]["since_created"], false);
}
