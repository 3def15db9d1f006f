//! Removing the touch markers (`sidestream_touch`, `sidestream_retouch`, docs/formats.md "Touch
//! marker") from a base table once the backfills, repairs and replays that set them are done:
//! the team's items as they were, and the attributes gone from its API's answers.
//!
//! Each item that carries a marker is read by a paced scan, and its markers are removed by an
//! `UpdateItem REMOVE` conditioned on each still holding what the scan saw: a run that touches
//! the item meanwhile keeps its marker, and an item deleted meanwhile is not recreated. A removal
//! is one more `MODIFY` on the stream, but not a touch (no marker appears): the indexer finds no
//! entry changed, and the aggregator and the archiver pass it over. Another consumer's
//! `formats::touch::KEEP_CHANGES_FILTERS` let it through, as they let through an application's
//! whole-item put that drops a marker. So run it once no backfill, repair or replay runs.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use formats::touch::{RETOUCH_ATTRIBUTE, TOUCH_ATTRIBUTE};
use io_policy::{Policy, RequestFailed};
use serde::Serialize;

use crate::pace::Pacer;

/// How long a removal may take, retries included.
const UNTOUCH_TIME: Duration = Duration::from_secs(24 * 3600);

/// Items a scan page holds (its `Limit`).
const PAGE_ITEMS: i32 = 500;

/// What a removal did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Untouched {
    /// Items read.
    pub scanned: u64,
    /// Items whose markers were removed.
    pub removed: u64,
    /// Markers left because they changed since the scan read them (a run touched the item again),
    /// or because the item was deleted.
    pub changed: u64,
    /// Milliseconds the reads and writes waited for their pace.
    pub paced_ms: u64,
}

/// How fast a removal reads and writes, in units per second (`None`: no limit). Each item read
/// is counted as one read unit (more than a scan spends: one per 4 KB of its page), each removal
/// as one write unit (exact for items under 1 KB).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pace {
    /// Read units a second.
    pub read_units: Option<f64>,
    /// Write units a second.
    pub write_units: Option<f64>,
}

/// Removes the touch markers from every item of `table` (whose key attributes are `key`), at
/// `rate`, telling `progress` the items scanned and the markers removed so far after each page.
/// Every call is under `policy`, so `client` must have the SDK's retries off.
pub async fn untouch(
    client: &aws_sdk_dynamodb::Client,
    policy: Policy,
    table: &str,
    key: &[String],
    rate: Pace,
    progress: &mut (dyn FnMut(&Untouched) + Send),
) -> Result<Untouched, RequestFailed> {
    let budget = policy.within(UNTOUCH_TIME);
    let (reads, writes) = (Pacer::new(rate.read_units), Pacer::new(rate.write_units));
    let mut done = Untouched::default();
    let mut waited = Duration::ZERO;
    let mut names: HashMap<String, String> = HashMap::from([
        ("#t".to_owned(), TOUCH_ATTRIBUTE.to_owned()),
        ("#r".to_owned(), RETOUCH_ATTRIBUTE.to_owned()),
    ]);
    let mut projection = vec!["#t".to_owned(), "#r".to_owned()];
    for (i, attribute) in key.iter().enumerate() {
        names.insert(format!("#k{i}"), attribute.clone());
        projection.push(format!("#k{i}"));
    }
    let projection = projection.join(", ");
    let mut start = None;
    loop {
        let from = start.take();
        let page = budget
            .call(|| {
                let request = client
                    .scan()
                    .table_name(table)
                    .limit(PAGE_ITEMS)
                    .projection_expression(&projection)
                    .filter_expression("attribute_exists(#t) OR attribute_exists(#r)")
                    .set_expression_attribute_names(Some(names.clone()))
                    .set_exclusive_start_key(from.clone());
                async move { request.send().await.map_err(|e| io_policy::classify("Scan", &e)) }
            })
            .await
            .map_err(|failure| RequestFailed::new("Scan", table, failure))?;
        let read = u64::try_from(page.scanned_count().max(0)).unwrap_or(0);
        done.scanned += read;
        waited += pause(&reads, read).await;
        for item in page.items() {
            // What the scan saw of each marker: its value, or its absence.
            let mut seen = Vec::new();
            for (alias, name) in [("#t", TOUCH_ATTRIBUTE), ("#r", RETOUCH_ATTRIBUTE)] {
                match item.get(name) {
                    Some(value) => seen.push((format!("{alias} = :{}", &alias[1..]), Some(value.clone()))),
                    None => seen.push((format!("attribute_not_exists({alias})"), None)),
                }
            }
            if seen.iter().all(|(_, value)| value.is_none()) {
                continue;
            }
            let condition = seen.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>().join(" AND ");
            let values: HashMap<String, AttributeValue> = seen
                .iter()
                .zip(["t", "r"])
                .filter_map(|((_, value), alias)| Some((format!(":{alias}"), value.clone()?)))
                .collect();
            let item_key: HashMap<String, AttributeValue> =
                key.iter().filter_map(|k| Some((k.clone(), item.get(k)?.clone()))).collect();
            waited += pause(&writes, 1).await;
            let removed = budget
                .call(|| {
                    let request = client
                        .update_item()
                        .table_name(table)
                        .set_key(Some(item_key.clone()))
                        .update_expression("REMOVE #t, #r")
                        .condition_expression(&condition)
                        .expression_attribute_names("#t", TOUCH_ATTRIBUTE)
                        .expression_attribute_names("#r", RETOUCH_ATTRIBUTE)
                        .set_expression_attribute_values(Some(values.clone()));
                    async move { Ok(io_policy::conditional("UpdateItem", request.send().await)?.is_some()) }
                })
                .await
                .map_err(|failure| RequestFailed::new("UpdateItem", table, failure))?;
            if removed {
                done.removed += 1;
            } else {
                done.changed += 1;
            }
        }
        done.paced_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
        progress(&done);
        match page.last_evaluated_key {
            Some(next) if !next.is_empty() => start = Some(next),
            _ => return Ok(done),
        }
    }
}

/// Waits until `units` may be spent at `pacer`'s pace; how long it waited.
async fn pause(pacer: &Pacer, units: u64) -> Duration {
    #[allow(clippy::cast_precision_loss)] // a page's items: far below 2^52
    let wait = pacer.reserve(units as f64, Instant::now());
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    wait
}
