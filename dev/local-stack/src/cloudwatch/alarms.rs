//! The template's alarms on the emulator: put under the names CloudFormation gives them, created
//! in `INSUFFICIENT_DATA` as CloudWatch creates them, and evaluated as CloudWatch evaluates them, a
//! metric's statistic or a metric-math expression over the last `EvaluationPeriods` periods, the
//! periods without data as `TreatMissingData` says.

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
    /// `AlarmActions`, `OKActions` and `InsufficientDataActions`, as the template resolves them.
    alarm_actions: Vec<String>,
    ok_actions: Vec<String>,
    insufficient_data_actions: Vec<String>,
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

/// A property that is a list of text (an alarm's actions), without the empty ones.
fn texts(p: &Value, field: &str) -> Vec<String> {
    p[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// An alarm's or a metric's `Dimensions`, as template JSON gives them, for `CloudWatch`'s API.
pub fn dimensions(p: &Value) -> Vec<Dimension> {
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
            alarm_actions: texts(p, "AlarmActions"),
            ok_actions: texts(p, "OKActions"),
            insufficient_data_actions: texts(p, "InsufficientDataActions"),
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

    /// The state CloudWatch gives the alarm when its evaluation range of `periods` periods holds
    /// the datapoints `values` (the other periods have none), or `None` when it keeps the state
    /// it is in.
    ///
    /// The CloudWatch User Guide, "Configuring how CloudWatch alarms treat missing data"
    /// (<https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html>):
    /// - `notBreaching`: "Missing data points are treated as \"good\" and within the threshold";
    /// - `breaching`: "Missing data points are treated as \"bad\" and breaching the threshold";
    /// - `ignore`: "The current alarm state is maintained" (when every period is missing; with
    ///   some data, those datapoints are evaluated);
    /// - `missing`, the default: "If all data points in the alarm evaluation range are missing,
    ///   the alarm transitions to `INSUFFICIENT_DATA`"; with some data, those datapoints are
    ///   evaluated, a missing one counting neither as breaching nor as not.
    ///
    /// With data, the alarm is in ALARM when `DatapointsToAlarm` of the evaluated datapoints
    /// breach, and OK otherwise. (CloudWatch also reads a few periods before the range when some
    /// in it are missing; the emulator reads the range only.)
    fn evaluation(&self, values: &[f64], periods: usize) -> Option<Evaluation> {
        let missing = periods.saturating_sub(values.len());
        let treat = self.treat_missing.as_str();
        if values.is_empty() {
            match treat {
                "ignore" => return None,
                "breaching" | "notBreaching" => {}
                // `missing`, CloudWatch's default.
                _ => return Some(Evaluation { state: StateValue::InsufficientData, breaching: 0, missing }),
            }
        }
        let mut breaching = values.iter().filter(|v| self.breaches(**v)).count();
        if treat == "breaching" {
            breaching += missing;
        }
        let needed = usize::try_from(self.datapoints_to_alarm).unwrap_or(1);
        let state = if breaching >= needed { StateValue::Alarm } else { StateValue::Ok };
        Some(Evaluation { state, breaching, missing })
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

/// What an alarm's evaluation found: its state, and how many of the datapoints of its evaluation
/// range breached and how many were missing.
#[derive(Debug)]
struct Evaluation {
    state: StateValue,
    breaching: usize,
    missing: usize,
}

impl Evaluation {
    /// The state's reason, as CloudWatch words it: how many of the evaluated datapoints breached,
    /// or, in `INSUFFICIENT_DATA`, were unknown.
    fn reason(&self, alarm: &AlarmSpec) -> String {
        if self.state == StateValue::InsufficientData {
            return format!(
                "Insufficient Data: {} out of the last {} datapoints were unknown, missing data {}",
                self.missing, alarm.evaluation_periods, alarm.treat_missing
            );
        }
        format!(
            "Threshold {}: {} out of the last {} datapoints {} the threshold ({}), missing data {}",
            if self.state == StateValue::Alarm { "Crossed" } else { "not crossed" },
            self.breaching,
            alarm.evaluation_periods,
            alarm.comparison.as_str(),
            alarm.threshold,
            alarm.treat_missing
        )
    }
}

/// The reason CloudWatch gives the state of an alarm it has just created, `INSUFFICIENT_DATA`
/// (`sidestream status` reads it: such an alarm has not changed state since).
const CREATED: &str = "Unchecked: Initial alarm creation";

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

/// Puts the stack's alarms on the emulator, each under its name (`PutMetricAlarm`), with the
/// actions the template gives them, so that `DescribeAlarms` says what each notifies (moto runs
/// no action, and nothing on the emulator would receive one). How many.
///
/// Each is in the state CloudWatch gives it: a new alarm `INSUFFICIENT_DATA`, for the reason
/// [`CREATED`], and one that exists the state it was in ("When this operation creates an alarm,
/// the alarm state is immediately set to `INSUFFICIENT_DATA`. [...] When you update an existing
/// alarm, its state is left unchanged", `PutMetricAlarm` in the CloudWatch API Reference). moto
/// creates every alarm, and puts one that exists afresh, in OK; so each is set its state
/// (`SetAlarmState`) once put.
pub async fn create_alarms(sdk: &SdkConfig, stack: &Stack) -> Result<usize, StackError> {
    let client = aws_sdk_cloudwatch::Client::new(sdk);
    let specs = specs(stack)?;
    let mut existing = states(&client, &format!("{}-", stack.name)).await?;
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
            .set_alarm_actions(Some(alarm.alarm_actions.clone()))
            .set_ok_actions(Some(alarm.ok_actions.clone()))
            .set_insufficient_data_actions(Some(alarm.insufficient_data_actions.clone()))
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
        let (state, reason) = existing
            .remove(&alarm.name)
            .unwrap_or_else(|| (StateValue::InsufficientData, CREATED.to_owned()));
        set_state(&client, &alarm.name, state, reason).await?;
    }
    Ok(specs.len())
}

/// Evaluates each of the stack's alarms now, as CloudWatch does, and sets its state on the
/// emulator (`SetAlarmState`) where it changed; an alarm whose state stays keeps its reason, as on
/// CloudWatch. The names of the alarms in ALARM.
pub async fn evaluate_alarms(sdk: &SdkConfig, stack: &Stack) -> Result<Vec<String>, StackError> {
    let client = aws_sdk_cloudwatch::Client::new(sdk);
    let now = SystemTime::now();
    let states = states(&client, &format!("{}-", stack.name)).await?;
    let mut alarming = Vec::new();
    for alarm in specs(stack)? {
        let Some(evaluation) = evaluate(&client, &alarm, now).await? else {
            continue;
        };
        let current = states.get(&alarm.name).map(|(state, _)| state);
        if current != Some(&evaluation.state) {
            set_state(&client, &alarm.name, evaluation.state.clone(), evaluation.reason(&alarm)).await?;
        }
        if evaluation.state == StateValue::Alarm {
            alarming.push(alarm.name);
        }
    }
    Ok(alarming)
}

/// Sets `alarm`'s state on the emulator (`SetAlarmState`).
async fn set_state(
    client: &aws_sdk_cloudwatch::Client,
    alarm: &str,
    state: StateValue,
    reason: String,
) -> Result<(), StackError> {
    client
        .set_alarm_state()
        .alarm_name(alarm)
        .state_value(state)
        .state_reason(reason)
        .send()
        .await
        .map_err(|e| request("SetAlarmState", alarm, &e))?;
    Ok(())
}

/// The state and its reason of each alarm named `prefix…` on the emulator, by name: one
/// `DescribeAlarms` listing, every page.
async fn states(
    client: &aws_sdk_cloudwatch::Client,
    prefix: &str,
) -> Result<BTreeMap<String, (StateValue, String)>, StackError> {
    let mut states = BTreeMap::new();
    let mut pages = client.describe_alarms().alarm_name_prefix(prefix).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| request("DescribeAlarms", prefix, &e))?;
        for alarm in page.metric_alarms() {
            if let (Some(name), Some(state)) = (alarm.alarm_name(), alarm.state_value()) {
                let reason = alarm.state_reason().unwrap_or_default().to_owned();
                states.insert(name.to_owned(), (state.clone(), reason));
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

/// What `alarm` evaluates to at `now` ([`AlarmSpec::evaluation`]), or `None` when missing data
/// leaves it as it is (`TreatMissingData: ignore`).
async fn evaluate(
    client: &aws_sdk_cloudwatch::Client,
    alarm: &AlarmSpec,
    now: SystemTime,
) -> Result<Option<Evaluation>, StackError> {
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
    Ok(alarm.evaluation(&values, periods))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `IndexVerifyMissingAlarm` as the template resolves it (26 hourly periods, all 26 to alarm,
    /// fewer than one report an hour breaching), missing data treated as `treat` (its default
    /// when `None`).
    fn heartbeat(treat: Option<&str>) -> AlarmSpec {
        let mut properties = json!({
            "Namespace": "Sidestream",
            "MetricName": "IndexDrift",
            "Dimensions": [{"Name": "Function", "Value": "s-VerifierFunction-ABCDEFGHIJKLM"}],
            "Statistic": "SampleCount",
            "Period": 3600,
            "EvaluationPeriods": "26",
            "DatapointsToAlarm": "26",
            "Threshold": 1,
            "ComparisonOperator": "LessThanThreshold",
            "InsufficientDataActions": ["arn:aws:sns:us-east-1:123456789012:s-alarmtopic"],
        });
        if let Some(treat) = treat {
            properties["TreatMissingData"] = json!(treat);
        }
        AlarmSpec::from_properties("IndexVerifyMissingAlarm", "s-IndexVerifyMissingAlarm-X", &properties)
            .unwrap()
    }

    fn state(alarm: &AlarmSpec, values: &[f64]) -> Option<StateValue> {
        alarm.evaluation(values, 26).map(|e| e.state)
    }

    #[test]
    fn missing_data_treated_as_missing_is_insufficient_data_when_every_period_is_missing() {
        for alarm in [heartbeat(Some("missing")), heartbeat(None)] {
            let evaluation = alarm.evaluation(&[], 26).unwrap();
            assert_eq!(evaluation.state, StateValue::InsufficientData);
            assert_eq!(evaluation.missing, 26);
            assert!(evaluation.reason(&alarm).starts_with("Insufficient Data: 26 out of the last 26"));
        }
        assert_eq!(heartbeat(None).treat_missing, "missing");
        assert_eq!(heartbeat(None).insufficient_data_actions.len(), 1);
    }

    /// Each `TreatMissingData` as the User Guide says: with no data at all, and with one report
    /// (not breaching) among 25 missing periods.
    #[test]
    fn each_treatment_of_missing_data_is_cloudwatchs() {
        let cases = [
            ("missing", Some(StateValue::InsufficientData), Some(StateValue::Ok)),
            ("ignore", None, Some(StateValue::Ok)),
            ("breaching", Some(StateValue::Alarm), Some(StateValue::Ok)),
            ("notBreaching", Some(StateValue::Ok), Some(StateValue::Ok)),
        ];
        for (treat, none, one) in cases {
            let alarm = heartbeat(Some(treat));
            assert_eq!(state(&alarm, &[]), none, "{treat}, no data");
            assert_eq!(state(&alarm, &[1.0]), one, "{treat}, one report");
        }
        // Breaching data counts whatever the treatment of missing data: 26 periods without a
        // report (a SampleCount of 0) are ALARM.
        for treat in ["missing", "ignore", "breaching", "notBreaching"] {
            assert_eq!(state(&heartbeat(Some(treat)), &[0.0; 26]), Some(StateValue::Alarm), "{treat}");
        }
        // Missing periods treated as breaching complete the breaching ones.
        assert_eq!(state(&heartbeat(Some("breaching")), &[0.0]), Some(StateValue::Alarm));
    }
}
