//! The oracles of a chaos run, each independent of the functions' planning code: the index
//! against the article's rules over the base items (`operations::oracle` through
//! `crate::check_index`), the archive against the items that expired, each counter
//! against the increments its writers saw acknowledged, and the replayer's and runtime's counts
//! against loss.

use std::collections::{BTreeMap, BTreeSet};

use aws_config::SdkConfig;
use serde_json::Value;
use sharded_counter::Counters;

use crate::Stack;

use crate::chaos::{ChaosError, Verdict};

/// The index: exact, with the first differences as the detail.
pub(crate) async fn index(
    sdk: &SdkConfig,
    stack: &Stack,
    oracle: &'static str,
) -> Result<Verdict, ChaosError> {
    let check = crate::check_index(&aws_sdk_dynamodb::Client::new(sdk), stack).await?;
    let ok = check.is_exact();
    let detail = if ok {
        format!("{} entries, each as the base items call for", check.entries)
    } else {
        format!(
            "{} entries; {} missing (first: {}), {} extra (first: {})",
            check.entries,
            check.missing.len(),
            check.missing.first().map_or("-", String::as_str),
            check.extra.len(),
            check.extra.first().map_or("-", String::as_str),
        )
    };
    Ok(Verdict { oracle, ok, detail })
}

/// The archive: exactly the expired items, each once, each as it was put.
pub(crate) async fn archive(
    sdk: &SdkConfig,
    stack: &Stack,
    expired: &BTreeMap<String, Value>,
) -> Result<Verdict, ChaosError> {
    let (bucket, prefix) = stack.archive_location()?;
    let archived = operations::archive::items(&crate::s3_client(sdk), &bucket, &prefix).await?;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut changed = Vec::new();
    // A team's table (not the stack's own) holds the workload's items renamed.
    let team = stack.table("IssuesTable").is_err();
    for (_, item) in &archived {
        let mut item = serde_json::to_value(item).map_err(|e| ChaosError::Check(e.to_string()))?;
        // The operations phase may have touched an item before TTL deleted it: the marker is
        // Sidestream's own attribute, not the workload's (either of the two).
        if let Some(map) = item.as_object_mut() {
            for marker in formats::touch::MARKERS {
                map.remove(marker);
            }
        }
        let id = if team { super::team::id_of(&item) } else { item["id"]["S"].as_str().unwrap_or_default() };
        let id = id.to_owned();
        if let Some(put) = expired.get(&id) {
            let put = if team { super::team::item(put) } else { put.clone() };
            let put: serde_dynamo::Item =
                serde_dynamo::to_item(put).map_err(|e| ChaosError::Check(e.to_string()))?;
            let put = serde_json::to_value(put).map_err(|e| ChaosError::Check(e.to_string()))?;
            if put != item {
                changed.push(id.clone());
            }
        }
        *seen.entry(id).or_default() += 1;
    }
    let expected: BTreeSet<&String> = expired.keys().collect();
    let missing: Vec<&&String> = expected.iter().filter(|id| !seen.contains_key(**id)).collect();
    let extra: Vec<&String> = seen.keys().filter(|id| !expired.contains_key(*id)).collect();
    let twice: Vec<&String> = seen.iter().filter(|(_, n)| **n > 1).map(|(id, _)| id).collect();
    let ok = missing.is_empty() && extra.is_empty() && twice.is_empty() && changed.is_empty();
    let detail = if ok {
        format!("{} items, exactly those TTL deleted, each once and whole", expired.len())
    } else {
        format!(
            "{} expected; missing {missing:?}, not expired {extra:?}, read twice {twice:?}, different from what was put {changed:?}",
            expired.len()
        )
    };
    Ok(Verdict { oracle: "archive", ok, detail })
}

/// Each counter's total and shards against the sum of its acknowledged increments.
pub(crate) async fn counters(
    counters: &Counters,
    sums: &BTreeMap<String, i128>,
    oracle: &'static str,
) -> Result<Verdict, ChaosError> {
    let mut wrong = Vec::new();
    for (name, sum) in sums {
        let total = counters.total(name).await?;
        let shards = counters.exact(name).await?;
        if total != Some(*sum) || shards != *sum {
            wrong.push(format!("{name}: acknowledged {sum}, shards {shards}, total {total:?}"));
        }
    }
    let ok = wrong.is_empty();
    Ok(Verdict {
        oracle,
        ok,
        detail: if ok {
            format!("{} totals, each the exact sum of its acknowledged increments", sums.len())
        } else {
            wrong.join("; ")
        },
    })
}

/// A global table's two replicas hold the same items, table by table.
pub(crate) async fn replicas(
    (first_sdk, first): (&SdkConfig, &Stack),
    (second_sdk, second): (&SdkConfig, &Stack),
) -> Result<Verdict, ChaosError> {
    let mut wrong = Vec::new();
    let mut items = 0;
    for logical in ["IssuesTable", "CounterTable"] {
        let read = |sdk: &SdkConfig, stack: &Stack| {
            let client = aws_sdk_dynamodb::Client::new(sdk);
            let table = stack.table(logical).map(|t| t.name.clone());
            async move {
                let items = crate::scan(&client, &table?).await?;
                let lines: BTreeSet<String> = items.iter().map(Value::to_string).collect();
                Ok::<_, ChaosError>(lines)
            }
        };
        let (a, b) = (read(first_sdk, first).await?, read(second_sdk, second).await?);
        items += a.len();
        let differ = a.symmetric_difference(&b).count();
        if differ > 0 {
            wrong.push(format!(
                "{logical}: {differ} items differ (first: {})",
                a.symmetric_difference(&b).next().map_or("-", String::as_str)
            ));
        }
    }
    let ok = wrong.is_empty();
    Ok(Verdict {
        oracle: "replicas",
        ok,
        detail: if ok { format!("{items} items, the same in both Regions") } else { wrong.join("; ") },
    })
}

/// The operations phase: each operation ran, and after everything settled no drift persists.
pub(crate) fn operations(ops: &crate::chaos::Operations) -> Verdict {
    let mut wrong = Vec::new();
    if ops.verifications == 0 {
        wrong.push("no verification ran".to_owned());
    }
    if ops.backfill_touches == 0 {
        wrong.push("the backfill touched nothing".to_owned());
    }
    if ops.indexer_records_replayed == 0 || ops.records_rerun == 0 {
        wrong.push(format!(
            "replays: {} of the indexer's records, {} rerun",
            ops.indexer_records_replayed, ops.records_rerun
        ));
    }
    if ops.drift_at_end > 0 {
        wrong.push(format!("{} entries of persistent drift at the end", ops.drift_at_end));
    }
    let ok = wrong.is_empty();
    Verdict {
        oracle: "operations",
        ok,
        detail: if ok {
            format!(
                "{} verifications {} ({} persistent drift {}: {} items touched, {} entries deleted, {} deletes refused), \
                 a backfill ({} items touched), {} old indexer records replayed through the stream, {} rerun; no drift at the end",
                ops.verifications,
                if ops.repair { "with repair" } else { "without repair" },
                ops.drift_during_run,
                if ops.repair { "mended" } else { "seen, none mended" },
                ops.repair_touches,
                ops.repair_deletes,
                ops.repair_deletes_refused,
                ops.backfill_touches,
                ops.indexer_records_replayed,
                ops.records_rerun
            )
        } else {
            wrong.join("; ")
        },
    }
}

/// The permissions: every call the stack's functions and jobs made under their template roles
/// was allowed by them (the emulator's IAM check, `crate::iam`), and some were checked.
pub(crate) async fn permissions(sdk: &SdkConfig, stack: &Stack) -> Result<Verdict, ChaosError> {
    let report = crate::iam::report(sdk, &stack.roles).await?;
    let ok = report.checked > 0 && report.denials.is_empty();
    let detail = match report.denials.first() {
        None => {
            format!("{} requests under {} roles checked, none refused", report.checked, report.calls.len())
        }
        Some(first) => format!("{} refused (first: {first})", report.denials.len()),
    };
    Ok(Verdict { oracle: "permissions", ok, detail })
}
