//! `sidestream archive`: read the ttl-archiver's objects back, and restore them into a table.

use std::collections::HashMap;
use std::io::Write;

use anyhow::{Context as _, bail, ensure};
use aws_sdk_s3::error::DisplayErrorContext;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ddb_writer::Writer;
use io_policy::Policy;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_dynamo::{AttributeValue, Item};
use stream_kit::{Deadline, ItemWrite, Op};
use ttl_archiver::format::{self, DynamoJson, Line};

/// Where an archive object is: a local file or `s3://bucket/key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file on disk (for example one `sidestream plan ttl-archiver --out` wrote).
    File(std::path::PathBuf),
    /// An S3 object.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
    },
}

impl Source {
    /// Reads `s3://bucket/key` or a path.
    pub fn parse(text: &str) -> anyhow::Result<Source> {
        match text.strip_prefix("s3://") {
            Some(rest) => {
                let (bucket, key) = rest
                    .split_once('/')
                    .filter(|(b, k)| !b.is_empty() && !k.is_empty())
                    .with_context(|| format!("{text:?} is not s3://BUCKET/KEY"))?;
                Ok(Source::S3 {
                    bucket: bucket.to_owned(),
                    key: key.to_owned(),
                })
            }
            None => Ok(Source::File(text.into())),
        }
    }

    /// The object's bytes.
    pub async fn fetch(&self, s3: &aws_sdk_s3::Client) -> anyhow::Result<Vec<u8>> {
        match self {
            Source::File(path) => {
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
            }
            Source::S3 { bucket, key } => get(s3, bucket, key).await,
        }
    }
}

async fn get(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> anyhow::Result<Vec<u8>> {
    let object = s3
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("GetObject s3://{bucket}/{key}: {}", DisplayErrorContext(&e)))?;
    let body = object
        .body
        .collect()
        .await
        .with_context(|| format!("reading s3://{bucket}/{key}"))?;
    Ok(body.into_bytes().to_vec())
}

/// Writes an archive object's lines to `out`, one JSON object per line. Items are plain JSON
/// (`{"id":"a","n":42,"tags":["x"]}`: sets become arrays, binary becomes base64, numbers stay
/// exact); metadata lines keep their fields with `keys` in plain JSON. With `typed`, lines are
/// written as archived (DynamoDB JSON). Returns the number of lines.
pub fn cat(object: &[u8], mut out: impl Write, typed: bool) -> anyhow::Result<usize> {
    let lines = format::read(object)?;
    for line in &lines {
        match (line, typed) {
            (Line::Item(item), true) => serde_json::to_writer(
                &mut out,
                &format::ItemLineRef {
                    item: DynamoJson(item),
                },
            )?,
            (Line::Item(item), false) => serde_json::to_writer(&mut out, &Plain::Item(item))?,
            (Line::Meta(meta), true) => {
                serde_json::to_writer(&mut out, &meta.with_keys(DynamoJson(&meta.keys)))?;
            }
            (Line::Meta(meta), false) => {
                serde_json::to_writer(&mut out, &meta.with_keys(Plain::Item(&meta.keys)))?;
            }
        }
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(lines.len())
}

/// DynamoDB values as plain JSON.
enum Plain<'a> {
    Item(&'a HashMap<String, AttributeValue>),
    Value(&'a AttributeValue),
}

impl Serialize for Plain<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = match self {
            Plain::Item(item) => {
                let mut entries: Vec<_> = item.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, &Plain::Value(v))?;
                }
                return map.end();
            }
            Plain::Value(value) => value,
        };
        match value {
            AttributeValue::S(s) => serializer.serialize_str(s),
            AttributeValue::N(n) => Number(n).serialize(serializer),
            AttributeValue::B(b) => serializer.serialize_str(&BASE64.encode(b)),
            AttributeValue::Bool(b) => serializer.serialize_bool(*b),
            AttributeValue::Null(_) => serializer.serialize_unit(),
            AttributeValue::Ss(v) => v.serialize(serializer),
            AttributeValue::Ns(v) => {
                let mut seq = serializer.serialize_seq(Some(v.len()))?;
                for n in v {
                    seq.serialize_element(&Number(n))?;
                }
                seq.end()
            }
            AttributeValue::Bs(v) => {
                let mut seq = serializer.serialize_seq(Some(v.len()))?;
                for b in v {
                    seq.serialize_element(&BASE64.encode(b))?;
                }
                seq.end()
            }
            AttributeValue::M(m) => Plain::Item(m).serialize(serializer),
            AttributeValue::L(l) => {
                let mut seq = serializer.serialize_seq(Some(l.len()))?;
                for v in l {
                    seq.serialize_element(&Plain::Value(v))?;
                }
                seq.end()
            }
        }
    }
}

/// A DynamoDB number as a JSON number token, digit for digit (all 38 significant digits
/// survive), or as a string in the case JSON has no token for it.
struct Number<'a>(&'a str);

impl Serialize for Number<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.parse::<serde_json::Number>().is_ok()
            && let Ok(raw) = serde_json::value::RawValue::from_string(self.0.to_owned())
        {
            return raw.serialize(serializer);
        }
        serializer.serialize_str(self.0)
    }
}

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// Item objects read.
    pub objects: usize,
    /// Items written.
    pub items: usize,
    /// Earlier copies of an item left out because a later line of the same object has its key.
    pub superseded: usize,
}

/// Puts the items archived under `s3://bucket/prefix` back into the existing table `table`,
/// object by object in key order (so within a day, the latest deletion of a key wins), with a
/// progress line per object on `progress`. Metadata objects (`_meta/`) are not restored. Items
/// replace any item with the same key already in the table. `dynamodb` must have the SDK's
/// retries off (`io_policy::without_sdk_retries`): the writer retries under the I/O policy.
pub async fn restore(
    s3: &aws_sdk_s3::Client,
    dynamodb: &aws_sdk_dynamodb::Client,
    bucket: &str,
    prefix: &str,
    table: &str,
    mut progress: impl Write,
) -> anyhow::Result<Restored> {
    let keys = list(s3, bucket, prefix).await?;
    ensure!(
        !keys.is_empty(),
        "no archive objects (*{}) under s3://{bucket}/{prefix}",
        format::SUFFIX
    );
    let mut tables: Vec<&str> = keys.iter().filter_map(|k| format::table_of_key(k)).collect();
    tables.dedup();
    if tables.len() > 1 {
        bail!(
            "s3://{bucket}/{prefix} holds archives of {} source tables ({}); narrow --prefix to one table=… partition",
            tables.len(),
            tables.join(", ")
        );
    }
    let key_names = key_schema(dynamodb, table).await?;
    let writer = Writer::new(dynamodb.clone());
    let table_name: std::sync::Arc<str> = table.into();
    let mut done = Restored::default();
    for (n, key) in keys.iter().enumerate() {
        let bytes = get(s3, bucket, key).await?;
        let lines = format::read(&bytes).with_context(|| format!("s3://{bucket}/{key}"))?;
        let (items, superseded) =
            latest_per_key(lines, &key_names).with_context(|| format!("s3://{bucket}/{key}"))?;
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
        let budget = Policy::default().budget(Deadline::after(std::time::Duration::from_secs(3600)));
        let report = writer.write(puts, &budget).await;
        if let Some((_, failure)) = report.failures.first() {
            bail!(
                "s3://{bucket}/{key}: {} of {count} items were not written to {table}: {failure}",
                report.failed,
            );
        }
        done.objects += 1;
        done.items += count;
        done.superseded += superseded;
        writeln!(
            progress,
            "restore: [{}/{}] {key}: {count} items ({} restored so far)",
            n + 1,
            keys.len(),
            done.items
        )?;
    }
    writeln!(
        progress,
        "restore: {} items from {} objects put into {table}",
        done.items, done.objects
    )?;
    Ok(done)
}

/// Every item archived under `s3://bucket/prefix`, object by object in key order, each with
/// its object's key (metadata objects left out).
pub async fn items(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
) -> anyhow::Result<Vec<(String, Item)>> {
    let mut out = Vec::new();
    for key in list(s3, bucket, prefix).await? {
        let bytes = get(s3, bucket, &key).await?;
        for line in format::read(&bytes).with_context(|| format!("s3://{bucket}/{key}"))? {
            if let Line::Item(item) = line {
                out.push((key.clone(), item));
            }
        }
    }
    Ok(out)
}

/// The item objects under a prefix, in key order.
async fn list(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> anyhow::Result<Vec<String>> {
    let mut keys = Vec::new();
    let mut pages = s3
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| {
            anyhow::anyhow!(
                "ListObjectsV2 s3://{bucket}/{prefix}: {}",
                DisplayErrorContext(&e)
            )
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
async fn key_schema(dynamodb: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<Vec<String>> {
    let described = dynamodb
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "DescribeTable {table}: {}; restore puts items into an existing table (DynamoDB's \
                 Import from S3 can create a new one from the same objects)",
                aws_sdk_dynamodb::error::DisplayErrorContext(&e)
            )
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
fn latest_per_key(lines: Vec<Line>, key_names: &[String]) -> anyhow::Result<(Vec<Item>, usize)> {
    let mut items: Vec<Option<Item>> = Vec::with_capacity(lines.len());
    let mut by_key: HashMap<String, usize> = HashMap::with_capacity(lines.len());
    let mut superseded = 0;
    for (n, line) in lines.into_iter().enumerate() {
        let Line::Item(item) = line else {
            bail!(
                "line {} is a metadata line; item objects hold {{\"Item\":…}} lines only",
                n + 1
            );
        };
        let key: Item = key_names
            .iter()
            .map(|name| {
                item.get(name)
                    .map(|v| (name.clone(), v.clone()))
                    .with_context(|| {
                        format!(
                            "line {}: the item has no {name:?}, a key attribute of the table",
                            n + 1
                        )
                    })
            })
            .collect::<anyhow::Result<HashMap<_, _>>>()?
            .into();
        let key = serde_json::to_string(&DynamoJson(&key))?;
        if let Some(earlier) = by_key.insert(key, items.len()) {
            items[earlier] = None;
            superseded += 1;
        }
        items.push(Some(item));
    }
    Ok((items.into_iter().flatten().collect(), superseded))
}
