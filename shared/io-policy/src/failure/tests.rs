//! Tests of the failure model: AWS answers classified by code, status and message.

use super::{FailureKind, kind_of};

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
        assert_eq!(kind_of(code, status, message), kind, "{code:?} {status} {message:?}");
    }
}

#[test]
fn kinds_have_stable_names() {
    let names: Vec<&str> = [FailureKind::Transient, FailureKind::Systemic, FailureKind::RecordPermanent]
        .iter()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(names, ["transient", "systemic", "record-permanent"]);
}
