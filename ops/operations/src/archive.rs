//! The ttl-archiver's archives read back (format version 2, and version 1 too; `docs/formats.md`).
//!
//! - [`job`]: the same restore as a job on Step Functions, for an archive of any size.
//! - [`Source`]: one archive object, a local file or `s3://bucket/key`.
//! - [`cat`]: an object's lines as plain JSON (or as archived).
//! - [`items`] and [`restore`]: every item under a prefix, read back or put into a table; [`ttl`]:
//!   what a restore does with the TTL attribute.
//!
//! **Overlap.** A redelivered batch whose retry starts inside a run that was already uploaded
//! writes a new object (named by its own first record) whose lines overlap the earlier one's. The
//! metadata object beside each item object names every line's `eventID`, so [`items`] and
//! [`restore`] read each deletion once: a line whose `eventID` an earlier object (in key order,
//! which is stream order) already held is left out and counted. An item object without its
//! metadata object is read whole.

pub mod import;
pub mod job;
mod plain;
mod restore;
pub mod ttl;

use serde_dynamo::Item;

use formats::archive::FormatError;
pub use plain::cat;
pub use restore::{RestoreOptions, RestoreProgress, Restored, items, restore};
pub use ttl::TtlChoice;

/// Why an archive cannot be read or restored.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// A source that is neither a path nor `s3://BUCKET/KEY`.
    #[error("{0:?} is not s3://BUCKET/KEY")]
    Source(String),
    /// An S3 or DynamoDB request failed.
    #[error(transparent)]
    Request(#[from] io_policy::RequestFailed),
    /// An object is not a valid archive object.
    #[error("{object}: {cause}")]
    Format {
        /// The object.
        object: String,
        /// Why.
        cause: FormatError,
    },
    /// An object holds something restore cannot put (a metadata line, an item without the
    /// table's key), or its metadata object does not match it.
    #[error("{object}: {reason}")]
    Content {
        /// The object.
        object: String,
        /// Why.
        reason: String,
    },
    /// Nothing to restore, or more than one table's archive under the prefix.
    #[error("{0}")]
    Prefix(String),
    /// A restore that would do harm without a choice the user has not made (see
    /// [`RestoreOptions::ttl`]); nothing was written.
    #[error("refused: {0}")]
    Refused(String),
    /// Writing items to the table failed under the I/O policy.
    #[error("{object}: {failed} of {count} items were not written to {table}: {failure}")]
    Write {
        /// The object whose items were being written.
        object: String,
        /// Items not written.
        failed: u64,
        /// Items in the object.
        count: usize,
        /// The table.
        table: String,
        /// The first failure.
        failure: io_policy::Failure,
    },
    /// A local file or the output could not be read or written.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        cause: std::io::Error,
    },
}

impl From<crate::job_store::StoreError> for ArchiveError {
    fn from(error: crate::job_store::StoreError) -> ArchiveError {
        match error {
            crate::job_store::StoreError::Request(failed) => ArchiveError::Request(failed),
            crate::job_store::StoreError::Format { object, job, cause } => {
                ArchiveError::Content { object, reason: format!("not what {job} writes: {cause}") }
            }
        }
    }
}

/// Where an archive object is: a local file or `s3://bucket/key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file on disk (for example one `sidestream plan ttl-archiver --out` wrote).
    File(std::path::PathBuf),
    /// An S3 object.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
    },
}

impl Source {
    /// Reads `s3://bucket/key` or a path.
    pub fn parse(text: &str) -> Result<Source, ArchiveError> {
        match text.strip_prefix("s3://") {
            Some(rest) => {
                let (bucket, key) = rest
                    .split_once('/')
                    .filter(|(b, k)| !b.is_empty() && !k.is_empty())
                    .ok_or_else(|| ArchiveError::Source(text.to_owned()))?;
                Ok(Source::S3 { bucket: bucket.to_owned(), key: key.to_owned() })
            }
            None => Ok(Source::File(text.into())),
        }
    }

    /// The object's bytes.
    pub async fn fetch(&self, s3: &aws_sdk_s3::Client) -> Result<Vec<u8>, ArchiveError> {
        match self {
            Source::File(path) => std::fs::read(path).map_err(|source| ArchiveError::Io {
                what: format!("cannot read {}", path.display()),
                cause: source,
            }),
            Source::S3 { bucket, key } => {
                stream_runtime::aws::get_object(s3, bucket, key, &crate::s3_budget())
                    .await?
                    .ok_or_else(|| not_found(bucket, key))
            }
        }
    }
}

fn not_found(bucket: &str, key: &str) -> ArchiveError {
    io_policy::RequestFailed::new(
        "GetObject",
        format!("s3://{bucket}/{key}"),
        io_policy::Failure::systemic("no such key"),
    )
    .into()
}

/// An archived item with the object it was read from.
pub type Archived = (String, Item);
