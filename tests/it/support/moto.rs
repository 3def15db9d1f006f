//! The moto server the project's scripts start (`scripts/moto`), and helpers for talking to it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

use aws_config::SdkConfig;
use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodb::types::{ScalarAttributeType, StreamViewType};
use stream_runtime::Vars;
use stream_runtime::delivery::StreamReader;
use stream_runtime::{Runtime, StreamFunction};

/// The SDK configuration for moto. Fails, naming the fix, when the tests run without it.
pub(crate) fn sdk() -> SdkConfig {
    let endpoint = std::env::var("SIDESTREAM_MOTO_ENDPOINT").unwrap_or_else(|_| {
        panic!("SIDESTREAM_MOTO_ENDPOINT is not set: run the tests with scripts/test, which starts moto")
    });
    sdk_at(&endpoint)
}

/// [`sdk`] for the `n`th moto `scripts/moto` started (`SIDESTREAM_MOTO_ENDPOINTS`, counted from
/// 0), or the first when it started fewer: two heavy tests that run at once each take a moto of
/// their own, so that each has a core (moto answers one request at a time). Everything such a
/// test does must go through this SDK.
pub(crate) fn sdk_on(n: usize) -> SdkConfig {
    let endpoints = std::env::var("SIDESTREAM_MOTO_ENDPOINTS").unwrap_or_default();
    match endpoints.split_whitespace().nth(n) {
        Some(endpoint) => sdk_at(endpoint),
        None => sdk(),
    }
}

fn sdk_at(endpoint: &str) -> SdkConfig {
    local_stack::emulator_sdk(endpoint)
}

/// A table name no other test in this run uses.
pub(crate) fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Creates a table keyed as an index table is (`pk` and `sk`, strings), without a stream.
pub(crate) async fn create_index_table(client: &aws_sdk_dynamodb::Client, name: &str) {
    create_table(client, name, "pk", Some(("sk", ScalarAttributeType::S)), false).await;
}

/// Creates a table with a string partition key, an optional sort key of `sort_type`, and
/// optionally a `NEW_AND_OLD_IMAGES` stream.
pub(crate) async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    pk: &str,
    sk: Option<(&str, ScalarAttributeType)>,
    stream: bool,
) {
    create_table_viewed(client, name, pk, sk, stream.then_some(StreamViewType::NewAndOldImages)).await;
}

/// [`create_table`] with a stream of view type `view`, if any.
pub(crate) async fn create_table_viewed(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    pk: &str,
    sk: Option<(&str, ScalarAttributeType)>,
    view: Option<StreamViewType>,
) {
    let sort = sk.as_ref().map(|(name, ty)| (*name, ty.as_str()));
    let table =
        local_stack::template::Table::keyed(name, pk, sort, view.as_ref().map(StreamViewType::as_str));
    local_stack::replayer::resources::create_table(client, &table).await.unwrap();
}

/// Every record on `table`'s stream so far, as Lambda would deliver them.
pub(crate) async fn stream_records(
    sdk: &SdkConfig,
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Vec<EventRecord> {
    let described = dynamodb.describe_table().table_name(table).send().await.unwrap();
    let arn = described.table().and_then(|t| t.latest_stream_arn()).unwrap().to_owned();
    let mut reader = StreamReader::new(aws_sdk_dynamodbstreams::Client::new(sdk), arn);
    // A poll reads at most POLL_LIMIT records a shard: poll until one finds nothing.
    let mut records = Vec::new();
    loop {
        let polled = reader.poll().await.unwrap();
        if polled.is_empty() {
            return records;
        }
        records.extend(polled.into_iter().map(|(_, r)| r));
    }
}

/// The bucket the functions under test park records in.
pub(crate) const PARKING_BUCKET: &str = "sidestream-test-parking";

/// Creates [`PARKING_BUCKET`] unless it exists.
pub(crate) async fn parking_bucket() {
    let s3 = s3();
    if s3.head_bucket().bucket(PARKING_BUCKET).send().await.is_err() {
        let _ = s3.create_bucket().bucket(PARKING_BUCKET).send().await;
    }
}

/// An S3 client for moto (path-style).
pub(crate) fn s3() -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk()).force_path_style(true).build())
}

/// The function `F` under the stream runtime, configured from `env` on top of what every test
/// function shares: the parking bucket (created here), path-style S3 and a short deadline margin.
pub(crate) async fn runtime<F: StreamFunction>(env: &[(&str, &str)]) -> Runtime<F> {
    runtime_at(&sdk(), env).await
}

/// [`runtime`], its clients configured by `sdk` (another endpoint: a proxy in front of moto).
pub(crate) async fn runtime_at<F: StreamFunction>(sdk: &SdkConfig, env: &[(&str, &str)]) -> Runtime<F> {
    parking_bucket().await;
    let mut vars: HashMap<String, String> =
        [("PARKING_BUCKET", PARKING_BUCKET), ("S3_FORCE_PATH_STYLE", "true"), ("DEADLINE_MARGIN_MS", "500")]
            .iter()
            .chain(env)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
    vars.entry("AWS_LAMBDA_FUNCTION_NAME".to_owned()).or_insert_with(|| format!("{}-test", F::NAME));
    let lookup = |name: &str| vars.get(name).cloned();
    Runtime::from_vars(&Vars::new(&lookup), sdk).unwrap()
}

/// The parked records of `function` whose key contains `event_id`, as JSON documents.
pub(crate) async fn parked(function: &str, event_id: &str) -> Vec<serde_json::Value> {
    let s3 = s3();
    let listed = s3
        .list_objects_v2()
        .bucket(PARKING_BUCKET)
        .prefix(format!("parked/{function}/"))
        .send()
        .await
        .unwrap();
    let mut docs = Vec::new();
    for object in listed.contents() {
        let key = object.key().unwrap();
        if !key.contains(event_id) {
            continue;
        }
        let body = s3.get_object().bucket(PARKING_BUCKET).key(key).send().await.unwrap();
        let bytes = body.body.collect().await.unwrap().into_bytes();
        docs.push(serde_json::from_slice(&bytes).unwrap());
    }
    docs
}

/// The partition key of every entry in the index table `table` (tombstones left out), one per
/// item, sorted.
pub(crate) async fn index_partitions(client: &aws_sdk_dynamodb::Client, table: &str) -> Vec<String> {
    let scan = client.scan().table_name(table).send().await.unwrap();
    let mut pks: Vec<String> = scan
        .items()
        .iter()
        .filter(|i| !formats::tombstone::is_tombstone(i.keys().map(String::as_str)))
        .map(|i| i["pk"].as_s().unwrap().clone())
        .collect();
    pks.sort();
    pks
}

/// The index table's entries, its tombstones left out.
pub(crate) async fn index_entries(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    Ok(local_stack::scan(client, table)
        .await?
        .into_iter()
        .filter(|item| {
            !item.as_object().is_some_and(|o| formats::tombstone::is_tombstone(o.keys().map(String::as_str)))
        })
        .collect())
}
