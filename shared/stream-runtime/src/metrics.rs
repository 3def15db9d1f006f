//! Per-invocation counters, written as one CloudWatch Embedded Metric Format (EMF) line.
//!
//! Lambda forwards stdout to CloudWatch Logs, and CloudWatch turns each EMF line into metric data
//! points with no API call and no extra latency. Every metric is emitted on every invocation, zeros
//! included, so alarms on "failures > 0" see a steady series. The dimension is `Function`.
//!
//! With the JSON log format, Lambda filters application logs by their `level` (a line without a
//! valid `level` and RFC 3339 `timestamp` counts as INFO), so a function set to
//! `ApplicationLogLevel: WARN` would drop INFO-level EMF lines, and every alarm on them would go
//! quiet. Each EMF line therefore carries [`EMF_LEVEL`], the level no `ApplicationLogLevel`
//! filters out, and its timestamp ([`log_fields`]).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::env::{ConfigError, Vars};

/// The counters Sidestream's functions report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Stream records delivered to the invocation.
    RecordsIn,
    /// Records the invocation finished (planned and written).
    RecordsDone,
    /// Records that can never succeed (record-permanent failures), parked with their full content
    /// and logged at ERROR; the batch went on past them.
    ParkedRecords,
    /// Invocations that stopped at a systemic failure (configuration, a missing resource, access):
    /// they checkpoint, and every retry fails alike until an operator acts.
    SystemicFailures,
    /// Invocations that stopped at a transient failure after their retries (throttling, server
    /// errors, timeouts): they checkpoint, and Lambda's retry will get past it.
    TransientFailures,
    /// Records deliberately not acted on (for example deletes made by users, for the archiver).
    SkippedRecords,
    /// TTL deletes archived with their keys only, because the stream carries no `OldImage`.
    KeysOnlyRecords,
    /// Values left out of an index because they cannot be keyed (a nested map, say).
    SkippedValues,
    /// Item writes (puts and deletes) that succeeded.
    Writes,
    /// Write requests sent, first attempts and retries alike.
    Requests,
    /// Requests sent again after throttling, a server error or unprocessed items.
    Retries,
    /// Item writes that failed for good in this invocation (their records are retried by Lambda,
    /// or parked).
    FailedWrites,
    /// Version-conditioned writes that lost to another writer and were merged again.
    Conflicts,
    /// Versioned puts not applied because the stored item already held a newer (or the same)
    /// version: a newer record of the item was applied first, so they were late (a superseded
    /// invocation's) or repeated, and not needed.
    SupersededWrites,
}

impl Metric {
    /// Every metric, in emission order.
    pub const ALL: [Metric; 14] = [
        Metric::RecordsIn,
        Metric::RecordsDone,
        Metric::ParkedRecords,
        Metric::SystemicFailures,
        Metric::TransientFailures,
        Metric::SkippedRecords,
        Metric::KeysOnlyRecords,
        Metric::SkippedValues,
        Metric::Writes,
        Metric::Requests,
        Metric::Retries,
        Metric::FailedWrites,
        Metric::Conflicts,
        Metric::SupersededWrites,
    ];

    /// The CloudWatch metric name.
    pub const fn name(self) -> &'static str {
        match self {
            Metric::RecordsIn => "RecordsIn",
            Metric::RecordsDone => "RecordsDone",
            Metric::ParkedRecords => "ParkedRecords",
            Metric::SystemicFailures => "SystemicFailures",
            Metric::TransientFailures => "TransientFailures",
            Metric::SkippedRecords => "SkippedRecords",
            Metric::KeysOnlyRecords => "KeysOnlyRecords",
            Metric::SkippedValues => "SkippedValues",
            Metric::Writes => "Writes",
            Metric::Requests => "Requests",
            Metric::Retries => "Retries",
            Metric::FailedWrites => "FailedWrites",
            Metric::Conflicts => "Conflicts",
            Metric::SupersededWrites => "SupersededWrites",
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// Counters for one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    namespace: String,
    function: String,
    counts: [u64; Metric::ALL.len()],
}

/// The log level of every EMF line: `FATAL`, the one level that every `ApplicationLogLevel`
/// (TRACE to FATAL) lets through to CloudWatch Logs, where the metrics are made.
pub(crate) const EMF_LEVEL: &str = "FATAL";

/// The fields that make an EMF line pass Lambda's log-level filter whatever `ApplicationLogLevel`
/// is: `level` ([`EMF_LEVEL`]) and `timestamp`, the line's time as RFC 3339 (without a valid
/// one Lambda takes the line as INFO).
pub fn log_fields(timestamp_ms: u64) -> [(&'static str, Value); 2] {
    let at = i64::try_from(timestamp_ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or_default();
    [
        ("level", Value::from(EMF_LEVEL)),
        ("timestamp", Value::from(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))),
    ]
}

/// The namespace used when `METRICS_NAMESPACE` is unset.
pub const DEFAULT_NAMESPACE: &str = "Sidestream";

impl Metrics {
    /// Empty counters for `function` in `namespace`.
    pub fn new(namespace: impl Into<String>, function: impl Into<String>) -> Metrics {
        Metrics { namespace: namespace.into(), function: function.into(), counts: [0; Metric::ALL.len()] }
    }

    /// Reads `METRICS_NAMESPACE` (default `Sidestream`) and `AWS_LAMBDA_FUNCTION_NAME` (default
    /// `function`, the crate's name).
    pub fn from_vars(vars: &Vars<'_>, function: &str) -> Result<Metrics, ConfigError> {
        let namespace = vars.optional("METRICS_NAMESPACE").unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
        if namespace.len() > 255 || namespace.starts_with(':') {
            return Err(ConfigError::Invalid {
                var: "METRICS_NAMESPACE",
                reason: format!(
                    "{namespace:?} is not a CloudWatch namespace (1-255 characters, not starting with ':')"
                ),
            });
        }
        let function = vars.optional("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|| function.to_owned());
        Ok(Metrics::new(namespace, function))
    }

    /// Fresh counters for one invocation of `records` records, with `RecordsIn` counted.
    #[must_use]
    pub(crate) fn for_batch(&self, records: usize) -> Metrics {
        let mut metrics = Metrics::new(self.namespace.clone(), self.function.clone());
        metrics.add(Metric::RecordsIn, records as u64);
        metrics
    }

    /// The `Function` dimension: the function's name.
    pub fn function(&self) -> &str {
        &self.function
    }

    /// The same empty counters under another `Function` dimension.
    #[must_use]
    pub fn for_function(&self, function: impl Into<String>) -> Metrics {
        Metrics::new(self.namespace.clone(), function)
    }

    /// Adds `n` to a counter.
    pub fn add(&mut self, metric: Metric, n: u64) {
        self.counts[metric.slot()] = self.counts[metric.slot()].saturating_add(n);
    }

    /// A counter's value.
    pub fn get(&self, metric: Metric) -> u64 {
        self.counts[metric.slot()]
    }

    /// The EMF document for these counters, stamped `timestamp_ms`, as one line of JSON.
    pub fn render(&self, timestamp_ms: u64) -> String {
        let definitions: Vec<Value> =
            Metric::ALL.iter().map(|m| json!({"Name": m.name(), "Unit": "Count"})).collect();
        let mut doc = Map::new();
        doc.insert(
            "_aws".to_owned(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [["Function"]],
                    "Metrics": definitions,
                }],
            }),
        );
        for (name, value) in log_fields(timestamp_ms) {
            doc.insert(name.to_owned(), value);
        }
        doc.insert("Function".to_owned(), Value::from(self.function.as_str()));
        for metric in Metric::ALL {
            doc.insert(metric.name().to_owned(), Value::from(self.get(metric)));
        }
        Value::Object(doc).to_string()
    }

    /// Writes the EMF line to stdout (where Lambda's log agent picks it up) and resets the
    /// counters. `println!` rather than a raw stdout handle, so the test harness captures it.
    #[allow(clippy::print_stdout, reason = "EMF is delivered through stdout")]
    pub fn flush(&mut self) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        println!("{}", self.render(u64::try_from(now).unwrap_or(u64::MAX)));
        self.counts = [0; Metric::ALL.len()];
    }
}

#[cfg(test)]
mod tests;
