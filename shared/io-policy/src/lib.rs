//! One I/O policy for the AWS calls of a Lambda function (or any bounded job).
//!
//! - [`failure`]: the three kinds of failure (transient, systemic, record-permanent) and the
//!   classification of AWS errors into them.
//! - [`policy`]: retries with jittered exponential backoff, a per-attempt timeout and a deadline
//!   that bounds everything, counted in a [`Tally`].
//! - [`deadline`]: the invocation's deadline as a monotonic instant.
//! - [`window`]: how many requests are in flight, adapted to throttling.
//! - [`dynamodb`]: `BatchGetItem` drained of its unprocessed keys under the budget.
//! - [`without_sdk_retries`]: the SDK configuration every client is built from, so that this
//!   policy is the only one retrying.
//!
//! Nothing here knows about streams. A service whose error codes [`classify`] does not know
//! is classified with its own ([`ServiceCodes`], [`classify_for`]).

pub mod deadline;
pub mod dynamodb;
pub mod failure;
pub mod policy;
pub mod window;

pub use deadline::Deadline;
pub use dynamodb::{batch_get_item, conditional};
pub use failure::{Failure, FailureKind, RequestFailed, ServiceCodes, classify, classify_for, describe};
pub use policy::{Attempts, Bounded, Budget, Policy, Tally};
pub use window::Window;

use aws_smithy_types::retry::RetryConfig;
use aws_types::SdkConfig;

/// `sdk` with the SDK's own retries turned off: [`Budget`] retries, so that attempts are counted
/// once and the deadline bounds them all.
pub fn without_sdk_retries(sdk: &SdkConfig) -> SdkConfig {
    sdk.to_builder().retry_config(RetryConfig::disabled()).build()
}

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
