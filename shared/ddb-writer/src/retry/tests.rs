//! Tests for retry classification, backoff and configuration.

use std::collections::HashMap;
use std::time::Duration;

use stream_kit::Vars;

use super::*;

#[test]
fn service_errors_are_classified_by_code_then_status() {
    let cases = [
        (
            Some("ProvisionedThroughputExceededException"),
            400,
            ErrorClass::Throttled,
        ),
        (Some("RequestLimitExceeded"), 400, ErrorClass::Throttled),
        (Some("ThrottlingException"), 400, ErrorClass::Throttled),
        (Some("InternalServerError"), 500, ErrorClass::Transient),
        (None, 503, ErrorClass::Transient),
        (Some("Whatever"), 502, ErrorClass::Transient),
        (None, 429, ErrorClass::Throttled),
        (Some("ValidationException"), 400, ErrorClass::Permanent),
        (Some("ResourceNotFoundException"), 400, ErrorClass::Permanent),
        (Some("UnrecognizedClientException"), 400, ErrorClass::Permanent),
    ];
    for (code, status, class) in cases {
        assert_eq!(
            ErrorClass::of_service_error(code, status),
            class,
            "{code:?} {status}"
        );
        assert_eq!(class.is_retryable(), class != ErrorClass::Permanent);
    }
}

#[test]
fn backoff_doubles_up_to_the_cap_and_jitter_scales_it() {
    let p = RetryPolicy {
        max_attempts: 8,
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_secs(1),
    };
    let ceilings: Vec<u128> = (1..=8).map(|n| p.backoff(n, 1.0).as_millis()).collect();
    assert_eq!(ceilings, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
    assert_eq!(p.backoff(3, 0.0), Duration::ZERO);
    assert_eq!(p.backoff(3, 0.5), Duration::from_millis(100));
    // Out-of-range inputs stay bounded.
    assert_eq!(p.backoff(u32::MAX, 7.0), Duration::from_secs(1));
}

#[test]
fn config_reads_named_variables() {
    let env: HashMap<&str, &str> = [
        ("WRITE_CONCURRENCY", "16"),
        ("WRITE_MAX_ATTEMPTS", "3"),
        ("DEADLINE_MARGIN_MS", "500"),
    ]
    .into();
    let lookup = |k: &str| env.get(k).map(|v| (*v).to_owned());
    let c = WriterConfig::from_vars(&Vars::new(&lookup)).unwrap();
    assert_eq!(
        (c.concurrency, c.retry.max_attempts, c.margin),
        (16, 3, Duration::from_millis(500))
    );

    let none = |_: &str| None;
    assert_eq!(
        WriterConfig::from_vars(&Vars::new(&none)).unwrap(),
        WriterConfig::default()
    );

    let zero = |k: &str| (k == "WRITE_CONCURRENCY").then(|| "0".to_owned());
    let err = WriterConfig::from_vars(&Vars::new(&zero))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("WRITE_CONCURRENCY") && err.contains("from 1 to 64"),
        "{err}"
    );
}
