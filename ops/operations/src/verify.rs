//! An index table checked against what the base table calls for, and repaired.
//!
//! [`verify`] reads both tables with consistent scans and computes the expected entries with
//! `operations::oracle` (the format's rules over the base items, not the indexer's plan).
//! Every difference is one of three:
//!
//! - **missing**: the base calls for an entry whose key the index lacks;
//! - **stale**: the index has the key, with other content (a value, a tiebreaker, an included
//!   attribute);
//! - **extra**: the index has a key no base item calls for.
//!
//! The scans are consistent but not a snapshot: an item changed between the base scan and the
//! index scan shows as drift that the indexer is about to mend by itself. [`persistent`] keeps
//! only the differences seen again by a second verification, which is what the scheduled
//! verifier ([`scheduled`]) alarms on and repairs.
//!
//! A repair never writes entries from what the scans read: [`mend`] touches the base items of
//! missing and stale entries, so the indexer re-puts them from the stream in the item's order,
//! and deletes an extra entry only when a consistent read shows its item no longer calls for it,
//! conditioned on the version the verify saw. So a repair racing the live stream can neither put
//! back a stale entry nor delete a fresh one.

pub mod mend;
pub mod scheduled;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::oracle::content;
use formats::{Index, Indexes};
use io_policy::Policy;
use serde::Serialize;
use serde_json::Value;

pub use crate::backfill::run_id;
pub use mend::{Mended, Mender};

/// How long one table's scan may take, retries included.
pub(crate) const SCAN_TIME: Duration = Duration::from_secs(3600);

/// Why an index cannot be verified or repaired.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The configuration names no such index, or several and none was chosen.
    #[error("{0}")]
    Index(String),
    /// A scan, or a mend's request, failed after the I/O policy's retries.
    #[error(transparent)]
    Request(#[from] io_policy::RequestFailed),
    /// The expected entries cannot be computed from the base items.
    #[error(transparent)]
    Oracle(#[from] crate::oracle::OracleError),
    /// An item is not what the index's format says.
    #[error("{0}")]
    Format(String),
}

/// How an index table differs from what the base table calls for.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    /// The index's name.
    pub index: String,
    /// Its table.
    pub table: String,
    /// Entries in the index table.
    pub entries: usize,
    /// Entries the base table calls for.
    pub expected: usize,
    /// Entries the base calls for whose key the index lacks (DynamoDB JSON).
    pub missing: Vec<Value>,
    /// Entries whose key the index has with other content: what the base calls for.
    pub stale: Vec<Value>,
    /// Entries whose key no base item calls for (DynamoDB JSON, as the index has them, with
    /// their version).
    pub extra: Vec<Value>,
}

impl Drift {
    /// Whether the index is exact.
    pub fn is_exact(&self) -> bool {
        self.missing.is_empty() && self.stale.is_empty() && self.extra.is_empty()
    }

    /// Missing, stale and extra entries together.
    pub fn count(&self) -> usize {
        self.missing.len() + self.stale.len() + self.extra.len()
    }
}

/// The drift seen by both of two verifications of one index: the same key missing in both, stale
/// in both with the same content called for, or extra in both with the same version. Drift the
/// stream was about to mend when the first ran (an item changed between the two scans, a batch
/// in flight) is gone by the second; what is left is what the stream will not mend by itself.
/// The entries are the second verification's.
pub fn persistent(first: &Drift, second: &Drift) -> Drift {
    let keep = |a: &[Value], b: &[Value]| -> Vec<Value> {
        b.iter().filter(|entry| a.contains(entry)).cloned().collect()
    };
    Drift {
        index: second.index.clone(),
        table: second.table.clone(),
        entries: second.entries,
        expected: second.expected,
        missing: keep(&first.missing, &second.missing),
        stale: keep(&first.stale, &second.stale),
        extra: keep(&first.extra, &second.extra),
    }
}

/// The index of `indexes` named `name` (or the only one).
pub fn choose<'a>(indexes: &'a Indexes, name: Option<&str>) -> Result<&'a Index, VerifyError> {
    let names = || indexes.indexes.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ");
    match name {
        Some(name) => indexes.indexes.iter().find(|i| i.name == name).ok_or_else(|| {
            VerifyError::Index(format!("MULTIKEY_INDEXES has no index {name:?} (it has {})", names()))
        }),
        None if indexes.indexes.len() == 1 => Ok(&indexes.indexes[0]),
        None => Err(VerifyError::Index(format!(
            "MULTIKEY_INDEXES defines several indexes ({}); choose one with --index",
            names()
        ))),
    }
}

/// Compares `index`'s table with what `base_table` calls for under `indexes`' base key, calling
/// `progress` with the items scanned so far (both tables) after each page: the base table is
/// scanned first, then the index table, and the two are [`compare`]d. Each page is read under
/// `policy` ([`scan`]), so `client` must have the SDK's retries off.
pub async fn verify(
    client: &aws_sdk_dynamodb::Client,
    policy: Policy,
    indexes: &Indexes,
    index: &Index,
    base_table: &str,
    progress: &mut dyn FnMut(usize),
) -> Result<Drift, VerifyError> {
    let base = scan(client, policy, base_table, &mut |n| progress(n)).await?;
    let scanned = base.len();
    let actual = scan(client, policy, &index.table, &mut |n| progress(scanned + n)).await?;
    compare(indexes, index, &base, actual)
}

/// How `actual` (the index table's items) differs from what `base` (the base table's items)
/// calls for, by the independent oracle; both DynamoDB JSON. Entries compare by content: the
/// version attribute is left out. Version heads (`crate::oracle::is_head`) are not entries.
pub fn compare(
    indexes: &Indexes,
    index: &Index,
    base: &[Value],
    actual: Vec<Value>,
) -> Result<Drift, VerifyError> {
    let one = Indexes { base_key: indexes.base_key.clone(), indexes: vec![index.clone()] };
    let expected = crate::oracle::expected_index(&one, base)?;
    let key = |item: &Value| -> Result<String, VerifyError> {
        let part = |name: &str| {
            item.get(name).map(Value::to_string).ok_or_else(|| {
                VerifyError::Format(format!("an index item without its key attribute {name}: {item}"))
            })
        };
        Ok(format!("{}\u{0}{}", part(&index.partition_key)?, part(&index.sort_key)?))
    };
    let mut want: BTreeMap<String, Value> = BTreeMap::new();
    for line in &expected {
        let item: Value = serde_json::from_str(line).map_err(|e| VerifyError::Format(e.to_string()))?;
        want.insert(key(&item)?, item);
    }
    let mut have: BTreeMap<String, Value> = BTreeMap::new();
    for item in actual {
        if !crate::oracle::is_head(&one, &item) {
            have.insert(key(&item)?, item);
        }
    }
    let mut drift = Drift {
        index: index.name.clone(),
        table: index.table.to_string(),
        entries: have.len(),
        expected: want.len(),
        missing: Vec::new(),
        stale: Vec::new(),
        extra: Vec::new(),
    };
    for (k, item) in &want {
        match have.get(k) {
            None => drift.missing.push(item.clone()),
            Some(found) if content(found) != *item => drift.stale.push(item.clone()),
            Some(_) => {}
        }
    }
    drift.extra = have.into_iter().filter(|(k, _)| !want.contains_key(k)).map(|(_, item)| item).collect();
    Ok(drift)
}

/// Roughly how many items `table` holds (`DescribeTable`'s `ItemCount`, which DynamoDB updates
/// about every six hours): the total for a progress bar. 0 when unknown.
pub async fn estimated_items(client: &aws_sdk_dynamodb::Client, table: &str) -> u64 {
    client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .ok()
        .and_then(|d| d.table().and_then(aws_sdk_dynamodb::types::TableDescription::item_count))
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

/// Every item of `table`, read with consistent scans, as DynamoDB JSON; `progress` gets the
/// items read so far after each page. Each page is one call under `policy` (retries of transient
/// failures, its attempt timeout; [`SCAN_TIME`] for the whole scan), so `client` must have the
/// SDK's retries off (`io_policy::without_sdk_retries`). Against DynamoDB, `Policy::default()`;
/// an emulator that answers one request at a time may need a longer attempt timeout, since a page
/// waits behind every other client's requests.
pub async fn scan(
    client: &aws_sdk_dynamodb::Client,
    policy: Policy,
    table: &str,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Value>, VerifyError> {
    let budget = policy.within(SCAN_TIME);
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let from = start.take();
        let page = budget
            .call(|| {
                let request = client
                    .scan()
                    .table_name(table)
                    .consistent_read(true)
                    .set_exclusive_start_key(from.clone());
                async move { request.send().await.map_err(|e| io_policy::classify("Scan", &e)) }
            })
            .await
            .map_err(|failure| io_policy::RequestFailed::new("Scan", table, failure))?;
        for item in page.items() {
            items.push(
                serde_json::to_value(serde_dynamo::Item::from(item.clone()))
                    .map_err(|e| VerifyError::Format(format!("an item of {table}: {e}")))?,
            );
        }
        progress(items.len());
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return Ok(items),
        }
    }
}
