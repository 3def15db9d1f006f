//! The I/O shell: plan a batch, upload its objects in order, and report where Lambda must resume.
//!
//! Objects are uploaded one run at a time, in stream order (the item object and its metadata
//! concurrently). The first run whose upload fails, or that there is no time left to start,
//! becomes the checkpoint: its first record is reported in `batchItemFailures`, and no later run
//! is uploaded. Uploads are plain `PutObject`s of deterministic keys, so a redelivered run
//! overwrites its own objects; the SDK's standard retries handle throttling and transient errors
//! within the time left.

use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::StorageClass;
use stream_kit::{
    Deadline, DynamoDbEventResponse, Event, Metric, Metrics, NoCheckpoint, conclude, earliest, report_poison,
};

use crate::config::{Config, Layout};
use crate::format;
use crate::plan::{Object, Plan};

/// The function, with its configuration and client built once.
#[derive(Debug, Clone)]
pub struct Archiver {
    layout: Layout,
    bucket: String,
    storage_class: StorageClass,
    margin: std::time::Duration,
    s3: aws_sdk_s3::Client,
    metrics: Metrics,
}

impl Archiver {
    /// Builds the function from its configuration and an S3 client configuration (built with
    /// `force_path_style` when `S3_FORCE_PATH_STYLE` asks for it, see [`Archiver::s3_config`]).
    pub fn new(config: Config, s3: aws_sdk_s3::Config) -> Archiver {
        Archiver {
            layout: config.layout,
            storage_class: StorageClass::from(config.archive.storage_class.as_str()),
            bucket: config.archive.bucket,
            margin: config.archive.deadline_margin,
            s3: aws_sdk_s3::Client::from_conf(s3),
            metrics: config.metrics,
        }
    }

    /// The S3 client configuration for `config`, from the shared SDK configuration.
    pub fn s3_config(config: &Config, sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Config {
        aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(config.archive.force_path_style)
            .build()
    }

    /// Handles one batch. Errs only when no checkpoint can be reported, so Lambda retries the
    /// whole batch.
    pub async fn handle(
        &self,
        event: Event,
        deadline: Deadline,
    ) -> Result<DynamoDbEventResponse, NoCheckpoint> {
        let records = event.records;
        let mut metrics = self.metrics.for_batch(records.len());

        let plan = Plan::new(&self.layout, &records);
        for s in &plan.skipped {
            tracing::debug!(record = s.record, reason = %s.reason, "not archived");
        }
        if !plan.skipped.is_empty() {
            tracing::info!(
                skipped = plan.skipped.len(),
                "records that are not TTL deletes were skipped; the event source mapping's filter can keep them from invoking the function"
            );
        }
        metrics.add(Metric::SkippedRecords, plan.skipped.len() as u64);
        for &i in &plan.keys_only {
            tracing::warn!(
                record = i,
                event_id = %records[i].event_id,
                "TTL delete has no OldImage (the stream's view type leaves it out): archiving its keys only, flagged keysOnly"
            );
        }
        metrics.add(Metric::KeysOnlyRecords, plan.keys_only.len() as u64);
        if let Some(stopped) = &plan.stopped {
            report_poison(&records, stopped.record, &stopped.error, &mut metrics);
        }

        let failed_at = self.upload(plan.objects, deadline, &mut metrics).await;
        conclude(
            &records,
            earliest(plan.stopped.map(|s| s.record), failed_at),
            &mut metrics,
        )
    }

    /// Uploads the runs in order; returns the first record of the first run that failed or that
    /// there was no time left to start.
    async fn upload(&self, objects: Vec<Object>, deadline: Deadline, metrics: &mut Metrics) -> Option<usize> {
        let stop_by = tokio::time::Instant::from_std(deadline.less(self.margin));
        for object in objects {
            let first = object.first_record;
            if tokio::time::Instant::now() >= stop_by {
                tracing::warn!(key = %object.data_key, "no time left to upload; stopping before this run");
                return Some(first);
            }
            let (data_key, records) = (object.data_key.clone(), object.records);
            let requests = if object.items == 0 { 1 } else { 2 };
            metrics.add(Metric::Requests, requests);
            let error = match Box::pin(tokio::time::timeout_at(stop_by, self.put(object))).await {
                Ok(Ok(())) => {
                    metrics.add(Metric::Writes, requests);
                    tracing::debug!(key = %data_key, records, "archived");
                    continue;
                }
                Ok(Err(error)) => error,
                Err(_) => "the upload did not finish before the deadline margin".to_owned(),
            };
            tracing::error!(key = %data_key, bucket = %self.bucket, %error, "upload failed; the batch stops at this run");
            metrics.add(Metric::FailedWrites, requests);
            return Some(first);
        }
        None
    }

    /// Uploads a run's item and metadata objects, concurrently. A run of keys-only records has
    /// no items, and no item object: an empty object would only clutter the importable tree.
    async fn put(&self, object: Object) -> Result<(), String> {
        let records = object.records.to_string();
        let request = |key: String, body: Vec<u8>| {
            self.s3
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .body(ByteStream::from(body))
                .content_type("application/gzip")
                .storage_class(self.storage_class.clone())
                .metadata("sidestream-archive", format::VERSION.to_string())
                .metadata("first-sequence-number", &object.first_sequence_number)
                .metadata("last-sequence-number", &object.last_sequence_number)
                .metadata("records", &records)
                .send()
        };
        let data = async {
            if object.items == 0 {
                return Ok(());
            }
            request(object.data_key.clone(), object.data)
                .await
                .map(drop)
                .map_err(|e| format!("PutObject {}: {}", object.data_key, DisplayErrorContext(&e)))
        };
        let meta = async {
            request(object.meta_key.clone(), object.meta)
                .await
                .map(drop)
                .map_err(|e| format!("PutObject {}: {}", object.meta_key, DisplayErrorContext(&e)))
        };
        let (data, meta) = tokio::join!(data, meta);
        data.and(meta)
    }
}
