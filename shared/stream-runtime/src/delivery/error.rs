//! A request that failed, or an answer no real service gives: each names the operation and its
//! target (a stream, a table, a bucket).

/// A request that failed, or an answer no real service gives.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A Streams API request failed.
    #[error("{operation} on {target}: {message}")]
    Request {
        /// The API operation, e.g. `GetRecords`.
        operation: &'static str,
        /// The stream, table or bucket.
        target: String,
        /// The SDK's error, in full.
        message: String,
    },
    /// The service answered something a real one never would, or Lambda could not deliver.
    #[error("{target}: {message}")]
    Unexpected {
        /// The stream, table or bucket.
        target: String,
        /// What was wrong.
        message: String,
    },
}

impl RequestError {
    /// A failed request: `operation` on `target`, with what the SDK's error says
    /// (`io_policy::describe`).
    pub fn request<E>(
        operation: &'static str,
        target: &str,
        error: &aws_sdk_dynamodbstreams::error::SdkError<E>,
    ) -> RequestError
    where
        E: aws_sdk_dynamodbstreams::error::ProvideErrorMetadata + std::error::Error + 'static,
    {
        RequestError::Request { operation, target: target.to_owned(), message: io_policy::describe(error) }
    }

    /// An answer no real service gives.
    pub fn unexpected(target: &str, message: impl Into<String>) -> RequestError {
        RequestError::Unexpected { target: target.to_owned(), message: message.into() }
    }
}
