//! `index verify` as a scheduled Lambda function (`functions/index-verifier`): its configuration,
//! one run, and the drift as CloudWatch EMF metrics for the template's alarm.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `MULTIKEY_INDEXES` | (required) | the indexer's definitions |
//! | `VERIFY_TABLE` | (required) | the base table |
//! | `VERIFY_INDEX` | the only index | which index to verify |
//! | `VERIFY_REPAIR` | `false` | `true` writes the difference after reporting it |
//! | `METRICS_NAMESPACE` | `Sidestream` | the EMF namespace |
//!
//! Report-only by default: drift is an alarm for an operator, who can read the examples in the
//! log and run `sidestream index verify --repair`. The run reads both tables whole into memory, so
//! it suits tables whose scans fit one invocation (15 minutes); run the CLI for larger ones.

use multikey_indexer::{Index, Indexes};
use serde_json::{Value, json};
use stream_kit::{ConfigError, Vars};

use crate::{Drift, Repaired, VerifyError};

/// The verifier's configuration, read once at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// The indexer's definitions.
    pub indexes: Indexes,
    /// The index verified.
    pub index: Index,
    /// The base table.
    pub table: String,
    /// Whether to repair drift.
    pub repair: bool,
    /// The EMF namespace.
    pub namespace: String,
}

impl Config {
    /// Reads `MULTIKEY_INDEXES`, `VERIFY_TABLE`, `VERIFY_INDEX`, `VERIFY_REPAIR` and
    /// `METRICS_NAMESPACE`.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        let indexes = Indexes::from_vars(vars)?;
        let table = vars.required("VERIFY_TABLE", "the base table whose index is verified")?;
        let index = crate::choose(&indexes, vars.optional("VERIFY_INDEX").as_deref())
            .map_err(|e| ConfigError::Invalid {
                var: "VERIFY_INDEX",
                reason: e.to_string(),
            })?
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
        Ok(Config {
            indexes,
            index,
            table,
            repair,
            namespace: vars
                .optional("METRICS_NAMESPACE")
                .unwrap_or_else(|| "Sidestream".to_owned()),
        })
    }
}

/// One scheduled run: the drift found, what a repair wrote, and the drift after it.
#[derive(Debug, Clone)]
pub struct Run {
    /// What the verify found.
    pub drift: Drift,
    /// What the repair wrote, when repairing.
    pub repaired: Option<Repaired>,
    /// The drift after the repair.
    pub after: Option<Drift>,
}

/// Verifies (and with `repair`, repairs) once. `reader` may keep the SDK's retries; `writer`
/// must not (`io_policy::without_sdk_retries`).
pub async fn run(
    reader: &aws_sdk_dynamodb::Client,
    writer: &aws_sdk_dynamodb::Client,
    config: &Config,
) -> Result<Run, VerifyError> {
    let drift = crate::verify(reader, &config.indexes, &config.index, &config.table, &mut |_| {}).await?;
    let (mut repaired, mut after) = (None, None);
    if config.repair && !drift.is_exact() {
        repaired = Some(crate::repair(writer, &config.index, &drift).await?);
        after =
            Some(crate::verify(reader, &config.indexes, &config.index, &config.table, &mut |_| {}).await?);
    }
    Ok(Run {
        drift,
        repaired,
        after,
    })
}

/// The run as one EMF document (dimension `Index`): `IndexDrift` (missing + stale + extra, the
/// alarm's metric), each kind, the entries, and `IndexRepairs` when repairing.
pub fn emf(run: &Run, namespace: &str, timestamp_ms: u64) -> Value {
    let d = &run.drift;
    let metrics = [
        ("IndexDrift", d.missing.len() + d.stale.len() + d.extra.len()),
        ("IndexMissing", d.missing.len()),
        ("IndexStale", d.stale.len()),
        ("IndexExtra", d.extra.len()),
        ("IndexEntries", d.entries),
        ("IndexRepairs", run.repaired.map_or(0, |r| r.puts + r.deletes)),
    ];
    let mut doc = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["Index"]],
                "Metrics": metrics.iter().map(|(name, _)| json!({"Name": name, "Unit": "Count"})).collect::<Vec<_>>(),
            }],
        },
        "Index": d.index,
    });
    for (name, value) in metrics {
        doc[name] = json!(value);
    }
    doc
}

/// The function's answer: the counts, the first examples of each kind, and the repair's.
pub fn summary(run: &Run) -> Value {
    let d = &run.drift;
    let first = |items: &[Value]| items.iter().take(5).cloned().collect::<Vec<_>>();
    json!({
        "index": d.index, "table": d.table, "entries": d.entries, "expected": d.expected,
        "missing": d.missing.len(), "stale": d.stale.len(), "extra": d.extra.len(), "exact": d.is_exact(),
        "examples": {"missing": first(&d.missing), "stale": first(&d.stale), "extra": first(&d.extra)},
        "repaired": run.repaired,
        "exact_after_repair": run.after.as_ref().map(Drift::is_exact),
    })
}

#[cfg(test)]
mod tests;
