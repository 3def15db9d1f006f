//! Where a function's records come from, chosen at cold start by `CHANGE_SOURCE`: a table's
//! DynamoDB stream (Lambda's DynamoDB event, the default), or its Kinesis data stream (Kinesis
//! Data Streams for DynamoDB: Lambda's Kinesis event, turned into change records by
//! [`crate::kinesis`], each record's `SequenceNumber` its version, the change time).
//!
//! [`serve`] runs a handler under `lambda_runtime` on the source's events and answers in the
//! source's terms: a Kinesis checkpoint names the Kinesis sequence number. A DynamoDB stream's
//! event is read in place from the invocation's bytes ([`json`]); bytes that are not such an
//! event fail the invocation (`NotDynamoDbStreamEvent`), named. An event that holds
//! a record that is no DynamoDB change record (a Kinesis stream that is not a table's change
//! source) fails the invocation, naming the record, logged as a systemic failure: Lambda retries
//! the batch up to `MaximumRetryAttempts` and then gives it up to the on-failure destination.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `CHANGE_SOURCE` | `dynamodb-streams` | `dynamodb-streams` or `kinesis`: the event source mapping's kind |

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::wire::{Batch, WireRecord};
use crate::{ConfigError, DynamoDbEventResponse, Vars};
use bytes::Bytes;
use io_policy::Deadline;
use lambda_runtime::tower::Layer;
use lambda_runtime::{Diagnostic, LambdaEvent, LambdaInvocation, Runtime, Service, service_fn};

use crate::{NoCheckpoint, Whole};

/// The variable that names the source.
pub const SOURCE_VAR: &str = "CHANGE_SOURCE";

/// Where a function's records come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The table's DynamoDB stream.
    DynamoDbStreams,
    /// The table's Kinesis data stream.
    Kinesis,
}

impl Source {
    /// Reads `CHANGE_SOURCE`; an unknown value is named.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Source, ConfigError> {
        vars.choice(
            SOURCE_VAR,
            &[("dynamodb-streams", Source::DynamoDbStreams), ("kinesis", Source::Kinesis)],
        )
    }
}

/// What handles a batch of change records: a function's runtime, or several behind one mapping.
pub trait Handler: Sync {
    /// Handles one batch and writes its metrics; errs only when no checkpoint can be reported.
    fn handle_batch<'r>(
        &'r self,
        batch: Delivered<'r>,
    ) -> impl Future<Output = Result<DynamoDbEventResponse, NoCheckpoint>> + Send + 'r;
}

/// One invocation's batch as the runtime hands it to a [`Handler`].
#[derive(Debug)]
pub struct Delivered<'r> {
    /// The records, read in place.
    pub records: &'r [WireRecord<'r>],
    /// The way back to each record as delivered ([`Whole`]).
    pub whole: Whole<'r>,
    /// When the invocation ends.
    pub deadline: Deadline,
}

/// Runs `handler` under `lambda_runtime` on `source`'s events, until the runtime stops.
///
/// A DynamoDB stream's event is read in place from the invocation's bytes: the outermost layer
/// (`Bodies`) takes the body before `lambda_runtime` would decode it, hands the inner service
/// `null`, and the handler reads the bytes it kept ([`json`]). A Kinesis event is decoded, since
/// its change records are base64 inside it ([`kinesis`]).
pub async fn serve<H: Handler>(source: Source, handler: &H) -> Result<(), lambda_runtime::Error> {
    match source {
        Source::DynamoDbStreams => {
            let bodies = Bodies::default();
            let kept = bodies.clone();
            let service = service_fn(move |event: LambdaEvent<()>| {
                let body = kept.take(&event.context.request_id);
                async move {
                    let deadline = Deadline::from_epoch_millis(event.context.deadline);
                    json(handler, &body, deadline).await
                }
            });
            Runtime::new(service).layer(lambda_runtime::layers::TracingLayer::new()).layer(bodies).run().await
        }
        Source::Kinesis => {
            lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
                let deadline = Deadline::from_epoch_millis(event.context.deadline);
                kinesis(handler, &event.payload, deadline).await
            }))
            .await
        }
    }
}

/// One DynamoDB stream event, as the invocation's bytes, handled by `handler`: read in place.
/// Bytes that are not such an event fail the invocation, named, logged as a systemic failure.
pub async fn json<H: Handler>(
    handler: &H,
    body: &[u8],
    deadline: Deadline,
) -> Result<DynamoDbEventResponse, Diagnostic> {
    let not_an_event = |error: String| {
        tracing::error!(kind = "systemic", %error, "the invocation is not a DynamoDB stream event");
        Diagnostic { error_type: NOT_AN_EVENT.to_owned(), error_message: error }
    };
    let text = std::str::from_utf8(body).map_err(|e| not_an_event(format!("the event is not UTF-8: {e}")))?;
    let batch = Batch::parse(text).map_err(|e| not_an_event(e.to_string()))?;
    Box::pin(handler.handle_batch(Delivered { records: &batch.records, whole: Whole::text(text), deadline }))
        .await
        .map_err(Diagnostic::from)
}

/// The `errorType` of an invocation whose payload is not a DynamoDB stream event.
pub(crate) const NOT_AN_EVENT: &str = "NotDynamoDbStreamEvent";

/// The invocations' bodies, kept by request id between the outermost layer, which takes each
/// body as `lambda_runtime` received it, and the handler, which reads it. The inner layers see
/// `null` in its place, so `lambda_runtime` never decodes the event. The bytes are shared, not
/// copied.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bodies(Arc<Mutex<HashMap<String, Bytes>>>);

impl Bodies {
    /// The body of invocation `request_id`, once; empty when none was kept.
    pub(crate) fn take(&self, request_id: &str) -> Bytes {
        self.lock().remove(request_id).unwrap_or_default()
    }

    fn keep(&self, request_id: String, body: Bytes) {
        self.lock().insert(request_id, body);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Bytes>> {
        // A panic while holding the lock leaves the map whole: take it back.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<S> Layer<S> for Bodies {
    type Service = KeepBody<S>;

    fn layer(&self, inner: S) -> KeepBody<S> {
        KeepBody { bodies: self.clone(), inner }
    }
}

/// The service [`Bodies`] puts around `lambda_runtime`'s own.
#[derive(Debug)]
pub(crate) struct KeepBody<S> {
    bodies: Bodies,
    inner: S,
}

impl<S: Service<LambdaInvocation>> Service<LambdaInvocation> for KeepBody<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut invocation: LambdaInvocation) -> S::Future {
        let body = std::mem::replace(&mut invocation.body, Bytes::from_static(b"null"));
        self.bodies.keep(invocation.context.request_id.clone(), body);
        self.inner.call(invocation)
    }
}

/// One Kinesis event (Lambda's JSON) handled by `handler`: its records turned into change
/// records, and the checkpoint, if any, named by its Kinesis sequence number.
pub async fn kinesis<H: Handler>(
    handler: &H,
    event: &serde_json::Value,
    deadline: Deadline,
) -> Result<DynamoDbEventResponse, Diagnostic> {
    let batch = kinesis_batch(event)?;
    let records = WireRecord::view_all(&batch.event.records);
    let whole = Whole::events(&batch.event.records);
    let delivered = Delivered { records: &records, whole, deadline };
    let response = Box::pin(handler.handle_batch(delivered)).await.map_err(Diagnostic::from)?;
    Ok(batch.places.response(response))
}

/// A Kinesis event's DynamoDB change records, or why the invocation is refused whole (both
/// systemic, logged as such): the event holds no change records ([`NOT_CHANGES`]), or their
/// change times are less precise than microseconds ([`COARSE_TIMES`]), which cannot order one
/// item's changes.
pub fn kinesis_batch(event: &serde_json::Value) -> Result<crate::kinesis::Batch, Diagnostic> {
    let batch = crate::kinesis::from_value(event).map_err(|e| {
        tracing::error!(kind = "systemic", error = %e, "the Kinesis event holds no DynamoDB change records");
        Diagnostic { error_type: NOT_CHANGES.to_owned(), error_message: e.to_string() }
    })?;
    batch.refuse_coarse_times().map_err(|e| {
        tracing::error!(kind = "systemic", error = %e, "the Kinesis event's change times are not in microseconds");
        Diagnostic { error_type: COARSE_TIMES.to_owned(), error_message: e.to_string() }
    })?;
    Ok(batch)
}

/// The `errorType` of an invocation whose Kinesis event holds no DynamoDB change records.
pub const NOT_CHANGES: &str = "NotDynamoDbChanges";

/// The `errorType` of an invocation whose Kinesis event's change times are less precise than
/// microseconds (`kinesis::Batch::refuse_coarse_times`).
pub const COARSE_TIMES: &str = "CoarseChangeTimes";

#[cfg(test)]
mod tests;
