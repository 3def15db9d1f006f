//! Reading pages: the index phase, then the nulls phase, over DynamoDB.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use io_policy::{Bounded, Budget, Failure, Policy};
use serde_json::Value;

use crate::grid::query::{MAX_LIMIT, Query, QueryError};
use crate::grid::schema::GridSchema;
use formats::cursor::{Cursor, CursorError, Phase, Signer};

type Item = HashMap<String, AttributeValue>;

/// Why a page cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum GridError {
    /// The request is invalid.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// The cursor is refused.
    #[error(transparent)]
    Cursor(#[from] CursorError),
    /// An item or value DynamoDB returned that is not DynamoDB JSON (never from DynamoDB itself).
    #[error("an item that cannot be read as DynamoDB JSON: {0}")]
    Item(String),
    /// A DynamoDB request failed for good, or the page's time ran out, under the I/O policy.
    #[error(transparent)]
    Request(#[from] io_policy::RequestFailed),
}

/// One page.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The items, in order: the index phase's (sorted by the field's value), then the nulls
    /// phase's (items without an indexed value for the field, by order attribute).
    pub rows: Vec<Row>,
    /// The cursor of the next page; `None` after the last.
    pub next: Option<String>,
    /// The phase the page ended in.
    pub phase: Phase,
    /// Requests made: queries and `BatchGetItem` calls, every attempt counted.
    pub requests: Requests,
}

/// One item of a page.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The item, in DynamoDB JSON: the index item (or the base item, when the caller asked for
    /// attributes the index lacks), or in the nulls phase the base item.
    pub item: Value,
    /// The field's value (DynamoDB JSON); `None` in the nulls phase.
    pub value: Option<Value>,
    /// The phase the row came from.
    pub phase: Phase,
}

/// What a page cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    /// `Query` requests sent, retries included.
    pub queries: u32,
    /// `BatchGetItem` requests sent, retries and re-sent unprocessed keys included.
    pub batch_gets: u32,
    /// How many of those were retries.
    pub retries: u32,
    /// `Query` requests that DynamoDB stopped at the 1 MB it reads before their `Limit`: each
    /// adds one to what a page costs behind tombstones (docs/grid-view.md, "What a page costs").
    pub cut_at_1mb: u32,
}

/// How long one page may take by default, every request and retry included.
pub(crate) const PAGE_TIME: Duration = Duration::from_secs(20);

/// Pages through one index's items.
#[derive(Debug, Clone)]
pub struct Grid {
    client: Client,
    schema: GridSchema,
    signer: Signer,
    /// The policy of its calls, and how long each operation may take.
    io: Bounded,
}

/// Where a phase stopped: `None` when it is exhausted, else the key to resume after (`None`
/// inside: from the phase's start).
type More = Option<Option<Value>>;

impl Grid {
    /// A reader of `schema`'s tables whose cursors are signed by `signer`, under the default
    /// I/O policy and [`PAGE_TIME`]. `client` should have the SDK's own retries off
    /// (`io_policy::without_sdk_retries`): the policy retries.
    pub fn new(client: Client, schema: GridSchema, signer: Signer) -> Grid {
        Grid { client, schema, signer, io: Bounded::new(Policy::default(), PAGE_TIME) }
    }

    /// The same reader under `io`: its policy, each page bounded by its time.
    #[must_use]
    pub fn with_policy(mut self, io: Bounded) -> Grid {
        self.io = io;
        self
    }

    /// The schema read.
    pub fn schema(&self) -> &GridSchema {
        &self.schema
    }

    /// The page of `query` that `cursor` points at (the first page without one).
    ///
    /// **Order.** First every item with an index entry for the field, by the entry's sort key
    /// (value, tiebreakers, key), ascending or descending. Then, in both orders, every item of
    /// the scope without one, by the order attribute ascending: items that lack the field, and
    /// items whose value the indexer cannot key (a map, list or set; a binary too long for the
    /// sort key; a field name too long for the partition key). Whether an item has an entry is
    /// decided by the indexer's own keying (`formats::has_entry`), so each item appears
    /// exactly once. A filtered query has no nulls phase.
    ///
    /// **Pages are full.** A page holds `limit` items whenever that many remain, and `next` is
    /// `None` exactly when nothing does: each phase reads one item past the page to know.
    ///
    /// **Cost.** The index phase: one `Query` (more when tombstones lie ahead, each reading about
    /// 17 times as far as the ones before it, `index_limit`, or when DynamoDB's 1 MB page limit
    /// cuts a response short), plus one `BatchGetItem` when the caller asks for attributes the
    /// index items lack. The nulls phase reads the scope's items in order from the base table's
    /// `nulls_index` and their fields with `BatchGetItem`, 100 at a time: one `Query` and one
    /// `BatchGetItem` per round, until the page is full or the scope is read to its end. Items
    /// that have an entry are passed over, so the page where the index phase ends reads every
    /// remaining item of the scope when most items have the field: for a scope of `n` items,
    /// up to `n / 100` rounds. A page stops at the grid's page time (`PAGE_TIME` by default).
    pub async fn page(&self, query: &Query, cursor: Option<&str>) -> Result<Page, GridError> {
        query.check()?;
        let now = now();
        let fingerprint = query.fingerprint();
        let at = match cursor {
            Some(text) => self.signer.decode(text, &fingerprint, now)?,
            None => Cursor { phase: Phase::Index, key: None },
        };
        let mut filling = Filling {
            rows: Vec::with_capacity(query.limit),
            budget: self.io.budget(),
            requests: Requests::default(),
        };
        let mut start = at.key;
        let mut phase = at.phase;
        let mut more = None;
        if phase == Phase::Index {
            more = self.index_rows(query, start.take(), &mut filling).await?;
            if more.is_none() && query.has_nulls_phase() {
                phase = Phase::Nulls;
            }
        }
        if phase == Phase::Nulls {
            more = self.nulls_rows(query, start, &mut filling).await?;
        }
        let next = more.map(|key| self.signer.encode(&Cursor { phase, key }, &fingerprint, now));
        Ok(Page { rows: filling.rows, next, phase, requests: filling.requests.with_retries(&filling.budget) })
    }

    /// Index rows after `start`, up to the page's limit; whether more follow.
    async fn index_rows(
        &self,
        query: &Query,
        start: Option<Value>,
        filling: &mut Filling,
    ) -> Result<More, GridError> {
        let schema = &self.schema;
        let condition = match query.key_condition() {
            Ok(condition) => condition,
            // No partition key fits the field's name: the indexer wrote no entry for it.
            Err(QueryError::Key { .. }) => return Ok(None),
            Err(other) => return Err(other.into()),
        };
        let want = query.limit;
        let (pk, sk) = schema.index_keys();
        let mut entries = Vec::with_capacity(want + 1);
        let mut tombstones = 0;
        let mut start = start.map(|k| item(&k)).transpose()?;
        loop {
            let limit = index_limit(want + 1 - entries.len(), tombstones);
            let ask = self
                .client
                .query()
                .table_name(schema.index_table())
                .key_condition_expression(&condition.expression)
                .set_expression_attribute_names(Some(names(&condition.expression, pk, sk)))
                .set_expression_attribute_values(Some(condition.values.clone()))
                .scan_index_forward(!query.descending)
                .limit(count(limit))
                .set_exclusive_start_key(start.take());
            let page = query_under(ask, schema.index_table(), filling).await?;
            let read = usize::try_from(page.scanned_count).unwrap_or(0);
            if page.last_evaluated_key.as_ref().is_some_and(|k| !k.is_empty()) && read < limit {
                filling.requests.cut_at_1mb += 1;
            }
            // A removed entry's tombstone keeps its key until the table's TTL deletes it
            // (`formats::tombstone`): read and billed, never shown.
            for found in page.items.unwrap_or_default() {
                if formats::tombstone::is_tombstone(found.keys().map(String::as_str)) {
                    tombstones += 1;
                } else {
                    entries.push(found);
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() && entries.len() <= want => start = Some(key),
                _ => break,
            }
        }
        let more = if entries.len() > want {
            entries.truncate(want);
            let last = entries.last().map(|e| {
                e.iter()
                    .filter(|(name, _)| *name == pk || *name == sk)
                    .map(|(n, v)| (n.clone(), v.clone()))
                    .collect::<Item>()
            });
            Some(last.map(json_item).transpose()?)
        } else {
            None
        };
        let base = if query.needs_base_items(schema) {
            let keys = entries.iter().filter_map(|e| base_key_of(e, schema)).collect();
            self.base_items(keys, &projection(query, schema, false), filling).await?
        } else {
            HashMap::new()
        };
        for entry in entries {
            let value = entry.get(formats::VALUE_ATTRIBUTE).map(json).transpose()?;
            let item = match key_id(&entry, schema).and_then(|k| base.get(&k)) {
                Some(base) => base.clone(),
                // The issue was deleted since the index was read; show the index entry.
                None => entry,
            };
            filling.rows.push(Row { item: json_item(item)?, value, phase: Phase::Index });
        }
        Ok(more)
    }

    /// Rows of the nulls phase after `start` until the page holds `limit` rows; whether more
    /// follow. Reads one qualifying item past the page to know.
    async fn nulls_rows(
        &self,
        query: &Query,
        start: Option<Value>,
        filling: &mut Filling,
    ) -> Result<More, GridError> {
        let base_key = self.schema.base_key();
        let schema = &self.schema;
        let projection = projection(query, schema, true);
        let mut resume = start.clone();
        let mut start = start.map(|k| item(&k)).transpose()?;
        loop {
            // Full rounds whatever is left to fill: items with an entry are passed over, and the
            // page must read one item past its end.
            let ask = self
                .client
                .query()
                .table_name(schema.table())
                .index_name(schema.nulls_index())
                .key_condition_expression("#scope = :scope")
                .expression_attribute_names("#scope", schema.scope())
                .expression_attribute_values(":scope", AttributeValue::S(query.scope.clone()))
                .limit(count(MAX_LIMIT))
                .set_exclusive_start_key(start.take());
            let page = query_under(ask, schema.table(), filling).await?;
            let listed = page.items.unwrap_or_default();
            let keys: Vec<Item> = listed.iter().filter_map(|i| base_key_of(i, schema)).collect();
            let base = if keys.is_empty() {
                HashMap::new()
            } else {
                self.base_items(keys, &projection, filling).await?
            };
            for listed in &listed {
                let Some(found) = key_id(listed, schema).and_then(|k| base.get(&k)) else {
                    continue; // deleted meanwhile
                };
                let dynamo = serde_dynamo::Item::from(found.clone());
                if formats::has_entry(schema.index(), base_key, &dynamo, &query.field) {
                    continue; // listed in the index phase
                }
                if filling.rows.len() == query.limit {
                    return Ok(Some(resume));
                }
                let mut found = found.clone();
                if !query.attributes.iter().any(|a| a == schema.source()) {
                    found.remove(schema.source());
                }
                filling.rows.push(Row { item: json_item(found)?, value: None, phase: Phase::Nulls });
                resume = Some(json_item(nulls_key(listed, schema))?);
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(None),
            }
        }
    }

    /// The base items with these keys, by [`key_id`]; unprocessed keys are asked again, as
    /// retries under the budget.
    async fn base_items(
        &self,
        keys: Vec<Item>,
        projection: &(String, HashMap<String, String>),
        filling: &mut Filling,
    ) -> Result<HashMap<KeyId, Item>, GridError> {
        let schema = &self.schema;
        let table = schema.table();
        let wanted = KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .projection_expression(&projection.0)
            .set_expression_attribute_names(Some(projection.1.clone()))
            .build()
            .map_err(|e| request("BatchGetItem", table, Failure::systemic(e.to_string())))?;
        let answers = io_policy::batch_get_item(&filling.budget, &self.client, table, wanted, || {
            filling.requests.batch_gets += 1;
        })
        .await
        .map_err(|f| request("BatchGetItem", table, f))?;
        Ok(answers.into_iter().filter_map(|item| Some((key_id(&item, schema)?, item))).collect())
    }
}

/// A page as it fills: its rows, and the requests made under its budget.
struct Filling {
    rows: Vec<Row>,
    budget: Budget,
    requests: Requests,
}

/// The key of a `nulls_index` item, as DynamoDB's `ExclusiveStartKey` for that index wants it:
/// the table's key and the index's.
fn nulls_key(listed: &Item, schema: &GridSchema) -> Item {
    schema
        .base_key()
        .iter()
        .map(String::as_str)
        .chain([schema.scope(), schema.order()])
        .filter_map(|name| Some((name.to_owned(), listed.get(name)?.clone())))
        .collect()
}

/// An item's key in the base table (every `base_key` attribute), `None` if it lacks one.
fn base_key_of(item: &Item, schema: &GridSchema) -> Option<Item> {
    schema.base_key().iter().map(|k| Some((k.clone(), item.get(k)?.clone()))).collect()
}

/// A base-table key as text, one part per key attribute: what matches a base item to the index
/// entry or the listing that names it.
type KeyId = Vec<String>;

/// The [`KeyId`] of an item, `None` if it lacks a key attribute.
fn key_id(item: &Item, schema: &GridSchema) -> Option<KeyId> {
    schema.base_key().iter().map(|k| item.get(k).map(key_text)).collect()
}

/// Sends a `Query` under the budget, counting every attempt.
async fn query_under(
    ask: QueryFluentBuilder,
    table: &str,
    filling: &mut Filling,
) -> Result<QueryOutput, GridError> {
    let Filling { budget, requests, .. } = filling;
    budget
        .call(|| {
            requests.queries += 1;
            let sent = ask.clone().send();
            async move { sent.await.map_err(|e| io_policy::classify("Query", &e)) }
        })
        .await
        .map_err(|f| request("Query", table, f))
}

/// How many items a `Query` of the index phase asks for (its `Limit`, which counts the items
/// read, tombstones among them) when the page still needs `need` entries and the page's
/// earlier queries read `tombstones` tombstones.
///
/// With no tombstone read yet, exactly what is needed: an index with no tombstones ahead costs
/// one `Query` of the page's size. After a run of them, [`TOMBSTONE_GROWTH`] times as many as
/// were read besides, so that each `Query` reads that much further than all the ones before:
/// a bulk edit's few thousand tombstones are read in three queries (docs/grid-view.md, "What a
/// page costs"), where asking for only what the page still needs read them a page at a time
/// and ran a page out of time. Each `Query` still reads at most 1 MB, as DynamoDB caps it. The
/// entries read past the page's end are billed and dropped: at most `TOMBSTONE_GROWTH` times
/// the tombstones behind them.
fn index_limit(need: usize, tombstones: usize) -> usize {
    need.saturating_add(tombstones.saturating_mul(TOMBSTONE_GROWTH))
}

/// How much further than every earlier query of its page a `Query` reads once tombstones were
/// met ([`index_limit`]).
const TOMBSTONE_GROWTH: usize = 16;

/// `#pk`, and `#sk` for conditions that use it.
fn names(expression: &str, pk: &str, sk: &str) -> HashMap<String, String> {
    let mut names = HashMap::from([("#pk".to_owned(), pk.to_owned())]);
    if expression.contains("#sk") {
        names.insert("#sk".to_owned(), sk.to_owned());
    }
    names
}

/// The base items' projection: key, scope, tiebreakers, the index's attributes, what was asked
/// for, and (in the nulls phase) the field, to tell whether the item has an entry for it.
fn projection(query: &Query, schema: &GridSchema, with_field: bool) -> (String, HashMap<String, String>) {
    let index = schema.index();
    let mut attributes: Vec<&String> = schema.base_key().iter().collect();
    attributes.extend(&index.scope);
    attributes.extend(&index.tiebreakers);
    attributes.extend(schema.projected());
    attributes.extend(&query.attributes);
    let mut names = HashMap::new();
    let mut parts = Vec::new();
    for (i, attribute) in attributes.into_iter().enumerate() {
        if names.values().any(|a| a == attribute) {
            continue;
        }
        names.insert(format!("#a{i}"), attribute.clone());
        parts.push(format!("#a{i}"));
    }
    if with_field && !query.attributes.iter().any(|a| a == schema.source()) {
        names.insert("#src".to_owned(), schema.source().to_owned());
        names.insert("#field".to_owned(), query.field.clone());
        parts.push("#src.#field".to_owned());
    }
    (parts.join(", "), names)
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn key_text(key: &AttributeValue) -> String {
    match key {
        AttributeValue::S(s) | AttributeValue::N(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn json_item(item: Item) -> Result<Value, GridError> {
    serde_json::to_value(serde_dynamo::Item::from(item)).map_err(|e| GridError::Item(e.to_string()))
}

fn json(value: &AttributeValue) -> Result<Value, GridError> {
    serde_json::to_value(serde_dynamo::AttributeValue::from(value.clone()))
        .map_err(|e| GridError::Item(e.to_string()))
}

/// A cursor key back in the SDK's form.
fn item(key: &Value) -> Result<Item, GridError> {
    let parsed: serde_dynamo::Item = serde_json::from_value(key.clone())
        .map_err(|_| GridError::Cursor(CursorError::Malformed("its key is not DynamoDB JSON".into())))?;
    Ok(parsed.into())
}

fn request(operation: &'static str, table: &str, failure: Failure) -> GridError {
    io_policy::RequestFailed::new(operation, table, failure).into()
}

#[cfg(test)]
mod tests;

impl Requests {
    fn with_retries(mut self, budget: &Budget) -> Requests {
        self.retries = u32::try_from(budget.tally.retries()).unwrap_or(u32::MAX);
        self
    }
}
