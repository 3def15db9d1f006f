//! The storage a template declares: DynamoDB tables (keys, streams, TTL, global secondary
//! indexes) and S3 buckets, resolved for one set of parameters, so that a local emulator can be
//! given the same tables the stack would create.

use serde_json::Value;

use crate::template::eval::Resolver;
use crate::template::{Template, TemplateError};

/// One `AWS::DynamoDB::Table` that exists for the parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The logical id.
    pub logical_id: String,
    /// The physical name: `TableName`, or the resolver's name for the resource.
    pub name: String,
    /// `KeySchema`, partition key first.
    pub key: Vec<KeyAttribute>,
    /// `StreamSpecification.StreamViewType`, when the table has a stream.
    pub stream_view_type: Option<String>,
    /// `TimeToLiveSpecification.AttributeName`, when TTL is enabled.
    pub ttl_attribute: Option<String>,
    /// `KinesisStreamSpecification.StreamArn`: the Kinesis data stream the table's changes are
    /// written to, when it has one.
    pub kinesis_stream: Option<String>,
    /// `GlobalSecondaryIndexes`.
    pub global_indexes: Vec<GlobalIndex>,
}

/// One attribute of a key schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyAttribute {
    /// The attribute name.
    pub name: String,
    /// `HASH` or `RANGE`.
    pub key_type: String,
    /// Its `AttributeDefinitions` type: `S`, `N` or `B`.
    pub attribute_type: String,
}

/// One global secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalIndex {
    /// `IndexName`.
    pub name: String,
    /// Its key schema.
    pub key: Vec<KeyAttribute>,
    /// `Projection.ProjectionType`: `ALL`, `KEYS_ONLY` or `INCLUDE`.
    pub projection: String,
    /// `Projection.NonKeyAttributes`.
    pub non_key_attributes: Vec<String>,
}

/// One `AWS::S3::Bucket` that exists for the parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The logical id.
    pub logical_id: String,
    /// The physical name: `BucketName`, or the resolver's name for the resource.
    pub name: String,
}

impl Table {
    /// A table outside any template, as a test or an example creates one with
    /// [`crate::replayer::resources::create_table`]: named `name`, keyed by the string attribute
    /// `partition` and by `sort` (its name and attribute type, `S`, `N` or `B`) if given, with a
    /// stream of view type `view` (such as `NEW_AND_OLD_IMAGES`) if given.
    pub fn keyed(name: &str, partition: &str, sort: Option<(&str, &str)>, view: Option<&str>) -> Table {
        let attribute = |name: &str, key_type: &str, attribute_type: &str| KeyAttribute {
            name: name.to_owned(),
            key_type: key_type.to_owned(),
            attribute_type: attribute_type.to_owned(),
        };
        let mut key = vec![attribute(partition, "HASH", "S")];
        key.extend(sort.map(|(name, attribute_type)| attribute(name, "RANGE", attribute_type)));
        Table {
            logical_id: name.to_owned(),
            name: name.to_owned(),
            key,
            stream_view_type: view.map(str::to_owned),
            ttl_attribute: None,
            kinesis_stream: None,
            global_indexes: Vec::new(),
        }
    }
}

impl Template {
    /// The tables that exist for the resolver's parameters, in template order.
    pub fn tables(&self, resolver: &Resolver<'_>) -> Result<Vec<Table>, TemplateError> {
        let mut tables = Vec::new();
        for (id, properties) in resolver.resolved("AWS::DynamoDB::Table")? {
            let at = format!("Resources/{id}/Properties");
            let definitions = properties.get("AttributeDefinitions").unwrap_or(&Value::Null);
            let key = key_schema(properties.get("KeySchema"), definitions, &format!("{at}/KeySchema"))?;
            let mut global_indexes = Vec::new();
            for (i, index) in array(properties.get("GlobalSecondaryIndexes")).iter().enumerate() {
                let here = format!("{at}/GlobalSecondaryIndexes/{i}");
                global_indexes.push(GlobalIndex {
                    name: text(index, "/IndexName", &here)?,
                    key: key_schema(index.get("KeySchema"), definitions, &format!("{here}/KeySchema"))?,
                    projection: text(index, "/Projection/ProjectionType", &here)?,
                    non_key_attributes: array(index.pointer("/Projection/NonKeyAttributes"))
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect(),
                });
            }
            let ttl_enabled = properties
                .pointer("/TimeToLiveSpecification/Enabled")
                .is_some_and(|v| v == &Value::Bool(true) || v == "true");
            tables.push(Table {
                logical_id: id.to_owned(),
                name: resolver.string(&serde_json::json!({"Ref": id}), &at)?,
                key,
                stream_view_type: properties
                    .pointer("/StreamSpecification/StreamViewType")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                kinesis_stream: properties
                    .pointer("/KinesisStreamSpecification/StreamArn")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                ttl_attribute: properties
                    .pointer("/TimeToLiveSpecification/AttributeName")
                    .and_then(Value::as_str)
                    .filter(|_| ttl_enabled)
                    .map(str::to_owned),
                global_indexes,
            });
        }
        Ok(tables)
    }

    /// The buckets that exist for the resolver's parameters, in template order.
    pub fn buckets(&self, resolver: &Resolver<'_>) -> Result<Vec<Bucket>, TemplateError> {
        resolver
            .existing("AWS::S3::Bucket")?
            .into_iter()
            .map(|id| {
                Ok(Bucket {
                    logical_id: id.to_owned(),
                    name: resolver.string(&serde_json::json!({"Ref": id}), &format!("Resources/{id}"))?,
                })
            })
            .collect()
    }
}

fn key_schema(
    schema: Option<&Value>,
    definitions: &Value,
    at: &str,
) -> Result<Vec<KeyAttribute>, TemplateError> {
    let schema = array(schema);
    if schema.is_empty() {
        return Err(TemplateError::invalid(at, "a key schema needs a HASH attribute"));
    }
    schema
        .iter()
        .enumerate()
        .map(|(i, element)| {
            let here = format!("{at}/{i}");
            let name = text(element, "/AttributeName", &here)?;
            let attribute_type = array(Some(definitions))
                .iter()
                .find(|d| d.get("AttributeName").and_then(Value::as_str) == Some(name.as_str()))
                .and_then(|d| d.get("AttributeType").and_then(Value::as_str))
                .ok_or_else(|| {
                    TemplateError::invalid(
                        &here,
                        format!("key attribute {name} is not in AttributeDefinitions"),
                    )
                })?
                .to_owned();
            Ok(KeyAttribute { name, key_type: text(element, "/KeyType", &here)?, attribute_type })
        })
        .collect()
}

fn text(value: &Value, pointer: &str, at: &str) -> Result<String, TemplateError> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| TemplateError::invalid(&format!("{at}{pointer}"), "a string is needed here"))
}

fn array(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests;
