//! Where a function's records come from, chosen at cold start by `CHANGE_SOURCE`: a table's
//! DynamoDB stream (Lambda's DynamoDB event, the default), or its Kinesis data stream (Kinesis
//! Data Streams for DynamoDB: Lambda's Kinesis event, turned into change records by
//! [`stream_kit::kinesis`], each record's `SequenceNumber` its version, the change time).
//!
//! [`serve`] runs a handler under `lambda_runtime` on the source's events and answers in the
//! source's terms: a Kinesis checkpoint names the Kinesis sequence number. An event that holds
//! a record that is no DynamoDB change record (a Kinesis stream that is not a table's change
//! source) fails the invocation, naming the record, logged as a systemic failure: Lambda retries
//! the batch up to `MaximumRetryAttempts` and then gives it up to the on-failure destination.
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `CHANGE_SOURCE` | `dynamodb-streams` | `dynamodb-streams` or `kinesis`: the event source mapping's kind |

use std::future::Future;

use io_policy::Deadline;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use stream_kit::{ConfigError, DynamoDbEventResponse, Event, Vars};

use crate::NoCheckpoint;

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
            &[
                ("dynamodb-streams", Source::DynamoDbStreams),
                ("kinesis", Source::Kinesis),
            ],
        )
    }
}

/// What handles a batch of change records: a function's runtime, or several behind one mapping.
pub trait Handler: Sync {
    /// Handles one batch; errs only when no checkpoint can be reported.
    fn handle(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> impl Future<Output = Result<DynamoDbEventResponse, NoCheckpoint>> + Send;
}

/// Runs `handler` under `lambda_runtime` on `source`'s events, until the runtime stops.
pub async fn serve<H: Handler>(source: Source, handler: &H) -> Result<(), lambda_runtime::Error> {
    match source {
        Source::DynamoDbStreams => {
            lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
                let deadline = Deadline::from_epoch_millis(event.context.deadline);
                Box::pin(handler.handle(event.payload, deadline))
                    .await
                    .map_err(Diagnostic::from)
            }))
            .await
        }
        Source::Kinesis => {
            lambda_runtime::run(service_fn(
                move |event: LambdaEvent<serde_json::Value>| async move {
                    let deadline = Deadline::from_epoch_millis(event.context.deadline);
                    kinesis(handler, &event.payload, deadline).await
                },
            ))
            .await
        }
    }
}

/// One Kinesis event (Lambda's JSON) handled by `handler`: its records turned into change
/// records, and the checkpoint, if any, named by its Kinesis sequence number.
pub async fn kinesis<H: Handler>(
    handler: &H,
    event: &serde_json::Value,
    deadline: Deadline,
) -> Result<DynamoDbEventResponse, Diagnostic> {
    let batch = stream_kit::kinesis::from_value(event).map_err(|e| {
        tracing::error!(kind = "systemic", error = %e, "the Kinesis event holds no DynamoDB change records");
        Diagnostic {
            error_type: NOT_CHANGES.to_owned(),
            error_message: e.to_string(),
        }
    })?;
    let response = Box::pin(handler.handle(batch.event, deadline))
        .await
        .map_err(Diagnostic::from)?;
    Ok(batch.places.response(response))
}

/// The `errorType` of an invocation whose Kinesis event holds no DynamoDB change records.
pub const NOT_CHANGES: &str = "NotDynamoDbChanges";

#[cfg(test)]
mod tests;
