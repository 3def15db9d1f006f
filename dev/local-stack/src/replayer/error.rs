//! The replayer's errors: each names the request or file and what it was for.

use std::path::PathBuf;

use stream_runtime::delivery::RequestError;

/// Why the replayer stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// An emulator request failed, or the emulator answered something a real service never
    /// would.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The failure log could not be written.
    #[error("writing the failure log {path}: {cause}")]
    FailureLog {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The settled marker could not be written, or the wait on it ran out.
    #[error("{0}")]
    Settled(String),
    /// A function was refused a call it needs (a systemic failure: every retry of its batch
    /// would be refused alike), as the emulator's IAM check reported it ([`crate::iam::Watch`]).
    #[error(
        "{function} was refused a call its role must allow: {denial}. A refusal is a systemic failure, which every retry meets alike: on AWS a stream function's batch is retried until its records expire while its SystemicFailures alarm fires (a log write refused loses the function's logs); give the role the permission in the template and run again"
    )]
    Refused {
        /// The function (or functions) acting under the refused role, by deployed name.
        function: String,
        /// The refusal: role, action, resource and reason.
        denial: crate::iam::Denial,
    },
}

impl ReplayError {
    pub(crate) fn unexpected(target: &str, message: impl Into<String>) -> ReplayError {
        ReplayError::Request(RequestError::unexpected(target, message))
    }
}
