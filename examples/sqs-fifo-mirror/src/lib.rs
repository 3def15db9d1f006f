//! `sqs-fifo-mirror`: each change of a DynamoDB table sent to an SQS FIFO queue, in each
//! item's order, once. A stream function on `stream-runtime`, outside Sidestream's workspace.
//!
//! - **Order.** Each item's messages share a `MessageGroupId` (the SHA-256 of its keys), and a
//!   request never holds two messages of one item, so a refused message cannot be passed by a
//!   later one of its item. Requests go one after another; the first that fails stops the batch
//!   there, and the runtime reports its first record as the checkpoint.
//! - **Once.** Each message's `MessageDeduplicationId` is its record's `eventID`: the records
//!   Lambda delivers again from a checkpoint are sent again, and SQS drops the copies it took
//!   within the last five minutes.
//! - **Failures, in the runtime's three kinds.** A throttled or failed request is transient and
//!   checkpoints; a missing queue or access denied is systemic; a message SQS can never take (too
//!   large, characters it refuses) is record-permanent: the runtime parks its record whole, in S3,
//!   and the batch goes on. SQS's own codes are classified with [`SQS_CODES`].
//! - **Checked at cold start.** The queue is one of the function's resources ([`Queue`]): init
//!   fails, naming `MIRROR_QUEUE_URL`, when it is missing, out of the role's reach, or takes
//!   smaller messages than `MIRROR_MAX_MESSAGE_BYTES` (a message between the two sizes would be
//!   refused for its size, systemically, and stop the shard). That it is FIFO, its URL says: only
//!   a FIFO queue's name ends in `.fifo`.
//! - **Its own metric.** `MessageBytes`, the bytes of the message bodies SQS took, beside the
//!   runtime's metrics in the `SqsFifoMirror` namespace.
//!
//! | variable | meaning |
//! |---|---|
//! | `MIRROR_QUEUE_URL` | the FIFO queue's URL (required; it must end in `.fifo`) |
//! | `MIRROR_MAX_MESSAGE_BYTES` | the queue's `MaximumMessageSize` (1,024 to 1,048,576; default 1,048,576) |
//!
//! and the runtime's own (`PARKING_BUCKET`, `WRITE_MAX_ATTEMPTS`, …; `stream_runtime::settings`).

pub mod plan;

use aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};
use stream_runtime::io_policy::{ServiceCodes, classify_for};
use stream_runtime::prime::{Check, Named, PrimeError, Primer, Resource, Unfit};
use stream_runtime::{
    Applied, Aws, Budget, ConfigError, Failure, FailureKind, Metric, Planned, RecordFailure, StreamFunction,
    Vars, WireRecord,
};

use crate::plan::{MAX_BATCH_BYTES, Message, Requests};

/// SQS's error codes beyond the AWS-wide ones, for [`classify_for`].
///
/// SQS answers in JSON but names its errors by their query-protocol codes (the
/// `x-amzn-query-error` header, which the SDK reads first): a KMS throttle is
/// `KMS.ThrottlingException`, and `KmsThrottled` its JSON type, kept for emulators that send
/// only that.
pub const SQS_CODES: ServiceCodes = ServiceCodes {
    throttling: &["RequestThrottled", "KMS.ThrottlingException", "KmsThrottled"],
    server: &[],
    content: &["InvalidMessageContents"],
};

/// The function: the queue, its largest message, and the client.
#[derive(Debug)]
pub struct Mirror {
    queue_url: String,
    max_message_bytes: usize,
    sqs: aws_sdk_sqs::Client,
}

/// The function's own metric: the bytes of the message bodies SQS took.
pub const MESSAGE_BYTES: Metric = Metric::Own("MessageBytes");

/// The FIFO queue, as a resource checked at cold start with one `GetQueueAttributes`.
#[derive(Debug, Clone)]
pub struct Queue {
    url: String,
    max_message_bytes: usize,
    sqs: aws_sdk_sqs::Client,
}

impl Resource for Queue {
    fn named(&self) -> Named<'_> {
        Named { kind: "queue", variable: "MIRROR_QUEUE_URL", name: &self.url }
    }

    /// The queue exists, the role reaches it, and it takes messages of
    /// `MIRROR_MAX_MESSAGE_BYTES`. (Not whether it is FIFO: `init` required the `.fifo` suffix,
    /// which only a FIFO queue's name has; and SQS answers a standard queue asked for `FifoQueue`
    /// with `InvalidAttributeName`.)
    fn check<'a>(&'a self, primer: &'a Primer<'a>) -> Check<'a> {
        Box::pin(async move {
            let answer = primer
                .budget()
                .call(|| {
                    let call = self
                        .sqs
                        .get_queue_attributes()
                        .queue_url(&self.url)
                        .attribute_names(QueueAttributeName::MaximumMessageSize)
                        .send();
                    async move { call.await.map_err(|e| classify_for("GetQueueAttributes", &e, &SQS_CODES)) }
                })
                .await?;
            let size = answer
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::MaximumMessageSize))
                .and_then(|s| s.parse::<usize>().ok());
            match size {
                Some(size) if size < self.max_message_bytes => Err(Unfit::Wrong(PrimeError::Unusable {
                    variable: self.named().variable,
                    message: format!(
                        "queue {} takes messages of up to {size} bytes, but MIRROR_MAX_MESSAGE_BYTES is {}: \
                         set MIRROR_MAX_MESSAGE_BYTES to {size}, or the queue would refuse the messages between",
                        self.url, self.max_message_bytes
                    ),
                })),
                _ => Ok(()),
            }
        })
    }
}

impl Mirror {
    /// Sends one request's messages, within `budget`: the entries SQS did not take, each with
    /// its failure, or the request's failure.
    async fn send(&self, messages: &[Message], budget: &Budget) -> Result<Vec<(usize, Failure)>, Failure> {
        let entries: Vec<SendMessageBatchRequestEntry> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(&m.body)
                    .message_group_id(&m.group)
                    .message_deduplication_id(&m.dedup)
                    .build()
                    .map_err(|e| Failure::systemic(format!("SendMessageBatch: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let answer = budget
            .call(|| async {
                let request = self
                    .sqs
                    .send_message_batch()
                    .queue_url(&self.queue_url)
                    .set_entries(Some(entries.clone()));
                request.send().await.map_err(|e| classify_for("SendMessageBatch", &e, &SQS_CODES))
            })
            .await?;
        let failed = answer
            .failed()
            .iter()
            .filter_map(|f| {
                let message = messages.get(f.id().parse::<usize>().ok()?)?;
                let kind = if f.sender_fault() && SQS_CODES.content.contains(&f.code()) {
                    FailureKind::RecordPermanent
                } else if f.sender_fault() {
                    FailureKind::Systemic
                } else {
                    FailureKind::Transient
                };
                let what = format!("SendMessageBatch: {}: {}", f.code(), f.message().unwrap_or_default());
                Some((message.origin, Failure::new(kind, what)))
            })
            .collect();
        Ok(failed)
    }
}

impl StreamFunction for Mirror {
    const NAME: &'static str = "sqs-fifo-mirror";
    const NAMESPACE: &'static str = "SqsFifoMirror";
    const METRICS: &'static [&'static str] = &[MESSAGE_BYTES.name()];
    const STREAM_VIEWS: &'static [&'static str] =
        &["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"];
    type Plan = Requests;

    fn init(vars: &Vars<'_>, aws: &Aws) -> Result<Mirror, ConfigError> {
        let queue_url = vars.required("MIRROR_QUEUE_URL", "the SQS FIFO queue's URL")?;
        // A queue name's suffix, which SQS spells in lower case, not a file's extension.
        #[allow(clippy::case_sensitive_file_extension_comparisons)]
        if !queue_url.ends_with(".fifo") {
            return Err(ConfigError::Invalid {
                var: "MIRROR_QUEUE_URL",
                reason: format!("{queue_url} is not a FIFO queue's URL (it must end in .fifo)"),
            });
        }
        let max_message_bytes =
            vars.integer("MIRROR_MAX_MESSAGE_BYTES", MAX_BATCH_BYTES, 1_024, MAX_BATCH_BYTES)?;
        let sqs = aws_sdk_sqs::Client::new(aws.sdk_config());
        Ok(Mirror { queue_url, max_message_bytes, sqs })
    }

    /// The queue ([`Queue`]); the runtime adds the parking bucket.
    fn resources(&self) -> Vec<Box<dyn Resource>> {
        vec![Box::new(Queue {
            url: self.queue_url.clone(),
            max_message_bytes: self.max_message_bytes,
            sqs: self.sqs.clone(),
        })]
    }

    fn plan(&self, records: &[WireRecord<'_>]) -> Planned<Requests> {
        plan::plan(records, self.max_message_bytes)
    }

    /// Sends the requests in order, and stops at the first that fails: its first record is
    /// the checkpoint, and the requests after it wait for Lambda's retry.
    async fn apply(&self, requests: Requests, budget: &Budget) -> Applied {
        let mut applied = Applied::default();
        let mut bytes = 0;
        for messages in &requests {
            match self.send(messages, budget).await {
                Ok(failed) => {
                    applied.writes += (messages.len() - failed.len()) as u64;
                    bytes += messages
                        .iter()
                        .filter(|m| !failed.iter().any(|(origin, _)| *origin == m.origin))
                        .map(|m| m.body.len() as u64)
                        .sum::<u64>();
                    applied.failed_writes += failed.len() as u64;
                    let stop = failed.iter().any(|(_, f)| f.kind != FailureKind::RecordPermanent);
                    applied
                        .failures
                        .extend(failed.into_iter().map(|(origin, f)| RecordFailure::new(origin, f)));
                    if stop {
                        break;
                    }
                }
                Err(failure) => {
                    applied.failed_writes += messages.len() as u64;
                    if let Some(first) = messages.first() {
                        applied.failures.push(RecordFailure::new(first.origin, failure));
                    }
                    break;
                }
            }
        }
        applied.counts.push((MESSAGE_BYTES, bytes));
        applied
    }
}
