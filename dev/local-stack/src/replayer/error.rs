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
}

impl ReplayError {
    pub(crate) fn unexpected(target: &str, message: impl Into<String>) -> ReplayError {
        ReplayError::Request(RequestError::unexpected(target, message))
    }
}
