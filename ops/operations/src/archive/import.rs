//! A new table from an archive, by DynamoDB's `ImportTable`: the restore at scale.
//!
//! The archive is what `ImportTable` reads: DynamoDB JSON, one `{"Item":…}` per line, gzip
//! (`docs/formats.md`, "Archive objects"). A source table's item objects are all under
//! `PREFIX table=SOURCE/`, and the metadata objects under `PREFIX _meta/`, so an import of that
//! prefix reads item lines only. The import creates the table (it cannot write into an existing
//! one: [`crate::archive::restore`] does that), uses no write capacity, and reads at most 50,000
//! objects, so a larger archive is imported a narrower prefix at a time (a year, a month).
//!
//! What it cannot do is change the items: every archived item was deleted by TTL, so its TTL
//! attribute is in the past. The new table has no TTL; enabling TTL on that attribute would have
//! DynamoDB delete every imported item again.

use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, ImportStatus, InputCompressionType, InputFormat, KeySchemaElement,
    KeyType, S3BucketSource, ScalarAttributeType, TableCreationParameters,
};
use io_policy::RequestFailed;
use serde::Serialize;

use crate::archive::ArchiveError;

/// `ImportTable`'s limit on the objects one import reads.
pub const MAX_OBJECTS: usize = 50_000;

/// How often an import's progress is read (`DescribeImport`).
const POLL: Duration = Duration::from_secs(5);

/// A key attribute of the table an import creates: its name and type (`S`, `N` or `B`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyAttribute {
    /// The attribute's name.
    pub name: String,
    /// Its type.
    pub kind: ScalarAttributeType,
}

impl KeyAttribute {
    /// `NAME` (a string) or `NAME:S`, `NAME:N`, `NAME:B`.
    pub fn parse(text: &str) -> Result<KeyAttribute, String> {
        let (name, kind) = text.split_once(':').unwrap_or((text, "S"));
        let kind = match kind {
            "S" => ScalarAttributeType::S,
            "N" => ScalarAttributeType::N,
            "B" => ScalarAttributeType::B,
            other => return Err(format!("{text:?}: a key attribute's type is S, N or B, not {other:?}")),
        };
        if name.is_empty() {
            return Err(format!("{text:?}: the key attribute has no name"));
        }
        Ok(KeyAttribute { name: name.to_owned(), kind })
    }
}

/// What an import is asked to do: which objects, and the table it creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// The archive bucket.
    pub bucket: String,
    /// The objects' key prefix: a source table's folder (`PREFIX table=SOURCE/`) or a part of it.
    pub prefix: String,
    /// The table to create.
    pub table: String,
    /// Its partition key.
    pub partition_key: KeyAttribute,
    /// Its sort key, if it has one.
    pub sort_key: Option<KeyAttribute>,
}

impl Import {
    /// The import of the items archived under `prefix` (the archive's `ARCHIVE_PREFIX`) from the
    /// table `source`, into a new table: `prefix` + `table=SOURCE/`, where the item objects are
    /// and the metadata objects are not.
    pub fn of_source(
        bucket: &str,
        prefix: &str,
        source: &str,
        table: &str,
        key: (KeyAttribute, Option<KeyAttribute>),
    ) -> Import {
        Import {
            bucket: bucket.to_owned(),
            prefix: format!("{prefix}table={source}/"),
            table: table.to_owned(),
            partition_key: key.0,
            sort_key: key.1,
        }
    }

    /// The request's parts as the SDK takes them: the objects (`S3BucketSource`), and the table
    /// (`TableCreationParameters`: on-demand, the key schema and its attribute definitions).
    /// `DYNAMODB_JSON`, `GZIP` go beside them ([`start`]).
    pub fn request(&self) -> Result<(S3BucketSource, TableCreationParameters), ArchiveError> {
        let invalid =
            |e: aws_sdk_dynamodb::error::BuildError| ArchiveError::Source(format!("ImportTable: {e}"));
        let source = S3BucketSource::builder()
            .s3_bucket(&self.bucket)
            .s3_key_prefix(&self.prefix)
            .build()
            .map_err(invalid)?;
        let mut table = TableCreationParameters::builder()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest);
        let keys = std::iter::once((&self.partition_key, KeyType::Hash))
            .chain(self.sort_key.iter().map(|k| (k, KeyType::Range)));
        for (key, role) in keys {
            table = table
                .key_schema(
                    KeySchemaElement::builder()
                        .attribute_name(&key.name)
                        .key_type(role)
                        .build()
                        .map_err(invalid)?,
                )
                .attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(&key.name)
                        .attribute_type(key.kind.clone())
                        .build()
                        .map_err(invalid)?,
                );
        }
        Ok((source, table.build().map_err(invalid)?))
    }
}

/// An import's state as `DescribeImport` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Imported {
    /// The import's ARN.
    pub import_arn: String,
    /// `IN_PROGRESS`, `COMPLETED`, `FAILED`, `CANCELLING` or `CANCELLED`.
    pub status: String,
    /// The table it creates.
    pub table_arn: String,
    /// Lines read so far.
    pub processed_items: i64,
    /// Items written so far.
    pub imported_items: i64,
    /// Lines that could not be imported (their reasons are in the import's CloudWatch log).
    pub errors: i64,
    /// Why it failed, when it did.
    pub failure: Option<String>,
}

impl Imported {
    /// Whether the import has ended, one way or another.
    pub fn ended(&self) -> bool {
        self.status != ImportStatus::InProgress.as_str() && self.status != ImportStatus::Cancelling.as_str()
    }

    fn of(description: &aws_sdk_dynamodb::types::ImportTableDescription) -> Imported {
        Imported {
            import_arn: description.import_arn().unwrap_or_default().to_owned(),
            status: description.import_status().map_or("", ImportStatus::as_str).to_owned(),
            table_arn: description.table_arn().unwrap_or_default().to_owned(),
            processed_items: description.processed_item_count(),
            imported_items: description.imported_item_count(),
            errors: description.error_count(),
            failure: description.failure_message().map(|m| match description.failure_code() {
                Some(code) => format!("{code}: {m}"),
                None => m.to_owned(),
            }),
        }
    }
}

/// Starts `import` after counting its objects: more than [`MAX_OBJECTS`] (what one import reads),
/// or none, is refused before anything is created.
pub async fn start(
    s3: &aws_sdk_s3::Client,
    dynamodb: &aws_sdk_dynamodb::Client,
    import: &Import,
) -> Result<Imported, ArchiveError> {
    let objects = stream_runtime::aws::list_keys(
        s3,
        &import.bucket,
        &import.prefix,
        |k| k.ends_with(formats::archive::SUFFIX) && !formats::archive::is_meta_key(k),
        &crate::s3_budget(),
    )
    .await?
    .len();
    let at = format!("s3://{}/{}", import.bucket, import.prefix);
    if objects == 0 {
        return Err(ArchiveError::Source(format!("no archive objects (*.json.gz) under {at}")));
    }
    if objects > MAX_OBJECTS {
        return Err(ArchiveError::Source(format!(
            "{at} holds {objects} archive objects, more than the {MAX_OBJECTS} one ImportTable reads: import a \
             narrower prefix at a time (a year=…/ or month=…/ folder)"
        )));
    }
    let (source, table) = import.request()?;
    let started = dynamodb
        .import_table()
        .s3_bucket_source(source)
        .input_format(InputFormat::DynamodbJson)
        .input_compression_type(InputCompressionType::Gzip)
        .table_creation_parameters(table)
        .send()
        .await
        .map_err(|e| RequestFailed::sdk("ImportTable", &import.table, &e))?;
    started
        .import_table_description()
        .map(Imported::of)
        .ok_or_else(|| ArchiveError::Source("ImportTable answered without a description".to_owned()))
}

/// Reads the import's progress until it ends, calling `progress` after each read.
pub async fn wait(
    dynamodb: &aws_sdk_dynamodb::Client,
    import_arn: &str,
    progress: &mut dyn FnMut(&Imported),
) -> Result<Imported, ArchiveError> {
    loop {
        let asked = dynamodb.describe_import().import_arn(import_arn).send().await;
        let described = asked.map_err(|e| RequestFailed::sdk("DescribeImport", import_arn, &e))?;
        let now = described.import_table_description().map(Imported::of).ok_or_else(|| {
            ArchiveError::Source("DescribeImport answered without a description".to_owned())
        })?;
        progress(&now);
        if now.ended() {
            return Ok(now);
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests;
