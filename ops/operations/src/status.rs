//! A Sidestream stack's health in one report, from what AWS keeps about it.
//!
//! [`read`] gathers, for a stack deployed from `template.yaml`:
//! - each stream function (every `Function` dimension of the stack's metrics namespace whose
//!   name begins `<stack>-`, as CloudFormation names the stack's functions; a combined
//!   function's members as `<function>/<member>`): its lag (`AWS/Lambda` `IteratorAge`, the
//!   maximum over the window), its events (`RecordsIn`), its systemic and transient failures,
//!   its records parked and not yet replayed (objects under `parked/<binary>/` in the parking
//!   bucket), its ranges given up and not yet replayed, and its alarms in ALARM;
//! - the last verification's drift reported by each of the stack's verifiers (`IndexDrift`, by
//!   `Function`);
//! - the ranges given up and not yet replayed: kept by Lambda in the parking bucket, its S3
//!   on-failure destination (`aws/lambda/<mapping UUID>/…`), or for a stack deployed before,
//!   waiting in an SQS on-failure queue;
//! - the archive's newest object and its age (found by descending the archive's
//!   `year=/month=/day=` layout, not by listing it whole);
//! - every alarm of the stack in ALARM (`<stack>-` names, as CloudFormation names them);
//! - every alarm of the stack in `INSUFFICIENT_DATA` that notifies on it (`InsufficientDataActions`:
//!   a heartbeat, `IndexVerifyMissingAlarm`), and whether it has been there since it was created
//!   (nothing has reported yet: a new stack's index not verified yet, information) or went there
//!   after having had data (what it watches stopped reporting: a stopped schedule, which needs an
//!   operator): [`InsufficientDataAlarm`].
//!
//! [`Status::attention`] says what needs an operator; the report renders for people
//! ([`std::fmt::Display`]) and for programs (`serde`).

mod archive;
mod render;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricAlarm, MetricDataQuery, MetricStat, StateValue};
use serde::Serialize;

pub use archive::ArchiveStatus;

/// Why a status could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// A request failed (a transient or an access failure; the kind says which).
    #[error(transparent)]
    Request(#[from] io_policy::RequestFailed),
}

/// The stack to read, and how.
#[derive(Debug, Clone)]
pub struct Target {
    /// The stack's name: its functions' and alarms' names begin `<stack>-`.
    pub stack: String,
    /// The functions' metrics namespace (the template's `MetricsNamespace`).
    pub namespace: String,
    /// An SQS on-failure queue's URL (the `FailureQueueUrl` output of stacks deployed before
    /// the parking bucket became the on-failure destination).
    pub queue_url: Option<String>,
    /// The parking bucket (the stack's `ParkingBucket` output): parked records, and the ranges
    /// Lambda gave up to it.
    pub parking_bucket: Option<String>,
    /// The archive's bucket and prefix (`ArchiveBucket` and `ArchivePrefix`).
    pub archive: Option<(String, String)>,
    /// The window the functions' metrics are read over.
    pub window: Duration,
    /// How far back the last verification is looked for.
    pub verify_window: Duration,
    /// The lag beyond which a function needs an operator.
    pub max_lag: Duration,
}

/// The clients a status reads with.
#[derive(Debug, Clone)]
pub struct Clients {
    /// CloudWatch: metrics and alarms.
    pub cloudwatch: aws_sdk_cloudwatch::Client,
    /// S3: the parking bucket and the archive.
    pub s3: aws_sdk_s3::Client,
    /// SQS: an on-failure queue.
    pub sqs: aws_sdk_sqs::Client,
}

/// A stack's health.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The stack.
    pub stack: String,
    /// When it was read (RFC 3339).
    pub checked_at: String,
    /// The window of the functions' metrics, in seconds.
    pub window_seconds: u64,
    /// Each stream function.
    pub functions: Vec<FunctionStatus>,
    /// Each of the stack's index verifiers.
    pub indexes: Vec<IndexStatus>,
    /// Ranges given up and not yet replayed, by where they wait.
    pub given_up: Vec<GivenUp>,
    /// Parked records not yet replayed, by the function that parked them (its binary's name).
    pub parked: BTreeMap<String, u64>,
    /// The archive.
    pub archive: Option<ArchiveStatus>,
    /// The stack's alarms in ALARM.
    pub alarms: Vec<AlarmStatus>,
    /// The stack's alarms in `INSUFFICIENT_DATA` that notify on it.
    pub insufficient_data: Vec<InsufficientDataAlarm>,
    /// What needs an operator, one sentence each; empty when the stack is healthy.
    pub attention: Vec<String>,
    /// Why the stack's health cannot be seen, if it cannot: no function of the stack has
    /// reported, so nothing says whether its functions run. A wrong name, or a stack whose
    /// functions have not had a record yet. Health is never claimed then.
    pub unseen: Option<String>,
}

impl Status {
    /// Whether anything needs an operator.
    pub fn needs_operator(&self) -> bool {
        !self.attention.is_empty()
    }

    /// Whether the stack is known to be healthy: some function reports, and nothing needs an
    /// operator.
    pub fn healthy(&self) -> bool {
        self.unseen.is_none() && self.attention.is_empty()
    }
}

/// One stream function's health.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionStatus {
    /// Its `Function` dimension: the Lambda function's name, or `<name>/<member>` for a member
    /// of a combined function.
    pub function: String,
    /// The cargo binary it runs, where its name tells (a member's name, or the template's
    /// logical id in a CloudFormation name).
    pub binary: Option<String>,
    /// The Lambda function's `IteratorAge`, its maximum over the window, in milliseconds.
    pub lag_ms: Option<f64>,
    /// Stream records delivered to it in the window (`RecordsIn`).
    pub events: u64,
    /// Systemic failures in the window.
    pub systemic_failures: u64,
    /// Transient failures in the window.
    pub transient_failures: u64,
    /// Its records parked and not yet replayed.
    pub parked: u64,
    /// Ranges its Lambda function gave up on, not yet replayed.
    pub failures_pending: u64,
    /// Its alarms in ALARM.
    pub alarms: Vec<String>,
}

/// An index's last verification.
#[derive(Debug, Clone, Serialize)]
pub struct IndexStatus {
    /// The verifier's name (the `Function` dimension of its `IndexDrift`).
    pub verifier: String,
    /// The last verification's drift (entries missing, stale or extra), if there was one in the
    /// verify window.
    pub drift: Option<f64>,
    /// When that verification reported (RFC 3339).
    pub verified_at: Option<String>,
}

/// Ranges given up and not yet replayed, in one place.
#[derive(Debug, Clone, Serialize)]
pub struct GivenUp {
    /// Where: `s3://<parking bucket>/aws/lambda/` (the records kept with each range), or an SQS
    /// queue's URL (only their place, replayable while the stream holds them).
    pub location: String,
    /// Whether the records themselves are kept (an S3 destination), so that no deadline applies.
    pub records_kept: bool,
    /// How many.
    pub pending: u64,
    /// Pending ranges by the Lambda function that gave them up (from each object or message:
    /// `requestContext.functionArn`).
    pub by_function: BTreeMap<String, u64>,
}

/// An alarm in ALARM (or, in an [`InsufficientDataAlarm`], in `INSUFFICIENT_DATA`).
#[derive(Debug, Clone, Serialize)]
pub struct AlarmStatus {
    /// Its name.
    pub name: String,
    /// Its metric, `<namespace>/<name>`.
    pub metric: String,
    /// Its dimensions' values.
    pub dimensions: Vec<String>,
    /// Why it is in its state (CloudWatch's `StateReason`).
    pub reason: String,
    /// What it means (its description).
    pub description: String,
}

/// An alarm in `INSUFFICIENT_DATA` that notifies its topic on going there (it has
/// `InsufficientDataActions`, as the template's heartbeat on the verifications' reports,
/// `IndexVerifyMissingAlarm`, does). The stack's other alarms in `INSUFFICIENT_DATA` are not
/// listed: one that keeps its state while no data comes (`TreatMissingData: ignore`) stays there
/// from its creation until what it watches first reports, which no one is asked to notice.
#[derive(Debug, Clone, Serialize)]
pub struct InsufficientDataAlarm {
    /// The alarm (in JSON, its fields beside the two below).
    #[serde(flatten)]
    pub alarm: AlarmStatus,
    /// Since when it has been in `INSUFFICIENT_DATA` (RFC 3339), where CloudWatch says.
    pub since: Option<String>,
    /// Whether it has been in `INSUFFICIENT_DATA` since it was created (as `DescribeAlarms` tells:
    /// its state unchanged since its configuration, or CloudWatch's reason for a creation):
    /// nothing it watches has reported yet, as on a new stack before the verify schedule's first
    /// run ("not verified yet"); information, not trouble. Otherwise it went there from OK (or
    /// ALARM): what it watches stopped reporting (the verify schedule disabled or deleted, or its
    /// runs failing), which needs an operator.
    pub since_created: bool,
}

/// The binary a `Function` dimension runs, where its name tells.
fn binary_of(stack: &str, function: &str) -> Option<String> {
    if let Some((_, member)) = function.split_once('/') {
        return Some(member.to_owned());
    }
    let logical = function.strip_prefix(stack)?.strip_prefix('-')?;
    sidestream_combined::FUNCTIONS
        .iter()
        .find(|f| logical.starts_with(&format!("{}-", f.logical_id)))
        .map(|f| f.name.to_owned())
}

/// Reads `target`'s status with `clients`, at `now`.
pub async fn read(clients: &Clients, target: &Target, now: SystemTime) -> Result<Status, StatusError> {
    let functions = list_dimension(&clients.cloudwatch, &target.namespace, "RecordsIn", "Function").await?;
    let prefix = format!("{}-", target.stack);
    let functions: Vec<String> = functions.into_iter().filter(|f| f.starts_with(&prefix)).collect();
    let mut functions = function_metrics(&clients.cloudwatch, target, &functions, now).await?;
    let indexes = index_drift(&clients.cloudwatch, target, now).await?;
    let (alarms, insufficient_data) = stack_alarms(&clients.cloudwatch, &prefix).await?;
    let mut given_up = Vec::new();
    let mut parked = BTreeMap::new();
    if let Some(bucket) = &target.parking_bucket {
        parked = parked_records(&clients.s3, bucket).await?;
        given_up.push(destination(&clients.s3, bucket).await?);
    }
    if let Some(url) = &target.queue_url {
        given_up.push(queue(&clients.sqs, url).await?);
    }
    let archive = match &target.archive {
        Some((bucket, prefix)) => Some(archive::newest(&clients.s3, bucket, prefix, now).await?),
        None => None,
    };
    for f in &mut functions {
        let lambda = f.function.split('/').next().unwrap_or_default().to_owned();
        f.parked = f.binary.as_ref().and_then(|b| parked.get(b)).copied().unwrap_or(0);
        f.failures_pending = given_up.iter().filter_map(|g| g.by_function.get(&lambda)).sum();
        f.alarms = alarms
            .iter()
            .filter(|a| a.dimensions.iter().any(|d| *d == f.function || *d == lambda))
            .map(|a| a.name.clone())
            .collect();
    }
    let mut status = Status {
        stack: target.stack.clone(),
        checked_at: rfc3339(now),
        window_seconds: target.window.as_secs(),
        functions,
        indexes,
        given_up,
        parked,
        archive,
        alarms,
        insufficient_data,
        attention: Vec::new(),
        unseen: None,
    };
    status.attention = attention(&status, target);
    if status.functions.is_empty() {
        status.unseen = Some(format!(
            "no function of stack {} has reported; is the name right? (A function reports \
             `RecordsIn` in the namespace {} once it has had records, under the name CloudFormation \
             gives it, `{}-<LogicalId>-<suffix>`; none has in the last two weeks.)",
            target.stack, target.namespace, target.stack
        ));
    }
    Ok(status)
}

/// What needs an operator in `status`.
fn attention(status: &Status, target: &Target) -> Vec<String> {
    let mut attention = Vec::new();
    for f in &status.functions {
        #[allow(clippy::cast_precision_loss, reason = "a lag in milliseconds is far below 2^52")]
        let max_lag = target.max_lag.as_millis() as f64;
        if let Some(lag) = f.lag_ms.filter(|lag| *lag > max_lag) {
            attention.push(format!(
                "{} is {:.0} s behind its stream (more than {} s)",
                f.function,
                lag / 1000.0,
                target.max_lag.as_secs()
            ));
        }
    }
    for (function, n) in &status.parked {
        attention.push(format!(
            "{function} parked {n} record(s) that can never succeed as they are: read them with `sidestream failures list --parked`, then replay or delete them (docs/operations.md)"
        ));
    }
    for place in status.given_up.iter().filter(|g| g.pending > 0) {
        attention.push(if place.records_kept {
            format!(
                "{} range(s) given up are kept with their records in {}: fix the cause, then replay them with `sidestream failures replay --destination` (docs/operations.md)",
                place.pending, place.location
            )
        } else {
            format!(
                "{} range(s) given up are pending at the on-failure queue {}: replay them with `sidestream failures replay --queue` while the stream still holds them (docs/operations.md)",
                place.pending, place.location
            )
        });
    }
    for index in &status.indexes {
        if let Some(drift) = index.drift.filter(|d| *d > 0.0) {
            attention.push(format!(
                "the index drifted: {}'s last verification found {drift} entries missing, stale or extra; run `sidestream index verify --repair` (docs/operations.md)",
                index.verifier
            ));
        }
    }
    for alarm in &status.alarms {
        attention.push(format!("the alarm {} is in ALARM: {}", alarm.name, alarm.description));
    }
    for silent in status.insufficient_data.iter().filter(|a| !a.since_created) {
        attention.push(format!(
            "the alarm {} is in INSUFFICIENT_DATA{} after having had data (it stopped coming): {}",
            silent.alarm.name,
            silent.since.as_deref().map(|at| format!(" since {at}")).unwrap_or_default(),
            silent.alarm.description
        ));
    }
    attention
}

/// A CloudWatch time as RFC 3339, to the second.
fn rfc3339_of(at: &DateTime) -> String {
    rfc3339(UNIX_EPOCH + Duration::from_secs(u64::try_from(at.secs()).unwrap_or(0)))
}

fn rfc3339(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_secs())
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// The values of `dimension` among the metrics `metric` of `namespace` (`ListMetrics`, every
/// page), sorted.
async fn list_dimension(
    client: &aws_sdk_cloudwatch::Client,
    namespace: &str,
    metric: &str,
    dimension: &str,
) -> Result<Vec<String>, StatusError> {
    let mut values = Vec::new();
    let mut pages = client.list_metrics().namespace(namespace).metric_name(metric).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page
            .map_err(|e| io_policy::RequestFailed::sdk("ListMetrics", format!("{namespace}/{metric}"), &e))?;
        for m in page.metrics() {
            for d in m.dimensions() {
                if d.name() == Some(dimension)
                    && let Some(value) = d.value()
                {
                    values.push(value.to_owned());
                }
            }
        }
    }
    values.sort();
    values.dedup();
    Ok(values)
}

/// One statistic of one metric over `[start, end)` in periods of `period` seconds: the values,
/// oldest first, with their timestamps.
struct Query {
    namespace: String,
    metric: &'static str,
    dimension: (&'static str, String),
    stat: &'static str,
}

impl Query {
    fn build(&self, id: String, period: i32) -> MetricDataQuery {
        MetricDataQuery::builder()
            .id(id)
            .metric_stat(
                MetricStat::builder()
                    .metric(
                        Metric::builder()
                            .namespace(&self.namespace)
                            .metric_name(self.metric)
                            .dimensions(
                                Dimension::builder().name(self.dimension.0).value(&self.dimension.1).build(),
                            )
                            .build(),
                    )
                    .period(period)
                    .stat(self.stat)
                    .build(),
            )
            .build()
    }
}

/// The answers to `queries` over `[start, end)` in periods of `period` seconds: for each query,
/// its `(timestamp, value)` points, oldest first.
async fn metric_data(
    client: &aws_sdk_cloudwatch::Client,
    queries: &[Query],
    period: i32,
    start: SystemTime,
    end: SystemTime,
) -> Result<Vec<Vec<(i64, f64)>>, StatusError> {
    let mut answers = vec![Vec::new(); queries.len()];
    // GetMetricData takes at most 500 queries.
    for (chunk_at, chunk) in queries.chunks(500).enumerate() {
        let built: Vec<MetricDataQuery> = chunk
            .iter()
            .enumerate()
            .map(|(i, q)| q.build(format!("q{}", chunk_at * 500 + i), period))
            .collect();
        let mut pages = client
            .get_metric_data()
            .set_metric_data_queries(Some(built.clone()))
            .start_time(DateTime::from(start))
            .end_time(DateTime::from(end))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page =
                page.map_err(|e| io_policy::RequestFailed::sdk("GetMetricData", "the stack's metrics", &e))?;
            for result in page.metric_data_results() {
                let Some(i) =
                    result.id().and_then(|id| id.strip_prefix('q')).and_then(|n| n.parse::<usize>().ok())
                else {
                    continue;
                };
                let points =
                    result.timestamps().iter().map(DateTime::secs).zip(result.values().iter().copied());
                if let Some(answer) = answers.get_mut(i) {
                    answer.extend(points);
                }
            }
        }
    }
    for answer in &mut answers {
        answer.sort_by_key(|(at, _)| *at);
    }
    Ok(answers)
}

/// The first whole minute after `now`: the end of a window that holds every data point up to
/// `now` (CloudWatch's end time is exclusive), in whole periods.
fn minute_after(now: SystemTime) -> SystemTime {
    let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    UNIX_EPOCH + Duration::from_secs((secs / 60 + 1) * 60)
}

/// A window in whole minutes, as a period CloudWatch takes (at least 60 s).
fn period_of(window: Duration) -> i32 {
    let minutes = window.as_secs().div_ceil(60).max(1);
    i32::try_from(minutes * 60).unwrap_or(i32::MAX)
}

#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "sums of counts are whole and non-negative"
)]
fn total(points: &[(i64, f64)]) -> u64 {
    points.iter().map(|(_, v)| *v).sum::<f64>().round() as u64
}

async fn function_metrics(
    client: &aws_sdk_cloudwatch::Client,
    target: &Target,
    functions: &[String],
    now: SystemTime,
) -> Result<Vec<FunctionStatus>, StatusError> {
    const SUMS: [&str; 3] = ["RecordsIn", "SystemicFailures", "TransientFailures"];
    let mut queries = Vec::new();
    for function in functions {
        for metric in SUMS {
            queries.push(Query {
                namespace: target.namespace.clone(),
                metric,
                dimension: ("Function", function.clone()),
                stat: "Sum",
            });
        }
        let lambda = function.split('/').next().unwrap_or_default().to_owned();
        queries.push(Query {
            namespace: "AWS/Lambda".to_owned(),
            metric: "IteratorAge",
            dimension: ("FunctionName", lambda),
            stat: "Maximum",
        });
    }
    let period = period_of(target.window);
    let end = minute_after(now);
    let start = end - Duration::from_secs(u64::try_from(period).unwrap_or(60));
    let answers = metric_data(client, &queries, period, start, end).await?;
    Ok(functions
        .iter()
        .zip(answers.chunks(SUMS.len() + 1))
        .map(|(function, answer)| FunctionStatus {
            function: function.clone(),
            binary: binary_of(&target.stack, function),
            lag_ms: answer[3].iter().map(|(_, v)| *v).reduce(f64::max),
            events: total(&answer[0]),
            systemic_failures: total(&answer[1]),
            transient_failures: total(&answer[2]),
            parked: 0,
            failures_pending: 0,
            alarms: Vec::new(),
        })
        .collect())
}

/// The metric each verification reports its drift to, by the verifier's `Function`.
const VERIFY_METRIC: &str = "IndexDrift";

async fn index_drift(
    client: &aws_sdk_cloudwatch::Client,
    target: &Target,
    now: SystemTime,
) -> Result<Vec<IndexStatus>, StatusError> {
    let prefix = format!("{}-", target.stack);
    let verifiers: Vec<String> = list_dimension(client, &target.namespace, VERIFY_METRIC, "Function")
        .await?
        .into_iter()
        .filter(|f| f.starts_with(&prefix))
        .collect();
    let queries: Vec<Query> = verifiers
        .iter()
        .map(|verifier| Query {
            namespace: target.namespace.clone(),
            metric: VERIFY_METRIC,
            dimension: ("Function", verifier.clone()),
            stat: "Maximum",
        })
        .collect();
    let end = minute_after(now);
    let answers = metric_data(client, &queries, 60, end - target.verify_window, end).await?;
    Ok(verifiers
        .into_iter()
        .zip(answers)
        .map(|(verifier, points)| {
            let last = points.last().copied();
            IndexStatus {
                verifier,
                drift: last.map(|(_, v)| v),
                verified_at: last
                    .map(|(at, _)| rfc3339(UNIX_EPOCH + Duration::from_secs(u64::try_from(at).unwrap_or(0)))),
            }
        })
        .collect())
}

/// The stack's alarms (`DescribeAlarms` by the `<stack>-` prefix, every page): those in ALARM,
/// and those in `INSUFFICIENT_DATA` that notify on it; each by name.
async fn stack_alarms(
    client: &aws_sdk_cloudwatch::Client,
    prefix: &str,
) -> Result<(Vec<AlarmStatus>, Vec<InsufficientDataAlarm>), StatusError> {
    let mut alarming = Vec::new();
    let mut insufficient = Vec::new();
    let mut pages = client.describe_alarms().alarm_name_prefix(prefix).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| io_policy::RequestFailed::sdk("DescribeAlarms", prefix, &e))?;
        for a in page.metric_alarms() {
            match a.state_value() {
                Some(StateValue::Alarm) => alarming.push(AlarmStatus::of(a)),
                Some(StateValue::InsufficientData) if !a.insufficient_data_actions().is_empty() => {
                    insufficient.push(InsufficientDataAlarm {
                        alarm: AlarmStatus::of(a),
                        since: a
                            .state_transitioned_timestamp()
                            .or(a.state_updated_timestamp())
                            .map(rfc3339_of),
                        since_created: since_created(a),
                    });
                }
                _ => {}
            }
        }
    }
    alarming.sort_by(|a, b| a.name.cmp(&b.name));
    insufficient.sort_by(|a, b| a.alarm.name.cmp(&b.alarm.name));
    Ok((alarming, insufficient))
}

impl AlarmStatus {
    fn of(a: &MetricAlarm) -> AlarmStatus {
        // An alarm on metric math: its returning expression, over its queries' metrics.
        let expression =
            a.metrics().iter().find(|q| q.return_data() != Some(false)).and_then(|q| q.expression());
        let queried = a
            .metrics()
            .iter()
            .filter_map(|q| q.metric_stat()?.metric())
            .flat_map(aws_sdk_cloudwatch::types::Metric::dimensions);
        AlarmStatus {
            name: a.alarm_name().unwrap_or_default().to_owned(),
            metric: match expression {
                Some(expression) => format!("metric math {expression}"),
                None => {
                    format!("{}/{}", a.namespace().unwrap_or_default(), a.metric_name().unwrap_or_default())
                }
            },
            dimensions: a
                .dimensions()
                .iter()
                .chain(queried)
                .filter_map(|d| d.value().map(str::to_owned))
                .collect(),
            reason: a.state_reason().unwrap_or_default().to_owned(),
            description: a.alarm_description().unwrap_or_default().to_owned(),
        }
    }
}

/// The reason CloudWatch gives the state of an alarm it creates, `INSUFFICIENT_DATA`.
const CREATED: &str = "Unchecked: Initial alarm creation";

/// Whether `alarm`, in `INSUFFICIENT_DATA`, has been there since it was created, rather than gone
/// there from OK (or ALARM).
///
/// `DescribeAlarms` tells, with no other request, in two ways; either says "since created":
/// - `PutMetricAlarm` creates an alarm in `INSUFFICIENT_DATA` and leaves an alarm's state as it
///   is when it updates it ("When this operation creates an alarm, the alarm state is
///   immediately set to `INSUFFICIENT_DATA` [...] When you update an existing alarm, its state is
///   left unchanged", CloudWatch API Reference). So an alarm whose `StateTransitionedTimestamp`
///   ("The date and time that the alarm's `StateValue` most recently changed") is not after its
///   `AlarmConfigurationUpdatedTimestamp` has not changed state since it was created, or since it
///   was last configured.
/// - An alarm takes a state's reason when it enters the state, and CloudWatch creates one for the
///   reason [`CREATED`]: in `INSUFFICIENT_DATA` for that reason, it has not left it since. This is
///   what the local stack's emulator shows (moto returns no `StateTransitionedTimestamp`), and it
///   holds on CloudWatch should a creation's two timestamps be a moment apart.
///
/// An alarm that went to `INSUFFICIENT_DATA` from OK fits neither: that change is after its
/// configuration, and its reason is the evaluation's (`Insufficient Data: …`). The one case read
/// wrongly is an alarm whose configuration is updated (a stack update that changes it) while it
/// is in `INSUFFICIENT_DATA` after OK: it reads as "since created" until it next changes state;
/// its notification went out when it changed.
///
/// Not `StateUpdatedTimestamp`: it also moves with the alarm's `EvaluationState`, its state
/// unchanged. Not `DescribeAlarmHistory`, which says the previous state outright: it is a request for each alarm
/// and a permission more for the operator, and its history is kept for a limited time only, after
/// which an alarm long gone to `INSUFFICIENT_DATA` would read as new, the wrong way (silently);
/// moto does not answer it either.
fn since_created(alarm: &MetricAlarm) -> bool {
    let unchanged = matches!(
        (alarm.state_transitioned_timestamp(), alarm.alarm_configuration_updated_timestamp()),
        (Some(changed), Some(configured)) if changed <= configured
    );
    unchanged || alarm.state_reason().is_some_and(|reason| reason.starts_with(CREATED))
}

/// How many receives of up to 10 messages attribute the queue's ranges to functions.
const PEEKS: usize = 10;

async fn queue(client: &aws_sdk_sqs::Client, url: &str) -> Result<GivenUp, StatusError> {
    use aws_sdk_sqs::types::QueueAttributeName as Name;
    let attributes = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(Name::ApproximateNumberOfMessages)
        .attribute_names(Name::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(|e| io_policy::RequestFailed::sdk("GetQueueAttributes", url, &e))?;
    let count = |name: &Name| {
        attributes.attributes().and_then(|a| a.get(name)).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0)
    };
    let pending =
        count(&Name::ApproximateNumberOfMessages) + count(&Name::ApproximateNumberOfMessagesNotVisible);
    // Read without hiding (a visibility timeout of 0), so a replay running now is not disturbed.
    let mut seen = std::collections::BTreeSet::new();
    let mut by_function: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..PEEKS {
        if seen.len() as u64 >= pending {
            break;
        }
        let received = client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .send()
            .await
            .map_err(|e| io_policy::RequestFailed::sdk("ReceiveMessage", url, &e))?;
        if received.messages().is_empty() {
            break;
        }
        for message in received.messages() {
            let Some(id) = message.message_id() else {
                continue;
            };
            if !seen.insert(id.to_owned()) {
                continue;
            }
            let body: serde_json::Value =
                message.body().and_then(|b| serde_json::from_str(b).ok()).unwrap_or_default();
            let arn = body["requestContext"]["functionArn"].as_str().unwrap_or_default();
            let name = arn.rsplit(':').next().unwrap_or_default().to_owned();
            *by_function.entry(name).or_default() += 1;
        }
    }
    Ok(GivenUp { location: url.to_owned(), records_kept: false, pending, by_function })
}

/// Where Lambda writes the ranges it gives up to an S3 on-failure destination.
const DESTINATION_PREFIX: &str = "aws/lambda/";

/// How many of a destination's objects are read to attribute ranges to functions; the rest are
/// counted only.
const ATTRIBUTED: usize = 100;

/// The ranges Lambda gave up to the parking bucket as its S3 on-failure destination: one object
/// each under `aws/lambda/`, attributed to its function by the object's
/// `requestContext.functionArn` (the first [`ATTRIBUTED`] objects).
async fn destination(client: &aws_sdk_s3::Client, bucket: &str) -> Result<GivenUp, StatusError> {
    let location = format!("s3://{bucket}/{DESTINATION_PREFIX}");
    let keys = list_keys(client, bucket, DESTINATION_PREFIX).await?;
    let mut by_function: BTreeMap<String, u64> = BTreeMap::new();
    for key in keys.iter().take(ATTRIBUTED) {
        // Listed a moment ago: a key gone since reads as nothing to attribute.
        let bytes = stream_runtime::aws::get_object(client, bucket, key, &crate::s3_budget())
            .await?
            .unwrap_or_default();
        let record: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let arn = record["requestContext"]["functionArn"].as_str().unwrap_or_default();
        // `…:function:<name>` or `…:function:<name>:<qualifier>`.
        let name = arn.split(':').nth(6).unwrap_or_default().to_owned();
        *by_function.entry(name).or_default() += 1;
    }
    Ok(GivenUp {
        location,
        records_kept: true,
        pending: u64::try_from(keys.len()).unwrap_or(u64::MAX),
        by_function,
    })
}

/// Every key under `prefix` in `bucket`.
async fn list_keys(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<String>, StatusError> {
    Ok(stream_runtime::aws::list_keys(client, bucket, prefix, |_| true, &crate::s3_budget()).await?)
}

/// The parked records' count by function: objects under `parked/<function>/`.
async fn parked_records(
    client: &aws_sdk_s3::Client,
    bucket: &str,
) -> Result<BTreeMap<String, u64>, StatusError> {
    let mut parked: BTreeMap<String, u64> = BTreeMap::new();
    for key in list_keys(client, bucket, "parked/").await? {
        if let Some(function) = key.split('/').nth(1) {
            *parked.entry(function.to_owned()).or_default() += 1;
        }
    }
    Ok(parked)
}

#[cfg(test)]
mod tests;
