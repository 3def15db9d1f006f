//! Reading pages: the index phase, then the nulls phase, over DynamoDB.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use io_policy::{Budget, Failure, FailureKind, Policy};
use serde_json::Value;

use crate::cursor::{Cursor, CursorError, Phase, Signer};
use crate::query::{GridSchema, Query, QueryError};

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
    #[error("{operation} on {table} ({kind}): {message}")]
    Request {
        /// `Query` or `BatchGetItem`.
        operation: &'static str,
        /// The table.
        table: String,
        /// What kind of failure: transient (try again later) or systemic (fix the setup).
        kind: FailureKind,
        /// What failed, with the SDK's error and its causes.
        message: String,
    },
}

/// One page.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The items, in order: index items (or base items, when the caller asked for attributes
    /// the index lacks) with the sorted `value`, then base items without the field.
    pub rows: Vec<Row>,
    /// The cursor of the next page; `None` after the last.
    pub next: Option<String>,
    /// The phase these rows came from.
    pub phase: Phase,
    /// Requests made: queries and `BatchGetItem` calls, every attempt counted.
    pub requests: Requests,
}

/// One item of a page.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The item, in DynamoDB JSON.
    pub item: Value,
    /// The field's value (DynamoDB JSON); `None` in the nulls phase.
    pub value: Option<Value>,
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
}

/// How long one page may take by default, every request and retry included.
pub const PAGE_TIME: Duration = Duration::from_secs(20);

/// Pages through one layout's items.
#[derive(Debug, Clone)]
pub struct Grid {
    client: Client,
    layout: GridSchema,
    signer: Signer,
    policy: Policy,
    page_time: Duration,
}

impl Grid {
    /// A reader of `layout`'s tables whose cursors are signed by `signer`, under the default
    /// I/O policy and [`PAGE_TIME`]. `client` should have the SDK's own retries off
    /// (`io_policy::without_sdk_retries`): the policy retries.
    pub fn new(client: Client, layout: GridSchema, signer: Signer) -> Grid {
        Grid {
            client,
            layout,
            signer,
            policy: Policy::default(),
            page_time: PAGE_TIME,
        }
    }

    /// The same reader under `policy`, each page bounded by `page_time`.
    #[must_use]
    pub fn with_policy(mut self, policy: Policy, page_time: Duration) -> Grid {
        self.policy = policy;
        self.page_time = page_time;
        self
    }

    /// The page of `query` that `cursor` points at (the first page without one).
    ///
    /// Cost: one `Query` (of the index table, or in the nulls phase of the base table's
    /// `project-num` index), plus one `BatchGetItem` when the index items do not hold every
    /// attribute asked for, and always in the nulls phase, whose index cannot tell which items
    /// lack the field. When the index phase ends exactly at a page boundary, the next page, which
    /// would be empty, goes straight on to the nulls phase (one more `Query`). A nulls page may
    /// hold fewer rows than `limit`: items that have the field are left out of it.
    pub async fn page(&self, query: &Query, cursor: Option<&str>) -> Result<Page, GridError> {
        query.check()?;
        let now = now();
        let fingerprint = query.fingerprint();
        let at = match cursor {
            Some(text) => self.signer.decode(text, &fingerprint, now)?,
            None => Cursor {
                phase: Phase::Index,
                key: None,
            },
        };
        let budget = self.policy.within(self.page_time);
        let mut requests = Requests::default();
        let Cursor { phase, key } = at;
        let mut start = None;
        if phase == Phase::Nulls {
            start = key;
        } else {
            let (rows, last) = self.index_page(query, key, &budget, &mut requests).await?;
            let next = match last {
                Some(key) => Some(Cursor {
                    phase: Phase::Index,
                    key: Some(key),
                }),
                None if query.has_nulls_phase() => Some(Cursor {
                    phase: Phase::Nulls,
                    key: None,
                }),
                None => None,
            };
            if !rows.is_empty() || next.as_ref().is_none_or(|n| n.phase == Phase::Index) {
                return Ok(Page {
                    rows,
                    next: next.map(|n| self.signer.encode(&n, &fingerprint, now)),
                    phase: Phase::Index,
                    requests: requests.with_retries(&budget),
                });
            }
        }
        let (rows, last) = self.nulls_page(query, start, &budget, &mut requests).await?;
        let next = last.map(|key| {
            let cursor = Cursor {
                phase: Phase::Nulls,
                key: Some(key),
            };
            self.signer.encode(&cursor, &fingerprint, now)
        });
        Ok(Page {
            rows,
            next,
            phase: Phase::Nulls,
            requests: requests.with_retries(&budget),
        })
    }

    async fn index_page(
        &self,
        query: &Query,
        start: Option<Value>,
        budget: &Budget,
        requests: &mut Requests,
    ) -> Result<(Vec<Row>, Option<Value>), GridError> {
        let layout = &self.layout;
        let condition = query.key_condition()?;
        let start = start.map(|k| item(&k)).transpose()?;
        let ask = self
            .client
            .query()
            .table_name(&layout.index_table)
            .key_condition_expression(&condition.expression)
            .set_expression_attribute_names(Some(names(&condition.expression)))
            .set_expression_attribute_values(Some(condition.values))
            .scan_index_forward(!query.descending)
            .limit(limit(query))
            .set_exclusive_start_key(start);
        let page = query_under(ask, &layout.index_table, budget, requests).await?;
        let entries = page.items().to_vec();
        let last = last_key(page.last_evaluated_key())?;
        let base = if query.needs_base_items(layout) {
            let keys = entries
                .iter()
                .filter_map(|e| e.get(&layout.key).cloned())
                .collect();
            self.base_items(keys, &projection(query, layout, false), budget, requests)
                .await?
        } else {
            HashMap::new()
        };
        let mut rows = Vec::with_capacity(entries.len());
        for entry in entries {
            let value = entry.get("value").map(json).transpose()?;
            let item = match entry.get(&layout.key).and_then(|k| base.get(&key_text(k))) {
                Some(base) => base.clone(),
                // The issue was deleted since the index was read; show the index entry.
                None => entry,
            };
            rows.push(Row {
                item: json_item(item)?,
                value,
            });
        }
        Ok((rows, last))
    }

    async fn nulls_page(
        &self,
        query: &Query,
        start: Option<Value>,
        budget: &Budget,
        requests: &mut Requests,
    ) -> Result<(Vec<Row>, Option<Value>), GridError> {
        let layout = &self.layout;
        let start = start.map(|k| item(&k)).transpose()?;
        let ask = self
            .client
            .query()
            .table_name(&layout.table)
            .index_name(&layout.nulls_index)
            .key_condition_expression("#scope = :scope")
            .expression_attribute_names("#scope", &layout.scope)
            .expression_attribute_values(":scope", AttributeValue::S(query.scope.clone()))
            .limit(limit(query))
            .set_exclusive_start_key(start);
        let page = query_under(ask, &layout.table, budget, requests).await?;
        let last = last_key(page.last_evaluated_key())?;
        let keys: Vec<AttributeValue> = page
            .items()
            .iter()
            .filter_map(|i| i.get(&layout.key).cloned())
            .collect();
        let base = if keys.is_empty() {
            HashMap::new()
        } else {
            self.base_items(keys.clone(), &projection(query, layout, true), budget, requests)
                .await?
        };
        let mut rows = Vec::new();
        for key in keys {
            let Some(mut item) = base.get(&key_text(&key)).cloned() else {
                continue; // deleted meanwhile
            };
            let has_field = matches!(item.get(&layout.source), Some(AttributeValue::M(m)) if m.contains_key(&query.field));
            if has_field {
                continue;
            }
            if !query.attributes.contains(&layout.source) {
                item.remove(&layout.source);
            }
            rows.push(Row {
                item: json_item(item)?,
                value: None,
            });
        }
        Ok((rows, last))
    }

    /// The base items with these keys, by key text; unprocessed keys are asked again, as
    /// retries under the budget.
    async fn base_items(
        &self,
        keys: Vec<AttributeValue>,
        projection: &(String, HashMap<String, String>),
        budget: &Budget,
        requests: &mut Requests,
    ) -> Result<HashMap<String, Item>, GridError> {
        let layout = &self.layout;
        let wanted = KeysAndAttributes::builder()
            .set_keys(Some(
                keys.into_iter()
                    .map(|k| HashMap::from([(layout.key.clone(), k)]))
                    .collect(),
            ))
            .projection_expression(&projection.0)
            .set_expression_attribute_names(Some(projection.1.clone()))
            .build()
            .map_err(|e| request("BatchGetItem", &layout.table, Failure::systemic(e.to_string())))?;
        let table = &layout.table;
        let answers = budget
            .drain("BatchGetItem", wanted, |wanted| {
                requests.batch_gets += 1;
                let sent = self.client.batch_get_item().request_items(table, wanted).send();
                async move {
                    let mut output = sent.await.map_err(|e| io_policy::classify("BatchGetItem", &e))?;
                    let items = output
                        .responses
                        .and_then(|mut r| r.remove(table))
                        .unwrap_or_default();
                    let rest = output.unprocessed_keys.take().and_then(|mut u| u.remove(table));
                    Ok((items, rest.filter(|r| !r.keys().is_empty())))
                }
            })
            .await
            .map_err(|f| request("BatchGetItem", table, f))?;
        Ok(answers
            .into_iter()
            .flatten()
            .filter_map(|item| Some((key_text(item.get(&layout.key)?), item)))
            .collect())
    }
}

/// Sends a `Query` under the budget, counting every attempt.
async fn query_under(
    ask: QueryFluentBuilder,
    table: &str,
    budget: &Budget,
    requests: &mut Requests,
) -> Result<QueryOutput, GridError> {
    budget
        .call(|| {
            requests.queries += 1;
            let sent = ask.clone().send();
            async move { sent.await.map_err(|e| io_policy::classify("Query", &e)) }
        })
        .await
        .map_err(|f| request("Query", table, f))
}

/// `#sk` for conditions that use it.
fn names(expression: &str) -> HashMap<String, String> {
    let mut names = HashMap::from([("#pk".to_owned(), "pk".to_owned())]);
    if expression.contains("#sk") {
        names.insert("#sk".to_owned(), "sk".to_owned());
    }
    names
}

/// The base items' projection: key, scope, order, the index's attributes, what was asked for,
/// and (in the nulls phase) the field, to tell whether the item has it.
fn projection(query: &Query, layout: &GridSchema, with_field: bool) -> (String, HashMap<String, String>) {
    let mut attributes = vec![&layout.key, &layout.scope, &layout.order];
    attributes.extend(&layout.projected);
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
    if with_field && !query.attributes.contains(&layout.source) {
        names.insert("#src".to_owned(), layout.source.clone());
        names.insert("#field".to_owned(), query.field.clone());
        parts.push("#src.#field".to_owned());
    }
    (parts.join(", "), names)
}

fn limit(query: &Query) -> i32 {
    i32::try_from(query.limit).unwrap_or(i32::MAX)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn key_text(key: &AttributeValue) -> String {
    match key {
        AttributeValue::S(s) | AttributeValue::N(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn last_key(key: Option<&Item>) -> Result<Option<Value>, GridError> {
    key.filter(|k| !k.is_empty())
        .map(|k| json_item(k.clone()))
        .transpose()
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
    GridError::Request {
        operation,
        table: table.to_owned(),
        kind: failure.kind,
        message: failure.message,
    }
}

impl Requests {
    fn with_retries(mut self, budget: &Budget) -> Requests {
        self.retries = u32::try_from(budget.tally.retries()).unwrap_or(u32::MAX);
        self
    }
}
