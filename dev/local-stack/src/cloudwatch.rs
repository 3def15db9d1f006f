//! The emulator's CloudWatch, fed as AWS feeds it, so that what reads CloudWatch
//! (`sidestream status`, alarms) reads the local stack as it reads a deployed one.
//!
//! - [`Feed`]: the functions' EMF log lines become metric data, as CloudWatch Logs makes them
//!   from a Lambda function's log group: lines of the in-process functions as they are written,
//!   and lines of the real binaries' log files as they grow ([`Feed::follow`]). The replayer's
//!   `AWS/Lambda` data (`stream_replayer::lambda_metrics`) go the same way, and so do the buckets'
//!   `AWS/S3` object counts ([`Feed::bucket_sizes`]), which S3 publishes daily.
//! - [`create_alarms`] puts the template's alarms on the emulator, under the names
//!   CloudFormation gives them; [`evaluate_alarms`] evaluates them as CloudWatch does (moto keeps
//!   alarms but never evaluates them): the last `EvaluationPeriods` periods of the metric's
//!   statistic against the threshold, `DatapointsToAlarm` of them breaching, missing data as
//!   `TreatMissingData` says.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_config::SdkConfig;
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{
    ComparisonOperator, Dimension, Metric, MetricDataQuery, MetricDatum, MetricStat, StandardUnit,
    StateValue, Statistic,
};
use serde_json::Value;
use stream_kit::Metrics;
use stream_replayer::lambda_metrics::{Datum, MetricSink};
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
        let shared = Arc::new(Shared {
            tx,
            followed: Mutex::new(Vec::new()),
            failed: Mutex::new(None),
        });
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
        lock(&self.shared.followed).push(Followed {
            path: path.into(),
            offset: 0,
            partial: String::new(),
        });
    }

    /// Puts what S3 publishes daily about each of the stack's buckets (`AWS/S3`, by
    /// `BucketName` and `StorageType` `AllStorageTypes`): `NumberOfObjects`, counted now. The
    /// parking bucket's is what `ParkingBucketPendingAlarm` watches.
    pub async fn bucket_sizes(&self, sdk: &SdkConfig, stack: &Stack) -> Result<(), StackError> {
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
                .dimensions(
                    Dimension::builder()
                        .name("BucketName")
                        .value(&bucket.name)
                        .build(),
                )
                .dimensions(
                    Dimension::builder()
                        .name("StorageType")
                        .value("AllStorageTypes")
                        .build(),
                )
                .value(objects as f64)
                .unit(StandardUnit::Count)
                .timestamp(DateTime::from(now))
                .build();
            let _ = self
                .shared
                .tx
                .send(Message::Data(vec![("AWS/S3".to_owned(), datum)]));
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
    let at = aws["Timestamp"]
        .as_u64()
        .map_or_else(SystemTime::now, |ms| UNIX_EPOCH + Duration::from_millis(ms));
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
                    let value = doc[name]
                        .as_str()
                        .map_or_else(|| doc[name].to_string(), str::to_owned);
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
                let unit = metric["Unit"]
                    .as_str()
                    .map_or(StandardUnit::None, StandardUnit::from);
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
        .dimensions(
            Dimension::builder()
                .name(datum.dimension.0)
                .value(&datum.dimension.1)
                .build(),
        )
        .value(datum.value)
        .unit(StandardUnit::from(datum.unit))
        .timestamp(DateTime::from(datum.at))
        .build();
    (stream_replayer::lambda_metrics::NAMESPACE.to_owned(), built)
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
                .map_err(|e| {
                    format!(
                        "PutMetricData {namespace}: {}",
                        aws_sdk_cloudwatch::error::DisplayErrorContext(&e)
                    )
                })?;
        }
    }
    Ok(())
}

fn request(operation: &'static str, target: &str, error: &(impl std::error::Error + 'static)) -> StackError {
    StackError::Request {
        operation,
        table: target.to_owned(),
        message: aws_smithy_types::error::display::DisplayErrorContext(error).to_string(),
    }
}

/// One alarm of the template, as it is put and evaluated.
struct AlarmSpec {
    name: String,
    description: String,
    namespace: String,
    metric: String,
    dimensions: Vec<Dimension>,
    statistic: Statistic,
    period: i32,
    evaluation_periods: i32,
    datapoints_to_alarm: i32,
    threshold: f64,
    comparison: ComparisonOperator,
    treat_missing: String,
}

impl AlarmSpec {
    fn from_properties(logical_id: &str, name: &str, p: &Value) -> Result<AlarmSpec, StackError> {
        let unusable = |what: &str| StackError::Unusable(format!("the alarm {logical_id}: {what}"));
        let text = |field: &str| p[field].as_str().map(str::to_owned);
        // Resolved parameters come as strings, literals as numbers.
        let number = |field: &str| {
            p[field]
                .as_f64()
                .or_else(|| p[field].as_str().and_then(|s| s.parse().ok()))
        };
        let whole = |field: &str| number(field).and_then(|n| format!("{n}").parse::<i32>().ok());
        let dimensions = p["Dimensions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                Dimension::builder()
                    .name(d["Name"].as_str().unwrap_or_default())
                    .value(d["Value"].as_str().unwrap_or_default())
                    .build()
            })
            .collect();
        let evaluation_periods =
            whole("EvaluationPeriods").ok_or_else(|| unusable("no EvaluationPeriods"))?;
        Ok(AlarmSpec {
            name: name.to_owned(),
            description: text("AlarmDescription").unwrap_or_default(),
            namespace: text("Namespace")
                .ok_or_else(|| unusable("no Namespace (metric math is not evaluated here)"))?,
            metric: text("MetricName").ok_or_else(|| unusable("no MetricName"))?,
            dimensions,
            statistic: Statistic::from(
                text("Statistic")
                    .ok_or_else(|| unusable("no Statistic"))?
                    .as_str(),
            ),
            period: whole("Period").ok_or_else(|| unusable("no Period"))?,
            evaluation_periods,
            datapoints_to_alarm: whole("DatapointsToAlarm").unwrap_or(evaluation_periods),
            threshold: number("Threshold").ok_or_else(|| unusable("no Threshold"))?,
            comparison: ComparisonOperator::from(
                text("ComparisonOperator")
                    .ok_or_else(|| unusable("no ComparisonOperator"))?
                    .as_str(),
            ),
            treat_missing: text("TreatMissingData").unwrap_or_else(|| "missing".to_owned()),
        })
    }

    fn breaches(&self, value: f64) -> bool {
        match self.comparison {
            ComparisonOperator::GreaterThanThreshold => value > self.threshold,
            ComparisonOperator::GreaterThanOrEqualToThreshold => value >= self.threshold,
            ComparisonOperator::LessThanThreshold => value < self.threshold,
            ComparisonOperator::LessThanOrEqualToThreshold => value <= self.threshold,
            _ => false,
        }
    }
}

fn specs(stack: &Stack) -> Result<Vec<AlarmSpec>, StackError> {
    stack
        .alarms
        .iter()
        .map(|(id, (name, properties))| AlarmSpec::from_properties(id, name, properties))
        .collect()
}

/// Puts the stack's alarms on the emulator, each under its name (`PutMetricAlarm`, keeping an
/// alarm that exists). Their actions are left out: nothing on the emulator would receive them.
/// How many.
pub async fn create_alarms(sdk: &SdkConfig, stack: &Stack) -> Result<usize, StackError> {
    let client = aws_sdk_cloudwatch::Client::new(sdk);
    let specs = specs(stack)?;
    for alarm in &specs {
        client
            .put_metric_alarm()
            .alarm_name(&alarm.name)
            .alarm_description(&alarm.description)
            .namespace(&alarm.namespace)
            .metric_name(&alarm.metric)
            .set_dimensions(Some(alarm.dimensions.clone()))
            .statistic(alarm.statistic.clone())
            .period(alarm.period)
            .evaluation_periods(alarm.evaluation_periods)
            .datapoints_to_alarm(alarm.datapoints_to_alarm)
            .threshold(alarm.threshold)
            .comparison_operator(alarm.comparison.clone())
            .treat_missing_data(&alarm.treat_missing)
            .send()
            .await
            .map_err(|e| request("PutMetricAlarm", &alarm.name, &e))?;
    }
    Ok(specs.len())
}

/// Evaluates each of the stack's alarms now, as CloudWatch does, and sets its state on the
/// emulator (`SetAlarmState`) where it changed. The names of the alarms in ALARM.
pub async fn evaluate_alarms(sdk: &SdkConfig, stack: &Stack) -> Result<Vec<String>, StackError> {
    let client = aws_sdk_cloudwatch::Client::new(sdk);
    let now = SystemTime::now();
    let states = states(&client, &format!("{}-", stack.name)).await?;
    let mut alarming = Vec::new();
    for alarm in specs(stack)? {
        let Some((state, breaching)) = evaluate(&client, &alarm, now).await? else {
            continue;
        };
        let current = states.get(&alarm.name);
        if current != Some(&state) {
            // As CloudWatch words it: how many of the evaluated datapoints breached.
            let reason = format!(
                "Threshold {}: {breaching} out of the last {} datapoints {} the threshold ({}), missing data {}",
                if state == StateValue::Alarm {
                    "Crossed"
                } else {
                    "not crossed"
                },
                alarm.evaluation_periods,
                alarm.comparison.as_str(),
                alarm.threshold,
                alarm.treat_missing
            );
            client
                .set_alarm_state()
                .alarm_name(&alarm.name)
                .state_value(state.clone())
                .state_reason(reason)
                .send()
                .await
                .map_err(|e| request("SetAlarmState", &alarm.name, &e))?;
        }
        if state == StateValue::Alarm {
            alarming.push(alarm.name);
        }
    }
    Ok(alarming)
}

/// The state of each alarm named `prefix…` on the emulator, by name: one `DescribeAlarms`
/// listing, every page.
async fn states(
    client: &aws_sdk_cloudwatch::Client,
    prefix: &str,
) -> Result<std::collections::BTreeMap<String, StateValue>, StackError> {
    let mut states = std::collections::BTreeMap::new();
    let mut token = None;
    loop {
        let page = client
            .describe_alarms()
            .alarm_name_prefix(prefix)
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| request("DescribeAlarms", prefix, &e))?;
        for alarm in page.metric_alarms() {
            if let (Some(name), Some(state)) = (alarm.alarm_name(), alarm.state_value()) {
                states.insert(name.to_owned(), state.clone());
            }
        }
        token = page.next_token().map(str::to_owned);
        if token.is_none() {
            return Ok(states);
        }
    }
}

/// The state `alarm` evaluates to at `now` and how many datapoints breached, or `None` when
/// missing data leaves it as it is (`TreatMissingData: ignore`).
async fn evaluate(
    client: &aws_sdk_cloudwatch::Client,
    alarm: &AlarmSpec,
    now: SystemTime,
) -> Result<Option<(StateValue, usize)>, StackError> {
    let period = Duration::from_secs(u64::try_from(alarm.period).unwrap_or(60));
    let periods = u32::try_from(alarm.evaluation_periods).unwrap_or(1);
    // CloudWatch's end time is exclusive: the second that holds `now` is in.
    let (start, end) = (now - period * periods, now + Duration::from_secs(1));
    let query = MetricDataQuery::builder()
        .id("m")
        .metric_stat(
            MetricStat::builder()
                .metric(
                    Metric::builder()
                        .namespace(&alarm.namespace)
                        .metric_name(&alarm.metric)
                        .set_dimensions(Some(alarm.dimensions.clone()))
                        .build(),
                )
                .period(alarm.period)
                .stat(alarm.statistic.as_str())
                .build(),
        )
        .build();
    let answer = client
        .get_metric_data()
        .metric_data_queries(query)
        .start_time(DateTime::from(start))
        .end_time(DateTime::from(end))
        .send()
        .await
        .map_err(|e| request("GetMetricData", &alarm.name, &e))?;
    let values: Vec<f64> = answer
        .metric_data_results()
        .iter()
        .flat_map(|r| r.values().iter().copied())
        .collect();
    let missing = usize::try_from(periods).unwrap_or(1).saturating_sub(values.len());
    let mut breaching = values.iter().filter(|v| alarm.breaches(**v)).count();
    match alarm.treat_missing.as_str() {
        "breaching" => breaching += missing,
        "ignore" if values.is_empty() => return Ok(None),
        _ => {}
    }
    let needed = usize::try_from(alarm.datapoints_to_alarm).unwrap_or(1);
    let state = if breaching >= needed {
        StateValue::Alarm
    } else {
        StateValue::Ok
    };
    Ok(Some((state, breaching)))
}
