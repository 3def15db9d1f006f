//! The template's dashboard and alarms against what is emitted: every widget's and every alarm's
//! metric is one that the code (Sidestream's EMF, rendered by the functions' own metrics code)
//! or Lambda (the function's and its mapping's metrics, those only with `MetricsConfig`) emits,
//! under the namespace and dimension it is emitted with, in every deployment the template tests
//! cover. A renamed metric, or a dimension that no longer matches, fails here rather than leaving
//! a widget empty or an alarm silent. Each function's widgets must also show what an operator
//! looks at: lag, the mapping's events, errors, throttles, duration against the timeout, and
//! Sidestream's parked records, failures, conflicts and retries.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, bail, ensure};
use local_stack::template::{Function, Resolver, Template};
use serde_json::{Value, json};
use stream_runtime::Vars;
use stream_runtime::metrics::Metrics;

use crate::support::template::{
    COMBINED, VERIFIER, alarm_metrics, deployments, names, physical, stream_functions, template,
};

/// One metric series: namespace, name, dimension name, dimension value.
type Series = (String, String, String, String);

/// Series, each with where it is shown (a widget's title, an alarm's logical id).
type Shown = Vec<(String, Series)>;

/// Timeout lines: a function's name and the line's value in ms.
type TimeoutLines = Vec<(String, i64)>;

/// Lambda's function metrics that the dashboard and alarms may use (AWS/Lambda, `FunctionName`).
const FUNCTION_METRICS: [&str; 4] = ["Errors", "Throttles", "Duration", "Invocations"];
/// What a function URL emits (AWS/Lambda, `FunctionName`); the dashboard shows the counts.
const URL_METRICS: [&str; 3] = ["UrlRequestCount", "Url4xxCount", "Url5xxCount"];
/// A stream mapping's function metric.
const STREAM_METRIC: &str = "IteratorAge";
/// What a mapping with `MetricsConfig: {Metrics: [EventCount]}` emits (AWS/Lambda,
/// `EventSourceMappingUUID`; Lambda developer guide, "Event source mapping metrics").
const MAPPING_METRICS: [&str; 4] = [
    "PolledEventCount",
    "FilteredOutEventCount",
    "DroppedEventCount",
    "OnFailureDestinationDeliveredEventCount",
];
/// Sidestream's counters each stream function's dashboard row must show.
const SHOWN: [&str; 5] = ["ParkedRecords", "TransientFailures", "SystemicFailures", "Conflicts", "Retries"];

/// The series an EMF document makes: one per metric and dimension set (each set of one name here).
fn emf_series(doc: &Value) -> Result<Vec<Series>> {
    let mut out = Vec::new();
    let directives =
        doc["_aws"]["CloudWatchMetrics"].as_array().context("an EMF document has CloudWatchMetrics")?;
    for directive in directives {
        let namespace = directive["Namespace"].as_str().context("a namespace")?;
        for dimensions in directive["Dimensions"].as_array().context("dimensions")? {
            let [Value::String(dimension)] = dimensions.as_array().map(Vec::as_slice).unwrap_or_default()
            else {
                bail!("one dimension per set: {dimensions}");
            };
            let value = doc[dimension.as_str()].as_str().context("the dimension's value")?;
            for metric in directive["Metrics"].as_array().context("metrics")? {
                let name = metric["Name"].as_str().context("a metric name")?;
                ensure!(doc.get(name).is_some(), "EMF names {name} without a value");
                out.push((namespace.into(), name.into(), dimension.clone(), value.into()));
            }
        }
    }
    Ok(out)
}

/// Everything a deployment emits, with each function's timeout in ms by physical name, and what
/// the dashboard must show.
struct Emitted {
    series: BTreeSet<Series>,
    timeouts: BTreeMap<String, i64>,
    required: BTreeSet<Series>,
}

fn emitted(template: &Template, resolver: &Resolver<'_>) -> Result<Emitted> {
    let mut out = Emitted { series: BTreeSet::new(), timeouts: BTreeMap::new(), required: BTreeSet::new() };
    let lambda = |name: &str, dimension: &str, value: &str| -> Series {
        ("AWS/Lambda".into(), name.into(), dimension.into(), value.into())
    };
    for function in template.functions(resolver)? {
        let name = physical(&function.logical_id);
        out.timeouts.insert(name.clone(), function.timeout.unwrap_or(3) * 1000);
        for metric in FUNCTION_METRICS {
            out.series.insert(lambda(metric, "FunctionName", &name));
        }
        // A function URL's metrics (AWS/Lambda, `FunctionName`; Lambda developer guide,
        // "Monitoring function URLs"), for the function that has one: the grid API's.
        let url = template
            .root()
            .pointer(&format!("/Resources/{}/Properties/FunctionUrlConfig", function.logical_id));
        if url.is_some() {
            for metric in URL_METRICS {
                out.series.insert(lambda(metric, "FunctionName", &name));
                out.required.insert(lambda(metric, "FunctionName", &name));
            }
        }
        for stream in &function.streams {
            out.series.insert(lambda(STREAM_METRIC, "FunctionName", &name));
            out.required.insert(lambda(STREAM_METRIC, "FunctionName", &name));
            for metric in ["Errors", "Throttles", "Duration"] {
                out.required.insert(lambda(metric, "FunctionName", &name));
            }
            let mapping = format!("{}{}", function.logical_id, stream.name);
            let uuid = resolver.string(&json!({"Ref": mapping}), &mapping)?;
            let config = template.root().pointer(&format!(
                "/Resources/{}/Properties/Events/{}/Properties/MetricsConfig/Metrics",
                function.logical_id, stream.name
            ));
            // Without EventCount the mapping emits none of these: a widget on them stays empty.
            if config.is_some_and(|m| m.as_array().is_some_and(|m| m.contains(&json!("EventCount")))) {
                for metric in MAPPING_METRICS {
                    out.series.insert(lambda(metric, "EventSourceMappingUUID", &uuid));
                }
            }
            for metric in MAPPING_METRICS {
                out.required.insert(lambda(metric, "EventSourceMappingUUID", &uuid));
            }
        }
        for series in sidestream_series(&function, &name)? {
            if series.2 == "Function" && SHOWN.contains(&series.1.as_str()) {
                out.required.insert(series.clone());
            }
            if series.1 == "IndexDrift" {
                out.required.insert(series.clone());
            }
            out.series.insert(series);
        }
    }
    out.series.extend(services_series(template, resolver)?);
    Ok(out)
}

/// How a resource's dimension value is read from its logical id.
type Named<'a> = &'a dyn Fn(&str) -> serde_json::Value;

/// What the other AWS services publish about the stack's resources: Step Functions' state
/// machines, S3's buckets, DynamoDB's tables, Kinesis's streams, SQS's queues.
fn services_series(template: &Template, resolver: &Resolver<'_>) -> Result<BTreeSet<Series>> {
    let mut out = BTreeSet::new();
    let by_ref = |id: &str| json!({"Ref": id});
    let queue_name = |id: &str| json!({"Fn::GetAtt": [id, "QueueName"]});
    // (resource type, namespace, the dimension that names it, its name, the metrics): Step
    // Functions' executions of each state machine; each bucket's object count, which S3 publishes
    // daily (`StorageType` `AllStorageTypes`); each table's consumed write units; each stream's
    // incoming records; each queue's depth, sends and oldest message.
    let services: [(&str, &str, &str, Named<'_>, &[&str]); 5] = [
        (
            "AWS::Serverless::StateMachine",
            "AWS/States",
            "StateMachineArn",
            &by_ref,
            &["ExecutionsStarted", "ExecutionsSucceeded", "ExecutionsFailed", "ExecutionsTimedOut"],
        ),
        ("AWS::S3::Bucket", "AWS/S3", "BucketName", &by_ref, &["NumberOfObjects"]),
        (
            "AWS::DynamoDB::Table",
            "AWS/DynamoDB",
            "TableName",
            &by_ref,
            &[
                "ConsumedWriteCapacityUnits",
                "ConsumedReadCapacityUnits",
                "WriteThrottleEvents",
                "ReadThrottleEvents",
            ],
        ),
        ("AWS::Kinesis::Stream", "AWS/Kinesis", "StreamName", &by_ref, &["IncomingRecords"]),
        (
            "AWS::SQS::Queue",
            "AWS/SQS",
            "QueueName",
            &queue_name,
            &["ApproximateNumberOfMessagesVisible", "NumberOfMessagesSent", "ApproximateAgeOfOldestMessage"],
        ),
    ];
    for (kind, namespace, dimension, name_of, metrics) in services {
        for resource in resolver.existing(kind)? {
            let name = resolver.string(&name_of(resource), resource)?;
            for metric in metrics {
                out.insert((namespace.into(), (*metric).into(), dimension.into(), name.clone()));
            }
        }
    }
    // The source tables a stack is given, besides the tables it creates; and an index table it
    // is given (`IndexTableName`), as the indexer's definition names it.
    for function in template.functions(resolver)? {
        if let Some(name) = function.environment.get("SOURCE_TABLE") {
            out.insert(dynamodb_writes(name.clone()));
        }
        let lookup = |var: &str| function.environment.get(var).cloned();
        if let Ok(indexes) = multikey_indexer::Indexes::from_vars(&Vars::new(&lookup)) {
            for index in &indexes.indexes {
                for metric in [
                    "ConsumedWriteCapacityUnits",
                    "ConsumedReadCapacityUnits",
                    "WriteThrottleEvents",
                    "ReadThrottleEvents",
                ] {
                    out.insert((
                        "AWS/DynamoDB".into(),
                        metric.into(),
                        "TableName".into(),
                        index.table.to_string(),
                    ));
                }
            }
        }
    }
    Ok(out)
}

fn dynamodb_writes(table: String) -> Series {
    ("AWS/DynamoDB".into(), "ConsumedWriteCapacityUnits".into(), "TableName".into(), table)
}

/// The series a function's own code emits, as its configuration code reads its environment
/// (Lambda sets `AWS_LAMBDA_FUNCTION_NAME`).
fn sidestream_series(function: &Function, name: &str) -> Result<Vec<Series>> {
    let lookup = |var: &str| match var {
        "AWS_LAMBDA_FUNCTION_NAME" => Some(name.to_owned()),
        _ => function.environment.get(var).cloned(),
    };
    let vars = Vars::new(&lookup);
    let binary = function.binary.as_deref().unwrap_or_default();
    let render =
        |metrics: &Metrics| -> Result<Vec<Series>> { emf_series(&serde_json::from_str(&metrics.render(0))?) };
    if stream_functions().contains(&binary) {
        return render(&Metrics::from_vars(&vars, binary, formats::METRICS_NAMESPACE)?);
    }
    if binary == COMBINED {
        let metrics = Metrics::from_vars(&vars, binary, formats::METRICS_NAMESPACE)?;
        let members = function.environment.get("COMBINED_FUNCTIONS").context("COMBINED_FUNCTIONS")?;
        let mut out = Vec::new();
        for member in members.split(',') {
            let dimension = stream_runtime::combined::member_dimension(metrics.function(), member);
            out.extend(render(&metrics.for_function(dimension))?);
        }
        return Ok(out);
    }
    if binary == VERIFIER {
        let config = operations::verify::scheduled::Config::from_vars(&vars)?;
        let drift = operations::verify::Drift::none(&config.index);
        let run = operations::verify::scheduled::Run {
            first: drift.clone(),
            drift,
            mended: None,
            paused: std::time::Duration::ZERO,
        };
        return emf_series(&operations::verify::scheduled::emf(&run, &config.namespace, &config.function, 0));
    }
    Ok(Vec::new())
}

/// The dashboard's series, each with its widget's title, and its timeout annotations by function.
fn dashboard(template: &Template, resolver: &Resolver<'_>) -> Result<(Shown, TimeoutLines)> {
    let body =
        template.root().pointer("/Resources/Dashboard/Properties/DashboardBody").context("a dashboard")?;
    let body: Value =
        serde_json::from_str(&resolver.string(body, "Dashboard")?).context("the dashboard's body is JSON")?;
    let mut series = Vec::new();
    let mut timeouts = Vec::new();
    for widget in body["widgets"].as_array().context("widgets")? {
        if widget["type"] != "metric" {
            continue;
        }
        let title = widget["properties"]["title"].as_str().unwrap_or_default().to_owned();
        let mut functions = BTreeSet::new();
        for row in widget["properties"]["metrics"].as_array().context("metrics")? {
            let fields: Vec<&str> =
                row.as_array().context("a metric row")?.iter().filter_map(Value::as_str).collect();
            let [namespace, name, dimension, value] = fields.as_slice() else {
                bail!("{title}: a metric row of one dimension, in full: {row}");
            };
            if *dimension == "FunctionName" {
                functions.insert((*value).to_owned());
            }
            series.push((
                title.clone(),
                ((*namespace).into(), (*name).into(), (*dimension).into(), (*value).into()),
            ));
        }
        for line in widget["properties"]["annotations"]["horizontal"].as_array().into_iter().flatten() {
            if line["label"] == "timeout" {
                let [function] = functions.iter().collect::<Vec<_>>()[..] else {
                    bail!("{title}: a timeout line over one function");
                };
                timeouts.push((function.clone(), line["value"].as_i64().context("a timeout value")?));
            }
        }
    }
    Ok((series, timeouts))
}

/// Every alarm that exists, as the series it watches: its metric, or each metric its metric
/// math reads.
fn alarms(resolver: &Resolver<'_>) -> Result<Shown> {
    let mut out = Vec::new();
    for (alarm, p) in resolver.resolved("AWS::CloudWatch::Alarm")? {
        let metrics = alarm_metrics(&p);
        ensure!(!metrics.is_empty(), "{alarm}: no metric");
        for m in metrics {
            out.push((alarm.to_owned(), series_of(alarm, m)?));
        }
    }
    Ok(out)
}

/// The series of a metric (`Namespace`, `MetricName`, `Dimensions`).
fn series_of(alarm: &str, m: &Value) -> Result<Series> {
    let dimensions = m["Dimensions"].as_array().context("dimensions")?;
    let d = match dimensions.as_slice() {
        [d] => d,
        // S3's daily storage metrics are by bucket and storage type; `NumberOfObjects` is
        // published for `AllStorageTypes` only.
        [d, storage]
            if m["Namespace"] == "AWS/S3"
                && storage["Name"] == "StorageType"
                && storage["Value"] == "AllStorageTypes" =>
        {
            d
        }
        _ => bail!("{alarm}: one dimension (S3's storage metrics: a bucket and AllStorageTypes)"),
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    Ok((text(&m["Namespace"]), text(&m["MetricName"]), text(&d["Name"]), text(&d["Value"])))
}

#[test]
fn every_widget_and_alarm_watches_a_metric_the_code_or_lambda_emits() -> Result<()> {
    let template = template()?;
    let mut checked = (0, 0);
    for (deployment, parameters) in deployments() {
        let resolver = template.resolver(&parameters, names());
        let emitted = emitted(template, &resolver)?;
        let (shown, timeouts) = dashboard(template, &resolver)?;
        for (title, series) in &shown {
            ensure!(
                emitted.series.contains(series),
                "{deployment}: widget {title:?} shows {series:?}, which nothing emits"
            );
        }
        let shown: BTreeSet<&Series> = shown.iter().map(|(_, s)| s).collect();
        let missing: Vec<_> = emitted.required.iter().filter(|s| !shown.contains(s)).collect();
        ensure!(missing.is_empty(), "{deployment}: the dashboard does not show {missing:#?}");
        for (function, timeout) in &timeouts {
            ensure!(
                emitted.timeouts.get(function) == Some(timeout),
                "{deployment}: {function}'s timeout line at {timeout} ms, its timeout {:?}",
                emitted.timeouts.get(function)
            );
        }
        for (alarm, series) in alarms(&resolver)? {
            ensure!(
                emitted.series.contains(&series),
                "{deployment}: alarm {alarm} watches {series:?}, which nothing emits"
            );
            checked.1 += 1;
        }
        checked.0 += shown.len();
    }
    ensure!(checked.0 > 500 && checked.1 > 100, "checked {checked:?}");
    Ok(())
}

/// The check has teeth: a metric renamed in the template, or a dimension that the code does not
/// emit, is named.
#[test]
fn a_renamed_metric_or_a_wrong_dimension_is_caught() -> Result<()> {
    let template = template()?;
    let (_, parameters) = &deployments()[0];
    let resolver = template.resolver(parameters, names());
    let emitted = emitted(template, &resolver)?;
    let (shown, _) = dashboard(template, &resolver)?;
    let (_, parked) =
        shown.iter().find(|(_, s)| s.1 == "ParkedRecords").context("a parked-records series")?;
    ensure!(emitted.series.contains(parked));
    let renamed = (parked.0.clone(), "RecordsParked".to_owned(), parked.2.clone(), parked.3.clone());
    let elsewhere = (parked.0.clone(), parked.1.clone(), parked.2.clone(), format!("{}-x", parked.3));
    ensure!(!emitted.series.contains(&renamed) && !emitted.series.contains(&elsewhere));
    Ok(())
}
