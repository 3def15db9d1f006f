//! An index table checked against what the base table calls for, and repaired.
//!
//! [`verify`] reads both tables one scan page at a time, in segments (`verify::pass`): the
//! entries each page of base items calls for (computed by `operations::oracle`, the format's
//! rules over the base items, not the indexer's plan) are looked up in the index table, and the
//! base items of each page of index entries are looked up in the base table; the lookups are
//! batched and consistent. No table is held: memory is a page and the drift kept ([`KEPT`] entries
//! of each kind; the counts count them all). Every difference is one of three:
//!
//! - **missing**: the base calls for an entry whose key the index lacks;
//! - **stale**: the index has the key, with other content (a value, a tiebreaker, an included
//!   attribute);
//! - **extra**: the index has a key no base item calls for.
//!
//! The scans are consistent but not a snapshot: an item changed while the passes ran shows as
//! drift that the indexer is about to mend by itself. [`confirm`] looks at each difference kept
//! again, key by key, after a pause: what persists is what the scheduled verifier
//! ([`scheduled`]) alarms on and repairs.
//!
//! A repair never writes entries from what the scans read: [`mend`] touches the base items of
//! missing and stale entries, so the indexer re-puts them from the stream in the item's order,
//! and deletes an extra entry only when a consistent read shows its item no longer calls for it,
//! conditioned on the version the verify saw. So a repair racing the live stream can neither put
//! back a stale entry nor delete a fresh one.

pub mod job;
pub mod mend;
mod pass;
pub mod scheduled;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::oracle::content;
use formats::{Index, Indexes};
use io_policy::Policy;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::backfill::run_id;
pub use mend::{Mended, Mender};
pub use pass::{PAGE_ITEMS, Pass};

/// How long one table's scan may take, retries included.
pub(crate) const SCAN_TIME: Duration = Duration::from_secs(3600);

/// Entries of each kind a drift keeps: the examples reported, what one confirmation looks at
/// again and one repair mends. The counts count every difference.
pub const KEPT: usize = 1_000;

/// Segments each table is scanned in, at once: a parallel scan, each segment a page at a time.
pub const SEGMENTS: u32 = 4;

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

impl From<crate::job_store::StoreError> for VerifyError {
    fn from(error: crate::job_store::StoreError) -> VerifyError {
        match error {
            crate::job_store::StoreError::Request(failed) => VerifyError::Request(failed),
            format @ crate::job_store::StoreError::Format { .. } => VerifyError::Format(format.to_string()),
        }
    }
}

/// How an index table differs from what the base table calls for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Drift {
    /// The index's name.
    pub index: String,
    /// Its table.
    pub table: String,
    /// Entries in the index table.
    pub entries: usize,
    /// Entries the base table calls for.
    pub expected: usize,
    /// How many differences of each kind there are.
    pub counts: Counts,
    /// Entries the base calls for whose key the index lacks (DynamoDB JSON): the first [`KEPT`].
    pub missing: Vec<Value>,
    /// Entries whose key the index has with other content: what the base calls for, the first
    /// [`KEPT`].
    pub stale: Vec<Value>,
    /// Entries whose key no base item calls for (DynamoDB JSON, as the index has them, with
    /// their version): the first [`KEPT`].
    pub extra: Vec<Value>,
}

/// How many differences of each kind a drift counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Missing entries.
    pub missing: usize,
    /// Stale entries.
    pub stale: usize,
    /// Extra entries.
    pub extra: usize,
}

/// A kind of difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Missing,
    Stale,
    Extra,
}

impl Drift {
    /// No difference yet, for `index`.
    pub fn none(index: &Index) -> Drift {
        Drift {
            index: index.name.clone(),
            table: index.table.to_string(),
            entries: 0,
            expected: 0,
            counts: Counts::default(),
            missing: Vec::new(),
            stale: Vec::new(),
            extra: Vec::new(),
        }
    }

    /// Whether the index is exact.
    pub fn is_exact(&self) -> bool {
        self.count() == 0
    }

    /// Missing, stale and extra entries together.
    pub fn count(&self) -> usize {
        self.counts.missing + self.counts.stale + self.counts.extra
    }

    /// The drift as JSON for a report: the index, the counts, whether it is exact, and the first
    /// `examples` entries of each kind.
    pub fn report(&self, examples: usize) -> Value {
        let first = |items: &[Value]| items.iter().take(examples).cloned().collect::<Vec<_>>();
        serde_json::json!({
            "index": self.index, "table": self.table, "entries": self.entries, "expected": self.expected,
            "missing": self.counts.missing, "stale": self.counts.stale, "extra": self.counts.extra,
            "exact": self.is_exact(),
            "examples": {"missing": first(&self.missing), "stale": first(&self.stale), "extra": first(&self.extra)},
        })
    }

    /// Whether there are more differences than the drift keeps.
    pub fn truncated(&self) -> bool {
        self.count() > self.missing.len() + self.stale.len() + self.extra.len()
    }

    /// Counts a difference, and keeps its entry while fewer than [`KEPT`] of its kind are kept.
    pub(crate) fn note(&mut self, kind: Kind, entry: Value) {
        let (count, kept) = match kind {
            Kind::Missing => (&mut self.counts.missing, &mut self.missing),
            Kind::Stale => (&mut self.counts.stale, &mut self.stale),
            Kind::Extra => (&mut self.counts.extra, &mut self.extra),
        };
        *count += 1;
        if kept.len() < KEPT {
            kept.push(entry);
        }
    }

    /// Adds what another segment found: its counts, and its entries while there is room.
    fn merge(&mut self, other: Drift) {
        self.entries += other.entries;
        self.expected += other.expected;
        let kinds = [
            (Kind::Missing, other.counts.missing, other.missing),
            (Kind::Stale, other.counts.stale, other.stale),
            (Kind::Extra, other.counts.extra, other.extra),
        ];
        for (kind, count, kept) in kinds {
            let unkept = count - kept.len();
            for entry in kept {
                self.note(kind, entry);
            }
            match kind {
                Kind::Missing => self.counts.missing += unkept,
                Kind::Stale => self.counts.stale += unkept,
                Kind::Extra => self.counts.extra += unkept,
            }
        }
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

/// Compares `index`'s table with what `base_table` calls for under `indexes`' base key
/// (`verify::pass`), each table in [`SEGMENTS`] segments at once, calling `progress` with the
/// items scanned so far (both tables). Every call is under `policy`, so `client` must have the
/// SDK's retries off.
pub async fn verify(
    client: &aws_sdk_dynamodb::Client,
    policy: Policy,
    indexes: &Indexes,
    index: &Index,
    base_table: &str,
    progress: &mut (dyn FnMut(usize) + Send),
) -> Result<Drift, VerifyError> {
    verify_paced(client, policy, indexes, index, base_table, None, progress).await
}

/// [`verify`], reading at most `read_units` a second over both tables (`None`: no limit), each
/// item read counted as one unit (more than a scan spends: one unit per 4 KB of its page), so
/// that a verification of a production table leaves its capacity to the app.
pub async fn verify_paced(
    client: &aws_sdk_dynamodb::Client,
    policy: Policy,
    indexes: &Indexes,
    index: &Index,
    base_table: &str,
    read_units: Option<f64>,
    progress: &mut (dyn FnMut(usize) + Send),
) -> Result<Drift, VerifyError> {
    let budget = policy.within(SCAN_TIME);
    let scanned = AtomicUsize::new(0);
    let progress = Mutex::new(progress);
    let count = |n: usize| {
        let total = scanned.fetch_add(n, Ordering::Relaxed) + n;
        if let Ok(mut progress) = progress.lock() {
            progress(total);
        }
    };
    let passes =
        pass::Passes::new(client, &budget, indexes, index, base_table, &count).paced(PAGE_ITEMS, read_units);
    let segments = (0..SEGMENTS).map(|segment| {
        let passes = &passes;
        async move {
            let mut drift = Drift::none(index);
            passes.segment((segment, SEGMENTS), &mut drift).await?;
            Ok::<Drift, VerifyError>(drift)
        }
    });
    let mut drift = Drift::none(index);
    for found in futures_util::future::join_all(segments).await {
        drift.merge(found?);
    }
    Ok(drift)
}

/// The differences of `first` (a verification of `index`) that are still there, looked at again
/// key by key with consistent reads (`verify::pass`): a missing or stale entry whose base item
/// still calls for it and the index still lacks or holds otherwise; an extra entry that no base
/// item calls for. What the stream mended meanwhile, or an item changed since, is gone. Only the
/// entries `first` kept are looked at: of a drift of more than [`KEPT`] of a kind, the first
/// [`KEPT`] are confirmed.
pub async fn confirm(
    client: &aws_sdk_dynamodb::Client,
    policy: Policy,
    indexes: &Indexes,
    index: &Index,
    base_table: &str,
    first: &Drift,
) -> Result<Drift, VerifyError> {
    let budget = policy.within(SCAN_TIME);
    let passes = pass::Passes::new(client, &budget, indexes, index, base_table, &|_| {});
    let mut drift = Drift { entries: first.entries, expected: first.expected, ..Drift::none(index) };
    passes.again(first, &mut drift).await?;
    Ok(drift)
}

/// How `actual` (the index table's items) differs from what `base` (the base table's items)
/// calls for, by the independent oracle; both DynamoDB JSON. Entries compare by content: the
/// version attribute is left out. Tombstones and version heads are not entries
/// (`crate::oracle::is_entry`).
pub fn compare(
    indexes: &Indexes,
    index: &Index,
    base: &[Value],
    actual: Vec<Value>,
) -> Result<Drift, VerifyError> {
    let one = indexes.only(index);
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
        if crate::oracle::is_entry(&one, &item) {
            have.insert(key(&item)?, item);
        }
    }
    let mut drift = Drift { entries: have.len(), expected: want.len(), ..Drift::none(index) };
    for (k, item) in &want {
        match have.get(k) {
            None => drift.note(Kind::Missing, item.clone()),
            Some(found) if content(found) != *item => drift.note(Kind::Stale, item.clone()),
            Some(_) => {}
        }
    }
    for (k, item) in have {
        if !want.contains_key(&k) {
            drift.note(Kind::Extra, item);
        }
    }
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
