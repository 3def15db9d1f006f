//! One mapping for the indexer and the archiver (`stream_runtime::Combined`) against moto: the
//! same index, archive and answer as two separate mappings, each function's metrics on its own,
//! and the batch resuming at the earliest record either function stopped at.

use anyhow::{Result, ensure};
use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodb::types::ScalarAttributeType;
use serde_json::{Value, json};
use stream_kit::{Metric, Vars};
use stream_runtime::{Combined, Runtime, StreamFunction, combined};

use crate::lambda::{deadline, fixture, items, objects};
use crate::moto::{PARKING_BUCKET, create_table, parking_bucket, sdk, unique};

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

/// The records of the batch the archiver's own mapping would deliver: its filter applied to
/// each record's JSON as the sample files hold it, as Lambda would apply it.
fn archivers_part(batch: &Event) -> Result<Event> {
    let pattern = event_filter::Pattern::parse_dynamodb(TTL_REMOVE)?;
    let mut raw = Vec::new();
    for path in FIXTURES {
        let event: Value = serde_json::from_str(&std::fs::read_to_string(crate::lambda::root().join(path))?)?;
        raw.extend(event["Records"].as_array().cloned().unwrap_or_default());
    }
    ensure!(
        raw.len() == batch.records.len(),
        "the batch is the sample files' records"
    );
    let mut part = Event::default();
    for (record, json) in batch.records.iter().zip(&raw) {
        if pattern.matches(json) {
            part.records.push(record.clone());
        }
    }
    Ok(part)
}

fn answer(response: &stream_kit::DynamoDbEventResponse) -> Value {
    serde_json::to_value(response).unwrap_or(Value::Null)
}

fn stops_at(sequence_number: &str) -> Value {
    json!({"batchItemFailures": [{"itemIdentifier": sequence_number}]})
}

#[tokio::test]
async fn a_combined_mapping_leaves_what_two_mappings_leave() -> Result<()> {
    parking_bucket().await;
    let sdk = sdk();
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    let (index, index_ref) = (unique("combined-index"), unique("combined-index-ref"));
    for table in [&index, &index_ref] {
        create_table(
            &dynamodb,
            table,
            "pk",
            Some(("sk", ScalarAttributeType::S)),
            false,
        )
        .await;
    }
    let (bucket, bucket_ref) = (unique("combined-archive"), unique("combined-archive-ref"));
    for b in [&bucket, &bucket_ref] {
        s3.create_bucket().bucket(b).send().await?;
    }
    let batch = issues_batch()?;
    let ttl_deletes = archivers_part(&batch)?;
    ensure!(
        !ttl_deletes.records.is_empty() && ttl_deletes.records.len() < batch.records.len(),
        "the archiver's filter must take some records and leave others: {} of {}",
        ttl_deletes.records.len(),
        batch.records.len()
    );

    // Two mappings: the indexer takes every record, the archiver its filter's.
    let reference = lookup(&index_ref, &bucket_ref);
    let indexer = separate::<multikey_indexer::Indexer>(&reference)?;
    let archiver = separate::<ttl_archiver::Archiver>(&reference)?;
    let indexers_answer = answer(&indexer.handle(batch.clone(), deadline()).await?);
    let archivers_answer = answer(&archiver.handle(ttl_deletes.clone(), deadline()).await?);
    ensure!(
        indexers_answer == stops_at("400000000000000002200"),
        "{indexers_answer}"
    );
    ensure!(
        archivers_answer == json!({"batchItemFailures": []}),
        "{archivers_answer}"
    );

    // One mapping.
    let both = combined(&lookup(&index, &bucket))?;
    let (response, metrics) = both.handle_counted(batch.clone(), deadline()).await;
    let response = answer(&response?);
    ensure!(
        response == indexers_answer,
        "combined {response}, the indexer alone {indexers_answer}"
    );
    ensure!(
        items(&dynamodb, &index).await? == items(&dynamodb, &index_ref).await?,
        "the index tables differ"
    );
    let written = objects(&s3, &bucket).await?;
    ensure!(!written.is_empty(), "nothing archived");
    ensure!(written == objects(&s3, &bucket_ref).await?, "the archives differ");

    // Each function's metrics on their own line, under its own name.
    let seen: Vec<(String, u64)> = metrics
        .iter()
        .map(|m| (m.function().to_owned(), m.get(Metric::RecordsIn)))
        .collect();
    let expected = vec![
        (
            "sidestream-issues/multikey-indexer".to_owned(),
            batch.records.len() as u64,
        ),
        (
            "sidestream-issues/ttl-archiver".to_owned(),
            ttl_deletes.records.len() as u64,
        ),
    ];
    ensure!(seen == expected, "{seen:?}");
    Ok(())
}

#[tokio::test]
async fn a_combined_batch_resumes_at_the_earliest_record_either_function_stopped_at() -> Result<()> {
    parking_bucket().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk());
    let index = unique("combined-stop-index");
    create_table(
        &dynamodb,
        &index,
        "pk",
        Some(("sk", ScalarAttributeType::S)),
        false,
    )
    .await;
    // The archive bucket does not exist: the archiver stops, systemic, at its first record,
    // long before the indexer's KEYS_ONLY record.
    let both = combined(&lookup(&index, &unique("combined-no-such-bucket")))?;
    let batch = issues_batch()?;
    let first_ttl_delete = archivers_part(&batch)?.records[0]
        .change
        .sequence_number
        .clone()
        .unwrap_or_default();
    let (response, metrics) = both.handle_counted(batch, deadline()).await;
    let response = answer(&response?);
    ensure!(response == stops_at(&first_ttl_delete), "{response}");
    let systemic: Vec<u64> = metrics.iter().map(|m| m.get(Metric::SystemicFailures)).collect();
    let transient: Vec<u64> = metrics.iter().map(|m| m.get(Metric::TransientFailures)).collect();
    // The indexer stopped at its own record (whatever the kind), the archiver systemic.
    ensure!(systemic[1] == 1, "the archiver's stop is systemic: {systemic:?}");
    ensure!(
        systemic[0] + transient[0] == 1,
        "the indexer stopped once: {systemic:?} {transient:?}"
    );
    Ok(())
}
