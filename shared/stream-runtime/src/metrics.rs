//! Per-invocation counters, written as one CloudWatch Embedded Metric Format (EMF) line.
//!
//! Lambda forwards stdout to CloudWatch Logs, and CloudWatch turns each EMF line into metric data
//! points with no API call and no extra latency. Every metric is emitted on every invocation, zeros
//! included, so alarms on "failures > 0" see a steady series. The dimension is `Function`.
//!
//! The runtime counts the failure model's metrics ([`Metric::ALL`]); a function adds its own
//! ([`Metric::Own`]), declared in [`crate::StreamFunction::METRICS`] so that they too are emitted
//! on every invocation. The namespace is the function's ([`crate::StreamFunction::NAMESPACE`]),
//! unless `METRICS_NAMESPACE` names another.
//!
//! With the JSON log format, Lambda filters application logs by their `level` (a line without a
//! valid `level` and RFC 3339 `timestamp` counts as INFO), so a function set to
//! `ApplicationLogLevel: WARN` would drop INFO-level EMF lines, and every alarm on them would go
//! quiet. Each EMF line therefore carries `EMF_LEVEL`, the level no `ApplicationLogLevel`
//! filters out, and its timestamp ([`log_fields`]).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use crate::env::{ConfigError, Vars};

/// A counter: one of the runtime's, or one of the function's own.
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
    /// A counter of the function's own, by its CloudWatch metric name (1-255 characters). Declare
    /// it in [`crate::StreamFunction::METRICS`] so that it is emitted, zero included, on every
    /// invocation; one counted but not declared is emitted from its first count on.
    Own(&'static str),
}

impl Metric {
    /// The runtime's metrics, in emission order (the function's own come after them).
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
            Metric::Own(name) => name,
        }
    }

    /// Its place among the runtime's counters; `None` for a function's own.
    fn slot(self) -> Option<usize> {
        Metric::ALL.iter().position(|m| *m == self)
    }
}

/// Counters for one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    namespace: String,
    function: String,
    counts: [u64; Metric::ALL.len()],
    /// The function's own counters, the declared ones first, in their order.
    own: Vec<(&'static str, u64)>,
}

/// The log level of every EMF line: `FATAL`, the one level that every `ApplicationLogLevel`
/// (TRACE to FATAL) lets through to CloudWatch Logs, where the metrics are made.
pub(crate) const EMF_LEVEL: &str = "FATAL";

/// The fields that make an EMF line pass Lambda's log-level filter whatever `ApplicationLogLevel`
/// is: `level` (`EMF_LEVEL`) and `timestamp`, the line's time as RFC 3339 (without a valid
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

impl Metrics {
    /// Empty counters for `function` in `namespace`.
    pub fn new(namespace: impl Into<String>, function: impl Into<String>) -> Metrics {
        Metrics {
            namespace: namespace.into(),
            function: function.into(),
            counts: [0; Metric::ALL.len()],
            own: Vec::new(),
        }
    }

    /// The same counters with the function's own metrics `own` declared: each is emitted on every
    /// invocation, zero included, after the runtime's.
    #[must_use]
    pub fn declare(mut self, own: &[&'static str]) -> Metrics {
        for name in own {
            if !self.own.iter().any(|(n, _)| n == name) {
                self.own.push((name, 0));
            }
        }
        self
    }

    /// Reads `METRICS_NAMESPACE` (default `namespace`, the function's) and
    /// `AWS_LAMBDA_FUNCTION_NAME` (default `function`, the crate's name).
    pub fn from_vars(vars: &Vars<'_>, function: &str, namespace: &str) -> Result<Metrics, ConfigError> {
        let namespace = vars.optional("METRICS_NAMESPACE").unwrap_or_else(|| namespace.to_owned());
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
        let mut metrics = self.cleared();
        metrics.add(Metric::RecordsIn, records as u64);
        metrics
    }

    /// These counters at zero, the declared own metrics kept.
    fn cleared(&self) -> Metrics {
        let own = self.own.iter().map(|(name, _)| (*name, 0)).collect();
        Metrics { own, ..Metrics::new(self.namespace.clone(), self.function.clone()) }
    }

    /// The `Function` dimension: the function's name.
    pub fn function(&self) -> &str {
        &self.function
    }

    /// The same empty counters under another `Function` dimension.
    #[must_use]
    pub fn for_function(&self, function: impl Into<String>) -> Metrics {
        Metrics { function: function.into(), ..self.cleared() }
    }

    /// Adds `n` to a counter.
    pub fn add(&mut self, metric: Metric, n: u64) {
        let count = if let Some(slot) = metric.slot() {
            &mut self.counts[slot]
        } else {
            let name = metric.name();
            let at = self.own.iter().position(|(n, _)| *n == name).unwrap_or_else(|| {
                self.own.push((name, 0));
                self.own.len() - 1
            });
            &mut self.own[at].1
        };
        *count = count.saturating_add(n);
    }

    /// A counter's value.
    pub fn get(&self, metric: Metric) -> u64 {
        match metric.slot() {
            Some(slot) => self.counts[slot],
            None => self.own.iter().find(|(n, _)| *n == metric.name()).map_or(0, |(_, v)| *v),
        }
    }

    /// Every counter in emission order: the runtime's, then the function's own.
    pub fn counts(&self) -> impl Iterator<Item = (Metric, u64)> + '_ {
        let own = self.own.iter().map(|(name, n)| (Metric::Own(name), *n));
        Metric::ALL.iter().zip(self.counts).map(|(m, n)| (*m, n)).chain(own)
    }

    /// The EMF document for these counters, stamped `timestamp_ms`, as one line of JSON.
    pub fn render(&self, timestamp_ms: u64) -> String {
        let definitions: Vec<Value> =
            self.counts().map(|(m, _)| json!({"Name": m.name(), "Unit": "Count"})).collect();
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
        for (metric, n) in self.counts() {
            doc.insert(metric.name().to_owned(), Value::from(n));
        }
        Value::Object(doc).to_string()
    }

    /// Writes the EMF line to stdout (where Lambda's log agent picks it up) and resets the
    /// counters. `println!` rather than a raw stdout handle, so the test harness captures it.
    #[allow(clippy::print_stdout, reason = "EMF is delivered through stdout")]
    pub fn flush(&mut self) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        println!("{}", self.render(u64::try_from(now).unwrap_or(u64::MAX)));
        *self = self.cleared();
    }
}

#[cfg(test)]
mod tests;
