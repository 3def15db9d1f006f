//! An index rebuilt into a new table: the table created for an index's definition, before a
//! backfill touches the base items into it (`sidestream index rebuild`).
//!
//! Changing an index's scope, tiebreakers or include list changes its entries' keys or content,
//! so the new definition gets a new table, kept beside the old one until it is verified: the
//! procedure in `docs/operations.md`.

use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
};
use formats::{Index, KeyFormat};
use io_policy::{Failure, Policy};

use crate::backfill::BackfillError;

/// How long a new table may take to become active.
const CREATE_TIME: Duration = Duration::from_secs(300);

/// Creates `index`'s table (on-demand, the index's key attributes, the sort key S or B by its
/// key format) unless it exists, and waits until it is active. Whether it created it.
pub async fn create_index_table(
    client: &aws_sdk_dynamodb::Client,
    index: &Index,
) -> Result<bool, BackfillError> {
    let table = index.table.to_string();
    let failed = |failure: Failure| BackfillError::Table { table: table.clone(), failure };
    let budget = Policy::default().within(CREATE_TIME);
    let sort_type = match index.key_format {
        KeyFormat::Text => ScalarAttributeType::S,
        KeyFormat::Binary => ScalarAttributeType::B,
    };
    let attribute = |name: &str, kind: ScalarAttributeType| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(kind)
            .build()
            .map_err(|e| failed(Failure::systemic(e.to_string())))
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .map_err(|e| failed(Failure::systemic(e.to_string())))
    };
    let request = client
        .create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(&index.partition_key, ScalarAttributeType::S)?)
        .attribute_definitions(attribute(&index.sort_key, sort_type)?)
        .key_schema(key(&index.partition_key, KeyType::Hash)?)
        .key_schema(key(&index.sort_key, KeyType::Range)?);
    let created = budget
        .call(|| {
            let request = request.clone();
            async move {
                match request.send().await {
                    Ok(_) => Ok(true),
                    Err(e)
                        if e.as_service_error()
                            .is_some_and(aws_sdk_dynamodb::operation::create_table::CreateTableError::is_resource_in_use_exception) =>
                    {
                        Ok(false)
                    }
                    Err(e) => Err(io_policy::classify("CreateTable", &e)),
                }
            }
        })
        .await
        .map_err(failed)?;
    loop {
        let described = budget
            .call(|| {
                let request = client.describe_table().table_name(&table);
                async move { request.send().await.map_err(|e| io_policy::classify("DescribeTable", &e)) }
            })
            .await
            .map_err(failed)?;
        if described.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            return Ok(created);
        }
        if budget.expired() {
            return Err(failed(Failure::transient("the table did not become active in 5 minutes")));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
