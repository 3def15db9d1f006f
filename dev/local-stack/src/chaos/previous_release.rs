//! The previous release's indexer, as it wrote: for the lifecycle run's canary deploy and its
//! move back ([`crate::chaos::lifecycle`]).
//!
//! Before tombstones the indexer wrote each record of an item in one `TransactWriteItems`
//! (docs/formats.md, "Version heads (retired)"): a put of the item's head on the condition that
//! it is absent or older than the record, with the record's entry puts and deletes
//! unconditioned. A record whose head is newer was refused whole, and passed over. What it
//! writes is the same as this release plans for the record (an entry put for each value, a
//! tombstone's key deleted), with this release's fence as the head: the planner, asked for
//! fences (`fence_heads`), writes the head as that release keyed it.
//!
//! [`Canary`] sends each invocation to one release or the other, by a share that the run moves.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Instant;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use multikey_indexer::plan::Order;
use multikey_indexer::{Indexes, Plan, VERSION_ATTRIBUTE};
use serde_json::json;
use stream_runtime::delivery::{Invocation, Invoker};
use stream_runtime::wire::WireRecord;
use stream_runtime::{Event, Op};

/// DynamoDB's limit on a transaction's writes.
const MAX_TRANSACTION_WRITES: usize = 100;
/// How long one call may take: the chaos stack's stalls outlast it.
const ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The previous release's indexer over `indexes` (this release's, their fences asked for),
/// writing with `client`. It answers with `batchItemFailures` from the first record it could not
/// write; `counts` counts its invocations and the transactions it found refused.
pub(crate) fn invoker(
    mut indexes: Indexes,
    client: aws_sdk_dynamodb::Client,
    counts: Arc<Counts>,
) -> Invoker {
    indexes.fence_heads = true;
    let indexes = Arc::new(indexes);
    Arc::new(move |event: Event, deadline: Instant| {
        let (indexes, client, counts) = (Arc::clone(&indexes), client.clone(), Arc::clone(&counts));
        Box::pin(async move {
            counts.invocations.fetch_add(1, Ordering::Relaxed);
            for record in &event.records {
                let at = record.change.sequence_number.clone().unwrap_or_default();
                let resume = || Invocation::Returned(json!({"batchItemFailures": [{"itemIdentifier": at}]}));
                let transaction = match transaction(&indexes, record) {
                    Ok(Some(transaction)) => transaction,
                    // Nothing to index, or a record that release parked: passed over here.
                    Ok(None) => continue,
                    Err(message) => {
                        tracing::error!(message, "the previous release cannot write a record");
                        return Invocation::Failed { error_type: "PreviousRelease".into(), message };
                    }
                };
                // Each call bounded by an attempt timeout and the invocation's deadline, as
                // that release's were.
                let bound = deadline.min(Instant::now() + ATTEMPT_TIMEOUT);
                let request = client.transact_write_items().set_transact_items(Some(transaction)).send();
                let Ok(answer) = tokio::time::timeout_at(bound.into(), request).await else {
                    return resume();
                };
                match answer {
                    Ok(_) => {
                        counts.transactions.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if refused_as_older(&e) => {
                        counts.refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        tracing::debug!(
                            record = at,
                            error = io_policy::describe(&e),
                            "the previous release's transaction failed; the batch resumes at its record"
                        );
                        return resume();
                    }
                }
            }
            Invocation::Returned(json!({"batchItemFailures": []}))
        })
    })
}

/// What the previous release did in a run.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// Invocations it was given.
    pub(crate) invocations: AtomicU64,
    /// Transactions it wrote.
    pub(crate) transactions: AtomicU64,
    /// Transactions refused: the item's head was newer (this release's fence, or its own).
    pub(crate) refused: AtomicU64,
}

/// The record's transaction: its head put on condition, its entries put and its removed
/// entries deleted, unconditioned. `None` when it touches no index or cannot be planned.
fn transaction(
    indexes: &Indexes,
    record: &stream_runtime::EventRecord,
) -> Result<Option<Vec<TransactWriteItem>>, String> {
    let wire = WireRecord::from_event_record(record);
    let plan = Plan::in_order(indexes, std::slice::from_ref(&wire), Order::Stream, 0);
    if !plan.failures.rejected.is_empty() || plan.failures.stopped.is_some() || plan.writes.is_empty() {
        return Ok(None);
    }
    let mut items = Vec::with_capacity(plan.writes.len());
    for write in plan.writes {
        let table = write.table.to_string();
        let item = match write.op {
            Op::Put(attributes) => attributes,
            Op::Delete(key) => {
                items.push(delete(&table, key.into_iter().map(|(n, v)| (n, v.into())).collect())?);
                continue;
            }
        };
        let item: HashMap<String, AttributeValue> = item.into_iter().map(|(n, v)| (n, v.into())).collect();
        let index =
            indexes.indexes.iter().find(|i| *i.table == *table).ok_or("a write to no index's table")?;
        let pk = match item.get(&index.partition_key) {
            Some(AttributeValue::S(pk)) => pk.clone(),
            _ => return Err(format!("an index item without its partition key {}", index.partition_key)),
        };
        if formats::head::is_head(&pk) {
            let version = item.get(VERSION_ATTRIBUTE).cloned().ok_or("a head without its version")?;
            let put = Put::builder()
                .table_name(&table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(#v) OR #v < :v")
                .expression_attribute_names("#v", VERSION_ATTRIBUTE)
                .expression_attribute_values(":v", version)
                .build()
                .map_err(|e| e.to_string())?;
            items.insert(0, TransactWriteItem::builder().put(put).build());
        } else if formats::tombstone::is_tombstone(item.keys().map(String::as_str)) {
            let key = [&index.partition_key, &index.sort_key]
                .into_iter()
                .filter_map(|name| Some((name.clone(), item.get(name)?.clone())))
                .collect();
            items.push(delete(&table, key)?);
        } else {
            let put =
                Put::builder().table_name(&table).set_item(Some(item)).build().map_err(|e| e.to_string())?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
    }
    if items.len() > MAX_TRANSACTION_WRITES {
        return Err(format!(
            "a record of {} writes, over a transaction's {MAX_TRANSACTION_WRITES}",
            items.len()
        ));
    }
    Ok(Some(items))
}

fn delete(table: &str, key: HashMap<String, AttributeValue>) -> Result<TransactWriteItem, String> {
    let delete = Delete::builder().table_name(table).set_key(Some(key)).build().map_err(|e| e.to_string())?;
    Ok(TransactWriteItem::builder().delete(delete).build())
}

/// Whether the transaction was cancelled by its head's condition alone: the record is older
/// than the item's head.
fn refused_as_older<R>(
    e: &aws_sdk_dynamodb::error::SdkError<
        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError,
        R,
    >,
) -> bool {
    let Some(aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(
        cancelled,
    )) = e.as_service_error()
    else {
        return false;
    };
    cancelled.cancellation_reasons().iter().any(|r| r.code() == Some("ConditionalCheckFailed"))
}

/// Sends each invocation to this release or the previous one: `share` percent of them to the
/// previous one, drawn from a seeded generator.
pub(crate) struct Canary {
    /// The percentage of invocations the previous release takes: moved by the run.
    pub(crate) share: AtomicU8,
    rng: std::sync::Mutex<fastrand::Rng>,
}

impl Canary {
    pub(crate) fn new(seed: u64) -> Arc<Canary> {
        Arc::new(Canary {
            share: AtomicU8::new(0),
            rng: std::sync::Mutex::new(fastrand::Rng::with_seed(seed)),
        })
    }

    /// An invoker that sends each invocation to `previous` or `current` by the share.
    pub(crate) fn invoker(self: &Arc<Canary>, current: Invoker, previous: Invoker) -> Invoker {
        let canary = Arc::clone(self);
        Arc::new(move |event, deadline| {
            let roll = canary.rng.lock().map_or(100, |mut rng| rng.u8(..100));
            if roll < canary.share.load(Ordering::Relaxed) {
                previous(event, deadline)
            } else {
                current(event, deadline)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stream_runtime::fixture::Change;

    fn indexes() -> Indexes {
        Indexes::from_json(
            r#"{"base_key":["id"],"indexes":[{"name":"cf","table":"index","source":"custom_fields","scope":["project"],"tiebreakers":["num"]}]}"#,
        )
        .expect("indexes")
    }

    fn image(fields: &serde_json::Value) -> serde_json::Value {
        json!({"id": {"S": "x1"}, "project": {"S": "p"}, "num": {"N": "1"}, "custom_fields": {"M": fields}})
    }

    /// What the previous release wrote for one record: its head put first, on the condition
    /// that it is absent or older than the record; the entry it calls for put unconditioned;
    /// the entry it removed deleted unconditioned (where this release puts a tombstone).
    #[test]
    fn a_record_is_one_transaction_of_its_head_on_condition_and_its_entries_unconditioned() {
        let mut indexes = indexes();
        indexes.fence_heads = true;
        let record = Change::modify(json!({"id": {"S": "x1"}}))
            .old_image(image(&json!({"a": {"N": "1"}})))
            .new_image(image(&json!({"a": {"N": "2"}})))
            .sequence(500)
            .record()
            .expect("a record");
        let items = transaction(&indexes, &record).expect("planned").expect("a transaction");
        let shape: Vec<(&str, bool, String)> = items
            .iter()
            .map(|t| match (t.put(), t.delete()) {
                (Some(put), _) => {
                    let pk = match put.item().get("pk") {
                        Some(AttributeValue::S(pk)) => pk.clone(),
                        other => format!("{other:?}"),
                    };
                    ("put", put.condition_expression().is_some(), pk)
                }
                (None, Some(delete)) => ("delete", delete.condition_expression().is_some(), String::new()),
                _ => ("other", false, String::new()),
            })
            .collect();
        assert_eq!(shape.len(), 3, "{shape:?}");
        assert!(shape[0].0 == "put" && shape[0].1 && formats::head::is_head(&shape[0].2), "{shape:?}");
        assert!(shape[1..].iter().all(|(_, conditioned, _)| !conditioned), "{shape:?}");
        assert_eq!(shape.iter().filter(|s| s.0 == "delete").count(), 1, "{shape:?}");
    }

    /// A record that touches no index is passed over, as that release did.
    #[test]
    fn a_record_without_the_source_attribute_writes_nothing() {
        let record = Change::modify(json!({"id": {"S": "x1"}}))
            .old_image(json!({"id": {"S": "x1"}, "project": {"S": "p"}}))
            .new_image(json!({"id": {"S": "x1"}, "project": {"S": "q"}}))
            .sequence(501)
            .record()
            .expect("a record");
        assert!(transaction(&indexes(), &record).expect("planned").is_none());
    }
}
