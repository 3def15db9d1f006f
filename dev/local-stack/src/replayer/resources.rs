//! Creates the tables, buckets and queues a template declares on an emulator, as CloudFormation would
//! (keys, global secondary indexes, streams, TTL); tables and buckets that exist are kept.

use crate::template::{Bucket, KeyAttribute, Table};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType, TimeToLiveSpecification,
};

use crate::replayer::ReplayError;
use stream_runtime::delivery::RequestError;

/// Creates `table` unless it exists; returns its stream's ARN, if it has a stream.
pub async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    table: &Table,
) -> Result<Option<String>, ReplayError> {
    let name = table.name.as_str();
    let exists = match client.describe_table().table_name(name).send().await {
        Ok(_) => true,
        Err(e) if e.as_service_error().is_some_and(aws_sdk_dynamodb::operation::describe_table::DescribeTableError::is_resource_not_found_exception) => false,
        Err(e) => return Err(RequestError::request("DescribeTable", name, &e).into()),
    };
    if !exists {
        let mut definitions: Vec<&KeyAttribute> = Vec::new();
        for attribute in table.key.iter().chain(table.global_indexes.iter().flat_map(|g| &g.key)) {
            if !definitions.iter().any(|d| d.name == attribute.name) {
                definitions.push(attribute);
            }
        }
        let mut request = client
            .create_table()
            .table_name(name)
            .billing_mode(BillingMode::PayPerRequest)
            .set_attribute_definitions(Some(
                definitions.iter().map(|a| definition(a, name)).collect::<Result<_, _>>()?,
            ))
            .set_key_schema(Some(key_schema(&table.key, name)?));
        for index in &table.global_indexes {
            let projection = Projection::builder()
                .projection_type(ProjectionType::from(index.projection.as_str()))
                .set_non_key_attributes(
                    (!index.non_key_attributes.is_empty()).then(|| index.non_key_attributes.clone()),
                )
                .build();
            request = request.global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(&index.name)
                    .set_key_schema(Some(key_schema(&index.key, name)?))
                    .projection(projection)
                    .build()
                    .map_err(|e| ReplayError::unexpected(name, e.to_string()))?,
            );
        }
        if let Some(view) = &table.stream_view_type {
            request = request.stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::from(view.as_str()))
                    .build()
                    .map_err(|e| ReplayError::unexpected(name, e.to_string()))?,
            );
        }
        request.send().await.map_err(|e| RequestError::request("CreateTable", name, &e))?;
        if let Some(attribute) = &table.ttl_attribute {
            client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder()
                        .attribute_name(attribute)
                        .enabled(true)
                        .build()
                        .map_err(|e| ReplayError::unexpected(name, e.to_string()))?,
                )
                .send()
                .await
                .map_err(|e| RequestError::request("UpdateTimeToLive", name, &e))?;
        }
    }
    if table.stream_view_type.is_none() {
        return Ok(None);
    }
    let described = client
        .describe_table()
        .table_name(name)
        .send()
        .await
        .map_err(|e| RequestError::request("DescribeTable", name, &e))?;
    let arn = described
        .table()
        .and_then(|t| t.latest_stream_arn())
        .ok_or_else(|| ReplayError::unexpected(name, "the template gives it a stream, but it has none"))?;
    Ok(Some(arn.to_owned()))
}

/// Creates `bucket` unless this account has it already.
pub async fn create_bucket(client: &aws_sdk_s3::Client, bucket: &Bucket) -> Result<(), ReplayError> {
    // Outside us-east-1, S3 wants the bucket's Region named, as CloudFormation names it.
    let location =
        client.config().region().map(aws_sdk_s3::config::Region::as_ref).filter(|r| *r != "us-east-1").map(
            |r| {
                aws_sdk_s3::types::CreateBucketConfiguration::builder()
                    .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(r))
                    .build()
            },
        );
    let request = client.create_bucket().bucket(&bucket.name).set_create_bucket_configuration(location);
    made_or_there(
        request.send().await,
        aws_sdk_s3::operation::create_bucket::CreateBucketError::is_bucket_already_owned_by_you,
        ("CreateBucket", &bucket.name),
    )
}

/// Creates an SQS queue named `name`, or finds it if it exists; its URL.
pub async fn create_queue(client: &aws_sdk_sqs::Client, name: &str) -> Result<String, ReplayError> {
    let created = client
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .map_err(|e| RequestError::request("CreateQueue", name, &e))?;
    created
        .queue_url()
        .map(str::to_owned)
        .ok_or_else(|| ReplayError::unexpected(name, "CreateQueue answered without a QueueUrl"))
}

/// Creates the secret `name` with `length` random letters and digits, as `GenerateSecretString`
/// does, or leaves it as it is if it exists (the stack made again on the same emulator).
pub async fn create_secret(
    client: &aws_sdk_secretsmanager::Client,
    name: &str,
    length: usize,
) -> Result<(), ReplayError> {
    let value: String = std::iter::repeat_with(fastrand::alphanumeric).take(length).collect();
    made_or_there(
        client.create_secret().name(name).secret_string(value).send().await,
        aws_sdk_secretsmanager::operation::create_secret::CreateSecretError::is_resource_exists_exception,
        ("CreateSecret", name),
    )
}

/// A create's answer, where the resource being there already (`there` says which error means
/// so: the stack made again on the same emulator) is as good as made.
fn made_or_there<T, E>(
    answer: Result<T, aws_sdk_dynamodbstreams::error::SdkError<E>>,
    there: impl Fn(&E) -> bool,
    (operation, name): (&'static str, &str),
) -> Result<(), ReplayError>
where
    E: aws_sdk_dynamodbstreams::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    match answer {
        Ok(_) => Ok(()),
        Err(e) if e.as_service_error().is_some_and(there) => Ok(()),
        Err(e) => Err(RequestError::request(operation, name, &e).into()),
    }
}

fn definition(attribute: &KeyAttribute, table: &str) -> Result<AttributeDefinition, ReplayError> {
    AttributeDefinition::builder()
        .attribute_name(&attribute.name)
        .attribute_type(ScalarAttributeType::from(attribute.attribute_type.as_str()))
        .build()
        .map_err(|e| ReplayError::unexpected(table, e.to_string()))
}

fn key_schema(key: &[KeyAttribute], table: &str) -> Result<Vec<KeySchemaElement>, ReplayError> {
    key.iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(&k.name)
                .key_type(KeyType::from(k.key_type.as_str()))
                .build()
                .map_err(|e| ReplayError::unexpected(table, e.to_string()))
        })
        .collect()
}
