//! Sending writes with `BatchWriteItem`: chunking, bounded concurrency, retries, the deadline.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::batch_write_item::BatchWriteItemError;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, PutRequest, WriteRequest};
use futures_util::stream::{self, StreamExt};
use stream_kit::{Deadline, Op, Write};

use crate::retry::{ErrorClass, WriterConfig};
use crate::{MAX_BATCH, Report};

/// Applies planned writes to DynamoDB. Build it once, at cold start, and share it.
#[derive(Debug, Clone)]
pub struct Writer {
    client: Client,
    config: WriterConfig,
}

/// A write in the SDK's form, with the record it finishes.
struct Pending {
    origin: usize,
    table: Arc<str>,
    request: WriteRequest,
}

impl Writer {
    /// A writer over a DynamoDB client built from `client_config`, with the SDK's own retries
    /// turned off: this writer retries, so that attempts are counted once and stop in time.
    pub fn new(client_config: &aws_sdk_dynamodb::Config, config: WriterConfig) -> Writer {
        let client_config = client_config
            .to_builder()
            .retry_config(RetryConfig::disabled())
            .build();
        Writer {
            client: Client::from_conf(client_config),
            config,
        }
    }

    /// Applies `writes`, whose table and key pairs must be distinct, stopping the configured
    /// margin before `deadline`.
    pub async fn write(&self, writes: Vec<Write>, deadline: Deadline) -> Report {
        let stop_at = deadline.less(self.config.margin);
        let mut report = Report::default();
        let mut chunks: Vec<Vec<Pending>> = Vec::with_capacity(crate::requests_for(writes.len()));
        let mut chunk = Vec::with_capacity(MAX_BATCH);
        for write in writes {
            let origin = write.origin;
            match Pending::new(write) {
                Ok(pending) => chunk.push(pending),
                Err(reason) => give_up(&mut report, [origin], reason),
            }
            if chunk.len() == MAX_BATCH {
                chunks.push(std::mem::replace(&mut chunk, Vec::with_capacity(MAX_BATCH)));
            }
        }
        if !chunk.is_empty() {
            chunks.push(chunk);
        }
        let reports: Vec<Report> = stream::iter(chunks)
            .map(|chunk| self.write_chunk(chunk, stop_at))
            .buffer_unordered(self.config.concurrency)
            .collect()
            .await;
        for r in reports {
            report.merge(r);
        }
        report
    }

    async fn write_chunk(&self, mut pending: Vec<Pending>, stop_at: Instant) -> Report {
        let mut report = Report::default();
        let policy = self.config.retry;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let now = Instant::now();
            if now >= stop_at {
                give_up(
                    &mut report,
                    pending.iter().map(|p| p.origin),
                    "stopped before the invocation deadline".into(),
                );
                return report;
            }
            let mut items: HashMap<String, Vec<WriteRequest>> = HashMap::new();
            for p in &pending {
                items
                    .entry(p.table.to_string())
                    .or_default()
                    .push(p.request.clone());
            }
            report.requests += 1;
            if attempt > 1 {
                report.retries += 1;
            }
            let budget = (stop_at - now).min(self.config.attempt_timeout);
            let call = self
                .client
                .batch_write_item()
                .set_request_items(Some(items))
                .send();
            let (class, reason) = match tokio::time::timeout(budget, call).await {
                Ok(Ok(output)) => {
                    let unprocessed = output.unprocessed_items.unwrap_or_default();
                    let sent = pending.len();
                    pending = still_pending(pending, &unprocessed);
                    report.writes += (sent - pending.len()) as u64;
                    if pending.is_empty() {
                        return report;
                    }
                    (
                        ErrorClass::Throttled,
                        format!("{} of {sent} writes unprocessed", pending.len()),
                    )
                }
                Ok(Err(err)) => (classify(&err), DisplayErrorContext(&err).to_string()),
                Err(_) => (
                    ErrorClass::Transient,
                    format!("attempt timed out after {} ms", budget.as_millis()),
                ),
            };
            if !class.is_retryable() || attempt >= policy.max_attempts {
                let mut why = reason;
                if class.is_retryable() {
                    let _ = write!(why, " (gave up after {attempt} attempts)");
                }
                give_up(&mut report, pending.iter().map(|p| p.origin), why);
                return report;
            }
            let delay = policy.backoff(attempt, fastrand::f64());
            if Instant::now() + delay >= stop_at {
                give_up(
                    &mut report,
                    pending.iter().map(|p| p.origin),
                    format!("{reason}; no time to retry before the invocation deadline"),
                );
                return report;
            }
            tracing::warn!(attempt, delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), writes = pending.len(), %reason, "retrying BatchWriteItem");
            tokio::time::sleep(delay).await;
        }
    }
}

impl Pending {
    fn new(write: Write) -> Result<Pending, String> {
        let request = match write.op {
            Op::Put(item) => {
                let item: HashMap<String, AttributeValue> = item.into();
                let put = PutRequest::builder()
                    .set_item(Some(item))
                    .build()
                    .map_err(|e| e.to_string())?;
                WriteRequest::builder().put_request(put).build()
            }
            Op::Delete(key) => {
                let key: HashMap<String, AttributeValue> = key.into();
                let delete = DeleteRequest::builder()
                    .set_key(Some(key))
                    .build()
                    .map_err(|e| e.to_string())?;
                WriteRequest::builder().delete_request(delete).build()
            }
        };
        Ok(Pending {
            origin: write.origin,
            table: write.table,
            request,
        })
    }
}

/// The writes DynamoDB left unprocessed. If any unprocessed request cannot be matched to one that
/// was sent, every write is kept: resending is idempotent, losing one is not.
fn still_pending(pending: Vec<Pending>, unprocessed: &HashMap<String, Vec<WriteRequest>>) -> Vec<Pending> {
    let total: usize = unprocessed.values().map(Vec::len).sum();
    if total == 0 {
        return Vec::new();
    }
    let (left, done): (Vec<Pending>, Vec<Pending>) = pending.into_iter().partition(|p| {
        unprocessed
            .get(&*p.table)
            .is_some_and(|rs| rs.contains(&p.request))
    });
    if left.len() == total {
        left
    } else {
        left.into_iter().chain(done).collect()
    }
}

fn classify(err: &SdkError<BatchWriteItemError>) -> ErrorClass {
    match err {
        SdkError::ServiceError(ctx) => {
            ErrorClass::of_service_error(ctx.err().code(), ctx.raw().status().as_u16())
        }
        SdkError::DispatchFailure(failure) if failure.is_user() => ErrorClass::Permanent,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            ErrorClass::Transient
        }
        _ => ErrorClass::Permanent,
    }
}

fn give_up(report: &mut Report, origins: impl IntoIterator<Item = usize>, reason: String) {
    let mut n = 0;
    for origin in origins {
        n += 1;
        report.first_failed_origin = Some(report.first_failed_origin.map_or(origin, |o| o.min(origin)));
    }
    if n > 0 {
        tracing::error!(writes = n, %reason, "giving up on writes; their records will be retried");
        report.failed += n;
        report.first_error.get_or_insert(reason);
    }
}
