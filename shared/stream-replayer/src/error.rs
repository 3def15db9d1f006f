//! The replayer's errors: each names the request or file and what it was for.

use std::path::PathBuf;

use aws_sdk_dynamodb::error::DisplayErrorContext;

/// Why the replayer stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// An emulator request failed.
    #[error("{operation} on {target}: {message}")]
    Request {
        /// The API operation, e.g. `GetRecords`.
        operation: &'static str,
        /// The table, stream or bucket.
        target: String,
        /// The SDK's error, in full.
        message: String,
    },
    /// The emulator answered something a real service never would.
    #[error("{target}: {message}")]
    Unexpected {
        /// The table, stream or bucket.
        target: String,
        /// What was wrong.
        message: String,
    },
    /// The failure log could not be written.
    #[error("writing the failure log {path}: {source}")]
    FailureLog {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl ReplayError {
    pub(crate) fn request(
        operation: &'static str,
        target: &str,
        error: &(impl std::error::Error + 'static),
    ) -> ReplayError {
        ReplayError::Request {
            operation,
            target: target.to_owned(),
            message: DisplayErrorContext(error).to_string(),
        }
    }

    pub(crate) fn unexpected(target: &str, message: impl Into<String>) -> ReplayError {
        ReplayError::Unexpected {
            target: target.to_owned(),
            message: message.into(),
        }
    }
}
