//! `index verify` as a scheduled Lambda function (`ops/index-verifier`): its configuration,
//! one run, and the drift as CloudWatch EMF metrics for the template's alarm.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `MULTIKEY_INDEXES` | (required) | the indexer's definitions |
//! | `VERIFY_TABLE` | (required) | the base table |
//! | `VERIFY_INDEX` | the only index | which index to verify |
//! | `VERIFY_REPAIR` | `false` | `true` mends the persistent drift after reporting it ([`crate::verify::mend`]) |
//! | `VERIFY_CONFIRM_SECONDS` | `60` (0-600) | the pause before the second verification |
//! | `METRICS_NAMESPACE` | `Sidestream` | the EMF namespace |
//!
//! A run verifies once; if it finds drift, it waits `VERIFY_CONFIRM_SECONDS` and looks again at
//! each difference, key by key ([`crate::verify::confirm`]), and only what is still there counts:
//! an item that changed while the scans ran, or a batch still in flight, is mended by the stream
//! within that pause and raises no alarm. `IndexDrift`, the alarm's metric, is the persistent
//! drift (of the first [`crate::verify::KEPT`] of each kind).
//!
//! Report-only by default: drift is an alarm for an operator, who can read the examples in the
//! log and run `sidestream index verify --repair`. With `VERIFY_REPAIR=true` the run mends the
//! persistent drift through the stream (touches, and deletes conditioned on versions), which is
//! safe while the indexer runs. The run reads both tables a page at a time (its memory does not
//! grow with them), so it suits tables whose scans fit one invocation (15 minutes).

use std::time::Duration;

use formats::{Index, Indexes};
use io_policy::Policy;
use serde_json::{Value, json};
use stream_runtime::{ConfigError, Vars};

use crate::verify::{Drift, Mended, Mender, VerifyError};

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
    /// The pause before the second verification.
    pub confirm_after: Duration,
    /// The EMF namespace.
    pub namespace: String,
    /// The function's name (`AWS_LAMBDA_FUNCTION_NAME`, which Lambda sets): the EMF `Function`
    /// dimension.
    pub function: String,
}

impl Config {
    /// Reads `MULTIKEY_INDEXES`, `VERIFY_TABLE`, `VERIFY_INDEX`, `VERIFY_REPAIR`,
    /// `VERIFY_CONFIRM_SECONDS`, `METRICS_NAMESPACE` and `AWS_LAMBDA_FUNCTION_NAME`.
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
            namespace: vars.optional("METRICS_NAMESPACE").unwrap_or_else(|| "Sidestream".to_owned()),
            function: vars
                .optional("AWS_LAMBDA_FUNCTION_NAME")
                .unwrap_or_else(|| "index-verifier".to_owned()),
        })
    }
}

/// One scheduled run: the drift of the first verification, the persistent drift, and what a
/// mend wrote.
#[derive(Debug, Clone)]
pub struct Run {
    /// What the first verification found.
    pub first: Drift,
    /// What the second found again (the first's, when it found none).
    pub drift: Drift,
    /// What the mend wrote, when repairing.
    pub mended: Option<Mended>,
}

/// Verifies, confirms any drift with a second verification, and with `repair` mends what
/// persists (touches carry `run_id`). Every call is under the I/O policy, so `client` must have
/// the SDK's retries off (`io_policy::without_sdk_retries`).
pub async fn run(
    client: &aws_sdk_dynamodb::Client,
    config: &Config,
    run_id: &str,
) -> Result<Run, VerifyError> {
    let policy = Policy::default();
    let (indexes, index, table) = (&config.indexes, &config.index, config.table.as_str());
    let first = crate::verify::verify(client, policy, indexes, index, table, &mut |_| {}).await?;
    if first.is_exact() {
        return Ok(Run { drift: first.clone(), first, mended: None });
    }
    tokio::time::sleep(config.confirm_after).await;
    let drift = crate::verify::confirm(client, policy, indexes, index, table, &first).await?;
    let mut mended = None;
    if config.repair && !drift.is_exact() {
        let by_stream = Mender::new(client.clone(), config.indexes.clone(), &config.table, run_id);
        mended = Some(by_stream.drift(&config.index, &drift).await?);
    }
    Ok(Run { first, drift, mended })
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
    let d = &run.drift;
    let first = |items: &[Value]| items.iter().take(5).cloned().collect::<Vec<_>>();
    json!({
        "index": d.index, "table": d.table, "entries": d.entries, "expected": d.expected,
        "missing": d.counts.missing, "stale": d.counts.stale, "extra": d.counts.extra, "exact": d.is_exact(),
        "seen": run.first.count(),
        "examples": {"missing": first(&d.missing), "stale": first(&d.stale), "extra": first(&d.extra)},
        "mended": run.mended,
    })
}

#[cfg(test)]
mod tests;
