//! The template's alarms on the emulator: put under the names CloudFormation gives them, and
//! evaluated as CloudWatch evaluates them, a metric's statistic or a metric-math expression over
//! the last `EvaluationPeriods` periods.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_config::SdkConfig;
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{
    ComparisonOperator, Dimension, Metric, MetricDataQuery, MetricStat, StateValue, Statistic,
};
use serde_json::Value;

use super::request;
use crate::metric_math::{self, Expr};
use crate::{Stack, StackError};

/// One metric's statistic over a period.
struct Stat {
    namespace: String,
    metric: String,
    dimensions: Vec<Dimension>,
    statistic: String,
    period: i32,
}

impl Stat {
    fn metric_stat(&self) -> MetricStat {
        MetricStat::builder()
            .metric(
                Metric::builder()
                    .namespace(&self.namespace)
                    .metric_name(&self.metric)
                    .set_dimensions(Some(self.dimensions.clone()))
                    .build(),
            )
            .period(self.period)
            .stat(&self.statistic)
            .build()
    }
}

/// What an alarm watches.
enum Watched {
    /// A metric (`Namespace`, `MetricName`, `Dimensions`, `Statistic`, `Period`).
    Metric(Stat),
    /// Metric math (`Metrics`): the expression that returns data, over the metric queries it
    /// reads by id.
    Math {
        /// The returning query's id, and its expression as written and parsed.
        id: String,
        text: String,
        expression: Expr,
        /// The metric queries, by id.
        queries: Vec<(String, Stat)>,
    },
}

/// One alarm of the template, as it is put and evaluated.
struct AlarmSpec {
    name: String,
    description: String,
    watched: Watched,
    period: i32,
    evaluation_periods: i32,
    datapoints_to_alarm: i32,
    threshold: f64,
    comparison: ComparisonOperator,
    treat_missing: String,
}

/// A property as text.
fn text(p: &Value, field: &str) -> Option<String> {
    p[field].as_str().map(str::to_owned)
}

/// A property as a number: resolved parameters come as strings, literals as numbers.
fn number(p: &Value, field: &str) -> Option<f64> {
    p[field].as_f64().or_else(|| p[field].as_str().and_then(|s| s.parse().ok()))
}

fn whole(p: &Value, field: &str) -> Option<i32> {
    number(p, field).and_then(|n| format!("{n}").parse::<i32>().ok())
}

fn dimensions(p: &Value) -> Vec<Dimension> {
    p["Dimensions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            Dimension::builder()
                .name(d["Name"].as_str().unwrap_or_default())
                .value(d["Value"].as_str().unwrap_or_default())
                .build()
        })
        .collect()
}

impl AlarmSpec {
    fn from_properties(logical_id: &str, name: &str, p: &Value) -> Result<AlarmSpec, StackError> {
        let unusable = |what: String| StackError::Unusable(format!("the alarm {logical_id}: {what}"));
        let needed = |value: Option<String>, what: &str| value.ok_or_else(|| unusable(format!("no {what}")));
        let watched = if let Some(metrics) = p["Metrics"].as_array() {
            math(metrics).map_err(unusable)?
        } else {
            Watched::Metric(Stat {
                namespace: needed(text(p, "Namespace"), "Namespace")?,
                metric: needed(text(p, "MetricName"), "MetricName")?,
                dimensions: dimensions(p),
                statistic: needed(text(p, "Statistic"), "Statistic")?,
                period: whole(p, "Period").ok_or_else(|| unusable("no Period".into()))?,
            })
        };
        let period = match &watched {
            Watched::Metric(stat) => stat.period,
            Watched::Math { queries, .. } => queries.first().map_or(60, |(_, q)| q.period),
        };
        let evaluation_periods =
            whole(p, "EvaluationPeriods").ok_or_else(|| unusable("no EvaluationPeriods".into()))?;
        Ok(AlarmSpec {
            name: name.to_owned(),
            description: text(p, "AlarmDescription").unwrap_or_default(),
            watched,
            period,
            evaluation_periods,
            datapoints_to_alarm: whole(p, "DatapointsToAlarm").unwrap_or(evaluation_periods),
            threshold: number(p, "Threshold").ok_or_else(|| unusable("no Threshold".into()))?,
            comparison: ComparisonOperator::from(
                needed(text(p, "ComparisonOperator"), "ComparisonOperator")?.as_str(),
            ),
            treat_missing: text(p, "TreatMissingData").unwrap_or_else(|| "missing".to_owned()),
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

    /// The queries the alarm is put with, when it watches metric math.
    fn metric_queries(&self) -> Option<Vec<MetricDataQuery>> {
        let Watched::Math { id, text, queries, .. } = &self.watched else {
            return None;
        };
        let mut out: Vec<MetricDataQuery> = queries
            .iter()
            .map(|(id, stat)| {
                MetricDataQuery::builder().id(id).metric_stat(stat.metric_stat()).return_data(false).build()
            })
            .collect();
        out.push(MetricDataQuery::builder().id(id).expression(text).return_data(true).build());
        Some(out)
    }
}

/// An alarm's `Metrics`: metric queries by id, and the one expression that returns data, which
/// reads only them. CloudWatch requires one returning query, and every query of one period.
fn math(metrics: &[Value]) -> Result<Watched, String> {
    let mut queries = Vec::new();
    let mut returning = None;
    for query in metrics {
        let id = query["Id"].as_str().ok_or("a query without an Id")?.to_owned();
        if let Some(expression) = query["Expression"].as_str() {
            if query["ReturnData"].as_bool() == Some(false) {
                return Err(format!("{id}: only the returning query may be an expression here"));
            }
            if returning.is_some() {
                return Err("more than one query returns data".to_owned());
            }
            let parsed = metric_math::parse(expression).map_err(|e| e.to_string())?;
            returning = Some((id, expression.to_owned(), parsed));
            continue;
        }
        let stat = &query["MetricStat"];
        let metric = &stat["Metric"];
        queries.push((
            id.clone(),
            Stat {
                namespace: text(metric, "Namespace").ok_or(format!("{id}: no Namespace"))?,
                metric: text(metric, "MetricName").ok_or(format!("{id}: no MetricName"))?,
                dimensions: dimensions(metric),
                statistic: text(stat, "Stat").ok_or(format!("{id}: no Stat"))?,
                period: whole(stat, "Period").ok_or(format!("{id}: no Period"))?,
            },
        ));
    }
    let (id, text, expression) = returning.ok_or("no expression returns data")?;
    if let Some(unknown) = expression.ids().into_iter().find(|read| !queries.iter().any(|(id, _)| id == read))
    {
        return Err(format!("{id} reads {unknown:?}, which no query of the alarm is"));
    }
    if queries.windows(2).any(|w| w[0].1.period != w[1].1.period) {
        return Err("its metric queries have different periods".to_owned());
    }
    Ok(Watched::Math { id, text, expression, queries })
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
        let mut put = client
            .put_metric_alarm()
            .alarm_name(&alarm.name)
            .alarm_description(&alarm.description)
            .evaluation_periods(alarm.evaluation_periods)
            .datapoints_to_alarm(alarm.datapoints_to_alarm)
            .threshold(alarm.threshold)
            .comparison_operator(alarm.comparison.clone())
            .treat_missing_data(&alarm.treat_missing)
            .set_metrics(alarm.metric_queries());
        if let Watched::Metric(stat) = &alarm.watched {
            put = put
                .namespace(&stat.namespace)
                .metric_name(&stat.metric)
                .set_dimensions(Some(stat.dimensions.clone()))
                .statistic(Statistic::from(stat.statistic.as_str()))
                .period(stat.period);
        }
        put.send().await.map_err(|e| request("PutMetricAlarm", &alarm.name, &e))?;
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
                if state == StateValue::Alarm { "Crossed" } else { "not crossed" },
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
) -> Result<BTreeMap<String, StateValue>, StackError> {
    let mut states = BTreeMap::new();
    let mut pages = client.describe_alarms().alarm_name_prefix(prefix).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| request("DescribeAlarms", prefix, &e))?;
        for alarm in page.metric_alarms() {
            if let (Some(name), Some(state)) = (alarm.alarm_name(), alarm.state_value()) {
                states.insert(name.to_owned(), state.clone());
            }
        }
    }
    Ok(states)
}

/// Each query's value in each of `periods` periods of `period` seconds from `start` (whole
/// seconds, as the emulator counts them), by id: one `GetMetricData`.
async fn series(
    client: &aws_sdk_cloudwatch::Client,
    alarm: &str,
    queries: &[(&str, &Stat)],
    (start, period, periods): (u64, u64, usize),
) -> Result<metric_math::Series, StackError> {
    let at = |secs: u64| DateTime::from_secs(i64::try_from(secs).unwrap_or(i64::MAX));
    let answer = client
        .get_metric_data()
        .set_metric_data_queries(Some(
            queries
                .iter()
                .map(|(id, stat)| MetricDataQuery::builder().id(*id).metric_stat(stat.metric_stat()).build())
                .collect(),
        ))
        .start_time(at(start))
        .end_time(at(start + period * periods as u64))
        .send()
        .await
        .map_err(|e| request("GetMetricData", alarm, &e))?;
    let mut out = metric_math::Series::new();
    for result in answer.metric_data_results() {
        let mut values = vec![None; periods];
        for (at, value) in result.timestamps().iter().zip(result.values()) {
            let offset = u64::try_from(at.secs()).unwrap_or(0).saturating_sub(start);
            let i = usize::try_from(offset / period.max(1)).unwrap_or(usize::MAX);
            // The emulator's periods are these: one value each.
            if let Some(slot) = values.get_mut(i) {
                *slot = Some(*value);
            }
        }
        out.insert(result.id().unwrap_or_default().to_owned(), values);
    }
    Ok(out)
}

/// The state `alarm` evaluates to at `now` and how many datapoints breached, or `None` when
/// missing data leaves it as it is (`TreatMissingData: ignore`).
async fn evaluate(
    client: &aws_sdk_cloudwatch::Client,
    alarm: &AlarmSpec,
    now: SystemTime,
) -> Result<Option<(StateValue, usize)>, StackError> {
    let period = u64::try_from(alarm.period).unwrap_or(60).max(1);
    let periods = usize::try_from(alarm.evaluation_periods).unwrap_or(1).max(1);
    // The periods end with the second that holds `now` (the emulator counts whole seconds, and
    // an end time is exclusive).
    let end = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() + 1;
    let window = (end.saturating_sub(period * periods as u64), period, periods);
    let values: Vec<f64> = match &alarm.watched {
        Watched::Metric(stat) => series(client, &alarm.name, &[("m", stat)], window)
            .await?
            .remove("m")
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .collect(),
        Watched::Math { expression, queries, .. } => {
            let queries: Vec<(&str, &Stat)> = queries.iter().map(|(id, s)| (id.as_str(), s)).collect();
            let series = series(client, &alarm.name, &queries, window).await?;
            (0..periods).filter_map(|i| expression.at(&series, i)).collect()
        }
    };
    let missing = periods.saturating_sub(values.len());
    let mut breaching = values.iter().filter(|v| alarm.breaches(**v)).count();
    match alarm.treat_missing.as_str() {
        "breaching" => breaching += missing,
        "ignore" if values.is_empty() => return Ok(None),
        _ => {}
    }
    let needed = usize::try_from(alarm.datapoints_to_alarm).unwrap_or(1);
    let state = if breaching >= needed { StateValue::Alarm } else { StateValue::Ok };
    Ok(Some((state, breaching)))
}
