//! Sending writes with `BatchWriteItem`: chunking, bounded concurrency, retries, narrowing.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::{Attributes, ItemWrite, Op};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, PutRequest, WriteRequest};
use futures_util::{Stream, StreamExt as _};
use io_policy::{Budget, Failure, FailureKind};

use crate::writer::{MAX_BATCH, Report, Retry};

/// Applies planned writes to DynamoDB. Build it once, at cold start, and share it.
#[derive(Debug, Clone)]
pub struct Writer {
    pub(crate) client: Client,
}

/// A write in the SDK's form, with the record it finishes.
#[derive(Clone)]
struct Pending {
    origin: usize,
    table: Arc<str>,
    request: WriteRequest,
}

impl Writer {
    /// A writer over `client`, which must have the SDK's own retries off
    /// (`io_policy::without_sdk_retries`): the budget retries.
    pub fn new(client: Client) -> Writer {
        Writer { client }
    }

    /// Applies `writes`, whose table and key pairs must be distinct, within `budget`.
    ///
    /// Each chunk of 25 is put into the SDK's form only when the window admits it, so the first
    /// request leaves after 25 conversions, not after all of them: the rest overlap the waits.
    pub async fn write(&self, writes: Vec<ItemWrite>, budget: &Budget) -> Report {
        let chunks = crate::writer::chunks(writes, MAX_BATCH);
        self.write_as_ready(futures_util::stream::iter(chunks), budget).await
    }

    /// Applies chunks of at most 25 writes as they come (a plan's, made while the batch is still
    /// being planned), each sent once it has come and the window admits it. The table and key
    /// pairs of all the chunks must be distinct.
    pub(crate) async fn write_as_ready(
        &self,
        chunks: impl Stream<Item = Vec<ItemWrite>>,
        budget: &Budget,
    ) -> Report {
        let reports =
            budget.in_window_as_ready(chunks.map(|chunk| self.convert_and_write(chunk, budget))).await;
        let mut report = Report::default();
        for r in reports {
            report.merge(r);
        }
        report
    }

    /// Converts a chunk to the SDK's form (a write that cannot be is given up on as
    /// record-permanent) and sends it.
    async fn convert_and_write(&self, chunk: Vec<ItemWrite>, budget: &Budget) -> Report {
        let mut report = Report::default();
        let mut pending = Vec::with_capacity(chunk.len());
        for write in chunk {
            let origin = write.origin;
            match Pending::new(write) {
                Ok(p) => pending.push(p),
                Err(reason) => give_up(&mut report, vec![origin], &Failure::record_permanent(reason)),
            }
        }
        if !pending.is_empty() {
            report.merge(self.write_chunk(pending, budget).await);
        }
        report
    }

    /// Sends one chunk until every write is applied or given up on; a record-permanent failure
    /// of several writes is narrowed down by halves.
    fn write_chunk<'a>(
        &'a self,
        pending: Vec<Pending>,
        budget: &'a Budget,
    ) -> Pin<Box<dyn Future<Output = Report> + Send + 'a>> {
        Box::pin(async move {
            let mut report = Report::default();
            let mut retry = Retry::new(budget, pending);
            let ended = loop {
                let (pending, attempts) = match retry.next().await {
                    Ok(Some(next)) => next,
                    Ok(None) => break None,
                    Err(ended) => break Some(ended),
                };
                let mut items: HashMap<String, Vec<WriteRequest>> = HashMap::new();
                for p in &pending {
                    items.entry(p.table.to_string()).or_default().push(p.request.clone());
                }
                let call = self.client.batch_write_item().set_request_items(Some(items)).send();
                let call =
                    Box::pin(async { call.await.map_err(|e| io_policy::classify("BatchWriteItem", &e)) });
                let output = match attempts.run(call).await {
                    Ok(output) => output,
                    Err(failure) => {
                        retry.left(pending, failure);
                        continue;
                    }
                };
                let unprocessed = output.unprocessed_items.unwrap_or_default();
                let sent = pending.len();
                let left = still_pending(pending, &unprocessed);
                report.writes += (sent - left.len()) as u64;
                if !left.is_empty() {
                    budget.window.throttled(std::time::Instant::now());
                    let unsent = format!("BatchWriteItem: {} of {sent} writes unprocessed", left.len());
                    retry.left(left, Failure::throttling(unsent));
                }
            };
            match ended {
                None => {}
                Some((mut left, failure))
                    if failure.kind == FailureKind::RecordPermanent && left.len() > 1 =>
                {
                    tracing::warn!(writes = left.len(), error = %failure.message, "narrowing a rejected BatchWriteItem down by halves");
                    let second = left.split_off(left.len() / 2);
                    report.merge(self.write_chunk(left, budget).await);
                    report.merge(self.write_chunk(second, budget).await);
                }
                Some((left, failure)) => {
                    give_up(&mut report, left.iter().map(|p| p.origin).collect(), &failure);
                }
            }
            report
        })
    }
}

impl Pending {
    fn new(write: ItemWrite) -> Result<Pending, String> {
        let request = match write.op {
            Op::Put(item) => {
                let put = PutRequest::builder()
                    .set_item(Some(sdk_item(item)))
                    .build()
                    .map_err(|e| e.to_string())?;
                WriteRequest::builder().put_request(put).build()
            }
            Op::Delete(key) => {
                let delete = DeleteRequest::builder()
                    .set_key(Some(sdk_item(key)))
                    .build()
                    .map_err(|e| e.to_string())?;
                WriteRequest::builder().delete_request(delete).build()
            }
        };
        Ok(Pending { origin: write.origin, table: write.table, request })
    }
}

/// A planned item in the SDK's form: the one conversion between plan and request.
pub(crate) fn sdk_item(item: Attributes) -> HashMap<String, AttributeValue> {
    item.into_iter().map(|(name, value)| (name, value.into())).collect()
}

/// The writes DynamoDB left unprocessed. If any unprocessed request cannot be matched to one that
/// was sent, every write is kept: resending is idempotent, losing one is not.
fn still_pending(pending: Vec<Pending>, unprocessed: &HashMap<String, Vec<WriteRequest>>) -> Vec<Pending> {
    let total: usize = unprocessed.values().map(Vec::len).sum();
    if total == 0 {
        return Vec::new();
    }
    let (left, done): (Vec<Pending>, Vec<Pending>) = pending
        .into_iter()
        .partition(|p| unprocessed.get(&*p.table).is_some_and(|rs| rs.contains(&p.request)));
    if left.len() == total { left } else { left.into_iter().chain(done).collect() }
}

pub(crate) fn give_up(report: &mut Report, origins: Vec<usize>, failure: &Failure) {
    if origins.is_empty() {
        return;
    }
    tracing::error!(writes = origins.len(), kind = %failure.kind, reason = %failure.message, "giving up on writes");
    report.failed += origins.len() as u64;
    report.failures.extend(origins.into_iter().map(|origin| (origin, failure.clone())));
}
