//! Every item under a prefix, read once (overlapping objects deduplicated by `eventID`), and
//! restored into an existing table: with a choice about TTL, and optionally only where the
//! table has no item with the key.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use formats::archive::{self, DynamoJson, Line};
use futures_util::StreamExt as _;
use io_policy::{Budget, Policy, RequestFailed};
use serde_dynamo::Item;
use stream_runtime::writer::Writer;
use stream_runtime::{ItemWrite, Op};

use crate::archive::ttl::{self, TtlChoice};
use crate::archive::{ArchiveError, Archived, not_found};
use crate::job_store;
use stream_runtime::aws::get_object as get;

/// How long one object's items may take to write, retries included.
const OBJECT_TIME: Duration = Duration::from_secs(3600);

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Restored {
    /// Item objects read.
    pub objects: usize,
    /// Items put into the table.
    pub items: usize,
    /// Earlier copies of an item left out because a later line of the same object has its key.
    pub superseded: usize,
    /// Lines left out because an earlier, overlapping object held the same deletion (`eventID`).
    pub duplicates: usize,
    /// Items not put because the table already had an item with their key (`if_absent`).
    pub existing: usize,
    /// Items whose TTL attribute had passed (DynamoDB would delete them again if kept).
    pub expired: usize,
    /// Items put with their TTL attribute cleared or extended (with `if_absent`, those found
    /// existing are not counted: they were left as they were).
    pub ttl_changed: usize,
}

/// How a restore treats the items it puts back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOptions {
    /// The table's TTL attribute.
    pub ttl_attribute: String,
    /// What to do with it. `None` refuses, before writing anything, when any item's TTL has
    /// passed or when no item has the attribute at all (a misnamed attribute).
    pub ttl: Option<TtlChoice>,
    /// Put an item only when the table has none with its key (a conditional put); the others
    /// are left as they are and counted.
    pub if_absent: bool,
    /// Now, in epoch seconds: TTL is judged and extended from it.
    pub now: i64,
}

/// How far a restore has got, after each object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreProgress<'a> {
    /// The object just restored.
    pub object: &'a str,
    /// Objects done, and in all.
    pub objects: (usize, usize),
    /// Items done (put, or found existing), and in all.
    pub items: (usize, usize),
}

/// Puts the items archived under `s3://bucket/prefix` back into the existing table `table`,
/// object by object in key order (so within a day, the latest deletion of a key wins), calling
/// `progress` after each object. Metadata objects (`_meta/`) are not restored; they tell which
/// lines repeat an earlier object's, and each deletion is put once.
///
/// A first pass reads every object to count the items and judge their TTL (see
/// [`RestoreOptions::ttl`]), so a refusal writes nothing. Items replace any item with the same
/// key, unless [`RestoreOptions::if_absent`]. `dynamodb` must have the SDK's retries off
/// (`io_policy::without_sdk_retries`): writes retry under the I/O policy.
pub async fn restore(
    s3: &aws_sdk_s3::Client,
    dynamodb: &aws_sdk_dynamodb::Client,
    target: (&str, &str, &str),
    options: &RestoreOptions,
    progress: &mut dyn FnMut(RestoreProgress<'_>),
) -> Result<Restored, ArchiveError> {
    let (bucket, prefix, table) = target;
    let keys = list(s3, bucket, prefix).await?;
    if keys.is_empty() {
        return Err(ArchiveError::Prefix(format!(
            "no archive objects (*{}) under s3://{bucket}/{prefix}",
            archive::SUFFIX
        )));
    }
    let mut tables: Vec<&str> = keys.iter().filter_map(|k| archive::table_of_key(k)).collect();
    tables.dedup();
    if tables.len() > 1 {
        return Err(ArchiveError::Prefix(format!(
            "s3://{bucket}/{prefix} holds archives of {} source tables ({}); narrow --prefix to one table=… partition",
            tables.len(),
            tables.join(", ")
        )));
    }
    let key_names = key_schema(dynamodb, table).await?;
    let survey = survey(s3, bucket, &keys, &key_names, options).await?;
    refuse(&survey, options)?;

    let policy = Policy::default();
    let writer = Writer::new(dynamodb.clone());
    let mut seen = HashSet::new();
    let mut done = Restored { expired: survey.expired, ..Restored::default() };
    for (n, key) in keys.iter().enumerate() {
        let (items, mut superseded, duplicates) = read_object(s3, bucket, key, &key_names, &mut seen).await?;
        // Keys deleted again in a later object are put from there.
        let before = items.len();
        let mut items: Vec<Item> = items
            .into_iter()
            .filter(|item| {
                key_of(item, &key_names)
                    .is_ok_and(|k| survey.last_object.get(&k).is_none_or(|last| *last == n))
            })
            .collect();
        superseded += before - items.len();
        let changed: Vec<bool> = match options.ttl {
            Some(choice) => items
                .iter_mut()
                .map(|item| ttl::apply(item, &options.ttl_attribute, choice, options.now))
                .collect(),
            None => vec![false; items.len()],
        };
        let count = items.len();
        let object = format!("s3://{bucket}/{key}");
        let budget = policy.within(OBJECT_TIME);
        let found = if options.if_absent {
            put_absent(dynamodb, table, &key_names[0], items, &budget).await
        } else {
            put_all(&writer, table, items, &budget).await.map(|()| vec![false; count])
        }
        .map_err(|(failed, failure)| ArchiveError::Write {
            object,
            failed,
            count,
            table: table.to_owned(),
            failure,
        })?;
        let existing = found.iter().filter(|f| **f).count();
        // Only the items put had their TTL changed: those found existing were left as they were.
        done.ttl_changed += changed.iter().zip(&found).filter(|(c, f)| **c && !**f).count();
        done.objects += 1;
        done.items += count - existing;
        done.existing += existing;
        done.superseded += superseded;
        done.duplicates += duplicates;
        progress(RestoreProgress {
            object: key,
            objects: (n + 1, keys.len()),
            items: (done.items + done.existing, survey.items),
        });
    }
    Ok(done)
}

/// What the first pass found.
struct Survey {
    /// Items to put: one per key.
    items: usize,
    /// Of those, items whose TTL has passed.
    expired: usize,
    /// Of those, items with the TTL attribute.
    with_attribute: usize,
    /// Each key's last object (by index). A later deletion of a key supersedes the earlier
    /// ones, so only its last copy is put.
    last_object: HashMap<String, usize>,
}

/// Reads every object once: each key's last copy, and how its TTL stands.
async fn survey(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    keys: &[String],
    key_names: &[String],
    options: &RestoreOptions,
) -> Result<Survey, ArchiveError> {
    let mut seen = HashSet::new();
    // Key → (last object, expired, has the attribute), for its last copy.
    let mut last: HashMap<String, (usize, bool, bool)> = HashMap::new();
    for (n, key) in keys.iter().enumerate() {
        let (items, _, _) = read_object(s3, bucket, key, key_names, &mut seen).await?;
        for item in &items {
            let item_key = key_of(item, key_names)
                .map_err(|reason| ArchiveError::Content { object: format!("s3://{bucket}/{key}"), reason })?;
            let expired = ttl::expired(item, &options.ttl_attribute, options.now);
            let with_attribute = item.contains_key(&options.ttl_attribute);
            last.insert(item_key, (n, expired, with_attribute));
        }
    }
    Ok(Survey {
        items: last.len(),
        expired: last.values().filter(|v| v.1).count(),
        with_attribute: last.values().filter(|v| v.2).count(),
        last_object: last.into_iter().map(|(k, v)| (k, v.0)).collect(),
    })
}

/// Refuses a restore without a TTL choice that would put back items DynamoDB deletes again, or
/// whose TTL attribute name matches no item.
fn refuse(survey: &Survey, options: &RestoreOptions) -> Result<(), ArchiveError> {
    if options.ttl.is_some() {
        return Ok(());
    }
    let name = &options.ttl_attribute;
    if survey.expired > 0 {
        return Err(ArchiveError::Refused(format!(
            "{} of the {} items have {name} in the past: put back as they are, DynamoDB deletes \
             them again within days and the archiver archives them a second time. Choose \
             --ttl clear (remove {name}), --ttl extend=DAYS (set it DAYS from now) or --ttl keep \
             (restore them as they are)",
            survey.expired, survey.items
        )));
    }
    if survey.items > 0 && survey.with_attribute == 0 {
        return Err(ArchiveError::Refused(format!(
            "none of the {} items has the attribute {name}: if the table's TTL attribute has \
             another name, give it with --ttl-attribute; to restore without looking at TTL, \
             --ttl keep",
            survey.items
        )));
    }
    Ok(())
}

/// An object's items to put: deduplicated across objects by `eventID` (`seen`), the last line
/// per key; with how many lines were superseded and how many repeated an earlier object's.
async fn read_object(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    key_names: &[String],
    seen: &mut HashSet<String>,
) -> Result<(Vec<Item>, usize, usize), ArchiveError> {
    let (lines, duplicates) = object_items(s3, bucket, key, seen).await?;
    let (items, superseded) = latest_per_key(lines, key_names)
        .map_err(|reason| ArchiveError::Content { object: format!("s3://{bucket}/{key}"), reason })?;
    Ok((items, superseded, duplicates))
}

/// Puts every item with `BatchWriteItem`; on failure, how many were not written and the first
/// failure.
pub(super) async fn put_all(
    writer: &Writer,
    table: &str,
    items: Vec<Item>,
    budget: &Budget,
) -> Result<(), (u64, io_policy::Failure)> {
    let table: Arc<str> = table.into();
    let puts: Vec<ItemWrite> = items
        .into_iter()
        .enumerate()
        .map(|(origin, item)| ItemWrite { table: Arc::clone(&table), op: Op::Put(item.into()), origin })
        .collect();
    let report = writer.write(puts, budget).await;
    match report.failures.into_iter().next() {
        Some((_, failure)) => Err((report.failed, failure)),
        None => Ok(()),
    }
}

/// Puts each item only if the table has no item with its key (`attribute_not_exists` on the
/// partition key), concurrently under `budget`; for each item in order, whether it already
/// existed (and so was left as it was).
pub(super) async fn put_absent(
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
    partition_key: &str,
    items: Vec<Item>,
    budget: &Budget,
) -> Result<Vec<bool>, (u64, io_policy::Failure)> {
    let results: Vec<Result<bool, io_policy::Failure>> = futures_util::stream::iter(items)
        .map(|item| {
            let item: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> =
                item.into();
            budget.call(move || {
                let put = dynamodb
                    .put_item()
                    .table_name(table)
                    .set_item(Some(item.clone()))
                    .condition_expression("attribute_not_exists(#k)")
                    .expression_attribute_names("#k", partition_key)
                    .send();
                async move { Ok(io_policy::conditional("PutItem", put.await)?.is_some()) }
            })
        })
        .buffered(budget.policy.concurrency)
        .collect()
        .await;
    let mut existing = Vec::with_capacity(results.len());
    let mut failures = results.into_iter().filter_map(|r| match r {
        Ok(put) => {
            existing.push(!put);
            None
        }
        Err(failure) => Some(failure),
    });
    let first = failures.next();
    let failed = 1 + failures.count() as u64;
    match first {
        Some(failure) => Err((failed, failure)),
        None => Ok(existing),
    }
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
    let lines = object_lines(s3, bucket, key, None).await?;
    let before = lines.len();
    let kept: Vec<Line> = lines
        .into_iter()
        .filter_map(|(line, event)| event.is_none_or(|event| seen.insert(event)).then_some(line))
        .collect();
    let left_out = before - kept.len();
    Ok((kept, left_out))
}

/// The lines of the item object `key`, each with its deletion's `eventID` from the metadata
/// object beside it (`None` when there is none). Each object is read within
/// [`job_store::OBJECT_TIME`], and by `deadline` if there is one (a restore job's step's).
pub(super) async fn object_lines(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    deadline: Option<Instant>,
) -> Result<Vec<(Line, Option<String>)>, ArchiveError> {
    let object = format!("s3://{bucket}/{key}");
    let read = |bytes: &[u8], object: &str| {
        archive::read(bytes)
            .map_err(|source| ArchiveError::Format { object: object.to_owned(), cause: source })
    };
    let bytes = get(s3, bucket, key, &read_budget(deadline)).await?.ok_or_else(|| not_found(bucket, key))?;
    let lines = read(&bytes, &object)?;
    let meta = match archive::meta_key_of(key) {
        Some(meta_key) => {
            get(s3, bucket, &meta_key, &read_budget(deadline)).await?.map(|meta| (meta_key, meta))
        }
        None => None,
    };
    let Some((meta_key, meta)) = meta else {
        return Ok(lines.into_iter().map(|line| (line, None)).collect());
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
    Ok(lines.into_iter().zip(events.into_iter().map(Some)).collect())
}

/// The budget of one object's read: by `deadline` if there is one, within
/// [`job_store::OBJECT_TIME`] in any case.
fn read_budget(deadline: Option<Instant>) -> Budget {
    deadline.map_or_else(|| Policy::default().within(job_store::OBJECT_TIME), job_store::object_budget)
}

/// The item objects under a prefix, in key order.
async fn list(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> Result<Vec<String>, ArchiveError> {
    stream_runtime::aws::list_keys(
        s3,
        bucket,
        prefix,
        |k| k.ends_with(archive::SUFFIX) && !archive::is_meta_key(k),
        &crate::s3_budget(),
    )
    .await
    .map_err(ArchiveError::from)
}

/// The table's key attribute names. Fails, saying what to do, when the table does not exist.
pub(super) async fn key_schema(
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Vec<String>, ArchiveError> {
    let described = Policy::default()
        .within(job_store::OBJECT_TIME)
        .call(|| {
            let request = dynamodb.describe_table().table_name(table);
            async move { request.send().await.map_err(|e| io_policy::classify("DescribeTable", &e)) }
        })
        .await
        .map_err(|failure| {
            let mut failed = RequestFailed::new("DescribeTable", table, failure);
            failed.message.push_str(
                "; restore puts items into an existing table (DynamoDB's Import from S3 can create a \
                 new one from the same objects)",
            );
            failed
        })?;
    let schema =
        described.table().map(aws_sdk_dynamodb::types::TableDescription::key_schema).unwrap_or_default();
    Ok(schema.iter().map(|k| k.attribute_name().to_owned()).collect())
}

/// An item's key as canonical text (its key attributes in DynamoDB JSON), to compare keys by.
pub(super) fn key_of(item: &Item, key_names: &[String]) -> Result<String, String> {
    let key: Item = key_names
        .iter()
        .map(|name| {
            item.get(name)
                .map(|v| (name.clone(), v.clone()))
                .ok_or_else(|| format!("the item has no {name:?}, a key attribute of the table"))
        })
        .collect::<Result<HashMap<_, _>, _>>()?
        .into();
    serde_json::to_string(&DynamoJson(&key)).map_err(|e| e.to_string())
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
        let key = key_of(&item, key_names).map_err(|reason| format!("line {}: {reason}", n + 1))?;
        if let Some(earlier) = by_key.insert(key, items.len()) {
            items[earlier] = None;
            superseded += 1;
        }
        items.push(Some(item));
    }
    Ok((items.into_iter().flatten().collect(), superseded))
}
