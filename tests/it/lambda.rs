//! Each function's real binary under `cargo lambda watch`, Lambda's Runtime API emulator: a
//! warm process takes fixture events through `cargo lambda invoke`, answers with the batch
//! response, logs JSON lines, and leaves exactly the state the library leaves when it handles
//! the same events in process.
//!
//! The binaries are the debug builds in `target/debug` (scripts/test builds them first);
//! cargo-lambda comes from scripts/setup.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail, ensure};
use aws_sdk_dynamodb::types::ScalarAttributeType;
use serde_json::{Value, json};
use stream_runtime::Vars;

use stream_runtime::{Runtime, StreamFunction};

use crate::support::lambda::{Function, deadline, fixture, items, objects};
use crate::support::moto::{PARKING_BUCKET, create_table, parked, parking_bucket, s3, sdk, unique};
use crate::support::process::root;

/// A function's environment: `pairs` and the parking bucket.
fn env(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .chain([("PARKING_BUCKET".to_owned(), PARKING_BUCKET.to_owned())])
        .collect()
}

/// The function `F` as a library under the stream runtime, with the environment `vars` (and
/// this process's `S3_FORCE_PATH_STYLE`, as the binary gets it).
async fn library<F: StreamFunction>(vars: &BTreeMap<String, String>) -> Result<Runtime<F>> {
    parking_bucket().await;
    let lookup = |name: &str| match name {
        "S3_FORCE_PATH_STYLE" => Some("true".to_owned()),
        _ => vars.get(name).cloned(),
    };
    Ok(Runtime::from_vars(&Vars::new(&lookup), &sdk())?)
}

/// The fixture events `names` of `function`: `events/<function>/<name>.json`.
fn fixtures<const N: usize>(function: &str, names: [&str; N]) -> [String; N] {
    names.map(|name| format!("events/{function}/{name}.json"))
}

/// What `F` as a library answers to each fixture, in order: what its binary must answer.
async fn library_answers<F: StreamFunction>(
    vars: &BTreeMap<String, String>,
    fixtures: &[String],
) -> Result<Vec<Value>> {
    let function = library::<F>(vars).await?;
    let mut answers = Vec::new();
    for f in fixtures {
        answers.push(response(&function.handle(fixture(f)?, deadline()).await?));
    }
    Ok(answers)
}

/// Checks the real binary's responses and logs against the in-process handler's responses.
fn compare(function: &Function, fixtures: &[String], expected: &[Value]) -> Result<()> {
    for (fixture, expected) in fixtures.iter().zip(expected) {
        let response = function.invoke(fixture)?;
        ensure!(response == *expected, "{fixture}: the binary answered {response}, the library {expected}");
    }
    let lines = function.log_lines()?;
    let metrics = lines.iter().filter(|l| l.get("_aws").is_some()).count();
    ensure!(metrics == fixtures.len(), "one EMF line per invocation, found {metrics} in {lines:#?}");
    Ok(())
}

fn response(r: &stream_runtime::DynamoDbEventResponse) -> Value {
    serde_json::to_value(r).unwrap_or(Value::Null)
}

#[tokio::test]
async fn multikey_indexer_binary_answers_like_the_library() -> Result<()> {
    let sdk = sdk();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let fixtures = fixtures("multikey-indexer", ["insert", "modify-fields", "keys-only"]);
    let definitions = include_str!("../../functions/multikey-indexer/indexes.example.json");
    let config = |table: &str| env(&[("MULTIKEY_INDEXES", definitions.replace("issue-attrib-index", table))]);
    let (real, reference) = (unique("watch-index"), unique("watch-index-ref"));
    for table in [&real, &reference] {
        create_table(&client, table, "pk", Some(("sk", ScalarAttributeType::S)), false).await;
    }

    let expected = library_answers::<multikey_indexer::Indexer>(&config(&reference), &fixtures).await?;
    ensure!(expected[0] == json!({"batchItemFailures": []}), "{}", expected[0]);
    ensure!(expected[2] != expected[0], "the last fixture must fail a record");

    let function = Function::start("multikey-indexer", &config(&real))?;
    compare(&function, &fixtures, &expected)?;
    let written = items(&client, &real).await?;
    ensure!(!written.is_empty(), "the binary wrote no index entries");
    let expected = items(&client, &reference).await?;
    ensure!(written == expected, "the index tables differ:\n{written:#?}\n{expected:#?}");
    Ok(())
}

#[tokio::test]
async fn ttl_archiver_binary_answers_like_the_library() -> Result<()> {
    let s3 = s3();
    let fixtures = fixtures("ttl-archiver", ["mixed", "user-remove", "poison"]);
    let config = |bucket: &str| {
        env(&[("ARCHIVE_BUCKET", bucket.to_owned()), ("ARCHIVE_PREFIX", "archive/".to_owned())])
    };
    let (real, reference) = (unique("watch-archive"), unique("watch-archive-ref"));
    for bucket in [&real, &reference] {
        s3.create_bucket().bucket(bucket).send().await?;
    }

    let expected = library_answers::<ttl_archiver::Archiver>(&config(&reference), &fixtures).await?;
    ensure!(expected[0] == json!({"batchItemFailures": []}), "{}", expected[0]);
    // The poison fixture's malformed record is parked, and the batch goes on.
    ensure!(expected[2] == expected[0], "the poison fixture's record is parked: {}", expected[2]);
    ensure!(!parked("ttl-archiver", "e0041").await.is_empty(), "the malformed record is not parked");

    let function = Function::start("ttl-archiver", &config(&real))?;
    compare(&function, &fixtures, &expected)?;
    let written = objects(&s3, &real).await?;
    ensure!(!written.is_empty(), "the binary archived nothing");
    ensure!(written == objects(&s3, &reference).await?, "the archives differ");
    // The binary reads the invocation's bytes in place, and parks the record as Lambda delivered
    // it (over the library's object, under the same key): not as aws_lambda_events writes it.
    let delivered: Value = serde_json::from_str(&std::fs::read_to_string(root().join(&fixtures[2]))?)?;
    let delivered = delivered["Records"]
        .as_array()
        .and_then(|records| records.iter().find(|r| r["eventID"] == "e0041"))
        .context("the poison fixture has e0041")?;
    let decoded: stream_runtime::EventRecord = serde_json::from_value(delivered.clone())?;
    ensure!(serde_json::to_value(&decoded)? != *delivered, "the check cannot tell the two apart");
    let docs = parked("ttl-archiver", "e0041").await;
    ensure!(
        docs.len() == 1 && docs[0]["record"] == *delivered,
        "the binary parked {docs:#?}, not the record as delivered"
    );
    Ok(())
}

#[tokio::test]
async fn counter_aggregator_binary_answers_like_the_library() -> Result<()> {
    let sdk = sdk();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let fixtures = fixtures("counter-aggregator", ["increments", "duplicate", "foreign"]);
    let config = |table: &str| env(&[("COUNTER_TABLE", table.to_owned())]);
    let (real, reference) = (unique("watch-counters"), unique("watch-counters-ref"));
    for table in [&real, &reference] {
        create_table(&client, table, "pk", None, false).await;
    }

    let expected = library_answers::<counter_aggregator::Aggregator>(&config(&reference), &fixtures).await?;
    if expected.iter().any(|e| *e != json!({"batchItemFailures": []})) {
        bail!("the counter fixtures all succeed in process: {expected:?}");
    }

    let function = Function::start("counter-aggregator", &config(&real))?;
    compare(&function, &fixtures, &expected)?;
    let written = items(&client, &real).await?;
    ensure!(!written.is_empty(), "the binary wrote no totals");
    ensure!(written == items(&client, &reference).await?, "the totals differ");
    Ok(())
}

/// The aggregator's binary with `CHANGE_SOURCE=kinesis` takes Lambda's Kinesis event (the
/// increments fixture's changes, written as Kinesis Data Streams for DynamoDB writes them) and
/// leaves the totals the library leaves from the DynamoDB stream's event.
#[tokio::test]
async fn counter_aggregator_binary_reads_a_kinesis_event() -> Result<()> {
    let sdk = sdk();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let fixture_path = "events/counter-aggregator/increments.json";
    let (real, reference) = (unique("kinesis-counters"), unique("kinesis-counters-ref"));
    for table in [&real, &reference] {
        create_table(&client, table, "pk", None, false).await;
    }
    let aggregator =
        library::<counter_aggregator::Aggregator>(&env(&[("COUNTER_TABLE", reference.clone())])).await?;
    let changes = fixture(fixture_path)?;
    aggregator.handle(changes.clone(), deadline()).await?;

    let mut writer = local_stack::replayer::kinesis::Writer::new(
        "arn:aws:kinesis:us-east-1:123456789012:stream/counters-changes",
        &real,
    );
    let records: Vec<Value> = changes.records.iter().map(|r| writer.write(r)).collect();
    let event_file = std::env::temp_dir().join(format!("{}.json", unique("kinesis-event")));
    std::fs::write(&event_file, json!({"Records": records}).to_string())?;
    let function = Function::start(
        "counter-aggregator",
        &env(&[("COUNTER_TABLE", real.clone()), ("CHANGE_SOURCE", "kinesis".to_owned())]),
    )?;
    let response = function.invoke(&event_file.to_string_lossy())?;
    ensure!(response == json!({"batchItemFailures": []}), "{response}");
    // Totals are read from the total item alone: the shard count does not matter here.
    let sharding = formats::counter::Sharding::new(1)?;
    let counters = |table: &str| sharded_counter::Counters::new(client.clone(), table, sharding.clone());
    let names: Vec<String> = changes
        .records
        .iter()
        .filter_map(|r| {
            let key = serde_json::to_value(&r.change.keys).ok()?;
            let pk = key["pk"]["S"].as_str()?.to_owned();
            Some(pk.trim_start_matches("COUNTER#").split("#SHARD#").next()?.to_owned())
        })
        .collect();
    ensure!(!names.is_empty(), "the fixture names counters");
    for name in &names {
        let (got, want) = (counters(&real).total(name).await?, counters(&reference).total(name).await?);
        ensure!(got.is_some() && got == want, "{name}: {got:?} from Kinesis, {want:?} from the stream");
    }
    let metrics = function.log_lines()?.iter().filter(|l| l.get("_aws").is_some()).count();
    ensure!(metrics == 1, "one EMF line, found {metrics}");
    Ok(())
}
