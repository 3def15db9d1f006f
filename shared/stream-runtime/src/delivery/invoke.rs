//! How a batch reaches a function: an [`Invoker`] takes Lambda's event and the invocation's
//! deadline, and answers with an [`Invocation`]; a [`KinesisInvoker`] takes Lambda's Kinesis
//! event instead.
//!
//! Like Lambda, the caller owns each invocation's timeout: an invoker gets the deadline, which an
//! in-process function sees as its context's deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use futures_util::future::BoxFuture;
use serde_json::Value;

/// What an invocation came back with.
#[derive(Debug, Clone, PartialEq)]
pub enum Invocation {
    /// The function returned this response (JSON; `null` for an empty body).
    Returned(Value),
    /// The function failed: it returned an error, crashed or timed out.
    Failed {
        /// `errorType`, or what went wrong with the invocation itself.
        error_type: String,
        /// `errorMessage`.
        message: String,
    },
}

impl Invocation {
    /// A handler's result as an invocation's: the response, or an error as Lambda reports it
    /// (its type's name as `errorType`).
    pub fn answer<T: serde::Serialize, E: std::fmt::Display>(result: Result<T, E>) -> Invocation {
        match result {
            Ok(response) => Invocation::Returned(serde_json::to_value(response).unwrap_or_default()),
            Err(error) => Invocation::Failed {
                error_type: std::any::type_name::<E>().to_owned(),
                message: error.to_string(),
            },
        }
    }
}

/// Invokes a function with a batch of records, to answer by the deadline.
pub type Invoker = Arc<dyn Fn(Event, Instant) -> BoxFuture<'static, Invocation> + Send + Sync>;

/// Invokes a function with a Kinesis event (Lambda's JSON: each record's `kinesis.data` the
/// base64 of a change record), to answer by the deadline.
pub type KinesisInvoker = Arc<dyn Fn(Value, Instant) -> BoxFuture<'static, Invocation> + Send + Sync>;

/// An event holding `records`, as Lambda sends it.
pub fn event(records: Vec<EventRecord>) -> Event {
    let mut event = Event::default();
    event.records = records;
    event
}

/// An invoker that calls `handler` in this process with the event and its deadline.
pub fn in_process<F, Fut>(handler: F) -> Invoker
where
    F: Fn(Event, Instant) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Invocation> + Send + 'static,
{
    Arc::new(move |event, deadline| Box::pin(handler(event, deadline)))
}
