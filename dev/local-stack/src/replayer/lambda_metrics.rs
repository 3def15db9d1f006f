//! The metrics Lambda publishes about the invocations an event source mapping makes, in the
//! `AWS/Lambda` namespace, as data points handed to a [`MetricSink`] (the local stack puts them
//! into the emulator's CloudWatch).
//!
//! By `FunctionName`, per invocation: `Invocations`, `Errors` (a function error: it returned an
//! error, crashed or timed out), `Duration` in milliseconds, and `IteratorAge`, the age of the
//! batch's last record when the invocation starts. By `EventSourceMappingUUID`, with the
//! mapping's `MetricsConfig` `EventCount`: `PolledEventCount` (records read),
//! `FilteredOutEventCount`, `DroppedEventCount` (records given up on) and
//! `OnFailureDestinationDeliveredEventCount` (of those, the ones whose range reached the
//! on-failure destination).

use std::sync::Arc;
use std::time::SystemTime;

/// The namespace Lambda publishes in.
pub(crate) const NAMESPACE: &str = "AWS/Lambda";

/// One data point.
#[derive(Debug, Clone, PartialEq)]
pub struct Datum {
    /// The metric's name (`IteratorAge`, `DroppedEventCount`, …).
    pub name: &'static str,
    /// Its one dimension: `("FunctionName", name)` or `("EventSourceMappingUUID", uuid)`.
    pub dimension: (&'static str, String),
    /// The value.
    pub value: f64,
    /// CloudWatch's unit: `Count` or `Milliseconds`.
    pub unit: &'static str,
    /// When it was measured.
    pub at: SystemTime,
}

/// Where the data points go, as they happen.
pub type MetricSink = Arc<dyn Fn(Vec<Datum>) + Send + Sync>;

/// The dimension of function metrics.
pub(crate) const FUNCTION_NAME: &str = "FunctionName";

/// The dimension of a mapping's event counts.
pub(crate) const MAPPING_UUID: &str = "EventSourceMappingUUID";

/// What one invocation reports: `Invocations`, `Errors`, `Duration` and `IteratorAge`.
pub fn invocation(
    function: &str,
    failed: bool,
    duration_ms: f64,
    iterator_age_ms: f64,
    at: SystemTime,
) -> Vec<Datum> {
    let by_function =
        |name, value, unit| Datum { name, dimension: (FUNCTION_NAME, function.to_owned()), value, unit, at };
    vec![
        by_function("Invocations", 1.0, "Count"),
        by_function("Errors", if failed { 1.0 } else { 0.0 }, "Count"),
        by_function("Duration", duration_ms, "Milliseconds"),
        by_function("IteratorAge", iterator_age_ms, "Milliseconds"),
    ]
}

/// A mapping's event count, `name` one of `PolledEventCount`, `FilteredOutEventCount`,
/// `DroppedEventCount` and `OnFailureDestinationDeliveredEventCount`.
pub fn events(mapping_uuid: &str, name: &'static str, count: u64, at: SystemTime) -> Datum {
    Datum {
        name,
        dimension: (MAPPING_UUID, mapping_uuid.to_owned()),
        #[allow(clippy::cast_precision_loss, reason = "a batch's count is far below 2^52")]
        value: count as f64,
        unit: "Count",
        at,
    }
}
