//! Increment, fast read and exact read, through the AWS SDK.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};

use crate::layout::{COUNT, Layout, LayoutError, TOTAL_ATTRIBUTE};

/// `BatchGetItem` reads at most this many keys per request.
const BATCH_GET_MAX: usize = 100;

/// Attempts at one `BatchGetItem` chunk while DynamoDB leaves keys unprocessed.
const UNPROCESSED_ATTEMPTS: u32 = 8;

/// Why a counter operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    /// The counter's key cannot be built.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A DynamoDB call failed (after the SDK's own retries).
    #[error("{operation} on {table}: {message}")]
    Request {
        /// The DynamoDB operation.
        operation: &'static str,
        /// The table.
        table: String,
        /// The SDK's error, with its causes.
        message: String,
    },
    /// An item holds something other than an integer where a count belongs.
    #[error("item {key:?} has {attribute} = {value}, not an integer count")]
    NotACount {
        /// The item's partition key.
        key: String,
        /// The attribute.
        attribute: &'static str,
        /// What it holds.
        value: String,
    },
    /// DynamoDB kept leaving keys unprocessed (sustained throttling).
    #[error("BatchGetItem on {table}: {left} keys still unprocessed after {UNPROCESSED_ATTEMPTS} attempts")]
    Unprocessed {
        /// The table.
        table: String,
        /// How many keys were left.
        left: usize,
    },
}

/// The counters in one table.
#[derive(Debug, Clone)]
pub struct Counters {
    client: aws_sdk_dynamodb::Client,
    table: String,
    layout: Layout,
}

impl Counters {
    /// Counters in `table`, laid out by `layout`.
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>, layout: Layout) -> Counters {
        Counters {
            client,
            table: table.into(),
            layout,
        }
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Adds `n` to counter `name`, on a random shard. Returns the shard.
    ///
    /// Like every DynamoDB `ADD`, this is not idempotent: when a request times out after DynamoDB
    /// applied it and the SDK retries, the count goes up twice. The aggregated total always
    /// equals the shards' sum; it cannot know about a retried increment.
    pub async fn increment(&self, name: &str, n: i64) -> Result<u32, CounterError> {
        let shard = fastrand::u32(..self.layout.shards);
        self.increment_shard(name, shard, n).await?;
        Ok(shard)
    }

    /// Adds `n` to shard `shard` of counter `name`.
    pub async fn increment_shard(&self, name: &str, shard: u32, n: i64) -> Result<(), CounterError> {
        let key = self.layout.shard_key(name, shard)?;
        self.client
            .update_item()
            .table_name(&self.table)
            .key(&self.layout.partition_key, AttributeValue::S(key))
            .update_expression("ADD #count :n")
            .expression_attribute_names("#count", COUNT)
            .expression_attribute_values(":n", AttributeValue::N(n.to_string()))
            .send()
            .await
            .map_err(|e| self.request("UpdateItem", &e))?;
        Ok(())
    }

    /// The fast read: counter `name`'s total item, as the counter-aggregator last wrote it
    /// (one eventually consistent `GetItem`). `None` before the aggregator has seen the counter.
    pub async fn total(&self, name: &str) -> Result<Option<i128>, CounterError> {
        let key = self.layout.total_key(name)?;
        let got = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(&self.layout.partition_key, AttributeValue::S(key.clone()))
            .projection_expression("#total")
            .expression_attribute_names("#total", TOTAL_ATTRIBUTE)
            .send()
            .await
            .map_err(|e| self.request("GetItem", &e))?;
        got.item()
            .map(|item| integer(item, &key, TOTAL_ATTRIBUTE))
            .transpose()
            .map(Option::flatten)
    }

    /// The exact read: the sum of all of counter `name`'s shards, read with strongly consistent
    /// `BatchGetItem`s (100 keys each). Missing shards count as zero.
    pub async fn exact(&self, name: &str) -> Result<i128, CounterError> {
        let keys = (0..self.layout.shards)
            .map(|k| self.layout.shard_key(name, k))
            .collect::<Result<Vec<_>, _>>()?;
        let mut sum = 0_i128;
        for chunk in keys.chunks(BATCH_GET_MAX) {
            for item in self.batch_get(chunk).await? {
                let key = match item.get(&self.layout.partition_key) {
                    Some(AttributeValue::S(k)) => k.clone(),
                    _ => String::new(),
                };
                sum += integer(&item, &key, COUNT)?.unwrap_or(0);
            }
        }
        Ok(sum)
    }

    async fn batch_get(&self, keys: &[String]) -> Result<Vec<HashMap<String, AttributeValue>>, CounterError> {
        let request = KeysAndAttributes::builder()
            .set_keys(Some(
                keys.iter()
                    .map(|k| {
                        HashMap::from([(self.layout.partition_key.clone(), AttributeValue::S(k.clone()))])
                    })
                    .collect(),
            ))
            .consistent_read(true)
            .build()
            .map_err(|e| self.request("BatchGetItem", &e))?;
        let mut pending = Some(request);
        let mut items = Vec::with_capacity(keys.len());
        for attempt in 0..UNPROCESSED_ATTEMPTS {
            let Some(request) = pending.take() else {
                return Ok(items);
            };
            if attempt > 0 {
                let cap = 50_u64 << attempt.min(6);
                tokio::time::sleep(Duration::from_millis(fastrand::u64(..=cap))).await;
            }
            let out = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .send()
                .await
                .map_err(|e| self.request("BatchGetItem", &e))?;
            if let Some(got) = out.responses().and_then(|r| r.get(&self.table)) {
                items.extend(got.iter().cloned());
            }
            pending = out
                .unprocessed_keys()
                .and_then(|u| u.get(&self.table))
                .filter(|k| !k.keys().is_empty())
                .cloned();
        }
        match pending {
            None => Ok(items),
            Some(left) => Err(CounterError::Unprocessed {
                table: self.table.clone(),
                left: left.keys().len(),
            }),
        }
    }

    fn request(&self, operation: &'static str, e: &dyn std::error::Error) -> CounterError {
        CounterError::Request {
            operation,
            table: self.table.clone(),
            message: DisplayErrorContext(e).to_string(),
        }
    }
}

/// An integer attribute: `None` when absent.
fn integer(
    item: &HashMap<String, AttributeValue>,
    key: &str,
    attribute: &'static str,
) -> Result<Option<i128>, CounterError> {
    match item.get(attribute) {
        None => Ok(None),
        Some(AttributeValue::N(n)) => n.parse().map(Some).map_err(|_| CounterError::NotACount {
            key: key.to_owned(),
            attribute,
            value: n.clone(),
        }),
        Some(other) => Err(CounterError::NotACount {
            key: key.to_owned(),
            attribute,
            value: format!("{other:?}"),
        }),
    }
}
