//! The moto server the project's scripts start (`scripts/moto`), and helpers for talking to it.

use std::sync::atomic::{AtomicU32, Ordering};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, StreamSpecification,
    StreamViewType,
};
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use serde_json::json;

/// The SDK configuration for moto. Fails, naming the fix, when the tests run without it.
pub(crate) fn sdk() -> SdkConfig {
    let endpoint = std::env::var("SIDESTREAM_MOTO_ENDPOINT").unwrap_or_else(|_| {
        panic!("SIDESTREAM_MOTO_ENDPOINT is not set: run the tests with scripts/test, which starts moto")
    });
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
            aws_sdk_dynamodb::config::Credentials::new("testing", "testing", None, None, "moto"),
        ))
        .build()
}

/// A table name no other test in this run uses.
pub(crate) fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
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
    let mut req = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(pk)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(pk)
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        );
    if let Some((sk, ty)) = sk {
        req = req
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(sk)
                    .attribute_type(ty)
                    .build()
                    .unwrap(),
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name(sk)
                    .key_type(KeyType::Range)
                    .build()
                    .unwrap(),
            );
    }
    if stream {
        req = req.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()
                .unwrap(),
        );
    }
    req.send().await.unwrap();
}

/// Every record on `table`'s stream so far, as Lambda would deliver them.
pub(crate) async fn stream_records(
    sdk: &SdkConfig,
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Vec<EventRecord> {
    let streams = aws_sdk_dynamodbstreams::Client::new(sdk);
    let described = dynamodb.describe_table().table_name(table).send().await.unwrap();
    let arn = described
        .table()
        .and_then(|t| t.latest_stream_arn())
        .unwrap()
        .to_owned();
    let stream = streams.describe_stream().stream_arn(&arn).send().await.unwrap();
    let mut out = Vec::new();
    for shard in stream.stream_description().unwrap().shards() {
        let mut iterator = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard.shard_id().unwrap())
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator
            .unwrap();
        loop {
            let page = streams
                .get_records()
                .shard_iterator(&iterator)
                .send()
                .await
                .unwrap();
            if page.records().is_empty() {
                break;
            }
            out.extend(page.records().iter().map(|r| event_record(r, &arn)));
            match page.next_shard_iterator {
                Some(next) => iterator = next,
                None => break,
            }
        }
    }
    out
}

/// A DynamoDB Streams record in the shape Lambda's event source mapping delivers.
fn event_record(r: &aws_sdk_dynamodbstreams::types::Record, arn: &str) -> EventRecord {
    let change = r.dynamodb().unwrap();
    let image = |m: Option<
        &std::collections::HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>,
    >| { m.map(|m| serde_json::to_value(serde_dynamo::Item::from(m.clone())).unwrap()) };
    let mut dynamodb = json!({
        "Keys": image(change.keys()),
        "SequenceNumber": change.sequence_number(),
        "SizeBytes": change.size_bytes(),
        "StreamViewType": change.stream_view_type().map(aws_sdk_dynamodbstreams::types::StreamViewType::as_str),
    });
    if let Some(old) = image(change.old_image()) {
        dynamodb["OldImage"] = old;
    }
    if let Some(new) = image(change.new_image()) {
        dynamodb["NewImage"] = new;
    }
    serde_json::from_value(json!({
        "eventID": r.event_id(),
        "eventName": r.event_name().map(aws_sdk_dynamodbstreams::types::OperationType::as_str),
        "eventVersion": r.event_version(),
        "eventSource": "aws:dynamodb",
        "awsRegion": r.aws_region(),
        "eventSourceARN": arn,
        "dynamodb": dynamodb,
    }))
    .unwrap()
}
