//! The archiver as a stream function: upload a batch's archive objects in order.
//!
//! Objects are uploaded one run at a time, in stream order (the metadata object, then the item
//! object), each `PutObject` under the one I/O policy. The first run whose upload fails,
//! or that there is no time left to start, becomes the checkpoint: its first record is where
//! Lambda resumes, and no later run is uploaded. Uploads are plain `PutObject`s of deterministic
//! keys, so a redelivered run overwrites its own objects.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::StorageClass;
use bytes::Bytes;
use io_policy::Budget;
use io_policy::{Failure, FailureKind};
use stream_runtime::prime::Bucket;
use stream_runtime::{
    Applied, Aws, ConfigError, Explain, Metric, Planned, RecordFailure, Replay, Resource, StreamFunction,
    Vars, WireRecord,
};

use crate::config::{Config, ObjectSettings};
use crate::plan::{Object, Plan, PlanError};
use formats::archive;

/// The function, with its configuration and client built once.
#[derive(Debug, Clone)]
pub struct Archiver {
    layout: ObjectSettings,
    bucket: String,
    storage_class: StorageClass,
    s3: aws_sdk_s3::Client,
}

impl Archiver {
    /// The archiver for `config`, uploading with `s3` (built without the SDK's retries).
    pub fn new(config: Config, s3: aws_sdk_s3::Client) -> Archiver {
        Archiver {
            layout: config.layout,
            storage_class: StorageClass::from(config.archive.storage_class.as_str()),
            bucket: config.archive.bucket,
            s3,
        }
    }

    /// Uploads a run's metadata object, then its item object; returns how many it uploaded. The
    /// order keeps an invariant readers rely on: an item object exists only beside its metadata
    /// object, which names each line's `eventID`, so a deletion archived in two overlapping
    /// objects (a retry that names a shorter run) is always read once. A run of keys-only
    /// records has no items, and no item object: an empty object would only clutter the
    /// importable tree.
    async fn put(&self, object: Object, budget: &Budget) -> Result<u64, Failure> {
        let tags = [
            ("sidestream-archive", archive::VERSION.to_string()),
            ("first-sequence-number", object.first_sequence_number),
            ("last-sequence-number", object.last_sequence_number),
            ("records", object.records.to_string()),
        ];
        self.upload(&object.meta_key, object.meta.into(), &tags, budget).await?;
        if object.items == 0 {
            return Ok(1);
        }
        self.upload(&object.data_key, object.data.into(), &tags, budget).await?;
        Ok(2)
    }

    /// One `PutObject` under the budget. The body is shared between attempts, not copied.
    async fn upload(
        &self,
        key: &str,
        body: Bytes,
        tags: &[(&str, String)],
        budget: &Budget,
    ) -> Result<(), Failure> {
        let op = format!("PutObject {key}");
        budget
            .call(|| {
                let mut put = self
                    .s3
                    .put_object()
                    .bucket(&self.bucket)
                    .key(key)
                    .body(ByteStream::from(body.clone()))
                    .content_type("application/gzip")
                    .storage_class(self.storage_class.clone());
                for (name, value) in tags {
                    put = put.metadata(*name, value);
                }
                let put = put.send();
                let op = &op;
                async move { put.await.map(drop).map_err(|e| classify_upload(op, &e)) }
            })
            .await
    }
}

/// S3's answers classified like every other call's. A `PutObject` rejected for its content would
/// be rejected for every run alike (the objects are this function's own encoding), so such an
/// answer is systemic here rather than record-permanent.
fn classify_upload<E>(
    op: &str,
    err: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> Failure
where
    E: aws_sdk_s3::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    let mut failure = io_policy::classify(op, err);
    if failure.kind == FailureKind::RecordPermanent {
        failure.kind = FailureKind::Systemic;
    }
    failure
}

impl StreamFunction for Archiver {
    const NAME: &'static str = env!("CARGO_PKG_NAME");
    const NAMESPACE: &'static str = formats::METRICS_NAMESPACE;
    const REPLAY: Replay = Replay::Rerun;
    const EXPLAIN: Option<Explain> = Some(crate::explain::explain);
    /// Each deletion is archived under its `eventID`, and readers read each `eventID` once: out
    /// of order and twice, the archive reads the same.
    type Plan = Vec<Object>;
    /// A deletion is archived as its old image.
    const STREAM_VIEWS: &'static [&'static str] = &["NEW_AND_OLD_IMAGES", "OLD_IMAGE"];

    /// Reads `ARCHIVE_BUCKET`, `ARCHIVE_PREFIX`, `ARCHIVE_STORAGE_CLASS` and `ARCHIVE_GZIP_LEVEL`.
    fn init(vars: &Vars<'_>, aws: &Aws) -> Result<Archiver, ConfigError> {
        Ok(Archiver::new(Config::from_vars(vars)?, aws.s3()))
    }

    /// The archive bucket.
    fn resources(&self) -> Vec<Box<dyn Resource>> {
        vec![Box::new(Bucket { variable: "ARCHIVE_BUCKET", name: self.bucket.clone() })]
    }

    /// Yes: an archive object is named by its record's `eventID`, so a duplicate rewrites the
    /// same object, and no archive depends on another's order.
    fn any_order(&self) -> Result<(), stream_runtime::AnyOrderHint> {
        Ok(())
    }

    fn plan(&self, records: &[WireRecord<'_>]) -> Planned<Vec<Object>> {
        let plan = Plan::from_wire(&self.layout, records);
        for s in &plan.skipped {
            tracing::debug!(record = s.record, reason = %s.reason, "not archived");
        }
        if !plan.skipped.is_empty() {
            tracing::info!(
                skipped = plan.skipped.len(),
                "records that are not TTL deletes were skipped; the event source mapping's filter can keep them from invoking the function"
            );
        }
        for &i in &plan.keys_only {
            tracing::warn!(
                record = i,
                event_id = %records[i].event_id,
                "TTL delete has no OldImage (the stream's view type leaves it out): archiving its keys only, flagged keysOnly"
            );
        }
        let failures = stream_runtime::rejections(plan.failures, PlanError::kind);
        Planned {
            plan: plan.objects,
            failures,
            counts: vec![
                (Metric::SkippedRecords, plan.skipped.len() as u64),
                (Metric::KeysOnlyRecords, plan.keys_only.len() as u64),
            ],
        }
    }

    async fn apply(&self, objects: Vec<Object>, budget: &Budget) -> Applied {
        let mut applied = Applied::default();
        for object in objects {
            let (key, first, records) = (object.data_key.clone(), object.first_record, object.records);
            let objects = if object.items == 0 { 1 } else { 2 };
            match self.put(object, budget).await {
                Ok(n) => {
                    applied.writes += n;
                    tracing::debug!(%key, records, "archived");
                }
                Err(failure) => {
                    tracing::error!(%key, bucket = %self.bucket, error = %failure.message, "upload failed; the batch stops at this run");
                    applied.failed_writes += objects;
                    applied.failures.push(RecordFailure::new(first, failure));
                    break;
                }
            }
        }
        applied
    }
}
