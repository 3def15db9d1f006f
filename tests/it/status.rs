//! `sidestream status` on the local stack, fed as Lambda feeds CloudWatch (the functions' EMF
//! lines, the mappings' `AWS/Lambda` data, the buckets' object counts) and with the template's alarms
//! evaluated: a new stack not verified yet and healthy, a healthy stack, then, each on a stack of
//! its own, a parked record, a range given up, an index that drifted and a verify schedule that
//! stopped, each reported where it belongs and each needing an operator (the command's exit
//! status 1).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, Result, ensure};
use aws_sdk_dynamodb::types::AttributeValue;
use local_stack::replayer::{Counts, Invoker, Pipeline};
use operations::status::Status;
use serde_json::json;

use local_stack::cloudwatch::Feed;
use local_stack::{Stack, put_json as put};

use crate::support::moto::sdk;
use crate::support::pipeline::{Local, failure_log, local, put_issues};

/// The stack's functions in process, their metrics fed to `feed`, the replayer's `AWS/Lambda`
/// data too, and ranges given up written to the stack's on-failure destination, the parking
/// bucket; `wrap` may replace a
/// function's invoker.
fn fed_pipeline(stack: &Stack, feed: &Feed, wrap: impl Fn(&str, Invoker) -> Invoker) -> Result<Pipeline> {
    let sdk = sdk();
    Ok(stack
        .pipeline(
            &sdk,
            |function| {
                let invoker = local_stack::fed_invoker(function, &sdk, feed)?;
                Ok(wrap(function.binary.as_deref().unwrap_or_default(), invoker))
            },
            stack.failure_log(&sdk, failure_log()),
        )?
        .with_metrics(feed.lambda()))
}

/// A stack with a scheduled verifier, verified once as after a deploy, and a few issues
/// delivered, except to the functions in `disabled`, whose mappings an operator disabled. Its
/// mapping-stopped alarms fire on the first 5-minute period of writes that a mapping does not
/// read, so that a test sees them fire, or stay quiet, at once.
async fn delivered(
    disabled: &[&str],
    wrap: impl Fn(&str, Invoker) -> Invoker,
) -> Result<(Stack, Feed, Pipeline)> {
    let Local { sdk, mut stack, .. } = local(&[
        ("IndexVerifySchedule", "rate(1 day)"),
        ("MaximumRetryAttempts", "1"),
        ("BatchSize", "10"),
        ("MappingStoppedAlarmPeriods", "1"),
    ])
    .await?;
    set_enabled(&mut stack, disabled, false);
    let feed = Feed::start(&sdk);
    // Just deployed, no verification has reported: no alarm is in ALARM, and
    // IndexVerifyMissingAlarm has been in INSUFFICIENT_DATA since its creation, which notifies no
    // one (CloudWatch acts on a change of state) and needs no operator; the report says the index
    // is not verified yet, until the first run (the schedule's, or one the runbook has the
    // operator start by hand).
    let before = local_stack::status(&sdk, &stack, &feed).await?;
    ensure!(
        alarming(&stack, &before).is_empty(),
        "no alarm is in ALARM before the first verification: {:?}\n{before}",
        alarming(&stack, &before)
    );
    ensure!(
        without_data(&stack, &before) == [("IndexVerifyMissingAlarm".to_owned(), true)],
        "{:?}\n{before}",
        without_data(&stack, &before)
    );
    ensure!(!before.needs_operator() && before.to_string().contains("not verified yet"), "{before}");
    // No function has had a record yet, so nothing says whether they run: the report never says
    // "Healthy", and the command exits 2 (`command` checks the status).
    ensure!(!before.healthy() && before.to_string().contains("UNKNOWN: no function of stack"), "{before}");
    let (ok, json) = command(&stack)?;
    ensure!(!ok && json["insufficient_data"][0]["since_created"] == true, "{json}");
    local_stack::verify(&sdk, &stack, &feed, &[("VERIFY_CONFIRM_SECONDS", "0")]).await?;
    let after = local_stack::status(&sdk, &stack, &feed).await?;
    ensure!(
        after.alarms.is_empty() && after.insufficient_data.is_empty(),
        "the first verification reported: IndexVerifyMissingAlarm is OK\n{after}"
    );
    let mut pipeline = fed_pipeline(&stack, &feed, wrap)?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let issues = crate::support::pipeline::issues_table(&stack)?;
    put_issues(&client, &issues, 0..6, |id| json!({"f": id, "g": format!("v{id}")})).await?;
    pipeline.settle().await?;
    Ok((stack, feed, pipeline))
}

/// Enables or disables the mappings of the functions built from `binaries`, as `aws lambda
/// update-event-source-mapping --[no-]enabled` does.
fn set_enabled(stack: &mut Stack, binaries: &[&str], enabled: bool) {
    for function in &mut stack.functions {
        if binaries.contains(&function.binary.as_deref().unwrap_or_default()) {
            for stream in &mut function.streams {
                stream.enabled = enabled;
            }
        }
    }
}

/// The mapping's counts of the function built from `binary`.
fn counts_of(pipeline: &Pipeline, binary: &str) -> Counts {
    pipeline
        .counts()
        .into_iter()
        .filter(|(function, _)| *function == binary)
        .fold(Counts::default(), |sum, (_, counts)| sum + counts)
}

fn row<'a>(status: &'a Status, logical_id: &str) -> Result<&'a operations::status::FunctionStatus> {
    let name = local_stack::function_name(&status.stack, logical_id);
    status
        .functions
        .iter()
        .find(|f| f.function == name)
        .with_context(|| format!("no row for {name} in\n{status}"))
}

/// `sidestream status --output json` run as an operator runs it, on the command line the local
/// stack prints: whether it exited 0, and its report. The report must say why when it fails.
fn command(stack: &Stack) -> Result<(bool, serde_json::Value)> {
    let line = stack.status_command()?;
    let mut args: Vec<&str> = line.split(' ').skip(1).collect();
    args.extend(["--output", "json"]);
    let ran = crate::support::process::sidestream(&args, "", &[]);
    let json: serde_json::Value = serde_json::from_str(&ran.out).with_context(|| format!("{ran:?}"))?;
    let attention = json["attention"].as_array().map_or(0, Vec::len);
    let expected = match (json["unseen"].is_null(), attention) {
        (false, _) => 2,
        (true, 0) => 0,
        (true, _) => 1,
    };
    ensure!(
        ran.code == Some(expected),
        "exit status 2 when no function reports, else 1 exactly when something needs an operator: {ran:?}"
    );
    Ok((ran.ok, json))
}

/// `sidestream status --output json` says the stack needs an operator, and `says` holds of its
/// output.
fn needs_operator(stack: &Stack, says: impl Fn(&serde_json::Value) -> bool) -> Result<()> {
    let (ok, json) = command(stack)?;
    ensure!(!ok && says(&json), "{json}");
    Ok(())
}

/// The stack's alarms in ALARM, by logical id.
fn alarming(stack: &Stack, status: &Status) -> Vec<String> {
    stack
        .alarms
        .iter()
        .filter(|(_, (name, _))| status.alarms.iter().any(|a| a.name == *name))
        .map(|(id, _)| id.clone())
        .collect()
}

/// The stack's alarms in `INSUFFICIENT_DATA` that notify on it, by logical id, each with whether it
/// has been there since its creation.
fn without_data(stack: &Stack, status: &Status) -> Vec<(String, bool)> {
    stack
        .alarms
        .iter()
        .filter_map(|(id, (name, _))| {
            let listed = status.insufficient_data.iter().find(|a| a.alarm.name == *name)?;
            Some((id.clone(), listed.since_created))
        })
        .collect()
}

#[tokio::test]
async fn a_healthy_stack_needs_no_operator() -> Result<()> {
    let sdk = sdk();
    let (stack, feed, pipeline) = delivered(&[], |_, inner| inner).await?;
    let run = local_stack::verify(&sdk, &stack, &feed, &[("VERIFY_CONFIRM_SECONDS", "0")]).await?;
    ensure!(run.drift.is_exact(), "{:?}", run.drift);
    let status = local_stack::status(&sdk, &stack, &feed).await?;
    ensure!(!status.needs_operator(), "{status}");
    ensure!(
        status.alarms.is_empty()
            && alarming(&stack, &status).is_empty()
            && status.insufficient_data.is_empty(),
        "{status}"
    );
    // Each function the mapping invoked has a row, its events exactly the records its mapping
    // delivered (its EMF lines' RecordsIn) and its lag the mapping's IteratorAge; a function
    // never invoked (the archiver: nothing expired) has reported nothing.
    for (logical_id, binary) in
        [("IndexerFunction", "multikey-indexer"), ("ArchiverFunction", "ttl-archiver")]
    {
        let counts = counts_of(&pipeline, binary);
        if counts.invocations == 0 {
            ensure!(row(&status, logical_id).is_err(), "{logical_id} was never invoked\n{status}");
            continue;
        }
        let row = row(&status, logical_id)?;
        ensure!(
            row.events == counts.delivered && row.binary.as_deref() == Some(binary) && row.lag_ms.is_some(),
            "{logical_id}: {} events, the mapping delivered {}\n{status}",
            row.events,
            counts.delivered
        );
    }
    ensure!(
        counts_of(&pipeline, "multikey-indexer").delivered == 6,
        "the six puts were delivered to the indexer"
    );
    let index = status.indexes.first().context("the verifier's index")?;
    ensure!(index.drift == Some(0.0), "{status}");
    let given_up = status.given_up.first().context("the parking bucket's given-up ranges")?;
    ensure!(given_up.records_kept && given_up.pending == 0 && status.parked.is_empty(), "{status}");
    ensure!(status.to_string().ends_with("Healthy: nothing needs an operator."), "{status}");
    let (ok, json) = command(&stack)?;
    ensure!(ok, "{json}");
    Ok(())
}

#[tokio::test]
async fn a_parked_record_needs_an_operator() -> Result<()> {
    let sdk = sdk();
    let (stack, feed, mut pipeline) = delivered(&[], |_, inner| inner).await?;
    // A counter shard whose count is not an integer: the aggregator parks it (record-permanent)
    // and goes on.
    let counters = stack.table("CounterTable")?.name.clone();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    put(&client, &counters, &json!({"pk": "COUNTER#status#SHARD#0", "count": 1.5})).await?;
    put(&client, &counters, &json!({"pk": "COUNTER#status#SHARD#1", "count": 2})).await?;
    pipeline.settle().await?;
    let status = local_stack::status(&sdk, &stack, &feed).await?;
    let aggregator = row(&status, "AggregatorFunction")?;
    ensure!(status.parked.get("counter-aggregator") == Some(&1) && aggregator.parked == 1, "{status}");
    ensure!(
        alarming(&stack, &status) == ["AggregatorParkedRecordsAlarm", "ParkingBucketPendingAlarm"],
        "{:?}\n{status}",
        alarming(&stack, &status)
    );
    ensure!(
        status.needs_operator() && status.attention.iter().any(|a| a.contains("counter-aggregator parked 1")),
        "{status}"
    );

    needs_operator(&stack, |json| json["parked"]["counter-aggregator"] == 1)
}

/// The indexer as a crashing build: every invocation with the issue "poison" fails (Lambda counts
/// each as an error). Counts the crashes.
fn crashing_on_poison(inner: Invoker, crashes: Arc<AtomicU32>) -> Invoker {
    crate::support::pipeline::crashing(inner, crashes, "Poison", |event| {
        event.records.iter().any(|r| crate::support::pipeline::of_issue(r, "poison"))
    })
}

#[tokio::test]
async fn a_range_given_up_needs_an_operator() -> Result<()> {
    let sdk = sdk();
    let crashes = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&crashes);
    let (stack, feed, mut pipeline) = delivered(&[], move |function, inner| {
        if function == "multikey-indexer" { crashing_on_poison(inner, Arc::clone(&seen)) } else { inner }
    })
    .await?;
    let issues = crate::support::pipeline::issues_table(&stack)?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    put(&client, &issues, &json!({"id": "poison", "project": "p0", "num": 99, "custom_fields": {"f": 1}}))
        .await?;
    pipeline.settle().await?;
    let given_up = counts_of(&pipeline, "multikey-indexer").given_up;
    ensure!(
        given_up == 1 && crashes.load(Ordering::SeqCst) == 2,
        "poison was given up after its retry: {given_up} given up, {} crashes",
        crashes.load(Ordering::SeqCst)
    );
    let status = local_stack::status(&sdk, &stack, &feed).await?;
    // Lambda wrote the range, records and all, to the parking bucket, its on-failure destination.
    let given_up = status.given_up.first().context("the parking bucket's given-up ranges")?;
    let indexer = row(&status, "IndexerFunction")?;
    ensure!(
        given_up.records_kept
            && given_up.location.ends_with("/aws/lambda/")
            && given_up.pending == 1
            && indexer.failures_pending == 1,
        "the range is pending, and it is the indexer's\n{status}"
    );
    ensure!(
        alarming(&stack, &status)
            == ["IndexerDroppedEventsAlarm", "IndexerErrorsAlarm", "ParkingBucketPendingAlarm"],
        "{:?}\n{status}",
        alarming(&stack, &status)
    );
    ensure!(status.needs_operator(), "{status}");
    needs_operator(&stack, |json| json["given_up"][0]["pending"] == 1)
}

#[tokio::test]
async fn an_index_that_drifted_needs_an_operator() -> Result<()> {
    let sdk = sdk();
    let (stack, feed, _pipeline) = delivered(&[], |_, inner| inner).await?;
    // An entry lost behind the stream's back.
    let index = stack.table("IndexTable")?.name.clone();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let entries = crate::support::moto::index_entries(&client, &index).await?;
    let first = entries.first().context("an index entry")?;
    let key = |name: &str| first[name]["S"].as_str().map(|s| AttributeValue::S(s.to_owned()));
    client
        .delete_item()
        .table_name(&index)
        .set_key(Some(
            [("pk", key("pk")), ("sk", key("sk"))]
                .into_iter()
                .map(|(k, v)| v.map(|v| (k.to_owned(), v)).context("the entry's key"))
                .collect::<Result<_>>()?,
        ))
        .send()
        .await?;
    let run = local_stack::verify(&sdk, &stack, &feed, &[("VERIFY_CONFIRM_SECONDS", "0")]).await?;
    ensure!(run.drift.count() == 1, "{:?}", run.drift);
    let status = local_stack::status(&sdk, &stack, &feed).await?;
    let drift = status.indexes.first().and_then(|i| i.drift);
    ensure!(drift == Some(1.0), "{status}");
    ensure!(alarming(&stack, &status) == ["IndexDriftAlarm"], "{:?}\n{status}", alarming(&stack, &status));
    ensure!(status.needs_operator() && status.attention.iter().any(|a| a.contains("drifted")), "{status}");
    needs_operator(&stack, |json| json["indexes"][0]["drift"] == 1.0)
}

/// The verify schedule stopped (disabled or deleted) after a verification: no report for
/// `IndexVerifyAlarmAfterHours` hours since one, and `IndexVerifyMissingAlarm` goes from OK to
/// `INSUFFICIENT_DATA`, which notifies its topic and needs an operator. The hours are not waited
/// for: the one report (a verification's `IndexDrift`, 0) is timed [`SLACK`] after the start of
/// the alarm's evaluation range, which it leaves that much later.
#[tokio::test]
async fn a_stopped_verify_schedule_needs_an_operator() -> Result<()> {
    use aws_sdk_cloudwatch::primitives::DateTime;
    use aws_sdk_cloudwatch::types::{MetricDatum, StandardUnit};
    let Local { sdk, stack, .. } = local(&[("IndexVerifySchedule", "rate(1 day)")]).await?;
    let feed = Feed::start(&sdk);
    let (name, alarm) = stack.alarms.get("IndexVerifyMissingAlarm").context("the verify alarm")?;
    let text = |field: &str| alarm[field].as_str().with_context(|| format!("the alarm's {field}"));
    let number = |field: &str| {
        alarm[field]
            .as_u64()
            .or_else(|| alarm[field].as_str().and_then(|n| n.parse().ok()))
            .with_context(|| format!("the alarm's {field}"))
    };
    let range = Duration::from_secs(number("Period")? * number("EvaluationPeriods")?);
    let dimensions = local_stack::cloudwatch::dimensions(alarm);
    let put = Instant::now();
    let report = MetricDatum::builder()
        .metric_name(text("MetricName")?)
        .set_dimensions(Some(dimensions))
        .value(0.0)
        .unit(StandardUnit::Count)
        .timestamp(DateTime::from(SystemTime::now() - range + SLACK))
        .build();
    aws_sdk_cloudwatch::Client::new(&sdk)
        .put_metric_data()
        .namespace(text("Namespace")?)
        .metric_data(report)
        .send()
        .await?;
    let verified = local_stack::status(&sdk, &stack, &feed).await?;
    ensure!(
        verified.insufficient_data.is_empty() && !verified.needs_operator(),
        "the report turned the alarm OK (status read {:?} after it was put)\n{verified}",
        put.elapsed()
    );
    // No report since, for the alarm's whole evaluation range.
    tokio::time::sleep((SLACK + Duration::from_secs(1)).saturating_sub(put.elapsed())).await;
    let stopped = local_stack::status(&sdk, &stack, &feed).await?;
    ensure!(
        without_data(&stack, &stopped) == [("IndexVerifyMissingAlarm".to_owned(), false)]
            && alarming(&stack, &stopped).is_empty(),
        "{:?}\n{stopped}",
        without_data(&stack, &stopped)
    );
    ensure!(
        stopped.needs_operator()
            && stopped.attention.iter().any(|a| a.contains(name.as_str()) && a.contains("INSUFFICIENT_DATA")),
        "{stopped}"
    );
    needs_operator(&stack, |json| json["insufficient_data"][0]["since_created"] == false)
}

/// How long after the start of `IndexVerifyMissingAlarm`'s evaluation range
/// [`a_stopped_verify_schedule_needs_an_operator`] puts its report: time for a status to find it
/// there.
const SLACK: Duration = Duration::from_secs(15);

/// A mapping an operator disabled reads nothing, so its function sends no `IteratorAge` and its
/// lag alarm stays quiet: only its mapping-stopped alarm (the issues table's write units against
/// the mapping's `PolledEventCount`) says so. The archiver's mapping, whose filters drop every one
/// of these records, polled them all and stays quiet. Enabled again, the mapping reads from
/// where it stopped, and the alarm clears.
#[tokio::test]
async fn a_disabled_mapping_is_alarmed_while_its_table_takes_writes() -> Result<()> {
    let sdk = sdk();
    let (mut stack, feed, pipeline) = delivered(&["multikey-indexer"], |_, inner| inner).await?;
    let (indexer, archiver) =
        (counts_of(&pipeline, "multikey-indexer"), counts_of(&pipeline, "ttl-archiver"));
    ensure!(
        indexer.read == 0 && archiver.read == 6 && archiver.filtered_out == 6,
        "the indexer's mapping read nothing, the archiver's all six puts: {indexer:?} {archiver:?}"
    );
    let status = local_stack::status(&sdk, &stack, &feed).await?;
    ensure!(
        alarming(&stack, &status) == ["IndexerMappingStoppedAlarm"],
        "{:?}\n{status}",
        alarming(&stack, &status)
    );
    let stopped = status.alarms.first().context("the alarm")?;
    ensure!(
        stopped.metric.starts_with("metric math IF(")
            && stopped.reason.starts_with("Threshold Crossed: 1 out of the last 1 datapoints")
            && status.needs_operator(),
        "{status}"
    );
    let (ok, json) = command(&stack)?;
    ensure!(!ok, "{json}");

    set_enabled(&mut stack, &["multikey-indexer"], true);
    let mut pipeline = fed_pipeline(&stack, &feed, |_, inner| inner)?;
    pipeline.settle().await?;
    let indexer = counts_of(&pipeline, "multikey-indexer");
    ensure!(
        indexer.read == 6 && indexer.delivered == 6,
        "enabled again, the mapping read the six puts: {indexer:?}"
    );
    let status = local_stack::status(&sdk, &stack, &feed).await?;
    ensure!(status.alarms.is_empty() && !status.needs_operator(), "{status}");
    Ok(())
}

/// The emulator publishes each table's `ConsumedWriteCapacityUnits` (`AWS/DynamoDB`, by
/// `TableName`) as DynamoDB does; the mapping-stopped alarms read them. A put costs a unit per
/// KB of its item, an update one, and a put refused by its condition its units too.
#[tokio::test]
async fn the_emulator_publishes_each_tables_write_units() -> Result<()> {
    use aws_sdk_cloudwatch::primitives::DateTime;
    use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricDataQuery, MetricStat};
    let sdk = sdk();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let table = crate::support::moto::unique("write-units");
    crate::support::moto::create_table(&client, &table, "pk", None, false).await;
    let start = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    put(&client, &table, &json!({"pk": "small"})).await?; // 1
    put(&client, &table, &json!({"pk": "big", "v": "a".repeat(3000)})).await?; // 3
    client
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("small".into()))
        .update_expression("SET n = :n")
        .expression_attribute_values(":n", AttributeValue::N("1".into()))
        .send()
        .await?; // 1
    let refused = client
        .put_item()
        .table_name(&table)
        .item("pk", AttributeValue::S("small".into()))
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await; // 1
    ensure!(
        refused.is_err_and(|e| e.as_service_error().is_some_and(
            aws_sdk_dynamodb::operation::put_item::PutItemError::is_conditional_check_failed_exception
        )),
        "the conditional put is refused"
    );
    let answer = aws_sdk_cloudwatch::Client::new(&sdk)
        .get_metric_data()
        .metric_data_queries(
            MetricDataQuery::builder()
                .id("w")
                .metric_stat(
                    MetricStat::builder()
                        .metric(
                            Metric::builder()
                                .namespace("AWS/DynamoDB")
                                .metric_name("ConsumedWriteCapacityUnits")
                                .dimensions(Dimension::builder().name("TableName").value(&table).build())
                                .build(),
                        )
                        .period(60)
                        .stat("Sum")
                        .build(),
                )
                .build(),
        )
        .start_time(DateTime::from(start))
        .end_time(DateTime::from(std::time::SystemTime::now() + std::time::Duration::from_secs(60)))
        .send()
        .await?;
    let units: f64 = answer.metric_data_results().iter().flat_map(|r| r.values().iter()).sum();
    ensure!((units - 6.0).abs() < f64::EPSILON, "{units} write units, not 6: {answer:?}");
    Ok(())
}
