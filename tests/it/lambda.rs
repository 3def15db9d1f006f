//! Each function's real binary under `cargo lambda watch`, Lambda's Runtime API emulator: a
//! warm process takes fixture events through `cargo lambda invoke`, answers with the batch
//! response, logs JSON lines, and leaves exactly the state the library leaves when it handles
//! the same events in process.
//!
//! The binaries are the debug builds in `target/debug` (scripts/test builds them first);
//! cargo-lambda comes from scripts/setup.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodb::types::ScalarAttributeType;
use local_stack::Emulated;
use serde_json::{Value, json};
use stream_runtime::{Deadline, Vars};

use stream_runtime::{Runtime, StreamFunction};

use crate::support::moto::{PARKING_BUCKET, create_table, parked, parking_bucket, sdk, unique};
use crate::support::process::{binary, root};

fn cargo_lambda() -> Result<PathBuf> {
    let path = root().join(".tools/bin/cargo-lambda");
    ensure!(path.exists(), "{} is missing: run scripts/setup", path.display());
    Ok(path)
}

/// One function binary, warm, behind its own `cargo lambda watch` runtime API (started the way
/// `sidestream-local` starts it).
pub(crate) struct Function(Emulated);

impl Function {
    pub(crate) fn start(name: &str, env: &BTreeMap<String, String>) -> Result<Function> {
        let log = std::env::temp_dir().join(format!("{}.log", unique(&format!("sidestream-{name}"))));
        let emulated = Emulated::start(&cargo_lambda()?, &binary(name)?, env, &log, Duration::from_secs(60))?;
        Ok(Function(emulated))
    }

    /// `cargo lambda invoke` with a fixture; the function's response.
    pub(crate) fn invoke(&self, fixture: &str) -> Result<Value> {
        let output = Command::new(cargo_lambda()?)
            .args(["lambda", "invoke", "_", "--output-format", "json", "-A", "127.0.0.1", "-P"])
            .arg(self.0.port.to_string())
            .arg("--data-file")
            .arg(root().join(fixture))
            .output()?;
        ensure!(output.status.success(), "invoke {fixture}: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout)
            .with_context(|| format!("invoke {fixture}: {}", String::from_utf8_lossy(&output.stdout)))
    }

    /// The function's log lines: every one must be JSON (the tracing logs and the EMF metrics).
    pub(crate) fn log_lines(&self) -> Result<Vec<Value>> {
        let mut text = String::new();
        File::open(&self.0.log)?.read_to_string(&mut text)?;
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).with_context(|| format!("a log line is not JSON: {l}")))
            .collect()
    }
}

pub(crate) fn fixture(path: &str) -> Result<Event> {
    let text = std::fs::read_to_string(root().join(path))?;
    Ok(serde_json::from_str(&text)?)
}

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

pub(crate) fn deadline() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

/// Checks the real binary's responses and logs against the in-process handler's responses.
fn compare(function: &Function, fixtures: &[&str], expected: &[Value]) -> Result<()> {
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

/// Every item of a table, as sorted JSON lines.
pub(crate) async fn items(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<Vec<String>> {
    let scan = client.scan().table_name(table).send().await?;
    let mut items: Vec<String> = scan
        .items()
        .iter()
        // Through a JSON value, whose object keys are sorted, unlike the item's HashMap.
        .map(|i| serde_json::to_value(serde_dynamo::Item::from(i.clone())).map(|v| v.to_string()))
        .collect::<Result<_, _>>()?;
    items.sort();
    Ok(items)
}

#[tokio::test]
async fn multikey_indexer_binary_answers_like_the_library() -> Result<()> {
    let sdk = sdk();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let fixtures = [
        "events/multikey-indexer/insert.json",
        "events/multikey-indexer/modify-fields.json",
        "events/multikey-indexer/keys-only.json",
    ];
    let definitions = include_str!("../../functions/multikey-indexer/indexes.example.json");
    let config = |table: &str| env(&[("MULTIKEY_INDEXES", definitions.replace("issue-attrib-index", table))]);
    let (real, reference) = (unique("watch-index"), unique("watch-index-ref"));
    for table in [&real, &reference] {
        create_table(&client, table, "pk", Some(("sk", ScalarAttributeType::S)), false).await;
    }

    let indexer = library::<multikey_indexer::Indexer>(&config(&reference)).await?;
    let mut expected = Vec::new();
    for f in fixtures {
        expected.push(response(&indexer.handle(fixture(f)?, deadline()).await?));
    }
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
    let sdk = sdk();
    let s3 =
        aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build());
    let fixtures = [
        "events/ttl-archiver/mixed.json",
        "events/ttl-archiver/user-remove.json",
        "events/ttl-archiver/poison.json",
    ];
    let config = |bucket: &str| {
        env(&[("ARCHIVE_BUCKET", bucket.to_owned()), ("ARCHIVE_PREFIX", "archive/".to_owned())])
    };
    let (real, reference) = (unique("watch-archive"), unique("watch-archive-ref"));
    for bucket in [&real, &reference] {
        s3.create_bucket().bucket(bucket).send().await?;
    }

    let archiver = library::<ttl_archiver::Archiver>(&config(&reference)).await?;
    let mut expected = Vec::new();
    for f in fixtures {
        expected.push(response(&archiver.handle(fixture(f)?, deadline()).await?));
    }
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
    let delivered: Value = serde_json::from_str(&std::fs::read_to_string(root().join(fixtures[2]))?)?;
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

/// Every object of a bucket: key and bytes.
pub(crate) async fn objects(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let listed = s3.list_objects_v2().bucket(bucket).send().await?;
    for object in listed.contents() {
        let key = object.key().context("a listed object has no key")?;
        let body = s3.get_object().bucket(bucket).key(key).send().await?.body.collect().await?;
        out.insert(key.to_owned(), body.to_vec());
    }
    Ok(out)
}

#[tokio::test]
async fn counter_aggregator_binary_answers_like_the_library() -> Result<()> {
    let sdk = sdk();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let fixtures = [
        "events/counter-aggregator/increments.json",
        "events/counter-aggregator/duplicate.json",
        "events/counter-aggregator/foreign.json",
    ];
    let config = |table: &str| env(&[("COUNTER_TABLE", table.to_owned())]);
    let (real, reference) = (unique("watch-counters"), unique("watch-counters-ref"));
    for table in [&real, &reference] {
        create_table(&client, table, "pk", None, false).await;
    }

    let aggregator = library::<counter_aggregator::Aggregator>(&config(&reference)).await?;
    let mut expected = Vec::new();
    for f in fixtures {
        expected.push(response(&aggregator.handle(fixture(f)?, deadline()).await?));
    }
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
