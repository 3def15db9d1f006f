//! The restore job (`RestoreStateMachine`) end to end on the local stack: the template's state
//! machine, its `ItemReader` listing the emulator's archive bucket, the archive-restorer's steps.
//! An archive whose objects overlap (a redelivery) and whose keys were deleted again a day later
//! is restored exactly once per deletion, each key as last deleted, partition by partition, a
//! page an invocation. Objects in Glacier are skipped and reported, and read once restored.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_dynamodb::types::ScalarAttributeType;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ObjectStorageClass, RestoreRequest, StorageClass};
use io_policy::Deadline;
use serde_json::{Value, json};
use stream_runtime::Event;

use crate::support::moto::{create_table, runtime, sdk, unique};
use crate::support::pipeline::{Local, local, stack};

/// When the first deletions happened; the second day's are a day later.
const DAY1: i64 = 1_795_168_800;

/// A bound on one of the test's own S3 reads (the emulator answers them at once).
fn read_budget() -> io_policy::Budget {
    io_policy::Policy::default().within(Duration::from_secs(60))
}

/// The items a scan of `table` finds, sorted.
async fn scan(client: &aws_sdk_dynamodb::Client, table: &str) -> Vec<serde_dynamo::Item> {
    let mut items: Vec<serde_dynamo::Item> = client
        .scan()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .items()
        .iter()
        .map(|i| serde_dynamo::Item::from(i.clone()))
        .collect();
    items.sort_by_key(|i| format!("{:?}{:?}", i.get("pk"), i.get("sk")));
    items
}

/// `batch`'s first `n` records deleted again a day later: new `eventID`s and sequence numbers,
/// another page in their images.
fn deleted_again(batch: &Event, n: usize) -> Event {
    let mut again = serde_json::to_value(batch).unwrap();
    let records = again["Records"].as_array_mut().unwrap();
    records.truncate(n);
    for (i, record) in records.iter_mut().enumerate() {
        record["eventID"] = json!(format!("again-{i}"));
        let sequence: u128 = record["dynamodb"]["SequenceNumber"].as_str().unwrap().parse().unwrap();
        record["dynamodb"]["SequenceNumber"] = json!((sequence + 1_000_000).to_string());
        let at = record["dynamodb"]["ApproximateCreationDateTime"].as_f64().unwrap();
        record["dynamodb"]["ApproximateCreationDateTime"] = json!(at + 86_400.0);
        record["dynamodb"]["OldImage"]["page"] = json!({"S": "deleted again"});
    }
    serde_json::from_value(again).unwrap()
}

/// What a restore test starts from: a new table to restore into, a stack with the restore job
/// whose issues table it is (`IssuesTableStreamArn`: the restore role may write items there and
/// nowhere else, as deployed), its archive bucket, and the archiver writing into it.
struct Restoring {
    dynamodb: aws_sdk_dynamodb::Client,
    table: String,
    stack: local_stack::Stack,
    archive: String,
    archiver: stream_runtime::Runtime<ttl_archiver::Archiver>,
}

async fn restoring() -> Result<Restoring> {
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk());
    let table = unique("restored-sessions");
    create_table(&dynamodb, &table, "pk", Some(("sk", ScalarAttributeType::S)), false).await;
    let stream =
        format!("arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/2026-01-01T00:00:00.000");
    let stack =
        stack(&sdk(), &[("EnableArchiveRestore", "true"), ("IssuesTableStreamArn", stream.as_str())]).await?;
    let archive = stack.bucket("ArchiveBucket")?.name.clone();
    let archiver =
        runtime::<ttl_archiver::Archiver>(&[("ARCHIVE_BUCKET", &archive), ("ARCHIVE_PREFIX", "archive/")])
            .await;
    Ok(Restoring { dynamodb, table, stack, archive, archiver })
}

#[tokio::test]
async fn the_restore_job_puts_each_deletion_once_and_each_key_as_last_deleted() -> Result<()> {
    let sdk = sdk();
    let Restoring { dynamodb, table, stack, archiver, .. } = restoring().await?;
    let deadline = || Deadline::after(Duration::from_secs(60));

    // Day 1: 60 deletions, then Lambda's redelivery from the 41st: an overlapping object.
    let first = ttl_archiver::synthetic::ttl_batch(60, 5, DAY1, 1.0);
    let mut redelivered = Event::default();
    redelivered.records = first.records[40..].to_vec();
    // Day 2: the first 10 keys deleted again, with other content.
    let second = deleted_again(&first, 10);
    for batch in [first.clone(), redelivered, second.clone()] {
        let response = archiver.handle(batch, deadline()).await?;
        ensure!(response.batch_item_failures.is_empty(), "{response:?}");
    }

    // One key was recreated since: with if_absent it is left as it is.
    let mut recreated = first.records[30].change.old_image.clone();
    recreated.insert("page".to_owned(), serde_dynamo::AttributeValue::S("recreated".into()));
    dynamodb.put_item().table_name(&table).set_item(Some(recreated.clone().into())).send().await?;

    let invocations = Arc::new(AtomicU64::new(0));
    // 75 s before its deadline, a partition stops after its first page of 25 puts.
    let report = restore_sessions(&sdk, &stack, 2, Duration::from_secs(75), &invocations).await?;

    let counts = &report["counts"];
    ensure!(report["objects"] == 3 && report["lines"] == 90, "{report}");
    ensure!(counts["duplicates"] == 20 && counts["superseded"] == 10, "{report}");
    ensure!(counts["planned"] == 60 && counts["items"] == 59 && counts["existing"] == 1, "{report}");
    ensure!(counts["expired"] == 60 && counts["ttl_changed"] == 0, "{report}");

    let mut expected: Vec<serde_dynamo::Item> =
        first.records.iter().map(|r| r.change.old_image.clone()).collect();
    for (n, record) in second.records.iter().enumerate() {
        expected[n] = record.change.old_image.clone();
    }
    expected[30] = recreated;
    expected.sort_by_key(|i| format!("{:?}{:?}", i.get("pk"), i.get("sk")));
    ensure!(scan(&dynamodb, &table).await == expected, "the table holds each key as last deleted");

    // The plan, one split (three objects, in one batch of 16), each partition a page of 25 puts
    // an invocation (one at least), and the report: counted from the partitions' own states.
    let report_object = restore_object(&sdk, &stack, &report, "report.json").await?;
    ensure!(report_object == report, "report.json is what the report step answered");
    let mut pages = 0;
    for partition in 0..2 {
        let state = restore_object(&sdk, &stack, &report, &format!("partition-{partition:04}.json")).await?;
        let planned = state["counts"]["planned"].as_u64().unwrap();
        pages += planned.div_ceil(25).max(1);
    }
    ensure!(pages >= 3, "60 items in two partitions: one partition at least takes two invocations");
    let done = invocations.load(Ordering::Relaxed);
    ensure!(done == 1 + 1 + pages + 1, "{done} invocations, not {}", 3 + pages);

    // Again: every item is there now, and nothing is overwritten.
    let report = restore_sessions(&sdk, &stack, 3, Duration::from_secs(900), &invocations).await?;
    ensure!(report["counts"]["items"] == 0 && report["counts"]["existing"] == 60, "{report}");
    ensure!(scan(&dynamodb, &table).await == expected);
    Ok(())
}

/// The object `name` of the report's run in the stack's restore bucket.
async fn restore_object(
    sdk: &aws_config::SdkConfig,
    stack: &local_stack::Stack,
    report: &Value,
    name: &str,
) -> Result<Value> {
    let bucket = stack.buckets.iter().find(|b| b.logical_id == "RestoreBucket").unwrap().name.clone();
    let key = format!("restore/{}/{name}", report["run_id"].as_str().unwrap());
    let bytes = stream_runtime::aws::get_object(&local_stack::s3_client(sdk), &bucket, &key, &read_budget())
        .await?
        .unwrap();
    Ok(serde_json::from_slice(&bytes)?)
}

/// An input the job refuses fails the execution at its first step, naming the field, and
/// writes nothing.
#[tokio::test]
async fn the_restore_job_refuses_an_input_without_a_ttl_choice_or_beyond_its_concurrency() -> Result<()> {
    let Local { sdk, stack, .. } =
        local(&[("EnableArchiveRestore", "true"), ("RestoreConcurrency", "2")]).await?;
    let invocations = Arc::new(AtomicU64::new(0));
    for (input, expected) in [
        (json!({"prefix": "archive/table=sessions/"}), "ttl is required"),
        (
            json!({"prefix": "archive/table=sessions/", "ttl": "keep", "max_concurrency": 3}),
            "max_concurrency is 3",
        ),
        (
            json!({"prefix": "archive/table=sessions/", "ttl": "keep", "max_concurrency": 0}),
            "max_concurrency is 0",
        ),
    ] {
        let error =
            local_stack::restore_job(&sdk, &stack, input, &[], Duration::from_secs(900), &invocations)
                .await
                .unwrap_err()
                .to_string();
        ensure!(error.contains("state Plan") && error.contains(expected), "{error}");
    }
    ensure!(invocations.load(Ordering::Relaxed) == 3, "one invocation each: a refusal is not retried");
    Ok(())
}

/// `batch` as its own deletions on day `day`: `eventID`s and sequence numbers of its own (a
/// synthetic batch's are the same whatever its seed).
fn on_day(batch: &Event, day: u32) -> Event {
    let mut renumbered = serde_json::to_value(batch).unwrap();
    for (i, record) in renumbered["Records"].as_array_mut().unwrap().iter_mut().enumerate() {
        record["eventID"] = json!(format!("day{day}-{i}"));
        let sequence: u128 = record["dynamodb"]["SequenceNumber"].as_str().unwrap().parse().unwrap();
        record["dynamodb"]["SequenceNumber"] = json!((sequence + 1_000_000 * u128::from(day)).to_string());
    }
    serde_json::from_value(renumbered).unwrap()
}

/// The items `batches` deleted, sorted as [`scan`] sorts them.
fn deleted(batches: &[Event]) -> Vec<serde_dynamo::Item> {
    let mut items: Vec<serde_dynamo::Item> =
        batches.iter().flat_map(|b| b.records.iter().map(|r| r.change.old_image.clone())).collect();
    items.sort_by_key(|i| format!("{:?}{:?}", i.get("pk"), i.get("sk")));
    items
}

/// `key` of `bucket` written again in `class`, as the archive bucket's lifecycle moves an object
/// over 128 KB to Glacier.
async fn recreate_in(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, class: StorageClass) -> Result<()> {
    let bytes = stream_runtime::aws::get_object(s3, bucket, key, &read_budget())
        .await?
        .context("the object is there")?;
    s3.put_object().bucket(bucket).key(key).storage_class(class).body(ByteStream::from(bytes)).send().await?;
    Ok(())
}

/// Archive objects in Glacier do not fail the job: each item object S3 will not read until it is
/// restored is skipped and reported with its storage class: one in Glacier (as the `ItemReader`
/// lists it), and one whose metadata object is in Deep Archive (as S3 refuses it,
/// `InvalidObjectState`). The other object's items are restored exactly. Once both are restored
/// (`RestoreObject`, the object still listed as `GLACIER`), a second run reads them.
#[tokio::test]
async fn the_restore_job_skips_and_reports_objects_in_glacier_and_reads_them_once_restored() -> Result<()> {
    let sdk = sdk();
    let Restoring { dynamodb, table, stack, archive: bucket, archiver } = restoring().await?;
    // Three days of other keys' deletions: an item object a day, and its metadata object.
    let days: Vec<Event> = [(0_u32, 21_u64), (1, 22), (2, 23)]
        .into_iter()
        .map(|(day, seed)| {
            on_day(&ttl_archiver::synthetic::ttl_batch(20, seed, DAY1 + 86_400 * i64::from(day), 1.0), day)
        })
        .collect();
    for batch in &days {
        let response = archiver.handle(batch.clone(), Deadline::after(Duration::from_secs(60))).await?;
        ensure!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    let s3 = local_stack::s3_client(&sdk);
    let objects =
        stream_runtime::aws::list_keys(&s3, &bucket, "archive/table=sessions/", |_| true, &read_budget())
            .await?;
    ensure!(objects.len() == 3, "an item object a day: {objects:?}");
    // The second day's item object in Glacier; the third day's metadata object in Deep Archive.
    let glacier = objects[1].clone();
    let deep_archive = formats::archive::meta_key_of(&objects[2]).context("a metadata object")?;
    recreate_in(&s3, &bucket, &glacier, StorageClass::Glacier).await?;
    recreate_in(&s3, &bucket, &deep_archive, StorageClass::DeepArchive).await?;

    let invocations = Arc::new(AtomicU64::new(0));
    let timeout = Duration::from_secs(900);
    let report = restore_sessions(&sdk, &stack, 2, timeout, &invocations).await?;

    // In key order: `archive/_meta/…` before `archive/table=…`.
    let in_glacier = json!([
        {"key": deep_archive, "storage_class": "DEEP_ARCHIVE"},
        {"key": glacier, "storage_class": "GLACIER"},
    ]);
    ensure!(report["archived"] == 2 && report["archived_objects"] == in_glacier, "{report}");
    ensure!(report["objects"] == 1 && report["lines"] == 20, "only the first day's object is read: {report}");
    let counts = &report["counts"];
    ensure!(counts["planned"] == 20 && counts["items"] == 20 && counts["existing"] == 0, "{report}");
    ensure!(scan(&dynamodb, &table).await == deleted(&days[..1]), "exactly the readable object's items");
    let report_object = restore_object(&sdk, &stack, &report, "report.json").await?;
    ensure!(report_object == report, "report.json is what the report step answered");

    // Restored, as docs/operations.md says: the object still lists as GLACIER, and is read.
    for key in [&glacier, &deep_archive] {
        let request = RestoreRequest::builder().days(1).build();
        s3.restore_object().bucket(&bucket).key(key).restore_request(request).send().await?;
    }
    let listed = s3.list_objects_v2().bucket(&bucket).prefix(&glacier).send().await?;
    let class = listed.contents().first().and_then(|o| o.storage_class());
    ensure!(class == Some(&ObjectStorageClass::Glacier), "a restored object lists as {class:?}");
    let report = restore_sessions(&sdk, &stack, 2, timeout, &invocations).await?;
    ensure!(report["archived"] == 0 && report["archived_objects"] == json!([]), "{report}");
    ensure!(report["objects"] == 3 && report["lines"] == 60, "{report}");
    let counts = &report["counts"];
    ensure!(counts["planned"] == 60 && counts["items"] == 40 && counts["existing"] == 20, "{report}");
    ensure!(scan(&dynamodb, &table).await == deleted(&days), "every object's items, once restored");
    Ok(())
}

/// The Split map's `ResultWriter`, as Step Functions writes it: its children's results are in the
/// restore bucket under `map-runs/<map run id>/` (each child's record, its input and output as
/// JSON text, in `SUCCEEDED_0.json`; `manifest.json` listing it), put under the state machine's
/// role, and none of them in the execution's state.
#[tokio::test]
async fn the_restore_jobs_split_writes_its_childrens_results_to_the_restore_bucket() -> Result<()> {
    let sdk = sdk();
    let Restoring { stack, archiver, .. } = restoring().await?;
    // One day's 20 deletions: one item object, so one batch, one child.
    let batch = ttl_archiver::synthetic::ttl_batch(20, 21, DAY1, 1.0);
    let response = archiver.handle(batch, Deadline::after(Duration::from_secs(60))).await?;
    ensure!(response.batch_item_failures.is_empty(), "{response:?}");

    let invocations = Arc::new(AtomicU64::new(0));
    let report = restore_sessions(&sdk, &stack, 2, Duration::from_secs(900), &invocations).await?;
    ensure!(report["objects"] == 1 && report["counts"]["items"] == 20, "{report}");

    // One Map Run whose one child succeeded: its results, then its manifest; no FAILED or PENDING file.
    let bucket = stack.bucket("RestoreBucket")?.name.clone();
    let s3 = local_stack::s3_client(&sdk);
    let keys = stream_runtime::aws::list_keys(&s3, &bucket, "map-runs/", |_| true, &read_budget()).await?;
    let run = keys
        .iter()
        .find_map(|k| k.strip_prefix("map-runs/")?.strip_suffix("/manifest.json"))
        .context("map-runs/<map run id>/manifest.json")?;
    let (succeeded_key, manifest_key) =
        (format!("map-runs/{run}/SUCCEEDED_0.json"), format!("map-runs/{run}/manifest.json"));
    ensure!(keys == [succeeded_key.clone(), manifest_key.clone()], "{keys:?}");

    let (manifest, _) = json_object(&s3, &bucket, &manifest_key).await?;
    let (children, size) = json_object(&s3, &bucket, &succeeded_key).await?;
    let arn = manifest["MapRunArn"].as_str().unwrap_or_default();
    ensure!(
        manifest["DestinationBucket"] == bucket
            && arn.starts_with("arn:aws:states:")
            && arn.contains(":mapRun:")
            && arn.ends_with(&format!(":{run}")),
        "{manifest}"
    );
    let listed = json!([{"Key": succeeded_key, "Size": size}]);
    ensure!(
        manifest["ResultFiles"] == json!({"FAILED": [], "PENDING": [], "SUCCEEDED": listed}),
        "{manifest}"
    );

    let children = children.as_array().context("SUCCEEDED_0.json holds an array")?;
    ensure!(children.len() == 1, "one batch, one child: {children:?}");
    let child = &children[0];
    ensure!(child["Status"] == "SUCCEEDED" && child["RedriveStatus"] == "NOT_REDRIVABLE", "{child}");
    let text = |field: &str| -> Result<Value> {
        Ok(serde_json::from_str(child[field].as_str().context("a field of JSON text")?)?)
    };
    let (batch, answer) = (text("Input")?, text("Output")?);
    ensure!(
        batch["BatchInput"]["plan"]["run_id"] == report["run_id"]
            && batch["Items"].as_array().map(Vec::len) == Some(1),
        "the batch of this run's one object: {batch}"
    );
    ensure!(answer == json!({"objects": 1}), "the split's answer, as its ResultSelector left it: {answer}");

    // Both objects were put under the state machine's role, which allows them (WriteMapResults).
    let permitted = stack.ensure_permitted(&sdk).await?;
    let puts = permitted.calls.get("RestoreStateMachineRole").and_then(|a| a.get("s3:PutObject")).copied();
    ensure!(puts == Some(2), "{:?}", permitted.calls);
    Ok(())
}

/// The JSON object `key` of `bucket`, and its size in bytes.
async fn json_object(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(Value, usize)> {
    let bytes = stream_runtime::aws::get_object(s3, bucket, key, &read_budget())
        .await?
        .with_context(|| format!("{key} is there"))?;
    Ok((serde_json::from_slice(&bytes)?, bytes.len()))
}

/// The restore job on the sessions archive as these tests run it: the TTL kept, an existing item
/// left as it is (`if_absent`), in `partitions` partitions two at a time (`RESTORE_CONCURRENCY=2`),
/// each invocation `timeout` long. The job's report.
async fn restore_sessions(
    sdk: &aws_config::SdkConfig,
    stack: &local_stack::Stack,
    partitions: u32,
    timeout: Duration,
    invocations: &Arc<AtomicU64>,
) -> Result<Value> {
    let input = json!({
        "prefix": "archive/table=sessions/", "ttl": "keep", "if_absent": true,
        "partitions": partitions, "max_concurrency": 2,
    });
    let overrides = [("RESTORE_CONCURRENCY", "2")];
    Ok(local_stack::restore_job(sdk, stack, input, &overrides, timeout, invocations).await?)
}
