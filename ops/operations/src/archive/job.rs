//! The restore into an existing table as a job on Step Functions (the template's
//! `RestoreStateMachine`): the steps the state machine asks the archive-restorer function for,
//! and the objects the function keeps in S3 between them.
//!
//! `archive restore` reads every object of a prefix first, in one process, so that each
//! deletion is put once (by `eventID`) and a key deleted on several days is put as last deleted.
//! A Distributed Map over the archive's objects cannot see the other objects, so the job shuffles
//! first, as a map-reduce would:
//!
//! 1. **[`Step::Plan`]**: the execution's input checked (a TTL choice is required: there is no
//!    survey to refuse from), `now` fixed for every step.
//! 2. **[`Step::Split`]**, one per batch of objects that the Map's `ItemReader` lists
//!    (`s3:listObjectsV2` over the prefix): each item line goes, with its object, line number and
//!    `eventID`, to the partition its key hashes to ([`partition_of`]), as one part object per
//!    partition and batch (`parts/PPPP/<batch>.json`). A key's every deletion lands in one
//!    partition, whatever object and day it is in. An item object S3 will not read until it is
//!    restored (it, or its metadata object, is in S3 Glacier Flexible Retrieval or Deep Archive:
//!    the archive bucket's lifecycle moves objects over 128 KB there) is skipped and listed with
//!    its storage class ([`Archived`]), not a failure of the job.
//! 3. **[`Step::Restore`]**, again and again for each partition until it answers `done`: the
//!    partition's parts read and ordered by (object key, line), which is stream order; a line
//!    whose `eventID` came before is left out, then the last line of each key is kept (what
//!    `archive restore` keeps); the TTL choice applied; the items put (or put if absent), paced,
//!    a page at a time, its cursor in `partition-PPPP.json`.
//! 4. **[`Step::Report`]**: the counts summed into `report.json`, with every object skipped as
//!    archived.
//!
//! Every object is under `s3://RESTORE_BUCKET/RESTORE_PREFIX<run id>/`, in the format
//! docs/formats.md specifies ("Restore job state, version 2"). A split holds one batch of
//! objects in memory; a restore step one partition's items: the archive's size over
//! `partitions`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use aws_sdk_s3::types::StorageClass;
use formats::archive::{self, DynamoJson, Line};
use futures_util::StreamExt as _;
use io_policy::{FailureKind, Policy, RequestFailed};
use serde::{Deserialize, Serialize, Serializer};
use serde_dynamo::Item;
use sha2::Digest as _;
use stream_runtime::writer::Writer;
use stream_runtime::{ConfigError, Vars};

use crate::archive::ArchiveError;
use crate::archive::restore::{key_of, key_schema, object_lines, put_absent, put_all};
use crate::archive::ttl::{self, TtlChoice};
use crate::job_store::{self, Store};
use crate::pace::Pacer;

/// The version of the objects a job writes (docs/formats.md).
pub const FORMAT_VERSION: u32 = 2;

/// The versions a job reads: version 1 had no archived objects (a batch of it reads as none
/// archived; a partition's state, the same in both, is resumed and saved as version 2).
pub const READS: [u32; 2] = [1, FORMAT_VERSION];

/// Partitions when the input names none.
pub const DEFAULT_PARTITIONS: u32 = 16;

/// The most partitions: the Map's items come from `States.ArrayRange`, which makes at most 1,000.
pub const MAX_PARTITIONS: u32 = 1_000;

/// No page of puts starts later than this before the invocation's deadline.
pub const STOP_BEFORE_DEADLINE: Duration = Duration::from_secs(75);

/// Items put at once (`BatchWriteItem`'s limit).
const PAGE_ITEMS: usize = 25;

/// Objects read at once.
const READ_AT_ONCE: usize = 8;

/// The archived objects the report step answers (the execution's output, which Step Functions
/// caps at 256 KB); `report.json` lists them all.
pub const ANSWERED_ARCHIVED: usize = 100;

/// The storage classes whose objects S3 reads only once restored (`RestoreObject`), as a listing
/// names them: S3 Glacier Flexible Retrieval and S3 Glacier Deep Archive. (An Intelligent-Tiering
/// object in an archive tier lists as `INTELLIGENT_TIERING`: only its read tells.)
pub const ARCHIVED_CLASSES: [&str; 2] = ["GLACIER", "DEEP_ARCHIVE"];

/// S3's error code for a read of an object in an archived storage class that has no restored
/// copy (HTTP 403).
const INVALID_OBJECT_STATE: &str = "InvalidObjectState";

/// The archive-restorer function's configuration, read once at cold start.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The table items are put into (`RESTORE_TABLE`).
    pub table: String,
    /// The archive's bucket (`ARCHIVE_BUCKET`), whose objects the state machine lists.
    pub archive_bucket: String,
    /// The table's TTL attribute (`TTL_ATTRIBUTE`).
    pub ttl_attribute: String,
    /// Write units a second each running partition may spend (`RESTORE_WRITE_UNITS`); `None`
    /// for no limit.
    pub write_units: Option<f64>,
    /// The function's reserved concurrency (`RESTORE_CONCURRENCY`): the most partitions or
    /// batches running at once.
    pub reserved: u32,
    /// Where the job keeps its objects (`RESTORE_BUCKET`).
    pub bucket: String,
    /// Under which prefix (`RESTORE_PREFIX`, default `restore/`).
    pub prefix: String,
}

impl Config {
    /// Reads the variables above.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Config, ConfigError> {
        Ok(Config {
            table: vars.required("RESTORE_TABLE", "the table the archive is restored into")?,
            archive_bucket: vars.required("ARCHIVE_BUCKET", "the bucket the archive's objects are in")?,
            ttl_attribute: vars.required("TTL_ATTRIBUTE", "the restored table's TTL attribute")?,
            write_units: vars.rate("RESTORE_WRITE_UNITS")?,
            reserved: vars.integer("RESTORE_CONCURRENCY", 4, 1, MAX_PARTITIONS)?,
            bucket: vars
                .required("RESTORE_BUCKET", "the bucket where a restore job keeps its parts and report")?,
            prefix: vars.optional("RESTORE_PREFIX").unwrap_or_else(|| "restore/".to_owned()),
        })
    }
}

/// What the state machine asks of the function: its input, by `step`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Check the execution's input and fix `now`.
    Plan {
        /// The execution's name.
        run_id: String,
        /// The execution's input.
        request: Request,
    },
    /// Shuffle a batch of listed objects into partitions.
    Split {
        /// The job.
        plan: Plan,
        /// The objects, as the `ItemReader` lists them (only `Key` and `StorageClass` are read).
        objects: Vec<Listed>,
    },
    /// Go on with one partition.
    Restore(PartitionTask),
    /// Sum the counts.
    Report {
        /// The job.
        plan: Plan,
    },
}

/// A restore job's input, as an operator starts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The archive prefix to restore, down to one table: `archive/table=issues/`, or a
    /// `year=…/`, `month=…/` or `day=…/` folder of it.
    pub prefix: String,
    /// `keep`, `clear` or `extend=DAYS` (`archive restore --ttl`): required.
    #[serde(default)]
    pub ttl: Option<String>,
    /// Put an item only where the table has none with its key (`--if-absent`).
    #[serde(default)]
    pub if_absent: bool,
    /// Partitions (1 to 1,000; 16 when absent).
    #[serde(default)]
    pub partitions: Option<u32>,
    /// Batches or partitions at once (1 to the function's reserved concurrency, which it is
    /// when absent).
    #[serde(default)]
    pub max_concurrency: Option<u32>,
}

/// A job as checked: what every step is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The execution's name.
    pub run_id: String,
    /// The archive prefix.
    pub prefix: String,
    /// The TTL choice, as given (`keep`, `clear`, `extend=DAYS`).
    pub ttl: String,
    /// Whether items are put only where absent.
    pub if_absent: bool,
    /// Partitions.
    pub partitions: u32,
    /// Batches or partitions at once.
    pub max_concurrency: u32,
    /// The job's start in epoch seconds: TTL is judged and extended from it.
    pub now: i64,
}

/// An object as `s3:listObjectsV2` lists it (its other fields are not read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// The object's key.
    #[serde(rename = "Key")]
    pub key: String,
    /// Its storage class (`STANDARD`, `GLACIER`, …), as the listing gives it. An object of an
    /// archived class lists so even once restored: it is read all the same, and reported (as
    /// this class) when S3 refuses it.
    #[serde(rename = "StorageClass", default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
}

/// An item object skipped unread because S3 reads it only once restored: the object S3 refused
/// (the item object, or the metadata object its lines' `eventID`s are in) and its storage class.
/// Record-permanent for that object: every run skips it alike until an operator restores it
/// (`RestoreObject`), and nothing else is kept from being restored. Ordered by key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Archived {
    /// The object to restore: the item object, or its metadata object (`…/_meta/table=…`).
    pub key: String,
    /// Its storage class (`GLACIER`, `DEEP_ARCHIVE`, …): as listed, or as S3 answers for it.
    pub storage_class: String,
}

/// One partition's work, as the state machine passes it to the function and back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionTask {
    /// The job.
    pub plan: Plan,
    /// The partition, from 0.
    pub partition: u32,
    /// Whether it is restored (false, or absent, at first).
    #[serde(default)]
    pub done: bool,
}

/// One archived item on its way to its partition: a line of a part object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartLine {
    /// The item object's key.
    pub object: String,
    /// The line, from 1.
    pub line: u32,
    /// The deletion's `eventID`, from the metadata object; `null` without one.
    pub event_id: Option<String>,
    /// The item, as DynamoDB JSON.
    #[serde(serialize_with = "dynamo_json")]
    pub item: Item,
}

fn restore_step<S: Serializer>(task: &PartitionTask, serializer: S) -> Result<S::Ok, S::Error> {
    Step::Restore(task.clone()).serialize(serializer)
}

fn dynamo_json<S: Serializer>(item: &Item, serializer: S) -> Result<S::Ok, S::Error> {
    DynamoJson(item).serialize(serializer)
}

/// A batch's items of one partition (`parts/PPPP/<batch>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// The job's run id.
    pub run_id: String,
    /// The partition.
    pub partition: u32,
    /// Its lines, in the batch's order.
    pub lines: Vec<PartLine>,
}

/// What a split read (`batches/<batch>.json`, and the step's answer).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// The job's run id.
    pub run_id: String,
    /// Item objects read.
    pub objects: usize,
    /// Listed objects that are not item objects (metadata, other files), left alone.
    pub skipped: usize,
    /// Item lines read.
    pub lines: usize,
    /// Item objects skipped unread as archived (none in version 1).
    #[serde(default)]
    pub archived: usize,
    /// What they are, in the batch's order.
    #[serde(default)]
    pub archived_objects: Vec<Archived>,
}

/// What a partition did, so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Items to put: one per key.
    pub planned: usize,
    /// Items put.
    pub items: usize,
    /// Items not put because the table had one with their key (`if_absent`).
    pub existing: usize,
    /// Copies of a key left out because a later deletion of it is put.
    pub superseded: usize,
    /// Lines left out because an earlier line held the same deletion (`eventID`).
    pub duplicates: usize,
    /// Items whose TTL had passed when the job started.
    pub expired: usize,
    /// Items put with their TTL attribute cleared or extended (with `if_absent`, one found
    /// existing was left as it was, and is not counted).
    pub ttl_changed: usize,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.planned += other.planned;
        self.items += other.items;
        self.existing += other.existing;
        self.superseded += other.superseded;
        self.duplicates += other.duplicates;
        self.expired += other.expired;
        self.ttl_changed += other.ttl_changed;
    }
}

/// A partition's state between invocations (`partition-PPPP.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// The job's run id.
    pub run_id: String,
    /// The partition.
    pub partition: u32,
    /// How many of its items (in stream order) are put or found existing.
    pub next: usize,
    /// Whether all are.
    pub done: bool,
    /// What it did so far.
    pub counts: Counts,
}

/// The job's outcome (`report.json`, and the report step's answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// The job's run id.
    pub run_id: String,
    /// The table restored into.
    pub table: String,
    /// `s3://bucket/prefix` restored.
    pub archive: String,
    /// Item objects read.
    pub objects: usize,
    /// Item lines read.
    pub lines: usize,
    /// Item objects skipped unread as archived: restore them (`RestoreObject`) and run the job
    /// again.
    #[serde(default)]
    pub archived: usize,
    /// What they are, in key order: all of them in `report.json`, the first
    /// [`ANSWERED_ARCHIVED`] in the step's answer.
    #[serde(default)]
    pub archived_objects: Vec<Archived>,
    /// Every partition's counts, summed.
    pub counts: Counts,
}

/// What a step answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    /// The checked job.
    Plan(Plan),
    /// A batch split.
    Split(Split),
    /// A partition's task, its `done` set when restored: as a [`Step::Restore`], which the state
    /// machine passes back to the function until it is done.
    #[serde(serialize_with = "restore_step")]
    Restore(PartitionTask),
    /// The report.
    Report(Report),
}

/// The partition of an item whose key is `key` (its key attributes as canonical DynamoDB JSON,
/// as `archive restore` compares keys): the first eight bytes of the key's SHA-256, big-endian,
/// modulo `partitions`.
pub fn partition_of(key: &str, partitions: u32) -> u32 {
    let digest = sha2::Sha256::digest(key.as_bytes());
    let mut head = [0_u8; 8];
    head.copy_from_slice(&digest[..8]);
    u32::try_from(u64::from_be_bytes(head) % u64::from(partitions.max(1))).unwrap_or(0)
}

/// A batch's name: the first eight bytes of the SHA-256 of its objects' keys (each followed by
/// a newline), in hex. The same batch, run again, writes the same objects.
pub fn batch_name(objects: &[Listed]) -> String {
    let mut hash = sha2::Sha256::new();
    for object in objects {
        hash.update(object.key.as_bytes());
        hash.update(b"\n");
    }
    let head = hash.finalize();
    format!("{:016x}", u64::from_be_bytes(head[..8].try_into().unwrap_or_default()))
}

/// The name of partition `partition`'s part of batch `batch`.
pub fn part_name(partition: u32, batch: &str) -> String {
    format!("parts/{partition:04}/{batch}.json")
}

/// The name of partition `partition`'s state.
pub fn partition_name(partition: u32) -> String {
    format!("partition-{partition:04}.json")
}

/// Checks a job's input: a plan, or why not (naming the field and its limits).
pub fn plan(run_id: String, request: Request, reserved: u32, now: i64) -> Result<Plan, ArchiveError> {
    let refuse = |reason: String| Err(ArchiveError::Refused(format!("the restore job's input: {reason}")));
    let Some(ttl) = request.ttl else {
        return refuse(
            "ttl is required (keep, clear or extend=DAYS): every archived item was deleted by TTL, \
             and unlike archive restore the job does not read the whole archive before it writes, \
             to refuse expired items"
                .to_owned(),
        );
    };
    if let Err(reason) = TtlChoice::parse(&ttl) {
        return refuse(format!("ttl: {reason}"));
    }
    if archive::table_of_key(&request.prefix).is_none() || !request.prefix.ends_with('/') {
        return refuse(format!(
            "prefix {:?} must end in / and name one table=… folder (archive/table=issues/, or a year=, month= or day= folder in it)",
            request.prefix
        ));
    }
    let partitions = request.partitions.unwrap_or(DEFAULT_PARTITIONS);
    if !(1..=MAX_PARTITIONS).contains(&partitions) {
        return refuse(format!("partitions is {partitions}: it must be 1 to {MAX_PARTITIONS}"));
    }
    let max_concurrency = request.max_concurrency.unwrap_or(reserved);
    if !(1..=reserved).contains(&max_concurrency) {
        return refuse(format!(
            "max_concurrency is {max_concurrency}: it must be 1 to the function's reserved concurrency, {reserved} \
             (RestoreConcurrency), so that no step waits throttled and the account keeps the rest"
        ));
    }
    Ok(Plan {
        run_id,
        prefix: request.prefix,
        ttl,
        if_absent: request.if_absent,
        partitions,
        max_concurrency,
        now,
    })
}

/// The lines of one partition, in stream order (object key, then line), with the repeated
/// deletions (an `eventID` already seen) and the earlier copies of each key left out: the items
/// to put, in stream order, and the counts of what was left out.
pub fn reduce(mut lines: Vec<PartLine>, key_names: &[String]) -> Result<(Vec<Item>, Counts), ArchiveError> {
    lines.sort_by(|a, b| (&a.object, a.line).cmp(&(&b.object, b.line)));
    let mut seen = HashSet::new();
    let mut counts = Counts::default();
    let mut kept: Vec<Option<Item>> = Vec::with_capacity(lines.len());
    let mut by_key: HashMap<String, usize> = HashMap::with_capacity(lines.len());
    for line in lines {
        if let Some(event) = &line.event_id
            && !seen.insert(event.clone())
        {
            counts.duplicates += 1;
            continue;
        }
        let key = key_of(&line.item, key_names).map_err(|reason| ArchiveError::Content {
            object: line.object.clone(),
            reason: format!("line {}: {reason}", line.line),
        })?;
        if let Some(earlier) = by_key.insert(key, kept.len()) {
            kept[earlier] = None;
            counts.superseded += 1;
        }
        kept.push(Some(line.item));
    }
    let items: Vec<Item> = kept.into_iter().flatten().collect();
    counts.planned = items.len();
    Ok((items, counts))
}

/// The archive-restorer function's work: its configuration and clients, built once at cold start.
#[derive(Debug)]
pub struct Job {
    dynamodb: aws_sdk_dynamodb::Client,
    s3: aws_sdk_s3::Client,
    store: Store,
    config: Config,
    /// The table's key attribute names, read once an instance (`DescribeTable`).
    key_names: tokio::sync::OnceCell<Vec<String>>,
}

impl Job {
    /// A job's steps with these clients (`dynamodb` with the SDK's retries off: every call is
    /// under the I/O policy).
    pub fn new(dynamodb: aws_sdk_dynamodb::Client, s3: aws_sdk_s3::Client, config: Config) -> Job {
        let store = Store::new(s3.clone(), config.bucket.clone(), config.prefix.clone(), "a restore job");
        Job { dynamodb, s3, store, config, key_names: tokio::sync::OnceCell::new() }
    }

    /// Runs `step`, within `deadline` (the invocation's), `now` in epoch seconds.
    pub async fn step(&self, step: Step, deadline: Instant, now: i64) -> Result<Answer, ArchiveError> {
        // Each step's future is boxed: nested in the function's, their layout would otherwise go
        // deeper than the compiler's query limit.
        match step {
            Step::Plan { run_id, request } => {
                plan(run_id, request, self.config.reserved, now).map(Answer::Plan)
            }
            Step::Split { plan, objects } => {
                Box::pin(self.split(&plan, &objects, deadline)).await.map(Answer::Split)
            }
            Step::Restore(task) => Box::pin(self.restore(task, deadline)).await.map(Answer::Restore),
            Step::Report { plan } => Box::pin(self.report(&plan, deadline)).await.map(Answer::Report),
        }
    }

    /// The table's key attribute names, read at the first step that needs them.
    async fn key_names(&self) -> Result<&[String], ArchiveError> {
        let names = self.key_names.get_or_try_init(|| key_schema(&self.dynamodb, &self.config.table)).await?;
        Ok(names)
    }

    /// Reads a batch of objects and writes each partition's lines of it. An item object S3
    /// refuses as archived (`InvalidObjectState`: it, or its metadata object, is not restored) is
    /// skipped and listed in the split's `archived_objects`. Every item object is read, whatever
    /// class it lists as: a restored object still lists as `GLACIER` or `DEEP_ARCHIVE`.
    async fn split(&self, plan: &Plan, objects: &[Listed], deadline: Instant) -> Result<Split, ArchiveError> {
        let key_names = self.key_names().await?;
        let bucket = &self.config.archive_bucket;
        let batch = batch_name(objects);
        let mut split = Split { version: FORMAT_VERSION, run_id: plan.run_id.clone(), ..Split::default() };
        let items: Vec<&Listed> = objects
            .iter()
            .filter(|o| o.key.ends_with(archive::SUFFIX) && !archive::is_meta_key(&o.key))
            .collect();
        split.skipped = objects.len() - items.len();
        let mut parts: BTreeMap<u32, Vec<PartLine>> = BTreeMap::new();
        // The futures are made before they are streamed: a stream's closure that returns them
        // would make this step's future not `Send` (a higher-ranked lifetime).
        let reads: Vec<_> = items
            .into_iter()
            .map(|listed| async move {
                (listed, object_lines(&self.s3, bucket, &listed.key, Some(deadline)).await)
            })
            .collect();
        let mut read = futures_util::stream::iter(reads).buffered(READ_AT_ONCE);
        while let Some((listed, lines)) = read.next().await {
            let key = listed.key.as_str();
            let lines = match lines {
                Ok(lines) => lines,
                Err(ArchiveError::Request(failed)) if refused_as_archived(&failed) => {
                    let archived = self.archived(listed, &failed, deadline).await?;
                    tracing::warn!(
                        run_id = plan.run_id,
                        object = key,
                        archived = archived.key,
                        storage_class = archived.storage_class,
                        kind = FailureKind::RecordPermanent.as_str(),
                        "an item object S3 reads only once restored: skipped, and listed in the report"
                    );
                    split.archived_objects.push(archived);
                    continue;
                }
                Err(error) => return Err(error),
            };
            split.objects += 1;
            for (n, (line, event_id)) in lines.into_iter().enumerate() {
                let Line::Item(item) = line else {
                    return Err(ArchiveError::Content {
                        object: format!("s3://{bucket}/{key}"),
                        reason: format!(
                            "line {} is a metadata line; item objects hold {{\"Item\":…}} lines only",
                            n + 1
                        ),
                    });
                };
                let item_key = key_of(&item, key_names).map_err(|reason| ArchiveError::Content {
                    object: format!("s3://{bucket}/{key}"),
                    reason: format!("line {}: {reason}", n + 1),
                })?;
                split.lines += 1;
                parts.entry(partition_of(&item_key, plan.partitions)).or_default().push(PartLine {
                    object: key.to_owned(),
                    line: u32::try_from(n + 1).unwrap_or(u32::MAX),
                    event_id,
                    item,
                });
            }
        }
        split.archived = split.archived_objects.len();
        let writes: Vec<_> = parts
            .into_iter()
            .map(|(partition, lines)| {
                let part = Part { version: FORMAT_VERSION, run_id: plan.run_id.clone(), partition, lines };
                let name = part_name(partition, &batch);
                async move { self.store.write(&plan.run_id, &name, &part, deadline).await }
            })
            .collect();
        let written: Vec<_> =
            futures_util::stream::iter(writes).buffer_unordered(READ_AT_ONCE).collect().await;
        written.into_iter().collect::<Result<Vec<()>, _>>()?;
        self.store.write(&plan.run_id, &format!("batches/{batch}.json"), &split, deadline).await?;
        tracing::info!(
            run_id = plan.run_id,
            batch,
            objects = split.objects,
            lines = split.lines,
            archived = split.archived,
            "batch split"
        );
        Ok(split)
    }

    /// The object S3 refused as archived (`failed`, reading `listed`'s lines: the item object
    /// or its metadata object), with its storage class: the listed one when the item object
    /// itself was refused and lists in an archived class, else as `HeadObject` answers (which
    /// reads an archived object's metadata, never its content).
    async fn archived(
        &self,
        listed: &Listed,
        failed: &RequestFailed,
        deadline: Instant,
    ) -> Result<Archived, ArchiveError> {
        let bucket = &self.config.archive_bucket;
        let key = failed.target.strip_prefix(&format!("s3://{bucket}/")).unwrap_or(&listed.key).to_owned();
        let listed_class = listed
            .storage_class
            .as_deref()
            .filter(|class| key == listed.key && ARCHIVED_CLASSES.contains(class));
        if let Some(class) = listed_class {
            return Ok(Archived { key, storage_class: class.to_owned() });
        }
        let target = format!("s3://{bucket}/{key}");
        let head = job_store::object_budget(deadline)
            .call(|| {
                let request = self.s3.head_object().bucket(bucket).key(&key);
                async move { request.send().await.map_err(|e| io_policy::classify("HeadObject", &e)) }
            })
            .await
            .map_err(|failure| RequestFailed::new("HeadObject", target, failure))?;
        // S3 names no class for S3 Standard.
        let storage_class = head.storage_class().map_or("STANDARD", StorageClass::as_str).to_owned();
        Ok(Archived { key, storage_class })
    }

    /// Goes on with `task`'s partition from its saved state, a page of puts at a time, until it
    /// is done or `deadline` draws near (at least one page an invocation), then saves the state.
    async fn restore(&self, task: PartitionTask, deadline: Instant) -> Result<PartitionTask, ArchiveError> {
        let plan = &task.plan;
        let name = partition_name(task.partition);
        let mut state = match self.store.read::<PartitionState>(&plan.run_id, &name, deadline).await? {
            Some(state)
                if READS.contains(&state.version)
                    && (&state.run_id, state.partition) == (&plan.run_id, task.partition) =>
            {
                PartitionState { version: FORMAT_VERSION, ..state }
            }
            Some(state) => {
                return Err(ArchiveError::Content {
                    object: self.store.url(&plan.run_id, &name),
                    reason: format!(
                        "holds partition {} of run {} (version {}), not partition {} of run {}",
                        state.partition, state.run_id, state.version, task.partition, plan.run_id
                    ),
                });
            }
            None => PartitionState {
                version: FORMAT_VERSION,
                run_id: plan.run_id.clone(),
                partition: task.partition,
                next: 0,
                done: false,
                counts: Counts::default(),
            },
        };
        if state.done {
            return Ok(PartitionTask { done: true, ..task });
        }
        let key_names = self.key_names().await?;
        let (mut items, counts) =
            reduce(self.partition_lines(plan, task.partition, deadline).await?, key_names)?;
        let choice =
            TtlChoice::parse(&plan.ttl).map_err(|reason| ArchiveError::Refused(format!("ttl: {reason}")))?;
        let attribute = &self.config.ttl_attribute;
        state.counts.planned = counts.planned;
        state.counts.superseded = counts.superseded;
        state.counts.duplicates = counts.duplicates;
        state.counts.expired = items.iter().filter(|i| ttl::expired(i, attribute, plan.now)).count();

        let stop = deadline.checked_sub(STOP_BEFORE_DEADLINE).unwrap_or(deadline);
        // The puts end in time for the state's write, which has its own bound after them.
        let budget = Policy::default()
            .within(job_store::work_until(deadline).saturating_duration_since(Instant::now()));
        let writer = Writer::new(self.dynamodb.clone());
        let pacer = Pacer::new(self.config.write_units);
        let table = self.config.table.as_str();
        let object = format!("partition {} of restore {}", task.partition, plan.run_id);
        let mut rest = items.split_off(state.next.min(items.len()));
        while !rest.is_empty() {
            let after = rest.split_off(PAGE_ITEMS.min(rest.len()));
            let mut page = std::mem::replace(&mut rest, after);
            let changed: Vec<bool> =
                page.iter_mut().map(|item| ttl::apply(item, attribute, choice, plan.now)).collect();
            pacer.spend(page.iter().map(write_units).sum()).await;
            let count = page.len();
            let write_failed = |(failed, failure)| ArchiveError::Write {
                object: object.clone(),
                failed,
                count,
                table: table.to_owned(),
                failure,
            };
            let found = if plan.if_absent {
                put_absent(&self.dynamodb, table, &key_names[0], page, &budget).await.map_err(write_failed)?
            } else {
                put_all(&writer, table, page, &budget)
                    .await
                    .map(|()| vec![false; count])
                    .map_err(write_failed)?
            };
            let existing = found.iter().filter(|f| **f).count();
            // Only the items put had their TTL changed: those found existing were left as they were.
            state.counts.ttl_changed += changed.iter().zip(&found).filter(|(c, f)| **c && !**f).count();
            state.next += count;
            state.counts.items += count - existing;
            state.counts.existing += existing;
            if Instant::now() >= stop {
                break;
            }
        }
        state.done = rest.is_empty();
        self.store.write(&plan.run_id, &name, &state, deadline).await?;
        tracing::info!(
            run_id = plan.run_id,
            partition = task.partition,
            done = state.done,
            put = state.next,
            of = state.counts.planned,
            "partition progress"
        );
        Ok(PartitionTask { done: state.done, ..task })
    }

    /// Every line a split wrote for `partition`.
    async fn partition_lines(
        &self,
        plan: &Plan,
        partition: u32,
        deadline: Instant,
    ) -> Result<Vec<PartLine>, ArchiveError> {
        let names = self.store.list(&plan.run_id, &format!("parts/{partition:04}/"), deadline).await?;
        let reads: Vec<_> = names
            .into_iter()
            .map(|name| async move {
                let part = self.store.read::<Part>(&plan.run_id, &name, deadline).await?;
                part.ok_or_else(|| ArchiveError::Content {
                    object: self.store.url(&plan.run_id, &name),
                    reason: "listed but gone".to_owned(),
                })
            })
            .collect();
        let mut parts = futures_util::stream::iter(reads).buffered(READ_AT_ONCE);
        let mut lines = Vec::new();
        while let Some(part) = parts.next().await {
            lines.extend(part?.lines);
        }
        Ok(lines)
    }

    /// Sums the splits and the partitions into `report.json`, with every object a split skipped
    /// as archived: the answer lists the first [`ANSWERED_ARCHIVED`] of them.
    async fn report(&self, plan: &Plan, deadline: Instant) -> Result<Report, ArchiveError> {
        let mut report = Report {
            version: FORMAT_VERSION,
            run_id: plan.run_id.clone(),
            table: self.config.table.clone(),
            archive: format!("s3://{}/{}", self.config.archive_bucket, plan.prefix),
            objects: 0,
            lines: 0,
            archived: 0,
            archived_objects: Vec::new(),
            counts: Counts::default(),
        };
        let reads: Vec<_> = self
            .store
            .list(&plan.run_id, "batches/", deadline)
            .await?
            .into_iter()
            .map(|name| async move { self.store.read::<Split>(&plan.run_id, &name, deadline).await })
            .collect();
        let mut splits = futures_util::stream::iter(reads).buffered(READ_AT_ONCE);
        while let Some(split) = splits.next().await {
            if let Some(split) = split? {
                report.objects += split.objects;
                report.lines += split.lines;
                report.archived_objects.extend(split.archived_objects);
            }
        }
        report.archived_objects.sort();
        report.archived = report.archived_objects.len();
        for partition in 0..plan.partitions {
            let name = partition_name(partition);
            match self.store.read::<PartitionState>(&plan.run_id, &name, deadline).await? {
                Some(state) if state.done => report.counts.add(&state.counts),
                _ => {
                    return Err(ArchiveError::Content {
                        object: self.store.url(&plan.run_id, &name),
                        reason:
                            "not a finished partition: every partition must be restored before the report"
                                .to_owned(),
                    });
                }
            }
        }
        self.store.write(&plan.run_id, "report.json", &report, deadline).await?;
        report.archived_objects.truncate(ANSWERED_ARCHIVED);
        tracing::info!(report = %serde_json::to_string(&report).unwrap_or_default(), "restore done");
        Ok(report)
    }
}

/// Whether `failed` is S3 refusing to read an object until it is restored: a `GetObject`
/// answered `InvalidObjectState`, which `io_policy` words `InvalidObjectState: <message>` (or
/// `InvalidObjectState (HTTP 403)`). It classes the answer systemic, as it does any unknown client
/// error; for the job it is record-permanent: that object alone, until it is restored.
fn refused_as_archived(failed: &RequestFailed) -> bool {
    failed.operation == "GetObject"
        && failed
            .message
            .strip_prefix(INVALID_OBJECT_STATE)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':') || rest.starts_with(" ("))
}

/// The write units a put of `item` spends: one per KB, at least one (its DynamoDB JSON's size,
/// near enough to DynamoDB's own count for pacing).
fn write_units(item: &Item) -> f64 {
    let bytes = serde_json::to_vec(&DynamoJson(item)).map_or(1024, |b| b.len());
    f64::from(u32::try_from(bytes.div_ceil(1024).max(1)).unwrap_or(u32::MAX))
}

/// The archive-restorer Lambda: configured once at cold start (the DynamoDB client under the I/O
/// policy, the SDK's retries off), then a step per invocation.
impl stream_runtime::task::Task for Job {
    const NAME: &'static str = "archive-restorer";
    const ERROR_TYPE: &'static str = "RestoreError";
    type Input = Step;
    type Output = Answer;
    type Error = ArchiveError;

    async fn init(
        vars: &Vars<'_>,
        sdk: &aws_types::SdkConfig,
    ) -> Result<Job, stream_runtime::task::InitError> {
        let (config, aws) = (Config::from_vars(vars)?, stream_runtime::Aws::from_vars(sdk, vars)?);
        Ok(Job::new(aws.dynamodb(), aws.s3(), config))
    }

    async fn handle(&self, step: Step, deadline: Instant) -> Result<Answer, ArchiveError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.step(step, deadline, now).await
    }
}

#[cfg(test)]
mod tests;
