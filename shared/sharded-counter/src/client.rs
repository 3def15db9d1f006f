//! Increment, fast read and exact read, through the AWS SDK.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, TransactWriteItem, Update};
use io_policy::{Bounded, Budget, Failure, FailureKind, Policy};

use formats::counter::{COUNT, Sharding, ShardingError, TOTAL_ATTRIBUTE};

/// `BatchGetItem` reads at most this many keys per request.
const BATCH_GET_MAX: usize = 100;

/// How long one operation may take by default, every request and retry included.
pub(crate) const OPERATION_TIME: Duration = Duration::from_secs(20);

/// How long DynamoDB keeps a `TransactWriteItems` client token: a repeat within it is applied
/// once (API reference, `TransactWriteItems`, `ClientRequestToken`). An increment's retries must
/// all be sent within it, so an operation may take no longer.
pub const IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(600);

/// Cancellation reasons of a transaction that a retry gets past: a conflict with another request
/// on the shard, throttling (API reference, `TransactionCanceledException`). Any other reason
/// (`ValidationError`: the shard's `count` not a number, or past 38 digits) fails every retry.
const PASSING_REASONS: [&str; 4] =
    ["None", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"];

/// An increment's failure, of its kind: a cancelled transaction by its reasons (transient when
/// each is one a retry gets past, [`PASSING_REASONS`]; record-permanent otherwise, since the shard
/// item's content refuses it), anything else as [`io_policy::classify`] says.
fn increment_failure(error: &SdkError<TransactWriteItemsError, HttpResponse>) -> Failure {
    let mut failure = io_policy::classify("TransactWriteItems", error);
    if let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) = error.as_service_error() {
        let codes: Vec<&str> = cancelled.cancellation_reasons().iter().filter_map(|r| r.code()).collect();
        failure.kind = if codes.iter().all(|code| PASSING_REASONS.contains(code)) {
            FailureKind::Transient
        } else {
            FailureKind::RecordPermanent
        };
        failure.message = format!("{} (cancellation reasons: {})", failure.message, codes.join(", "));
    }
    failure
}

/// A client token for one increment: 128 random bits in hex, 32 of the 36 characters DynamoDB
/// allows.
fn client_token() -> String {
    format!("{:032x}", fastrand::u128(..))
}

/// Why a counter operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    /// The counter's key cannot be built.
    #[error(transparent)]
    Sharding(#[from] ShardingError),
    /// A DynamoDB call failed for good, or the operation's time ran out, under the I/O policy
    /// (keys that DynamoDB kept leaving unprocessed included).
    #[error(transparent)]
    Request(#[from] io_policy::RequestFailed),
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
}

/// The counters in one table.
#[derive(Debug, Clone)]
pub struct Counters {
    client: aws_sdk_dynamodb::Client,
    table: String,
    layout: Sharding,
    /// The policy of its calls, and how long each operation may take.
    io: Bounded,
}

impl Counters {
    /// Counters in `table`, laid out by `layout`, under the default I/O policy and
    /// `OPERATION_TIME`. `client` should have the SDK's own retries off
    /// (`io_policy::without_sdk_retries`): the policy retries.
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>, layout: Sharding) -> Counters {
        Counters { client, table: table.into(), layout, io: Bounded::new(Policy::default(), OPERATION_TIME) }
    }

    /// The same counters under `io`: its policy, each operation bounded by its time or by
    /// [`IDEMPOTENCY_WINDOW`], whichever is shorter (a retry sent after the window could count
    /// an increment twice).
    #[must_use]
    pub fn with_policy(mut self, io: Bounded) -> Counters {
        self.io = Bounded::new(io.policy(), io.time().min(IDEMPOTENCY_WINDOW));
        self
    }

    fn budget(&self) -> Budget {
        self.io.budget()
    }

    /// The layout.
    pub fn layout(&self) -> &Sharding {
        &self.layout
    }

    /// Adds `n` to counter `name`, on a random shard of this writer's Region, once, however
    /// often it is retried ([`Counters::increment_shard`]). Returns the shard.
    pub async fn increment(&self, name: &str, n: i64) -> Result<u32, CounterError> {
        let shard = fastrand::u32(self.layout.written());
        self.increment_shard(name, shard, n).await?;
        Ok(shard)
    }

    /// Adds `n` to shard `shard` of counter `name`, once.
    ///
    /// A plain `ADD` is not idempotent: when a request times out (or gets a 5xx) after DynamoDB
    /// applied it, its retry counts it again. So the `ADD` is sent as the one `Update` of a
    /// `TransactWriteItems` with a client token drawn for this increment, which every retry
    /// sends again: DynamoDB applies a repeat of a token within [`IDEMPOTENCY_WINDOW`] once, and
    /// answers it with success. The price is a transactional write, 2 write units per KB of
    /// the shard item instead of 1 (docs/functions.md, "Counting once").
    pub async fn increment_shard(&self, name: &str, shard: u32, n: i64) -> Result<(), CounterError> {
        let key = self.layout.shard_key(name, shard)?;
        let update = Update::builder()
            .table_name(&self.table)
            .key(&self.layout.partition_key, AttributeValue::S(key))
            .update_expression("ADD #count :n")
            .expression_attribute_names("#count", COUNT)
            .expression_attribute_values(":n", AttributeValue::N(n.to_string()))
            .build()
            .map_err(|e| self.request("TransactWriteItems", Failure::systemic(e.to_string())))?;
        let write = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(update).build())
            .client_request_token(client_token());
        self.budget()
            .call(|| {
                let sent = write.clone().send();
                async move { sent.await.map_err(|e| increment_failure(&e)) }
            })
            .await
            .map_err(|f| self.request("TransactWriteItems", f))?;
        Ok(())
    }

    /// The fast read: counter `name`'s total item, as the counter-aggregator last wrote it
    /// (one eventually consistent `GetItem`). `None` before the aggregator has seen the counter.
    pub async fn total(&self, name: &str) -> Result<Option<i128>, CounterError> {
        let key = self.layout.total_key(name)?;
        let get = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(&self.layout.partition_key, AttributeValue::S(key.clone()))
            .projection_expression("#total")
            .expression_attribute_names("#total", TOTAL_ATTRIBUTE);
        let got = self
            .budget()
            .call(|| {
                let sent = get.clone().send();
                async move { sent.await.map_err(|e| io_policy::classify("GetItem", &e)) }
            })
            .await
            .map_err(|f| self.request("GetItem", f))?;
        got.item().map(|item| integer(item, &key, TOTAL_ATTRIBUTE)).transpose().map(Option::flatten)
    }

    /// The exact read: the sum of all of counter `name`'s shards (every Region's), read with
    /// strongly consistent `BatchGetItem`s (100 keys each). Missing shards count as zero.
    pub async fn exact(&self, name: &str) -> Result<i128, CounterError> {
        let keys =
            self.layout.all().map(|k| self.layout.shard_key(name, k)).collect::<Result<Vec<_>, _>>()?;
        let budget = self.budget();
        let mut sum = 0_i128;
        for chunk in keys.chunks(BATCH_GET_MAX) {
            for item in self.batch_get(chunk, &budget).await? {
                let key = match item.get(&self.layout.partition_key) {
                    Some(AttributeValue::S(k)) => k.clone(),
                    _ => String::new(),
                };
                sum += integer(&item, &key, COUNT)?.unwrap_or(0);
            }
        }
        Ok(sum)
    }

    /// The items with these keys; keys left unprocessed are asked again, as retries under the
    /// budget.
    async fn batch_get(
        &self,
        keys: &[String],
        budget: &Budget,
    ) -> Result<Vec<HashMap<String, AttributeValue>>, CounterError> {
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
            .map_err(|e| self.request("BatchGetItem", Failure::systemic(e.to_string())))?;
        io_policy::batch_get_item(budget, &self.client, &self.table, request, || ())
            .await
            .map_err(|f| self.request("BatchGetItem", f))
    }

    fn request(&self, operation: &'static str, failure: Failure) -> CounterError {
        io_policy::RequestFailed::new(operation, &self.table, failure).into()
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
        Some(other) => {
            Err(CounterError::NotACount { key: key.to_owned(), attribute, value: format!("{other:?}") })
        }
    }
}
