//! The JSON objects a Step Functions job (the verify, the distributed restore) keeps in S3
//! between its steps: `s3://bucket/prefix<run id>/<name>`, read and written under the I/O policy.

use std::time::{Duration, Instant};

use io_policy::{Budget, Deadline, Policy, RequestFailed};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How long one object's read or write, or one listing, may take, retries included; a step
/// stops its other work this long (and the policy's margin) before its invocation's deadline,
/// so that the state it writes last has this time.
pub const OBJECT_TIME: Duration = Duration::from_secs(60);

/// When a step's own calls (its pages of reads or writes) must end, given its invocation's
/// `deadline`: early enough that the state it writes last still has [`OBJECT_TIME`].
pub fn work_until(deadline: Instant) -> Instant {
    let reserved = OBJECT_TIME + Policy::default().margin;
    deadline.checked_sub(reserved).unwrap_or_else(Instant::now)
}

/// The budget of one object call of a step that must end by `deadline` (its invocation's):
/// [`OBJECT_TIME`] at most, and none of it within the policy's margin of the deadline.
pub fn object_budget(deadline: Instant) -> Budget {
    let policy = Policy::default();
    let cap = Instant::now() + OBJECT_TIME + policy.margin;
    policy.budget(Deadline::at(deadline.min(cap)))
}

/// Why a job's object could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An S3 request failed after the I/O policy's retries.
    #[error(transparent)]
    Request(#[from] RequestFailed),
    /// An object is not what the job writes (another job's, another version, damaged).
    #[error("{object} is not what {job} writes: {cause}")]
    Format {
        /// The object, `s3://bucket/key`.
        object: String,
        /// The job that writes it.
        job: &'static str,
        /// Why.
        cause: String,
    },
}

/// Where a job keeps its objects, and the client it reads and writes them with.
#[derive(Debug, Clone)]
pub struct Store {
    s3: aws_sdk_s3::Client,
    /// The bucket.
    pub bucket: String,
    /// The key prefix every run's folder is under.
    pub prefix: String,
    /// The job, for messages ("a verify job").
    job: &'static str,
}

impl Store {
    /// The objects of `job` under `s3://bucket/prefix`.
    pub fn new(s3: aws_sdk_s3::Client, bucket: String, prefix: String, job: &'static str) -> Store {
        Store { s3, bucket, prefix, job }
    }

    /// The key of the object `name` of run `run_id`.
    pub fn key(&self, run_id: &str, name: &str) -> String {
        format!("{}{run_id}/{name}", self.prefix)
    }

    /// `s3://bucket/key` of the object `name` of run `run_id`.
    pub fn url(&self, run_id: &str, name: &str) -> String {
        format!("s3://{}/{}", self.bucket, self.key(run_id, name))
    }

    /// The object `name` of run `run_id`, if there is one, read by `deadline`.
    pub async fn read<T: DeserializeOwned>(
        &self,
        run_id: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<T>, StoreError> {
        let key = self.key(run_id, name);
        let Some(bytes) =
            stream_runtime::aws::get_object(&self.s3, &self.bucket, &key, &object_budget(deadline)).await?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| StoreError::Format {
            object: self.url(run_id, name),
            job: self.job,
            cause: e.to_string(),
        })
    }

    /// Writes `value` as the object `name` of run `run_id`, by `deadline`.
    pub async fn write<T: Serialize>(
        &self,
        run_id: &str,
        name: &str,
        value: &T,
        deadline: Instant,
    ) -> Result<(), StoreError> {
        let key = self.key(run_id, name);
        let target = self.url(run_id, name);
        let body = serde_json::to_vec(value).map_err(|e| StoreError::Format {
            object: target.clone(),
            job: self.job,
            cause: e.to_string(),
        })?;
        object_budget(deadline)
            .call(|| {
                let request = self
                    .s3
                    .put_object()
                    .bucket(&self.bucket)
                    .key(&key)
                    .content_type("application/json")
                    .body(body.clone().into());
                async move { request.send().await.map_err(|e| io_policy::classify("PutObject", &e)) }
            })
            .await
            .map_err(|failure| RequestFailed::new("PutObject", target, failure))?;
        Ok(())
    }

    /// The names (keys less `prefix<run id>/`) of run `run_id`'s objects under `folder`, sorted,
    /// listed by `deadline`.
    pub async fn list(
        &self,
        run_id: &str,
        folder: &str,
        deadline: Instant,
    ) -> Result<Vec<String>, StoreError> {
        let under = self.key(run_id, "");
        let keys = stream_runtime::aws::list_keys(
            &self.s3,
            &self.bucket,
            &format!("{under}{folder}"),
            |_| true,
            &object_budget(deadline),
        )
        .await?;
        Ok(keys.into_iter().filter_map(|k| k.strip_prefix(&under).map(str::to_owned)).collect())
    }
}

#[cfg(test)]
mod tests;
