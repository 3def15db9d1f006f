//! One mapping for the indexer and the archiver (`stream_runtime::Combined`) against moto: the
//! same index, archive and answer as two separate mappings, each function's metrics on its own,
//! the batch resuming at the earliest record either function stopped at, and the
//! `sidestream-combined` binary under `cargo lambda watch` answering as the library does.

use anyhow::{Result, ensure};
use aws_lambda_events::event::dynamodb::Event;
use serde_json::{Value, json};
use stream_runtime::{Combined, Runtime, StreamFunction, combined};
use stream_runtime::{Metric, Vars};

use crate::support::lambda::{Function, deadline, fixture, items, objects};
use crate::support::moto::{PARKING_BUCKET, create_index_table, parking_bucket, s3, sdk, unique};

/// The archiver's pattern in template.yaml; the indexer's mapping has none (a map attribute).
const TTL_REMOVE: &str = r#"{"eventName":["REMOVE"],"userIdentity":{"type":["Service"],"principalId":["dynamodb.amazonaws.com"]}}"#;

/// The sample events that make the batch.
const FIXTURES: [&str; 4] = [
    "events/ttl-archiver/mixed.json",
    "events/multikey-indexer/insert.json",
    "events/multikey-indexer/modify-fields.json",
    "events/multikey-indexer/keys-only.json",
];

/// The issues table's records of the sample events, in stream order: inserts, updates and
/// deletes of every kind, then a record the indexer cannot use (`KEYS_ONLY`), which it stops at.
fn issues_batch() -> Result<Event> {
    let mut batch = Event::default();
    for path in FIXTURES {
        batch.records.extend(fixture(path)?.records);
    }
    Ok(batch)
}

/// Both functions' environment, one Lambda's: index table, archive bucket, filters.
fn lookup(index: &str, bucket: &str) -> impl Fn(&str) -> Option<String> {
    let definitions = include_str!("../../functions/multikey-indexer/indexes.example.json")
        .replace("issue-attrib-index", index);
    let bucket = bucket.to_owned();
    move |name: &str| match name {
        "MULTIKEY_INDEXES" => Some(definitions.clone()),
        "ARCHIVE_BUCKET" => Some(bucket.clone()),
        "ARCHIVE_PREFIX" => Some("archive/".to_owned()),
        "PARKING_BUCKET" => Some(PARKING_BUCKET.to_owned()),
        "S3_FORCE_PATH_STYLE" => Some("true".to_owned()),
        "AWS_LAMBDA_FUNCTION_NAME" => Some("sidestream-issues".to_owned()),
        combined::FILTERS_VAR => Some(format!(r#"{{"ttl-archiver":[{TTL_REMOVE}]}}"#)),
        _ => None,
    }
}

fn separate<F: StreamFunction>(lookup: &impl Fn(&str) -> Option<String>) -> Result<Runtime<F>> {
    Ok(Runtime::from_vars(&Vars::new(lookup), &sdk())?)
}

fn combined(lookup: &impl Fn(&str) -> Option<String>) -> Result<Combined> {
    let vars = Vars::new(lookup);
    Ok(Combined::new()
        .add::<multikey_indexer::Indexer>(&vars, &sdk())?
        .add::<ttl_archiver::Archiver>(&vars, &sdk())?)
}

/// The batch's records as the sample files hold them: JSON, as Lambda delivers it.
fn sample_records() -> Result<Vec<Value>> {
    let mut raw = Vec::new();
    for path in FIXTURES {
        let event: Value =
            serde_json::from_str(&std::fs::read_to_string(crate::support::process::root().join(path))?)?;
        raw.extend(event["Records"].as_array().cloned().unwrap_or_default());
    }
    Ok(raw)
}

/// The records of the batch the archiver's own mapping would deliver: its filter applied to
/// each record's JSON as the sample files hold it, as Lambda would apply it.
fn archivers_part(batch: &Event) -> Result<Event> {
    let pattern = stream_runtime::filter::Pattern::parse_dynamodb(TTL_REMOVE)?;
    let raw = sample_records()?;
    ensure!(raw.len() == batch.records.len(), "the batch is the sample files' records");
    let mut part = Event::default();
    for (record, json) in batch.records.iter().zip(&raw) {
        if pattern.matches(json) {
            part.records.push(record.clone());
        }
    }
    Ok(part)
}

fn answer(response: &stream_runtime::DynamoDbEventResponse) -> Value {
    serde_json::to_value(response).unwrap_or(Value::Null)
}

fn stops_at(sequence_number: &str) -> Value {
    json!({"batchItemFailures": [{"itemIdentifier": sequence_number}]})
}

/// An index table and an archive bucket for the combined mapping, and a pair for the reference.
struct Stores {
    dynamodb: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
    index: String,
    index_ref: String,
    bucket: String,
    bucket_ref: String,
}

async fn stores(prefix: &str) -> Result<Stores> {
    parking_bucket().await;
    let sdk = sdk();
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    let s3 = s3();
    let (index, index_ref) = (unique(&format!("{prefix}-index")), unique(&format!("{prefix}-index-ref")));
    for table in [&index, &index_ref] {
        create_index_table(&dynamodb, table).await;
    }
    let (bucket, bucket_ref) =
        (unique(&format!("{prefix}-archive")), unique(&format!("{prefix}-archive-ref")));
    for b in [&bucket, &bucket_ref] {
        s3.create_bucket().bucket(b).send().await?;
    }
    Ok(Stores { dynamodb, s3, index, index_ref, bucket, bucket_ref })
}

impl Stores {
    /// The combined mapping's index and archive are the reference's, and something was archived.
    async fn alike(&self) -> Result<()> {
        ensure!(
            items(&self.dynamodb, &self.index).await? == items(&self.dynamodb, &self.index_ref).await?,
            "the index tables differ"
        );
        let written = objects(&self.s3, &self.bucket).await?;
        ensure!(!written.is_empty(), "nothing archived");
        ensure!(written == objects(&self.s3, &self.bucket_ref).await?, "the archives differ");
        Ok(())
    }
}

#[tokio::test]
async fn a_combined_mapping_leaves_what_two_mappings_leave() -> Result<()> {
    let stores = stores("combined").await?;
    let batch = issues_batch()?;
    let ttl_deletes = archivers_part(&batch)?;
    ensure!(
        !ttl_deletes.records.is_empty() && ttl_deletes.records.len() < batch.records.len(),
        "the archiver's filter must take some records and leave others: {} of {}",
        ttl_deletes.records.len(),
        batch.records.len()
    );

    // Two mappings: the indexer takes every record, the archiver its filter's.
    let reference = lookup(&stores.index_ref, &stores.bucket_ref);
    let indexer = separate::<multikey_indexer::Indexer>(&reference)?;
    let archiver = separate::<ttl_archiver::Archiver>(&reference)?;
    let indexers_answer = answer(&indexer.handle(batch.clone(), deadline()).await?);
    let archivers_answer = answer(&archiver.handle(ttl_deletes.clone(), deadline()).await?);
    ensure!(indexers_answer == stops_at("400000000000000002200"), "{indexers_answer}");
    ensure!(archivers_answer == json!({"batchItemFailures": []}), "{archivers_answer}");

    // One mapping.
    let both = combined(&lookup(&stores.index, &stores.bucket))?;
    let (response, metrics) = both.handle_counted(batch.clone(), deadline()).await;
    let response = answer(&response?);
    ensure!(response == indexers_answer, "combined {response}, the indexer alone {indexers_answer}");
    stores.alike().await?;

    // Each function's metrics on their own line, under its own name.
    let seen: Vec<(String, u64)> =
        metrics.iter().map(|m| (m.function().to_owned(), m.get(Metric::RecordsIn))).collect();
    let expected = vec![
        ("sidestream-issues/multikey-indexer".to_owned(), batch.records.len() as u64),
        ("sidestream-issues/ttl-archiver".to_owned(), ttl_deletes.records.len() as u64),
    ];
    ensure!(seen == expected, "{seen:?}");
    Ok(())
}

#[tokio::test]
async fn a_combined_batch_resumes_at_the_earliest_record_either_function_stopped_at() -> Result<()> {
    parking_bucket().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk());
    let index = unique("combined-stop-index");
    create_index_table(&dynamodb, &index).await;
    // The archive bucket does not exist: the archiver stops, systemic, at its first record,
    // long before the indexer's KEYS_ONLY record.
    let both = combined(&lookup(&index, &unique("combined-no-such-bucket")))?;
    let batch = issues_batch()?;
    let first_ttl_delete =
        archivers_part(&batch)?.records[0].change.sequence_number.clone().unwrap_or_default();
    let (response, metrics) = both.handle_counted(batch, deadline()).await;
    let response = answer(&response?);
    ensure!(response == stops_at(&first_ttl_delete), "{response}");
    let systemic: Vec<u64> = metrics.iter().map(|m| m.get(Metric::SystemicFailures)).collect();
    let transient: Vec<u64> = metrics.iter().map(|m| m.get(Metric::TransientFailures)).collect();
    // The indexer stopped at its own record (whatever the kind), the archiver systemic.
    ensure!(systemic[1] == 1, "the archiver's stop is systemic: {systemic:?}");
    ensure!(systemic[0] + transient[0] == 1, "the indexer stopped once: {systemic:?} {transient:?}");
    Ok(())
}

#[tokio::test]
async fn the_combined_binary_answers_like_the_library() -> Result<()> {
    let stores = stores("combined-bin").await?;
    let batch = issues_batch()?;
    let file = std::env::temp_dir().join(format!("{}.json", unique("combined-batch")));
    std::fs::write(&file, serde_json::to_vec(&json!({"Records": sample_records()?}))?)?;

    let library = combined(&lookup(&stores.index_ref, &stores.bucket_ref))?;
    let expected = answer(&library.handle(batch, deadline()).await?);
    ensure!(expected == stops_at("400000000000000002200"), "{expected}");

    // The binary's whole environment, as the template would set it: both functions' variables.
    let vars = lookup(&stores.index, &stores.bucket);
    let env =
        ["MULTIKEY_INDEXES", "ARCHIVE_BUCKET", "ARCHIVE_PREFIX", "PARKING_BUCKET", combined::FILTERS_VAR]
            .into_iter()
            .filter_map(|name| vars(name).map(|value| (name.to_owned(), value)))
            .chain([(
                sidestream_combined::COMBINED_FUNCTIONS.to_owned(),
                "multikey-indexer, ttl-archiver".to_owned(),
            )])
            .collect();
    let function = Function::start(sidestream_combined::COMBINED_BINARY, &env)?;
    let response = function.invoke(&file.to_string_lossy())?;
    ensure!(response == expected, "the binary answered {response}, the library {expected}");
    stores.alike().await?;
    // One EMF line per function that had records, each under its own name.
    let functions: Vec<String> = function
        .log_lines()?
        .iter()
        .filter(|l| l.get("_aws").is_some())
        .filter_map(|l| l["Function"].as_str().map(str::to_owned))
        .collect();
    ensure!(
        functions.len() == 2
            && functions[0].ends_with("/multikey-indexer")
            && functions[1].ends_with("/ttl-archiver"),
        "{functions:?}"
    );
    Ok(())
}
