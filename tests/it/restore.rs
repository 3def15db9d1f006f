//! The restore job (`RestoreStateMachine`) end to end on the local stack: the template's state
//! machine, its `ItemReader` listing the emulator's archive bucket, the archive-restorer's steps.
//! An archive whose objects overlap (a redelivery) and whose keys were deleted again a day later
//! is restored exactly once per deletion, each key as last deleted, partition by partition, a
//! page an invocation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Result, ensure};
use aws_sdk_dynamodb::types::ScalarAttributeType;
use io_policy::Deadline;
use serde_json::{Value, json};
use stream_runtime::Event;

use crate::support::moto::{create_table, runtime, sdk, unique};
use crate::support::pipeline::stack;

/// When the first deletions happened; the second day's are a day later.
const DAY1: i64 = 1_795_168_800;

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

#[tokio::test]
async fn the_restore_job_puts_each_deletion_once_and_each_key_as_last_deleted() -> Result<()> {
    let sdk = sdk();
    let stack = stack(&sdk, &[("EnableArchiveRestore", "true")]).await?;
    let bucket = stack.buckets.iter().find(|b| b.logical_id == "ArchiveBucket").unwrap().name.clone();
    let archiver =
        runtime::<ttl_archiver::Archiver>(&[("ARCHIVE_BUCKET", &bucket), ("ARCHIVE_PREFIX", "archive/")])
            .await;
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

    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    let table = unique("restored-sessions");
    create_table(&dynamodb, &table, "pk", Some(("sk", ScalarAttributeType::S)), false).await;
    // One key was recreated since: with if_absent it is left as it is.
    let mut recreated = first.records[30].change.old_image.clone();
    recreated.insert("page".to_owned(), serde_dynamo::AttributeValue::S("recreated".into()));
    dynamodb.put_item().table_name(&table).set_item(Some(recreated.clone().into())).send().await?;

    let invocations = Arc::new(AtomicU64::new(0));
    let input = json!({"prefix": "archive/table=sessions/", "ttl": "keep", "if_absent": true, "partitions": 2, "max_concurrency": 2});
    // 75 s before its deadline, a partition stops after its first page of 25 puts.
    let overrides = [("RESTORE_TABLE", table.as_str()), ("RESTORE_CONCURRENCY", "2")];
    let report =
        local_stack::restore_job(&sdk, &stack, input, &overrides, Duration::from_secs(75), &invocations)
            .await?;

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
    let again = json!({"prefix": "archive/table=sessions/", "ttl": "keep", "if_absent": true, "partitions": 3, "max_concurrency": 2});
    let report =
        local_stack::restore_job(&sdk, &stack, again, &overrides, Duration::from_secs(900), &invocations)
            .await?;
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
    let bytes = stream_runtime::aws::get_object(&local_stack::s3_client(sdk), &bucket, &key).await?.unwrap();
    Ok(serde_json::from_slice(&bytes)?)
}

/// An input the job refuses fails the execution at its first step, naming the field, and
/// writes nothing.
#[tokio::test]
async fn the_restore_job_refuses_an_input_without_a_ttl_choice_or_beyond_its_concurrency() -> Result<()> {
    let sdk = sdk();
    let stack = stack(&sdk, &[("EnableArchiveRestore", "true"), ("RestoreConcurrency", "2")]).await?;
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
