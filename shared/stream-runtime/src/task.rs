//! The shell of a task Lambda: a function that is not a stream consumer (a Step Functions step,
//! a function URL's handler) but is built the same way: configured once at cold start, each
//! invocation's JSON input handled within its deadline, an error reported with an `errorType`
//! that a state machine's `Retry` and `Catch` can match, and a failed cold start printed as one
//! line ([`crate::exit`]).
//!
//! A task implements [`Task`]; its binary's `main` is [`main`]:
//!
//! ```no_run
//! use std::time::Instant;
//! use stream_runtime::Vars;
//! use stream_runtime::task::{InitError, Task};
//!
//! struct Echo { prefix: String }
//!
//! impl Task for Echo {
//!     const NAME: &'static str = "echo";
//!     const ERROR_TYPE: &'static str = "EchoError";
//!     type Input = String;
//!     type Output = String;
//!     type Error = std::convert::Infallible;
//!
//!     async fn init(vars: &Vars<'_>, _sdk: &aws_types::SdkConfig) -> Result<Echo, InitError> {
//!         Ok(Echo { prefix: vars.optional("ECHO_PREFIX").unwrap_or_default() })
//!     }
//!
//!     async fn handle(&self, input: String, _deadline: Instant) -> Result<String, Self::Error> {
//!         Ok(format!("{}{input}", self.prefix))
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     stream_runtime::task::main::<Echo>().await
//! }
//! ```

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use aws_types::SdkConfig;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Vars;

/// Why a task could not start: its configuration, or a resource it reads at cold start.
pub type InitError = Box<dyn std::error::Error + Send + Sync>;

/// A task Lambda: its configuration and its handling of one invocation.
pub trait Task: Send + Sync + Sized + 'static {
    /// Its name (its crate and binary), for the cold start's error line.
    const NAME: &'static str;
    /// The `errorType` of a failed invocation.
    const ERROR_TYPE: &'static str;
    /// The invocation's input.
    type Input: DeserializeOwned + Send;
    /// Its answer.
    type Output: Serialize;
    /// Why an invocation failed.
    type Error: Display;

    /// Builds the task from its environment and the SDK's configuration (the SDK's own retries
    /// on: a task that retries under `io_policy` turns them off for its clients), once, at cold
    /// start. Errors name the variable. (Its future need not be `Send`: it runs before the
    /// first invocation, on the main task.)
    fn init(vars: &Vars<'_>, sdk: &SdkConfig) -> impl Future<Output = Result<Self, InitError>>;

    /// Handles one invocation, within `deadline` (the invocation's).
    fn handle(
        &self,
        input: Self::Input,
        deadline: Instant,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// A task binary's `main`: [`serve`], and its error, if any, as one line and exit status 1.
pub async fn main<T: Task>() -> std::process::ExitCode {
    crate::exit::report(T::NAME, serve::<T>().await)
}

/// Builds `T` from the process's environment once, then serves invocations under
/// `lambda_runtime` until the process ends.
pub async fn serve<T: Task>() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let task = &T::init(&Vars::new(&Vars::process_lookup), &sdk).await?;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<T::Input>| async move {
        let deadline = io_policy::Deadline::from_epoch_millis(event.context.deadline).less(Duration::ZERO);
        task.handle(event.payload, deadline)
            .await
            .map_err(|e| Diagnostic { error_type: T::ERROR_TYPE.to_owned(), error_message: e.to_string() })
    }))
    .await
}
