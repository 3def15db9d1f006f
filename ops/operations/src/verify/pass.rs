//! The two passes of a verification, one scan page at a time: no table is held in memory.
//!
//! - **The base pass** reads a segment of the base table. For each page it computes the entries
//!   the page's items call for (the independent oracle) and looks them up in the index table,
//!   `BatchGetItem` with consistent reads: an entry the index lacks is missing, one it has with
//!   other content is stale.
//! - **The index pass** reads a segment of the index table. For each page it reads the base items
//!   of the page's entries, again batched and consistent, and computes what they call for: an
//!   entry no base item calls for is extra.
//!
//! What a pass holds is one page of items, the page's lookups, and the drift it keeps
//! ([`crate::verify::KEPT`] entries of each kind at most; the counts count them all).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use formats::{Index, Indexes};
use io_policy::{Budget, RequestFailed};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::oracle::content;
use crate::pace::Pacer;
use crate::verify::{Drift, Kind, VerifyError};

/// The two passes of a segment, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    /// The base table's segment: missing and stale entries.
    Base,
    /// The index table's segment: extra entries.
    Index,
}

/// Items a scan page asks for by default: what one step of a pass holds.
pub const PAGE_ITEMS: i32 = 250;

/// Keys one `BatchGetItem` asks for (DynamoDB's limit).
const BATCH_KEYS: usize = 100;

/// An item as the SDK has it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// One index of one base table, checked with `client` under a budget.
pub(crate) struct Passes<'a> {
    pub(crate) client: &'a aws_sdk_dynamodb::Client,
    pub(crate) budget: &'a Budget,
    /// The base key and the one index checked.
    pub(crate) one: Indexes,
    pub(crate) base_table: &'a str,
    /// Called with each page's item count.
    pub(crate) progress: &'a (dyn Fn(usize) + Sync),
    /// Items a scan page asks for.
    page_items: i32,
    /// Read units a second, counted as one an item read (none: no limit).
    pacer: Pacer,
}

impl<'a> Passes<'a> {
    /// The passes over `index` of `indexes` and `base_table`, telling `progress` each page's
    /// item count.
    pub(crate) fn new(
        client: &'a aws_sdk_dynamodb::Client,
        budget: &'a Budget,
        indexes: &Indexes,
        index: &Index,
        base_table: &'a str,
        progress: &'a (dyn Fn(usize) + Sync),
    ) -> Passes<'a> {
        let one = indexes.only(index);
        Passes { client, budget, one, base_table, progress, page_items: PAGE_ITEMS, pacer: Pacer::new(None) }
    }

    /// These passes with scan pages of `page_items` items, reading at most `read_units` a
    /// second (`None`: no limit), each item read counted as one unit: exact for a consistent
    /// lookup of an item under 4 KB, more than a scan spends (one unit per 4 KB of its page).
    pub(crate) fn paced(self, page_items: i32, read_units: Option<f64>) -> Passes<'a> {
        Passes { page_items, pacer: Pacer::new(read_units), ..self }
    }

    fn index(&self) -> &Index {
        &self.one.indexes[0]
    }

    /// Looks again at each difference `first` kept, key by key, noting in `drift` those still
    /// there: the missing and stale entries by their base items, read again and checked like a
    /// base page; the extra entries read again from the index and checked like an index page.
    pub(crate) async fn again(&self, first: &Drift, drift: &mut Drift) -> Result<(), VerifyError> {
        // The base items of the missing and stale entries, and what they call for now.
        let mut keys = BTreeMap::new();
        for entry in first.missing.iter().chain(&first.stale) {
            let key = self.base_key(entry)?;
            keys.insert(key_text(&key), key);
        }
        let keys: Vec<Item> = keys.into_values().collect();
        let seen: BTreeSet<String> =
            first.missing.iter().chain(&first.stale).map(|e| self.entry_key(e)).collect::<Result<_, _>>()?;
        for chunk in keys.chunks(BATCH_KEYS) {
            let items = self.get(self.base_table, chunk.to_vec()).await?;
            let wanted: BTreeMap<String, Value> =
                self.called_for(&items)?.into_iter().filter(|(key, _)| seen.contains(key)).collect();
            self.against_index(wanted, drift).await?;
        }
        // The extra entries as the index holds them now.
        let index = self.index();
        let names = [index.partition_key.clone(), index.sort_key.clone()];
        let keys: Vec<Item> =
            first.extra.iter().map(|entry| key_of(entry, &names)).collect::<Result<_, _>>()?;
        for chunk in keys.chunks(BATCH_KEYS) {
            // An extra entry removed since is a tombstone now: no longer extra.
            let entries = self.get(&index.table, chunk.to_vec()).await?;
            let entries =
                entries.into_iter().filter(|item| crate::oracle::is_entry(&self.one, item)).collect();
            self.against_base(entries, drift).await?;
        }
        Ok(())
    }

    /// Checks one page of segment `segment` of `total` of the table `pass` reads, from `start`,
    /// noting its differences in `drift`, and answers where the next page starts (`None`: the
    /// segment is done). The base pass notes missing and stale entries and counts the entries
    /// called for (`expected`); the index pass notes extra entries and counts the entries there
    /// (`entries`; tombstones and version heads are not entries). The page's item count goes to `progress`.
    pub(crate) async fn page_of(
        &self,
        pass: Pass,
        (segment, total): (u32, u32),
        start: Option<Item>,
        drift: &mut Drift,
    ) -> Result<Option<Item>, VerifyError> {
        let table = match pass {
            Pass::Base => self.base_table.to_owned(),
            Pass::Index => self.index().table.to_string(),
        };
        let (items, next) = self.page(&table, (segment, total), start).await?;
        (self.progress)(items.len());
        match pass {
            Pass::Base => {
                let wanted = self.called_for(&items)?;
                drift.expected += wanted.len();
                self.against_index(wanted, drift).await?;
            }
            Pass::Index => {
                let entries: Vec<Value> =
                    items.into_iter().filter(|item| crate::oracle::is_entry(&self.one, item)).collect();
                drift.entries += entries.len();
                self.against_base(entries, drift).await?;
            }
        }
        Ok(next)
    }

    /// Checks segment `segment` of `total` in both passes, the base table's and then the index
    /// table's, page by page.
    pub(crate) async fn segment(
        &self,
        (segment, total): (u32, u32),
        drift: &mut Drift,
    ) -> Result<(), VerifyError> {
        for pass in [Pass::Base, Pass::Index] {
            let mut start = None;
            while let Some(next) = self.page_of(pass, (segment, total), start.take(), drift).await? {
                start = Some(next);
            }
        }
        Ok(())
    }

    /// Notes each entry of `wanted` (called for, by index key) that the index lacks (missing) or
    /// holds with other content (stale).
    async fn against_index(
        &self,
        wanted: BTreeMap<String, Value>,
        drift: &mut Drift,
    ) -> Result<(), VerifyError> {
        let found = self.entries(&wanted).await?;
        for (key, entry) in wanted {
            match found.get(&key) {
                None => drift.note(Kind::Missing, entry),
                Some(have) if content(have) != entry => drift.note(Kind::Stale, entry),
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Notes each of `entries` (index entries) that no base item calls for now (extra).
    async fn against_base(&self, entries: Vec<Value>, drift: &mut Drift) -> Result<(), VerifyError> {
        let called_for = self.called_for_by_items_of(&entries).await?;
        for entry in entries {
            if !called_for.contains(&self.entry_key(&entry)?) {
                drift.note(Kind::Extra, entry);
            }
        }
        Ok(())
    }

    /// The entries `items` (base items, DynamoDB JSON) call for, by their index key.
    fn called_for(&self, items: &[Value]) -> Result<BTreeMap<String, Value>, VerifyError> {
        let mut wanted = BTreeMap::new();
        for line in crate::oracle::expected_index(&self.one, items)? {
            let entry: Value = serde_json::from_str(&line).map_err(|e| VerifyError::Format(e.to_string()))?;
            wanted.insert(self.entry_key(&entry)?, entry);
        }
        Ok(wanted)
    }

    /// The keys of the entries that the base items of `entries` call for now: the items read
    /// consistently by their keys, an item gone calling for nothing.
    async fn called_for_by_items_of(&self, entries: &[Value]) -> Result<BTreeSet<String>, VerifyError> {
        let mut keys = BTreeMap::new();
        for entry in entries {
            let key = self.base_key(entry)?;
            keys.insert(key_text(&key), key);
        }
        let mut called_for = BTreeSet::new();
        let keys: Vec<Item> = keys.into_values().collect();
        for chunk in keys.chunks(BATCH_KEYS) {
            let items = self.get(self.base_table, chunk.to_vec()).await?;
            called_for.extend(self.called_for(&items)?.into_keys());
        }
        Ok(called_for)
    }

    /// The index table's entries with the keys of `wanted`'s entries, read consistently, by
    /// their `entry_key`.
    async fn entries(&self, wanted: &BTreeMap<String, Value>) -> Result<HashMap<String, Value>, VerifyError> {
        let index = self.index();
        let names = [index.partition_key.clone(), index.sort_key.clone()];
        let keys: Vec<Item> = wanted.values().map(|entry| key_of(entry, &names)).collect::<Result<_, _>>()?;
        let mut found = HashMap::new();
        for chunk in keys.chunks(BATCH_KEYS) {
            // A tombstone under an entry's key: the entry is missing.
            for entry in self.get(&index.table, chunk.to_vec()).await? {
                if !crate::oracle::is_entry(&self.one, &entry) {
                    continue;
                }
                found.insert(self.entry_key(&entry)?, entry);
            }
        }
        Ok(found)
    }

    /// One consistent scan page of segment `segment` of `total` of `table`, from `start`: its
    /// items as DynamoDB JSON, and where the next page starts.
    async fn page(
        &self,
        table: &str,
        (segment, total): (u32, u32),
        start: Option<Item>,
    ) -> Result<(Vec<Value>, Option<Item>), VerifyError> {
        let page = self
            .budget
            .call(|| {
                let request = self
                    .client
                    .scan()
                    .table_name(table)
                    .consistent_read(true)
                    .limit(self.page_items)
                    .segment(i32::try_from(segment).unwrap_or(i32::MAX))
                    .total_segments(i32::try_from(total).unwrap_or(i32::MAX))
                    .set_exclusive_start_key(start.clone());
                async move { request.send().await.map_err(|e| io_policy::classify("Scan", &e)) }
            })
            .await
            .map_err(|failure| RequestFailed::new("Scan", table, failure))?;
        let items: Result<Vec<Value>, VerifyError> =
            page.items.unwrap_or_default().into_iter().map(|item| json(table, item)).collect();
        let items = items?;
        self.pacer.spend(units(items.len().max(1))).await;
        Ok((items, page.last_evaluated_key.filter(|key| !key.is_empty())))
    }

    /// The items of `table` with `keys` (at most [`BATCH_KEYS`]), read consistently, as DynamoDB
    /// JSON; unprocessed keys are asked again under the budget.
    async fn get(&self, table: &str, keys: Vec<Item>) -> Result<Vec<Value>, VerifyError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let keys_len = keys.len();
        let wanted =
            KeysAndAttributes::builder().set_keys(Some(keys)).consistent_read(true).build().map_err(|e| {
                RequestFailed::new("BatchGetItem", table, io_policy::Failure::systemic(e.to_string()))
            })?;
        let asked = keys_len;
        let items = io_policy::batch_get_item(self.budget, self.client, table, wanted, || {})
            .await
            .map_err(|failure| RequestFailed::new("BatchGetItem", table, failure))?;
        self.pacer.spend(units(asked)).await;
        items.into_iter().map(|item| json(table, item)).collect()
    }

    /// An entry's index key as text: its partition and sort key values, DynamoDB JSON.
    fn entry_key(&self, entry: &Value) -> Result<String, VerifyError> {
        let index = self.index();
        let part = |name: &str| {
            entry.get(name).map(Value::to_string).ok_or_else(|| {
                VerifyError::Format(format!("an index item without its key attribute {name}: {entry}"))
            })
        };
        Ok(format!("{}\u{0}{}", part(&index.partition_key)?, part(&index.sort_key)?))
    }

    /// The key of an entry's base item, from the base key attributes the entry carries.
    fn base_key(&self, entry: &Value) -> Result<Item, VerifyError> {
        key_of(entry, &self.one.base_key)
    }
}

/// Items read, as the read units a pacer counts (a page or a lookup holds far fewer than 2^32).
fn units(items: usize) -> f64 {
    f64::from(u32::try_from(items).unwrap_or(u32::MAX))
}

/// An item as DynamoDB JSON.
fn json(table: &str, item: Item) -> Result<Value, VerifyError> {
    serde_json::to_value(serde_dynamo::Item::from(item))
        .map_err(|e| VerifyError::Format(format!("an item of {table}: {e}")))
}

/// The attributes `names` of `item` (DynamoDB JSON), as a key.
fn key_of(item: &Value, names: &[String]) -> Result<Item, VerifyError> {
    let mut key = serde_json::Map::new();
    for name in names {
        let value = item.get(name).ok_or_else(|| {
            VerifyError::Format(format!("an item without its key attribute {name}: {item}"))
        })?;
        key.insert(name.clone(), value.clone());
    }
    let key: serde_dynamo::Item =
        serde_json::from_value(Value::Object(key)).map_err(|e| VerifyError::Format(e.to_string()))?;
    Ok(key.into())
}

/// A base key as text, to tell keys apart.
fn key_text(key: &Item) -> String {
    let mut parts: Vec<String> = key.iter().map(|(name, value)| format!("{name}={value:?}")).collect();
    parts.sort();
    parts.join("\u{0}")
}
