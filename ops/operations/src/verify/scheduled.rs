//! The scheduled verify's configuration, its pause and its report: what the verify job's steps
//! (`crate::verify::job`, run by the template's `VerifyStateMachine` on a schedule, each step an
//! invocation of `ops/index-verifier`) read at cold start, how long the job waits before its
//! confirmation, and the drift as CloudWatch EMF metrics for the template's alarm.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `MULTIKEY_INDEXES` | (required) | the indexer's definitions |
//! | `VERIFY_TABLE` | (required) | the base table |
//! | `VERIFY_INDEX` | the only index | which index to verify |
//! | `VERIFY_BUCKET` | (required) | where the job keeps its state and results ([`crate::verify::job::Results`]) |
//! | `VERIFY_PREFIX` | `verify/` | their key prefix |
//! | `VERIFY_REPAIR` | `false` | `true` mends the persistent drift after reporting it ([`crate::verify::mend`]) |
//! | `VERIFY_CONFIRM_SECONDS` | `60` (0-600) | the least pause before the confirmation |
//! | `VERIFY_LAG_FUNCTION` | none | the indexer's function name: the pause lasts its `IteratorAge` too |
//! | `VERIFY_PAGE_SIZE` | `250` (1-10,000) | items a scan page asks for |
//! | `VERIFY_READ_UNITS` | no limit | read units a second each segment may spend, one an item read |
//! | `METRICS_NAMESPACE` | `Sidestream` | the EMF namespace |
//!
//! A job verifies once; if it finds drift, it waits and looks again at each difference, key by
//! key ([`crate::verify::confirm`]), and only what is still there counts: an item that changed
//! while the scans ran, or a batch still in flight, is mended by the stream within the pause and
//! raises no alarm, and neither is it repaired. The pause ([`pause`]) is `VERIFY_CONFIRM_SECONDS`,
//! or, with `VERIFY_LAG_FUNCTION`, the indexer's lag if that is longer: its `IteratorAge` (the
//! maximum over the last five minutes) and as much again up to [`LAG_MARGIN`], at most
//! [`MAX_PAUSE`]. A stream minutes behind makes every change of those minutes look like drift;
//! waiting for it leaves the drift the stream will not mend by itself. `IndexDrift`, the alarm's
//! metric, is the persistent drift (of the first [`crate::verify::KEPT`] of each kind);
//! `IndexDriftSeen` less `IndexDrift` is what the pause saw mended.
//!
//! Report-only by default: drift is an alarm for an operator, who can read the examples in the
//! log (and the run's `report.json`) and run `sidestream index verify --repair`. With
//! `VERIFY_REPAIR=true` the job mends the persistent drift through the stream (touches, and
//! deletes conditioned on versions), which is safe while the indexer runs.

use std::time::Duration;

use formats::{Index, Indexes};
use serde_json::{Value, json};
use stream_runtime::{ConfigError, Vars};

use crate::verify::{Drift, Mended};

/// The verifier's configuration, read once at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// The indexer's definitions.
    pub indexes: Indexes,
    /// The index verified.
    pub index: Index,
    /// The base table.
    pub table: String,
    /// Whether to mend persistent drift.
    pub repair: bool,
    /// The least pause before the confirmation.
    pub confirm_after: Duration,
    /// The indexer's function name, whose `IteratorAge` lengthens the pause.
    pub lag_function: Option<String>,
    /// Items a scan page asks for.
    pub page_items: i32,
    /// Read units a second each segment may spend (`None`: no limit).
    pub read_units: Option<f64>,
    /// The EMF namespace.
    pub namespace: String,
    /// The function's name (`AWS_LAMBDA_FUNCTION_NAME`, which Lambda sets): the EMF `Function`
    /// dimension.
    pub function: String,
}

impl Config {
    /// Reads `MULTIKEY_INDEXES`, `VERIFY_TABLE`, `VERIFY_INDEX`, `VERIFY_REPAIR`,
    /// `VERIFY_CONFIRM_SECONDS`, `VERIFY_LAG_FUNCTION`, `VERIFY_PAGE_SIZE`, `VERIFY_READ_UNITS`,
    /// `METRICS_NAMESPACE` and
    /// `AWS_LAMBDA_FUNCTION_NAME`.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        let indexes = Indexes::from_vars(vars)?;
        let table = vars.required("VERIFY_TABLE", "the base table whose index is verified")?;
        let index = crate::verify::choose(&indexes, vars.optional("VERIFY_INDEX").as_deref())
            .map_err(|e| ConfigError::Invalid { var: "VERIFY_INDEX", reason: e.to_string() })?
            .clone();
        let repair = match vars.optional("VERIFY_REPAIR").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    var: "VERIFY_REPAIR",
                    reason: format!("{other:?} is not true or false"),
                });
            }
        };
        let confirm_after = Duration::from_secs(vars.integer("VERIFY_CONFIRM_SECONDS", 60_u64, 0, 600)?);
        Ok(Config {
            indexes,
            index,
            table,
            repair,
            confirm_after,
            lag_function: vars.optional("VERIFY_LAG_FUNCTION"),
            page_items: vars.integer("VERIFY_PAGE_SIZE", crate::verify::PAGE_ITEMS, 1, 10_000)?,
            read_units: vars.rate("VERIFY_READ_UNITS")?,
            namespace: vars
                .optional("METRICS_NAMESPACE")
                .unwrap_or_else(|| formats::METRICS_NAMESPACE.to_owned()),
            function: vars
                .optional("AWS_LAMBDA_FUNCTION_NAME")
                .unwrap_or_else(|| "index-verifier".to_owned()),
        })
    }
}

/// One run of the verify job: the drift of the first verification, the persistent drift, and
/// what a mend wrote.
#[derive(Debug, Clone)]
pub struct Run {
    /// What the first verification found.
    pub first: Drift,
    /// What the second found again (the first's, when it found none).
    pub drift: Drift,
    /// What the mend wrote, when repairing.
    pub mended: Option<Mended>,
    /// How long the run waited before the confirmation.
    pub paused: Duration,
}

/// How much longer than the indexer's lag the pause before a confirmation lasts, at most: the
/// metric is a minute's maximum, read up to a minute late. A lag shorter than this adds itself
/// again, so a stream that has caught up adds nothing.
pub const LAG_MARGIN: Duration = Duration::from_secs(10);

/// The longest pause before a confirmation, whatever the lag: ten minutes of a stream's lag is
/// an alarm of its own (the iterator-age alarms), not drift to wait for.
pub const MAX_PAUSE: Duration = Duration::from_secs(600);

/// The pause before a confirmation: `least`, or twice the indexer's `lag` (at most `lag` and
/// [`LAG_MARGIN`]) if that is longer, and at most [`MAX_PAUSE`]. A stream that has caught up adds
/// nothing.
pub fn pause(least: Duration, lag: Option<Duration>) -> Duration {
    lag.map_or(least, |lag| least.max(lag + lag.min(LAG_MARGIN))).min(MAX_PAUSE)
}

/// The indexer's lag: the most its `IteratorAge` (`AWS/Lambda`, by `FunctionName`) reached over
/// the last five minutes. `None` when there is no such metric or it cannot be read: the pause is
/// then the configured one, and the log says so.
pub(crate) async fn lag(cloudwatch: &aws_sdk_cloudwatch::Client, function: &str) -> Option<Duration> {
    use aws_sdk_cloudwatch::types::{Dimension, Statistic};
    let now = std::time::SystemTime::now();
    let asked = cloudwatch
        .get_metric_statistics()
        .namespace("AWS/Lambda")
        .metric_name("IteratorAge")
        .dimensions(Dimension::builder().name("FunctionName").value(function).build())
        .start_time(aws_sdk_cloudwatch::primitives::DateTime::from(now - Duration::from_secs(300)))
        .end_time(aws_sdk_cloudwatch::primitives::DateTime::from(now))
        .period(60)
        .statistics(Statistic::Maximum)
        .send()
        .await;
    match asked {
        Ok(answer) => {
            let most = answer
                .datapoints()
                .iter()
                .filter_map(aws_sdk_cloudwatch::types::Datapoint::maximum)
                .fold(None, |most: Option<f64>, ms| Some(most.map_or(ms, |most| most.max(ms))))?;
            Some(Duration::from_secs_f64(most.max(0.0) / 1000.0))
        }
        Err(e) => {
            tracing::warn!(function, error = %io_policy::describe(&e), "the indexer's IteratorAge cannot be read");
            None
        }
    }
}

/// The run as one EMF document (dimension `Function`, the verifier's name, which names its stack:
/// two stacks verifying indexes of the same name never share a series; the index's name is a
/// property of the document): `IndexDrift` (the persistent drift: missing, stale and extra
/// summed; the alarm's metric), each kind, `IndexDriftSeen` (the first verification's), the
/// entries, and `IndexRepairs` (items touched and entries deleted) when repairing.
pub fn emf(run: &Run, namespace: &str, function: &str, timestamp_ms: u64) -> Value {
    let d = &run.drift;
    let metrics = [
        ("IndexDrift", d.count()),
        ("IndexMissing", d.counts.missing),
        ("IndexStale", d.counts.stale),
        ("IndexExtra", d.counts.extra),
        ("IndexDriftSeen", run.first.count()),
        ("IndexEntries", d.entries),
        ("IndexRepairs", run.mended.map_or(0, |m| m.touched + m.deleted)),
    ];
    let mut doc = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["Function"]],
                "Metrics": metrics.iter().map(|(name, _)| json!({"Name": name, "Unit": "Count"})).collect::<Vec<_>>(),
            }],
        },
        "Function": function,
        "Index": d.index,
    });
    for (name, value) in metrics {
        doc[name] = json!(value);
    }
    // A level no ApplicationLogLevel filters out (`stream_runtime::metrics::log_fields`).
    for (name, value) in stream_runtime::metrics::log_fields(timestamp_ms) {
        doc[name] = value;
    }
    doc
}

/// The function's answer: the persistent drift's counts, its first examples of each kind, the
/// first verification's count, and the mend's.
pub fn summary(run: &Run) -> Value {
    let mut doc = run.drift.report(5);
    doc["seen"] = json!(run.first.count());
    doc["paused_seconds"] = json!(run.paused.as_secs());
    doc["mended"] = json!(run.mended);
    doc
}

#[cfg(test)]
mod tests;
