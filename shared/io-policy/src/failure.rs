//! The failure model: every error is one of three kinds, and the kind decides what happens next.
//!
//! | kind | examples | what the runtime does |
//! |---|---|---|
//! | [`FailureKind::Transient`] | throttling, 5xx, timeouts, a broken connection | retries within the deadline, then checkpoints: a later retry will succeed |
//! | [`FailureKind::Systemic`] | a missing table or bucket, access denied, configuration that does not match the table | checkpoints and alarms: every record would fail alike until an operator fixes the cause |
//! | [`FailureKind::RecordPermanent`] | a validation error caused by the record's content, an item over 400 KB, a malformed record | parks the record with its full content and goes on with the batch |
//!
//! `kind_of` classifies a service's answer by its error code, HTTP status and message;
//! [`classify`] does the same for any AWS SDK error.

use std::fmt;

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// The three kinds of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// A retry will succeed: throttling, server errors, timeouts, the network.
    Transient,
    /// Nothing will succeed until an operator acts: configuration, a missing resource, access.
    Systemic,
    /// This record's content can never succeed.
    RecordPermanent,
}

impl FailureKind {
    /// The stable name used in logs, metrics and parked records.
    pub const fn as_str(self) -> &'static str {
        match self {
            FailureKind::Transient => "transient",
            FailureKind::Systemic => "systemic",
            FailureKind::RecordPermanent => "record-permanent",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A classified failure: its kind and what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} failure: {message}")]
pub struct Failure {
    /// What kind of failure it is.
    pub kind: FailureKind,
    /// What happened, naming the thing and, for limits, the limit.
    pub message: String,
    /// Whether the service throttled the request (a transient failure that also tells the
    /// write window to shrink).
    pub throttled: bool,
}

impl Failure {
    /// A failure of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure { kind, message: message.into(), throttled: false }
    }

    /// A transient failure caused by throttling (or by writes left unprocessed, DynamoDB's way
    /// of throttling a batch): the write window shrinks.
    pub fn throttling(message: impl Into<String>) -> Failure {
        Failure { throttled: true, ..Failure::transient(message) }
    }

    /// A failure that a retry will get past.
    pub fn transient(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::Transient, message)
    }

    /// A failure that needs an operator.
    pub fn systemic(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::Systemic, message)
    }

    /// A failure of this record's content.
    pub fn record_permanent(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::RecordPermanent, message)
    }
}

/// Error codes that mean "slow down" (DynamoDB, S3 and the AWS-wide ones).
const THROTTLING: [&str; 9] = [
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    "Throttling",
    "ThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "TransactionInProgressException",
    "LimitExceededException",
];

/// Error codes of a service-side fault that a retry gets past.
const SERVER: [&str; 5] = [
    "InternalServerError",
    "InternalError",
    "ServiceUnavailable",
    "RequestTimeout",
    "ReplicatedWriteConflictException",
];

/// Error codes that say the request's content can never succeed, whoever sends it when.
const CONTENT: [&str; 5] = [
    "ValidationException",
    "ItemCollectionSizeLimitExceededException",
    "EntityTooLarge",
    "KeyTooLongError",
    "InvalidArgument",
];

/// Parts of a `ValidationException` message that blame the table's schema or the request's
/// shape, not the item: a configuration that does not match the table fails every record alike.
const SCHEMA_MISMATCH: [&str; 4] = [
    "Type mismatch for key",
    "Missing the key",
    "does not match the schema",
    "provided key element does not match",
];

/// A service's own error codes, for a caller of a service whose codes [`classify`] does not know
/// (it knows DynamoDB's, S3's and the AWS-wide ones): [`classify_for`] reads them first.
///
/// ```
/// use io_policy::ServiceCodes;
/// // Amazon SQS: throttled sends, and a message SQS refuses for its content.
/// const SQS: ServiceCodes = ServiceCodes {
///     throttling: &["RequestThrottled", "KMS.ThrottlingException"],
///     server: &[],
///     content: &["InvalidMessageContents", "InvalidParameterValue"],
/// };
/// assert!(SQS.content.contains(&"InvalidMessageContents"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServiceCodes {
    /// Codes that mean "slow down": transient, and the write window shrinks.
    pub throttling: &'static [&'static str],
    /// Codes of a service-side fault that a retry gets past: transient.
    pub server: &'static [&'static str],
    /// Codes that say the request's content can never succeed: record-permanent.
    pub content: &'static [&'static str],
}

impl ServiceCodes {
    /// No codes beyond the ones [`classify`] knows.
    pub const NONE: ServiceCodes = ServiceCodes { throttling: &[], server: &[], content: &[] };

    fn throttles(&self, code: &str) -> bool {
        THROTTLING.contains(&code) || self.throttling.contains(&code)
    }
}

/// Classifies a service's error answer by its code, HTTP status and message.
///
/// Unknown client errors are systemic rather than record-permanent: checkpointing stalls a shard
/// until an operator looks, but parking would move every record of the stream aside.
pub(crate) fn kind_of(code: Option<&str>, status: u16, message: &str, codes: &ServiceCodes) -> FailureKind {
    match code {
        Some(code) if codes.throttles(code) || SERVER.contains(&code) || codes.server.contains(&code) => {
            FailureKind::Transient
        }
        Some(code) if codes.content.contains(&code) => FailureKind::RecordPermanent,
        Some("ValidationException") if blames_the_schema(message) => FailureKind::Systemic,
        Some(code) if CONTENT.contains(&code) => FailureKind::RecordPermanent,
        _ if status >= 500 || status == 429 || status == 408 => FailureKind::Transient,
        _ => FailureKind::Systemic,
    }
}

/// Whether a `ValidationException`'s message blames the table's schema ([`SCHEMA_MISMATCH`]).
fn blames_the_schema(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    SCHEMA_MISMATCH.iter().any(|m| message.contains(&m.to_ascii_lowercase()))
}

/// What an AWS SDK error says, for people: a service's error code and message, or else the
/// error and its causes, each by its `Display` (not the SDK's `Debug` dump of the response).
pub fn describe<E>(err: &SdkError<E, Response>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    if let SdkError::ServiceError(ctx) = err {
        let (e, status) = (ctx.err(), ctx.raw().status().as_u16());
        return match (e.code(), e.message()) {
            (Some(code), Some(message)) => format!("{code}: {message}"),
            (Some(code), None) => format!("{code} (HTTP {status})"),
            _ => format!("HTTP {status}: {e}"),
        };
    }
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(err);
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = inner.source();
    }
    text
}

/// Classifies an AWS SDK error from operation `op` (named in the message).
pub fn classify<E>(op: &str, err: &SdkError<E, Response>) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    classify_for(op, err, &ServiceCodes::NONE)
}

/// [`classify`], reading the service's own `codes` as well.
pub fn classify_for<E>(op: &str, err: &SdkError<E, Response>, codes: &ServiceCodes) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let mut message = format!("{op}: {}", describe(err));
    // No Region configured: the request cannot be signed, now or on any retry.
    let no_region = matches!(err, SdkError::DispatchFailure(_)) && message.contains("missing signing region");
    if no_region {
        message.push_str(" (set AWS_REGION)");
    }
    let kind = match err {
        SdkError::ServiceError(ctx) => {
            let (code, status) = (ctx.err().code(), ctx.raw().status().as_u16());
            kind_of(code, status, ctx.err().message().unwrap_or_default(), codes)
        }
        SdkError::DispatchFailure(_) if no_region => FailureKind::Systemic,
        SdkError::DispatchFailure(failure) if !failure.is_user() => FailureKind::Transient,
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => FailureKind::Transient,
        // A request that could not be built, a dispatch the caller's own configuration broke
        // (a bad endpoint, no credentials), or anything unknown: it fails every time.
        _ => FailureKind::Systemic,
    };
    let throttled = matches!(err, SdkError::ServiceError(ctx)
        if ctx.err().code().is_some_and(|c| codes.throttles(c)) || ctx.raw().status().as_u16() == 429);
    Failure { kind, message, throttled }
}

/// A request that failed for good: the operation, what it was asked of, the kind of failure,
/// and why (the SDK's error with its causes). The one request error of every library that calls
/// AWS, so that each says a failed call the same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation} on {target} ({kind}): {message}")]
pub struct RequestFailed {
    /// The API operation, e.g. `Query`.
    pub operation: &'static str,
    /// What it was asked of: a table, `s3://bucket/key`, a queue, a stream.
    pub target: String,
    /// What kind of failure: transient (try again later) or systemic (fix the setup).
    pub kind: FailureKind,
    /// What failed.
    pub message: String,
}

impl RequestFailed {
    /// `failure`, as `operation` on `target` met it. A message that [`classify`] began with the
    /// operation's name says it once.
    pub fn new(operation: &'static str, target: impl Into<String>, failure: Failure) -> RequestFailed {
        let message = match failure.message.strip_prefix(operation).and_then(|m| m.strip_prefix(": ")) {
            Some(rest) => rest.to_owned(),
            None => failure.message,
        };
        RequestFailed { operation, target: target.into(), kind: failure.kind, message }
    }

    /// An AWS SDK error from `operation` on `target`, classified.
    pub fn sdk<E>(
        operation: &'static str,
        target: impl Into<String>,
        err: &SdkError<E, Response>,
    ) -> RequestFailed
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        RequestFailed::new(operation, target, classify(operation, err))
    }
}

#[cfg(test)]
mod tests;
