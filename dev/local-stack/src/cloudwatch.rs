//! The emulator's CloudWatch, fed as AWS feeds it, so that what reads CloudWatch
//! (`sidestream status`, alarms) reads the local stack as it reads a deployed one.
//!
//! - [`Feed`]: the functions' EMF log lines become metric data, as CloudWatch Logs makes them
//!   from a Lambda function's log group: lines of the in-process functions as they are written,
//!   and lines of the real binaries' log files as they grow ([`Feed::follow`]). The replayer's
//!   `AWS/Lambda` data (`crate::replayer::lambda_metrics`) go the same way, and so do the buckets'
//!   `AWS/S3` object counts ([`Feed::bucket_sizes`]), which S3 publishes daily. DynamoDB's
//!   `ConsumedWriteCapacityUnits` are put by the moto launcher itself (`scripts/moto-server.py`),
//!   which sees every write.
//! - [`create_alarms`] puts the template's alarms on the emulator, under the names
//!   CloudFormation gives them, with their actions, in `INSUFFICIENT_DATA` as CloudWatch creates
//!   them (moto creates them OK); [`evaluate_alarms`] evaluates them as CloudWatch does (moto keeps
//!   alarms but never evaluates them): the last `EvaluationPeriods` periods of the metric's
//!   statistic against the threshold, `DatapointsToAlarm` of them breaching, missing data as
//!   `TreatMissingData` says (every period missing: `INSUFFICIENT_DATA` for `missing`), and an
//!   alarm on metric math its expression (`metric_math`).

mod alarms;

pub use alarms::{create_alarms, dimensions, evaluate_alarms};

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::replayer::lambda_metrics::{Datum, MetricSink};
use aws_config::SdkConfig;
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, MetricDatum, StandardUnit};
use serde_json::Value;
use stream_runtime::Metrics;
use tokio::sync::{mpsc, oneshot};

use crate::{Stack, StackError};

/// At most this many data points per `PutMetricData` (CloudWatch takes 1,000).
const PUT_BATCH: usize = 500;

/// How often followed log files are read for new lines.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// A data point and its namespace.
type Point = (String, MetricDatum);

enum Message {
    Data(Vec<Point>),
    Flushed(oneshot::Sender<()>),
}

/// A log file followed, and how far it has been read.
struct Followed {
    path: PathBuf,
    offset: u64,
    /// A line not yet ended.
    partial: String,
}

struct Shared {
    tx: mpsc::UnboundedSender<Message>,
    followed: Mutex<Vec<Followed>>,
    /// The first failure to put data, reported by [`Feed::flush`].
    failed: Mutex<Option<String>>,
}

/// Puts metric data into the emulator's CloudWatch from a background task, in the order given.
#[derive(Clone)]
pub struct Feed {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed").finish_non_exhaustive()
    }
}

impl Feed {
    /// Starts the feed's task (on the current Tokio runtime).
    pub fn start(sdk: &SdkConfig) -> Feed {
        let client = aws_sdk_cloudwatch::Client::new(sdk);
        let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
        let shared = Arc::new(Shared { tx, followed: Mutex::new(Vec::new()), failed: Mutex::new(None) });
        let failed = Arc::downgrade(&shared);
        tokio::spawn(async move {
            while let Some(message) = rx.recv().await {
                match message {
                    Message::Data(data) => {
                        if let Err(e) = put(&client, data).await
                            && let Some(shared) = failed.upgrade()
                        {
                            lock(&shared.failed).get_or_insert(e);
                        }
                    }
                    Message::Flushed(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        let follower = Arc::downgrade(&shared);
        tokio::spawn(async move {
            while let Some(shared) = follower.upgrade() {
                read_followed(&shared);
                drop(shared);
                tokio::time::sleep(FOLLOW_EVERY).await;
            }
        });
        Feed { shared }
    }

    /// Puts the metric data of one EMF document (a log line), as CloudWatch Logs would; lines
    /// that are not EMF are left alone. How many data points the line held.
    pub fn emf(&self, line: &str) -> usize {
        let data = emf_data(line);
        let n = data.len();
        if n > 0 {
            let _ = self.shared.tx.send(Message::Data(data));
        }
        n
    }

    /// A sink for the metrics of functions run in this process: each invocation's, rendered
    /// as the EMF line the function would log, then fed.
    pub fn metrics(&self) -> Arc<dyn Fn(&Metrics) + Send + Sync> {
        let feed = self.clone();
        Arc::new(move |metrics: &Metrics| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            feed.emf(&metrics.render(u64::try_from(now.as_millis()).unwrap_or(u64::MAX)));
        })
    }

    /// A sink for the replayer's `AWS/Lambda` data.
    pub fn lambda(&self) -> MetricSink {
        let tx = self.shared.tx.clone();
        Arc::new(move |data: Vec<Datum>| {
            let data = data.iter().map(lambda_datum).collect();
            let _ = tx.send(Message::Data(data));
        })
    }

    /// Follows a function's log file (its stdout): each EMF line written to it, from its start,
    /// is put as it appears.
    pub fn follow(&self, path: impl Into<PathBuf>) {
        lock(&self.shared.followed).push(Followed { path: path.into(), offset: 0, partial: String::new() });
    }

    /// Puts what S3 publishes daily about each of the stack's buckets (`AWS/S3`, by
    /// `BucketName` and `StorageType` `AllStorageTypes`): `NumberOfObjects`, counted now. The
    /// parking bucket's is what `ParkingBucketPendingAlarm` watches.
    pub(crate) async fn bucket_sizes(&self, sdk: &SdkConfig, stack: &Stack) -> Result<(), StackError> {
        let s3 = crate::s3_client(sdk);
        let now = SystemTime::now();
        for bucket in &stack.buckets {
            let mut objects = 0_u64;
            let mut pages = s3.list_objects_v2().bucket(&bucket.name).into_paginator().send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| request("ListObjectsV2", &bucket.name, &e))?;
                objects += u64::try_from(page.contents().len()).unwrap_or(u64::MAX);
            }
            #[allow(clippy::cast_precision_loss, reason = "a count far below 2^52")]
            let datum = MetricDatum::builder()
                .metric_name("NumberOfObjects")
                .dimensions(Dimension::builder().name("BucketName").value(&bucket.name).build())
                .dimensions(Dimension::builder().name("StorageType").value("AllStorageTypes").build())
                .value(objects as f64)
                .unit(StandardUnit::Count)
                .timestamp(DateTime::from(now))
                .build();
            let _ = self.shared.tx.send(Message::Data(vec![("AWS/S3".to_owned(), datum)]));
        }
        Ok(())
    }

    /// Waits until everything handed to the feed so far, and every line the followed files hold
    /// now, is in CloudWatch. The first failure to put data, if any.
    pub async fn flush(&self) -> Result<(), StackError> {
        read_followed(&self.shared);
        let (done, flushed) = oneshot::channel();
        let _ = self.shared.tx.send(Message::Flushed(done));
        let _ = flushed.await;
        match lock(&self.shared.failed).take() {
            Some(e) => Err(StackError::Unusable(format!("the CloudWatch feed: {e}"))),
            None => Ok(()),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads the new complete lines of every followed file, and feeds their EMF documents.
fn read_followed(shared: &Shared) {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut followed = lock(&shared.followed);
    for file in followed.iter_mut() {
        let Ok(mut handle) = std::fs::File::open(&file.path) else {
            continue;
        };
        let mut text = String::new();
        if handle.seek(SeekFrom::Start(file.offset)).is_err() || handle.read_to_string(&mut text).is_err() {
            continue;
        }
        file.offset += text.len() as u64;
        file.partial.push_str(&text);
        let Some(end) = file.partial.rfind('\n') else {
            continue;
        };
        let complete: String = file.partial.drain(..=end).collect();
        let data: Vec<Point> = complete.lines().flat_map(emf_data).collect();
        if !data.is_empty() {
            let _ = shared.tx.send(Message::Data(data));
        }
    }
}

/// The data points of an EMF document: for each metric directive, each metric under each
/// dimension set, with the values the document holds (a number or an array of numbers).
fn emf_data(line: &str) -> Vec<Point> {
    let Ok(doc) = serde_json::from_str::<Value>(line) else {
        return Vec::new();
    };
    let Some(aws) = doc.get("_aws") else {
        return Vec::new();
    };
    let at =
        aws["Timestamp"].as_u64().map_or_else(SystemTime::now, |ms| UNIX_EPOCH + Duration::from_millis(ms));
    let mut data = Vec::new();
    for directive in aws["CloudWatchMetrics"].as_array().into_iter().flatten() {
        let namespace = directive["Namespace"].as_str().unwrap_or_default();
        for set in directive["Dimensions"].as_array().into_iter().flatten() {
            let dimensions: Vec<Dimension> = set
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|name| {
                    let value = doc[name].as_str().map_or_else(|| doc[name].to_string(), str::to_owned);
                    Dimension::builder().name(name).value(value).build()
                })
                .collect();
            for metric in directive["Metrics"].as_array().into_iter().flatten() {
                let Some(name) = metric["Name"].as_str() else {
                    continue;
                };
                let values = match &doc[name] {
                    Value::Array(values) => values.iter().filter_map(Value::as_f64).collect(),
                    value => value.as_f64().into_iter().collect::<Vec<_>>(),
                };
                let unit = metric["Unit"].as_str().map_or(StandardUnit::None, StandardUnit::from);
                for value in values {
                    let datum = MetricDatum::builder()
                        .metric_name(name)
                        .set_dimensions(Some(dimensions.clone()))
                        .value(value)
                        .unit(unit.clone())
                        .timestamp(DateTime::from(at))
                        .build();
                    data.push((namespace.to_owned(), datum));
                }
            }
        }
    }
    data
}

fn lambda_datum(datum: &Datum) -> Point {
    let built = MetricDatum::builder()
        .metric_name(datum.name)
        .dimensions(Dimension::builder().name(datum.dimension.0).value(&datum.dimension.1).build())
        .value(datum.value)
        .unit(StandardUnit::from(datum.unit))
        .timestamp(DateTime::from(datum.at))
        .build();
    (crate::replayer::lambda_metrics::NAMESPACE.to_owned(), built)
}

/// Puts `data`, namespace by namespace, in requests of at most [`PUT_BATCH`] points.
async fn put(client: &aws_sdk_cloudwatch::Client, data: Vec<Point>) -> Result<(), String> {
    let mut by_namespace: Vec<(String, Vec<MetricDatum>)> = Vec::new();
    for (namespace, datum) in data {
        match by_namespace.iter_mut().find(|(n, _)| *n == namespace) {
            Some((_, data)) => data.push(datum),
            None => by_namespace.push((namespace, vec![datum])),
        }
    }
    for (namespace, data) in by_namespace {
        for chunk in data.chunks(PUT_BATCH) {
            client
                .put_metric_data()
                .namespace(&namespace)
                .set_metric_data(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(|e| format!("PutMetricData {namespace}: {}", io_policy::describe(&e)))?;
        }
    }
    Ok(())
}

pub(crate) fn request<E>(
    operation: &'static str,
    target: &str,
    error: &aws_sdk_cloudwatch::error::SdkError<E>,
) -> StackError
where
    E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error + 'static,
{
    io_policy::RequestFailed::sdk(operation, target, error).into()
}
