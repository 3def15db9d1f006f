//! Every item under a prefix, read once (overlapping objects deduplicated by `eventID`), and
//! restored into an existing table.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use ddb_writer::Writer;
use io_policy::Policy;
use serde_dynamo::Item;
use stream_kit::{ItemWrite, Op};
use ttl_archiver::format::{self, DynamoJson, Line};

use crate::{ArchiveError, Archived, get, not_found};

/// How long one object's items may take to write, retries included.
const OBJECT_TIME: Duration = Duration::from_secs(3600);

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// Item objects read.
    pub objects: usize,
    /// Items written.
    pub items: usize,
    /// Earlier copies of an item left out because a later line of the same object has its key.
    pub superseded: usize,
    /// Lines left out because an earlier, overlapping object held the same deletion (`eventID`).
    pub duplicates: usize,
}

/// Puts the items archived under `s3://bucket/prefix` back into the existing table `table`,
/// object by object in key order (so within a day, the latest deletion of a key wins), with a
/// progress line per object on `progress`. Metadata objects (`_meta/`) are not restored; they
/// tell which lines repeat an earlier object's. Items replace any item with the same key already
/// in the table. `dynamodb` must have the SDK's retries off (`io_policy::without_sdk_retries`):
/// the writer retries under the I/O policy.
pub async fn restore(
    s3: &aws_sdk_s3::Client,
    dynamodb: &aws_sdk_dynamodb::Client,
    bucket: &str,
    prefix: &str,
    table: &str,
    mut progress: impl Write,
) -> Result<Restored, ArchiveError> {
    let keys = list(s3, bucket, prefix).await?;
    if keys.is_empty() {
        return Err(ArchiveError::Prefix(format!(
            "no archive objects (*{}) under s3://{bucket}/{prefix}",
            format::SUFFIX
        )));
    }
    let mut tables: Vec<&str> = keys.iter().filter_map(|k| format::table_of_key(k)).collect();
    tables.dedup();
    if tables.len() > 1 {
        return Err(ArchiveError::Prefix(format!(
            "s3://{bucket}/{prefix} holds archives of {} source tables ({}); narrow --prefix to one table=… partition",
            tables.len(),
            tables.join(", ")
        )));
    }
    let key_names = key_schema(dynamodb, table).await?;
    let writer = Writer::new(dynamodb.clone());
    let table_name: Arc<str> = table.into();
    let mut seen = HashSet::new();
    let mut done = Restored::default();
    let said = |source| ArchiveError::Io {
        what: "cannot write progress".to_owned(),
        source,
    };
    for (n, key) in keys.iter().enumerate() {
        let object = format!("s3://{bucket}/{key}");
        let (items, duplicates) = object_items(s3, bucket, key, &mut seen).await?;
        let (items, superseded) =
            latest_per_key(items, &key_names).map_err(|reason| ArchiveError::Content {
                object: object.clone(),
                reason,
            })?;
        let puts: Vec<ItemWrite> = items
            .into_iter()
            .enumerate()
            .map(|(origin, item)| ItemWrite {
                table: table_name.clone(),
                op: Op::Put(item),
                origin,
            })
            .collect();
        let count = puts.len();
        let report = writer.write(puts, &Policy::default().within(OBJECT_TIME)).await;
        if let Some((_, failure)) = report.failures.into_iter().next() {
            return Err(ArchiveError::Write {
                object,
                failed: report.failed,
                count,
                table: table.to_owned(),
                failure,
            });
        }
        done.objects += 1;
        done.items += count;
        done.superseded += superseded;
        done.duplicates += duplicates;
        writeln!(
            progress,
            "restore: [{}/{}] {key}: {count} items ({} restored so far)",
            n + 1,
            keys.len(),
            done.items
        )
        .map_err(said)?;
    }
    writeln!(
        progress,
        "restore: {} items from {} objects put into {table}; {} lines repeated an earlier object's and were left out",
        done.items, done.objects, done.duplicates
    )
    .map_err(said)?;
    Ok(done)
}

/// Every item archived under `s3://bucket/prefix`, object by object in key order, each with
/// its object's key (metadata objects left out), each deletion once.
pub async fn items(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<Archived>, ArchiveError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for key in list(s3, bucket, prefix).await? {
        let (items, _) = object_items(s3, bucket, &key, &mut seen).await?;
        out.extend(items.into_iter().filter_map(|line| match line {
            Line::Item(item) => Some((key.clone(), item)),
            Line::Meta(_) => None,
        }));
    }
    Ok(out)
}

/// The item lines of the object `key` whose `eventID` is not in `seen` (which gains them), and
/// how many were left out. Without a metadata object, every line.
async fn object_items(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    seen: &mut HashSet<String>,
) -> Result<(Vec<Line>, usize), ArchiveError> {
    let object = format!("s3://{bucket}/{key}");
    let read = |bytes: &[u8], object: &str| {
        format::read(bytes).map_err(|source| ArchiveError::Format {
            object: object.to_owned(),
            source,
        })
    };
    let bytes = get(s3, bucket, key)
        .await?
        .ok_or_else(|| not_found(bucket, key))?;
    let lines = read(&bytes, &object)?;
    let Some(meta_key) = format::meta_key_of(key) else {
        return Ok((lines, 0));
    };
    let Some(meta) = get(s3, bucket, &meta_key).await? else {
        return Ok((lines, 0));
    };
    let events: Vec<String> = read(&meta, &format!("s3://{bucket}/{meta_key}"))?
        .into_iter()
        .filter_map(|line| match line {
            Line::Meta(m) if !m.keys_only => Some(m.event_id),
            _ => None,
        })
        .collect();
    if events.len() != lines.len() {
        return Err(ArchiveError::Content {
            object,
            reason: format!(
                "{} item lines, but its metadata object {meta_key} names {} archived items",
                lines.len(),
                events.len()
            ),
        });
    }
    let before = lines.len();
    let kept: Vec<Line> = lines
        .into_iter()
        .zip(events)
        .filter_map(|(line, event)| seen.insert(event).then_some(line))
        .collect();
    let left_out = before - kept.len();
    Ok((kept, left_out))
}

/// The item objects under a prefix, in key order.
async fn list(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> Result<Vec<String>, ArchiveError> {
    let mut keys = Vec::new();
    let mut pages = s3
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| ArchiveError::Request {
            operation: "ListObjectsV2",
            target: format!("s3://{bucket}/{prefix}"),
            message: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
        })?;
        keys.extend(
            page.contents()
                .iter()
                .filter_map(|o| o.key())
                .filter(|k| k.ends_with(format::SUFFIX) && !format::is_meta_key(k))
                .map(str::to_owned),
        );
    }
    keys.sort();
    Ok(keys)
}

/// The table's key attribute names. Fails, saying what to do, when the table does not exist.
async fn key_schema(dynamodb: &aws_sdk_dynamodb::Client, table: &str) -> Result<Vec<String>, ArchiveError> {
    let described = dynamodb
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| ArchiveError::Request {
            operation: "DescribeTable",
            target: table.to_owned(),
            message: format!(
                "{}; restore puts items into an existing table (DynamoDB's Import from S3 can create \
                 a new one from the same objects)",
                aws_sdk_dynamodb::error::DisplayErrorContext(&e)
            ),
        })?;
    let schema = described
        .table()
        .map(aws_sdk_dynamodb::types::TableDescription::key_schema)
        .unwrap_or_default();
    Ok(schema.iter().map(|k| k.attribute_name().to_owned()).collect())
}

/// An object's items, keeping only the last line for each key (a key deleted by TTL twice in
/// one run, or an object written by hand); `BatchWriteItem` rejects a request that names a key
/// twice. Returns the items in line order and how many were superseded.
fn latest_per_key(lines: Vec<Line>, key_names: &[String]) -> Result<(Vec<Item>, usize), String> {
    let mut items: Vec<Option<Item>> = Vec::with_capacity(lines.len());
    let mut by_key: HashMap<String, usize> = HashMap::with_capacity(lines.len());
    let mut superseded = 0;
    for (n, line) in lines.into_iter().enumerate() {
        let Line::Item(item) = line else {
            return Err(format!(
                "line {} is a metadata line; item objects hold {{\"Item\":…}} lines only",
                n + 1
            ));
        };
        let key: Item = key_names
            .iter()
            .map(|name| {
                item.get(name).map(|v| (name.clone(), v.clone())).ok_or_else(|| {
                    format!(
                        "line {}: the item has no {name:?}, a key attribute of the table",
                        n + 1
                    )
                })
            })
            .collect::<Result<HashMap<_, _>, _>>()?
            .into();
        let key = serde_json::to_string(&DynamoJson(&key)).map_err(|e| e.to_string())?;
        if let Some(earlier) = by_key.insert(key, items.len()) {
            items[earlier] = None;
            superseded += 1;
        }
        items.push(Some(item));
    }
    Ok((items.into_iter().flatten().collect(), superseded))
}
