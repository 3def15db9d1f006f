//! Tests of the failure model: AWS answers classified by code, status and message.

use super::{FailureKind, ServiceCodes, kind_of};

#[test]
fn service_answers_are_classified_by_code_status_and_message() {
    use FailureKind::{RecordPermanent, Systemic, Transient};
    let cases: [(Option<&str>, u16, &str, FailureKind); 16] = [
        (Some("ProvisionedThroughputExceededException"), 400, "", Transient),
        (Some("ThrottlingException"), 400, "Throughput exceeds the current capacity", Transient),
        (Some("RequestLimitExceeded"), 400, "", Transient),
        (Some("SlowDown"), 503, "Please reduce your request rate.", Transient),
        (Some("InternalServerError"), 500, "", Transient),
        (Some("InternalError"), 500, "", Transient),
        (None, 503, "", Transient),
        (Some("Whatever"), 502, "", Transient),
        (None, 429, "", Transient),
        (
            Some("ValidationException"),
            400,
            "Item size has exceeded the maximum allowed size",
            RecordPermanent,
        ),
        (Some("ValidationException"), 400, "Number overflow.", RecordPermanent),
        (
            Some("ValidationException"),
            400,
            "One or more parameter values were invalid: Type mismatch for key sk expected: S actual: B",
            Systemic,
        ),
        (
            Some("ValidationException"),
            400,
            "One or more parameter values were invalid: Missing the key pk in the item",
            Systemic,
        ),
        (Some("ResourceNotFoundException"), 400, "Requested resource not found", Systemic),
        (Some("AccessDeniedException"), 400, "", Systemic),
        (Some("NoSuchBucket"), 404, "The specified bucket does not exist", Systemic),
    ];
    for (code, status, message, kind) in cases {
        assert_eq!(
            kind_of(code, status, message, &ServiceCodes::NONE),
            kind,
            "{code:?} {status} {message:?}"
        );
    }
}

#[test]
fn a_services_own_codes_are_read_before_the_defaults() {
    use FailureKind::{RecordPermanent, Systemic, Transient};
    // SQS's throttling and content codes, and a server code of a service's own (SQS has none).
    const SQS: ServiceCodes = ServiceCodes {
        throttling: &["RequestThrottled", "KMS.ThrottlingException"],
        server: &["EngineOverloaded"],
        content: &["InvalidMessageContents"],
    };
    let cases = [
        (Some("RequestThrottled"), 400, Transient, Systemic),
        (Some("KMS.ThrottlingException"), 400, Transient, Systemic),
        (Some("EngineOverloaded"), 400, Transient, Systemic),
        (Some("InvalidMessageContents"), 400, RecordPermanent, Systemic),
        // The defaults still hold beside them.
        (Some("ThrottlingException"), 400, Transient, Transient),
        (Some("AccessDeniedException"), 400, Systemic, Systemic),
    ];
    for (code, status, with, without) in cases {
        assert_eq!(kind_of(code, status, "", &SQS), with, "{code:?} with the codes");
        assert_eq!(kind_of(code, status, "", &ServiceCodes::NONE), without, "{code:?} without them");
    }
    assert!(SQS.throttles("RequestThrottled") && !ServiceCodes::NONE.throttles("RequestThrottled"));
}

#[test]
fn kinds_have_stable_names() {
    let names: Vec<&str> = [FailureKind::Transient, FailureKind::Systemic, FailureKind::RecordPermanent]
        .iter()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(names, ["transient", "systemic", "record-permanent"]);
}
