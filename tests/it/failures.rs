//! What the functions gave up on, replayed (`failure_replay`): a range the replayer gave up on
//! after `MaximumRetryAttempts` (read from the on-failure queue, as Lambda would send it, and
//! from the failure log alike, with the function named as CloudFormation names it), read again
//! from the stream, and a parked record, taken as stored, both replayed through the stream
//! (`operations::verify::Mender::records`); the index is then exact, and the queue's message is
//! deleted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use local_stack::replayer::{Invocation, Invoker};
use serde_json::json;
use stream_runtime::delivery::in_process;

use local_stack::put_json as put;
use operations::failures::{FunctionMatch, Read, Records, Replayed, Replayer};

use crate::support::moto::{PARKING_BUCKET, parking_bucket, s3, sdk, unique};
use crate::support::pipeline::{
    Local, assert_index_exact, failure_log, issue, local, pipeline, pipeline_to, put_issues, stack,
};

fn id_of(record: &stream_runtime::EventRecord) -> String {
    serde_json::to_value(&record.change.keys)
        .ok()
        .and_then(|k| k["id"]["S"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The indexer as it was when things failed, until `fixed`: it crashes on the issue "poison"
/// (its range is given up), and parks the issue "odd" (as the runtime parks a record-permanent
/// failure: the whole record in S3, under `prefix`) and goes on. Counts (parked, crashes).
fn as_it_was(
    inner: Invoker,
    prefix: String,
    counts: (Arc<AtomicU32>, Arc<AtomicU32>),
    fixed: Arc<AtomicBool>,
) -> Invoker {
    in_process(move |mut event, deadline| {
        let (inner, prefix, (parked, crashes)) = (Arc::clone(&inner), prefix.clone(), counts.clone());
        let fixed = fixed.load(Ordering::SeqCst);
        async move {
            if fixed {
                return inner(event, deadline).await;
            }
            if event.records.iter().any(|r| id_of(r) == "poison") {
                crashes.fetch_add(1, Ordering::SeqCst);
                return Invocation::Failed { error_type: "Poison".into(), message: "cannot index".into() };
            }
            for record in event.records.iter().filter(|r| id_of(r) == "odd") {
                let failure = io_policy::Failure::record_permanent("an index limit, since raised");
                let wire = stream_runtime::WireRecord::from_event_record(record);
                let key = stream_runtime::parked::key(&prefix, "multikey-indexer", &wire);
                let whole = serde_json::to_value(record).ok();
                let body = stream_runtime::parked::body(
                    "multikey-indexer",
                    &wire,
                    whole,
                    &failure,
                    chrono::Utc::now(),
                );
                let put = s3().put_object().bucket(PARKING_BUCKET).key(key).body(body.into()).send();
                if put.await.is_ok() {
                    parked.fetch_add(1, Ordering::SeqCst);
                }
            }
            event.records.retain(|r| id_of(r) != "odd");
            inner(event, deadline).await
        }
    })
}

#[tokio::test]
async fn a_given_up_range_and_a_parked_record_are_replayed_and_the_index_is_exact() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[("BatchSize", "4"), ("MaximumRetryAttempts", "2")]).await?;
    parking_bucket().await;
    let prefix = format!("{}/", unique("parked"));
    let prefix_for_parking = prefix.clone();
    let log = failure_log();
    let (parked, crashes) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let seen = (Arc::clone(&parked), Arc::clone(&crashes));
    let fixed = Arc::new(AtomicBool::new(false));
    let fix = Arc::clone(&fixed);
    let mut pipeline = pipeline(&sdk, &stack, &log, move |function, inner| {
        if function != "multikey-indexer" {
            return inner;
        }
        as_it_was(inner, prefix_for_parking.clone(), seen.clone(), Arc::clone(&fix))
    })?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let issues = crate::support::pipeline::issues_table(&stack)?;
    for id in 0..6 {
        put(&client, &issues, &issue(id, &json!({"f": id}))).await?;
    }
    // Each in a batch of its own (BatchSize 4): poison alone is given up, after bisection.
    let special = |id: &str, num: u32| json!({"id": id, "project": "p0", "num": num, "custom_fields": {"f": num, "g": "x"}});
    put(&client, &issues, &special("poison", 99)).await?;
    for id in 6..12 {
        put(&client, &issues, &issue(id, &json!({"f": id}))).await?;
    }
    put(&client, &issues, &special("odd", 98)).await?;
    pipeline.settle().await?;
    ensure!(
        pipeline.empty_pages() > 0,
        "the emulator answered empty pages, and the replayer read through them"
    );
    let (crash_count, was_parked) = (crashes.load(Ordering::SeqCst), parked.load(Ordering::SeqCst));
    ensure!(
        crash_count >= 3 && was_parked == 1,
        "the poison record crashed its batches until given up ({crash_count} crashes), and odd was parked ({was_parked})"
    );
    ensure!(
        assert_index_exact(&sdk, &stack).await.is_err(),
        "before the replay, the index lacks poison's and odd's entries"
    );

    // Lambda sends the given-up range to the on-failure queue: the same record as the log's line.
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let queue = on_failure_queue(&sqs, &log).await?;
    let from_log = operations::failures::read_log(&log)?;
    let mut failures = operations::failures::read_queue(&sqs, &queue).await?;
    ensure!(
        failures.len() == 1
            && from_log.len() == 1
            && serde_json::to_value(&failures[0].records)? == serde_json::to_value(&from_log[0].records)?
            && failures[0].message.is_some(),
        "the queue's message is the log's range: {failures:?} {from_log:?}"
    );
    failures.extend(operations::failures::read_parked(&s3(), PARKING_BUCKET, &prefix).await?);
    ensure!(failures.len() == 2, "one range and one parked record: {failures:?}");
    ensure!(matches!(failures[0].records, Records::Range { batch_size: 1, .. }));
    ensure!(matches!(failures[1].records, Records::Parked { .. }));
    all_the_indexers(&failures, &stack.name)?;

    // The indexer as it is now, replayed through the stream as `failures replay` does.
    fixed.store(true, Ordering::SeqCst);
    let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
    let replayer = replayer(&stack, "multikey-indexer")?;
    let acknowledged = replay(&failures, &streams, &replayer, &sqs).await?;
    pipeline.settle().await?;
    assert_index_exact(&sdk, &stack).await?;
    // The applied range's message is deleted, visible or not, and so is the parked record: the
    // parking bucket holds what is still to replay.
    let left = messages_left(&sqs, &queue).await?;
    let parked_left = operations::failures::read_parked(&s3(), PARKING_BUCKET, &prefix).await?;
    ensure!(
        acknowledged == 2 && left == 0 && parked_left.is_empty(),
        "{acknowledged} acknowledged, {left} left, {} parked left",
        parked_left.len()
    );
    // Replayed again, as any retried replay: still exact.
    for failed in &failures {
        if let Read::Records(records) = operations::failures::read(failed, &streams).await? {
            let again = replayer.replay(records, Duration::from_secs(60)).await?;
            ensure!(again.is_done(), "{again:?}");
        }
    }
    pipeline.settle().await?;
    assert_index_exact(&sdk, &stack).await?;
    Ok(())
}

/// The replayer `failures replay --function BINARY` builds, configured from the function's
/// template environment (for a combined function's member, the combined function's).
fn replayer(stack: &local_stack::Stack, binary: &str) -> Result<Replayer> {
    let env = local_stack::environment(stack.function(binary)?);
    let lookup = |name: &str| env.get(name).cloned();
    Ok(Replayer::for_function(
        binary,
        &stream_runtime::Vars::new(&lookup),
        &io_policy::without_sdk_retries(&sdk()),
    )?)
}

/// The range names the function as deployed by CloudFormation (`<stack>-IndexerFunction-…`);
/// the parked record by its runtime name. Both are the indexer's, neither the archiver's, and
/// both are replayable now.
fn all_the_indexers(failures: &[operations::failures::Failed], stack: &str) -> Result<()> {
    let deployed = &failures[0].function;
    ensure!(
        deployed.starts_with(&format!("{stack}-IndexerFunction-")),
        "a CloudFormation-shaped name: {deployed}"
    );
    let of = |binary: &str, logical_id: &str| FunctionMatch {
        binary: binary.into(),
        logical_id: logical_id.into(),
        deployed: vec![],
    };
    let (the_indexer, the_archiver) =
        (of("multikey-indexer", "IndexerFunction"), of("ttl-archiver", "ArchiverFunction"));
    let now = chrono::Utc::now();
    ensure!(failures.iter().all(|f| the_indexer.matches(f) && !the_archiver.matches(f) && f.replayable(now)));
    Ok(())
}

/// Replays each failure's records (one each) with `replayer`, and deletes a range's queue
/// message and a parked record's object once replayed, as `failures replay` does; the messages
/// and objects deleted.
async fn replay(
    failures: &[operations::failures::Failed],
    streams: &aws_sdk_dynamodbstreams::Client,
    replayer: &Replayer,
    sqs: &aws_sdk_sqs::Client,
) -> Result<usize> {
    let mut acknowledged = 0;
    for failed in failures {
        let Read::Records(records) = operations::failures::read(failed, streams).await? else {
            anyhow::bail!("{failed:?}: its records cannot be read back");
        };
        let outcome = replayer.replay(records, Duration::from_secs(60)).await?;
        ensure!(
            matches!(outcome, Replayed::Mended { records: 1, touched: 1, .. }),
            "{failed:?}: {outcome:?}"
        );
        acknowledged += usize::from(operations::failures::acknowledge(sqs, failed).await?);
        acknowledged += usize::from(operations::failures::acknowledge_object(&s3(), failed).await?);
    }
    Ok(acknowledged)
}

/// A queue holding each line of the failure log as a message, as Lambda's on-failure
/// destination would.
async fn on_failure_queue(sqs: &aws_sdk_sqs::Client, log: &std::path::Path) -> Result<String> {
    let queue =
        sqs.create_queue().queue_name(unique("on-failure")).send().await?.queue_url.unwrap_or_default();
    for line in std::fs::read_to_string(log)?.lines() {
        sqs.send_message().queue_url(&queue).message_body(line).send().await?;
    }
    Ok(queue)
}

/// The messages a queue holds, visible or not.
async fn messages_left(sqs: &aws_sdk_sqs::Client, queue: &str) -> Result<u32> {
    use aws_sdk_sqs::types::QueueAttributeName as Name;
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(queue)
        .attribute_names(Name::All)
        .send()
        .await?
        .attributes
        .unwrap_or_default();
    let count = |name: Name| -> Result<u32> {
        Ok(attributes.get(&name).map(|v| v.parse::<u32>()).transpose()?.unwrap_or(0))
    };
    Ok(count(Name::ApproximateNumberOfMessages)? + count(Name::ApproximateNumberOfMessagesNotVisible)?)
}

/// Every record one function is invoked with, in order.
fn recording(inner: Invoker, seen: Arc<std::sync::Mutex<Vec<stream_runtime::EventRecord>>>) -> Invoker {
    in_process(move |event, deadline| {
        let (inner, seen) = (Arc::clone(&inner), Arc::clone(&seen));
        async move {
            seen.lock().unwrap().extend(event.records.iter().cloned());
            inner(event, deadline).await
        }
    })
}

/// The aggregator's and the archiver's records are replayed by running them again
/// (`operations::failures::rerun`): an old record rerun after a newer one of the same shard or item was
/// applied changes nothing the newer one wrote. The aggregator keeps each shard's state with its
/// sequence number and ignores an older one; the archiver's readers read each deletion once, by
/// its `eventID`.
#[tokio::test]
async fn old_records_rerun_through_the_aggregator_and_the_archiver_undo_nothing_newer() -> Result<()> {
    use std::sync::Mutex;
    let Local { sdk, stack, .. } = local(&[]).await?;
    let (counted, ttl_records) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let (counting, archiving) = (Arc::clone(&counted), Arc::clone(&ttl_records));
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), move |function, inner| match function {
        "counter-aggregator" => recording(inner, Arc::clone(&counting)),
        "ttl-archiver" => recording(inner, Arc::clone(&archiving)),
        _ => inner,
    })?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let timeout = std::time::Duration::from_secs(60);

    // One shard: 5, then 7 more. The first record says the shard held 5.
    let counters = sharded_counter::Counters::new(
        client.clone(),
        &stack.table("CounterTable")?.name,
        formats::counter::Sharding::new(1)?,
    );
    counters.increment("c", 5).await?;
    pipeline.settle().await?;
    counters.increment("c", 7).await?;
    pipeline.settle().await?;
    ensure!(counters.total("c").await? == Some(12));
    let records = counted.lock().unwrap().clone();
    ensure!(records.len() == 2, "two shard records: {}", records.len());
    let aggregator = local_stack::in_process_invoker(stack.function("counter-aggregator")?, &sdk)?;
    let old = operations::failures::rerun(vec![records[0].clone()], &aggregator, timeout).await;
    ensure!(old == Replayed::Applied { records: 1 }, "{old:?}");
    let both =
        operations::failures::rerun(records.iter().rev().cloned().collect(), &aggregator, timeout).await;
    ensure!(both.is_done(), "{both:?}");
    ensure!(
        counters.total("c").await? == Some(12),
        "the old state (5) did not replace the newer (12): {:?}",
        counters.total("c").await?
    );

    // An item deleted by TTL, recreated, and deleted by TTL again; then the first deletion rerun.
    let issues = crate::support::pipeline::issues_table(&stack)?;
    let expired = chrono::Utc::now().timestamp() - 60;
    for name in ["first life", "second life"] {
        put(
            &client,
            &issues,
            &json!({"id": "x", "project": "p", "num": 1, "name": name, "expires_at": expired}),
        )
        .await?;
        pipeline.settle().await?;
    }
    let removes: Vec<stream_runtime::EventRecord> =
        ttl_records.lock().unwrap().iter().filter(|r| r.event_name == "REMOVE").cloned().collect();
    ensure!(removes.len() == 2, "two TTL deletes: {}", removes.len());
    let archiver = local_stack::in_process_invoker(stack.function("ttl-archiver")?, &sdk)?;
    let old = operations::failures::rerun(vec![removes[0].clone()], &archiver, timeout).await;
    ensure!(old == Replayed::Applied { records: 1 }, "{old:?}");
    let (bucket, prefix) = stack.archive_location()?;
    let names: Vec<String> = operations::archive::items(&local_stack::s3_client(&sdk), &bucket, &prefix)
        .await?
        .iter()
        .map(|(_, item)| {
            serde_json::to_value(item).map(|v| v["name"]["S"].as_str().unwrap_or_default().to_owned())
        })
        .collect::<Result<_, _>>()?;
    ensure!(names == ["first life", "second life"], "each deletion read once, in order: {names:?}");
    Ok(())
}

/// A range read back from a stream that answers empty pages first (as DynamoDB Streams may) is
/// read whole; one the stream gives back only part of is a short read, never "applied".
#[tokio::test]
async fn a_range_is_read_through_empty_pages_and_only_whole() -> Result<()> {
    let record = |seq: u32| {
        json!({"eventID": format!("e{seq}"), "eventName": "INSERT", "eventVersion": "1.1",
               "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
               "dynamodb": {"Keys": {"id": {"S": format!("i{seq}")}}, "NewImage": {"id": {"S": format!("i{seq}")}},
                            "SequenceNumber": seq.to_string(), "SizeBytes": 10,
                            "StreamViewType": "NEW_AND_OLD_IMAGES", "ApproximateCreationDateTime": 1.8e9}})
    };
    // Pages after the iterator: two empty, then 11 and 12, then 13 (past the range's end).
    let pages = move |n: usize| match n {
        0 | 1 => vec![],
        2 => vec![record(11), record(12)],
        _ => vec![record(13)],
    };
    let range = |start: &str, batch: u64| operations::failures::Failed {
        function: "f".into(),
        at: "2026-11-24T00:00:00Z".into(),
        reason: String::new(),
        records: Records::Range {
            source: operations::failures::Source::DynamodbStream,
            stream_arn: "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/s".into(),
            shard_id: "shardId-1".into(),
            start_sequence_number: start.into(),
            end_sequence_number: "12".into(),
            batch_size: batch,
            first_arrival: None,
            kept: None,
        },
        message: None,
        object: None,
    };
    for (failed, want, get_records) in [
        (range("11", 2), Ok(2), 3),
        // The stream no longer starts at the range's first record (10 was trimmed, say).
        (range("10", 3), Err("the read began at Some(\"11\")"), 3),
        // Fewer records than the batch held.
        (range("11", 3), Err("2 records read, the range held 3"), 3),
    ] {
        let endpoint = crate::support::scripted::Scripted::start(move |request| {
            let page = |n: usize| {
                crate::support::scripted::Reply::ok(
                    json!({"Records": pages(n), "NextShardIterator": format!("it-{}", n + 1)}),
                )
            };
            match request.operation.as_str() {
                "GetShardIterator" => crate::support::scripted::Reply::ok(json!({"ShardIterator": "it-0"})),
                "GetRecords" => {
                    let at = request.body["ShardIterator"].as_str().unwrap_or_default();
                    page(at.trim_start_matches("it-").parse().unwrap_or(0))
                }
                other => crate::support::scripted::Reply::error(400, "ValidationException", other),
            }
        })
        .await;
        let streams = aws_sdk_dynamodbstreams::Client::new(&endpoint.sdk());
        let read = operations::failures::read(&failed, &streams).await?;
        let got = match &read {
            Read::Records(records) => Ok(records.len()),
            Read::Unavailable(Replayed::ShortRead { reason, .. }) => Err(reason.clone()),
            Read::Unavailable(other) => anyhow::bail!("{other:?}"),
        };
        match (&got, want) {
            (Ok(n), Ok(m)) => ensure!(*n == m),
            (Err(reason), Err(m)) => ensure!(reason.contains(m), "{reason}"),
            _ => anyhow::bail!("{got:?}, expected {want:?}"),
        }
        let empty_then_records = endpoint.operations().iter().filter(|o| *o == "GetRecords").count();
        ensure!(
            empty_then_records == get_records,
            "two empty pages read through, then the page with the range's end: {:?}",
            endpoint.operations()
        );
    }
    Ok(())
}

/// A stack with these parameters whose mappings give up to a new S3 destination (and a failure
/// log), where the indexer (as it was) crashed on the issue "poison" until its range was given
/// up: what [`poison_given_up`] made.
struct Given {
    sdk: aws_config::SdkConfig,
    stack: local_stack::Stack,
    issues: String,
    s3: aws_sdk_s3::Client,
    bucket: String,
    log: std::path::PathBuf,
    /// Set, the indexer runs as it is now.
    fixed: Arc<AtomicBool>,
    pipeline: local_stack::replayer::Pipeline,
    /// The indexer's crashes on it.
    crashes: u32,
}

impl Given {
    /// The indexer fixed, `records` replayed through the stream (one item touched), and the index
    /// then exact.
    async fn replay_fixed(&mut self, records: &[stream_runtime::EventRecord], name: &str) -> Result<()> {
        self.fixed.store(true, Ordering::SeqCst);
        let writer = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&self.sdk));
        let indexes = crate::support::pipeline::indexes(&self.stack)?;
        let through_stream = operations::verify::Mender::new(writer, indexes, &self.issues, name);
        ensure!(through_stream.records(records).await?.touched == 1);
        self.pipeline.settle().await?;
        assert_index_exact(&self.sdk, &self.stack).await?;
        Ok(())
    }
}

async fn poison_given_up(parameters: &[(&str, &str)]) -> Result<Given> {
    let Local { sdk, stack, client, issues } = local(parameters).await?;
    parking_bucket().await;
    let s3 = s3();
    let bucket = unique("on-failure");
    s3.create_bucket().bucket(&bucket).send().await?;
    let log = failure_log();
    let counts = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let fixed = Arc::new(AtomicBool::new(false));
    let fix = Arc::clone(&fixed);
    let prefix = format!("{}/", unique("parked"));
    let failures = local_stack::replayer::FailureLog::new(&log).with_s3_destination(s3.clone(), &bucket);
    let mut pipeline = pipeline_to(&sdk, &stack, failures, |function, invoker| match function {
        "multikey-indexer" => as_it_was(invoker, prefix.clone(), counts.clone(), Arc::clone(&fix)),
        _ => invoker,
    })?;
    put(&client, &issues, &json!({"id": "poison", "project": "p0", "num": 9, "custom_fields": {"f": 9}}))
        .await?;
    pipeline.settle().await?;
    let crashes = counts.1.load(Ordering::SeqCst);
    Ok(Given { sdk, stack, issues, s3, bucket, log, fixed, pipeline, crashes })
}

/// An S3 on-failure destination keeps the whole invocation record, the records included. The
/// replayer writes it as Lambda does (`aws/lambda/<mapping UUID>/<shard>/YYYY/MM/DD/…`, the
/// event as `payload`); a range kept so is replayed with no stream at all, and its object is
/// deleted once replayed.
#[tokio::test]
async fn a_range_kept_by_an_s3_destination_replays_after_the_stream_dropped_it() -> Result<()> {
    let mut given = poison_given_up(&[("BatchSize", "4"), ("MaximumRetryAttempts", "1")]).await?;
    let (sdk, stack, s3, bucket, log) = (
        given.sdk.clone(),
        given.stack.name.clone(),
        given.s3.clone(),
        given.bucket.clone(),
        given.log.clone(),
    );
    let logged = operations::failures::read_log(&log)?;
    ensure!(logged.len() == 1, "one range given up: {logged:?}");

    // The object, as Lambda names it, holds the record the log holds and the records themselves.
    let kept = operations::failures::read_destination(&s3, &bucket, operations::failures::DESTINATION_PREFIX)
        .await?;
    ensure!(kept.len() == 1, "{kept:?}");
    all_the_indexers(&kept, &stack)?;
    let (Records::Range { shard_id, .. }, Some(object)) = (&kept[0].records, &kept[0].object) else {
        anyhow::bail!("a range, read from an object: {:?}", kept[0]);
    };
    let key = object.strip_prefix(&format!("s3://{bucket}/")).unwrap_or_default();
    let name: Vec<&str> = key.split('/').collect();
    ensure!(
        name.len() == 8
            && name[..2] == ["aws", "lambda"]
            && name[2].len() == 36
            && name[3] == shard_id
            && name[7].starts_with(&format!("{}-{}-{}T", name[4], name[5], name[6])),
        "aws/lambda/<mapping UUID>/<shard>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<UUID>: {object}"
    );
    let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
    let Read::Records(from_stream) = operations::failures::read(&logged[0], &streams).await? else {
        anyhow::bail!("the range is in the stream while it lasts");
    };
    // No stream at all: an endpoint where nothing listens. The log's range is lost with it; the
    // object's records are not.
    let no_stream = aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::config::Builder::from(&io_policy::without_sdk_retries(&sdk))
            .endpoint_url("http://127.0.0.1:9")
            .build(),
    );
    ensure!(
        operations::failures::read(&logged[0], &no_stream).await.is_err(),
        "without the records, the range needs the stream"
    );
    let Read::Records(replayed) = operations::failures::read(&kept[0], &no_stream).await? else {
        anyhow::bail!("the destination kept the records");
    };
    ensure!(
        replayed.iter().map(id_of).collect::<Vec<_>>() == ["poison"]
            && serde_json::to_value(&replayed)? == serde_json::to_value(&from_stream)?,
        "the object's records are the stream's: {replayed:?}"
    );
    given.replay_fixed(&replayed, "replay-kept").await?;
    ensure!(operations::failures::acknowledge_object(&s3, &kept[0]).await?);
    ensure!(
        operations::failures::read_destination(&s3, &bucket, operations::failures::DESTINATION_PREFIX)
            .await?
            .is_empty()
    );
    Ok(())
}

/// Under `Consumers=Combined`, a range the combined function gave up holds records of both of
/// its functions; `failures replay --function sidestream-combined` replays it for each, on the
/// records its own patterns pass: the indexer's through the stream, the archiver's through its
/// code. Here the combined function crashes on the TTL deletion of an indexed issue until fixed,
/// so the deletion is given up: its index entries stay and it is not archived. Replayed, the
/// index is exact and the issue archived once; replayed again, nothing changes.
#[tokio::test]
async fn a_combined_functions_range_is_replayed_by_each_of_its_functions() -> Result<()> {
    let sdk = sdk();
    let parameters = [
        ("Consumers", "Combined"),
        ("BatchSize", "4"),
        // Where it archives, the combined mapping retries as the archiver's does.
        ("ArchiverMaximumRetryAttempts", "1"),
    ];
    let stack = stack(&sdk, &parameters).await?;
    let log = failure_log();
    let (crashes, fixed) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicBool::new(false)));
    let (crashing, fix) = (Arc::clone(&crashes), Arc::clone(&fixed));
    let mut pipeline = pipeline(&sdk, &stack, &log, move |function, inner| {
        if function != sidestream_combined::COMBINED_BINARY {
            return inner;
        }
        crashing_on_the_deletion(inner, Arc::clone(&crashing), Arc::clone(&fix))
    })?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let issues = crate::support::pipeline::issues_table(&stack)?;
    put_issues(&client, &issues, 0..3, |id| json!({"f": id})).await?;
    let expired = chrono::Utc::now().timestamp() - 60;
    let item = json!({"id": "expired", "project": "p0", "num": 7, "name": "Expired",
                      "custom_fields": {"f": 7, "g": "x"}, "expires_at": expired});
    put(&client, &issues, &item).await?;
    pipeline.settle().await?;
    let archived = || crate::support::pipeline::archived_ids(&sdk, &stack);
    let crash_count = crashes.load(Ordering::SeqCst);
    ensure!(
        crash_count >= 2 && archived().await?.is_empty(),
        "the deletion crashed its batches until given up ({crash_count} crashes), and is not archived"
    );
    ensure!(
        assert_index_exact(&sdk, &stack).await.is_err(),
        "before the replay, the index still holds the deleted issue's entries"
    );

    // The range names the combined function as CloudFormation names it.
    let failures = operations::failures::read_log(&log)?;
    let combined = FunctionMatch {
        binary: sidestream_combined::COMBINED_BINARY.into(),
        logical_id: "IssuesStreamFunction".into(),
        deployed: vec![],
    };
    ensure!(
        failures.len() == 1 && combined.matches(&failures[0]),
        "one range, the combined function's: {failures:?}"
    );
    fixed.store(true, Ordering::SeqCst);
    let replayer = replayer(&stack, sidestream_combined::COMBINED_BINARY)?;
    ensure!(replayer.functions() == ["multikey-indexer", "ttl-archiver"], "{replayer:?}");
    let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
    for round in ["replayed", "replayed again"] {
        let Read::Records(records) = operations::failures::read(&failures[0], &streams).await? else {
            anyhow::bail!("the range cannot be read back");
        };
        let outcome = replayer.replay(records, Duration::from_secs(60)).await?;
        let Replayed::Combined { functions } = &outcome else {
            anyhow::bail!("{round}: {outcome:?}");
        };
        ensure!(
            outcome.is_done()
                && matches!(functions[0].replayed, Replayed::Mended { records: 1, gone: 1, .. })
                && functions[1].replayed == Replayed::Applied { records: 1 },
            "{round}: the indexer's part through the stream, the archiver's rerun: {outcome:?}"
        );
        pipeline.settle().await?;
        assert_index_exact(&sdk, &stack).await?;
        let ids = archived().await?;
        ensure!(ids == ["expired"], "{round}: archived once: {ids:?}");
    }
    Ok(())
}

/// The combined function as it was until `fixed`: it crashes on any batch holding the deletion
/// of the issue "expired" (counted in `crashes`).
fn crashing_on_the_deletion(inner: Invoker, crashes: Arc<AtomicU32>, fixed: Arc<AtomicBool>) -> Invoker {
    crate::support::pipeline::crashing(inner, crashes, "Crash", move |event| {
        !fixed.load(Ordering::SeqCst)
            && event.records.iter().any(|r| r.event_name == "REMOVE" && id_of(r) == "expired")
    })
}

/// The archive is the only copy of what TTL deleted. A TTL deletion the archiver gave up on is
/// written by Lambda, records and all, to the stack's on-failure destination (the parking
/// bucket); 24 hours later the stream has trimmed it (the emulator trims on request, as the
/// service does), so only the destination's copy is left, and from it the deletion is archived.
#[tokio::test]
async fn a_given_up_archiver_range_is_recovered_after_its_records_left_the_stream() -> Result<()> {
    let sdk = sdk();
    let parameters = [("BatchSize", "4"), ("ArchiverMaximumRetryAttempts", "1")];
    let stack = stack(&sdk, &parameters).await?;
    let Some(local_stack::Destination::Bucket(bucket)) = stack.failure_destination() else {
        anyhow::bail!("the template gives ranges up to a bucket: {:?}", stack.failure_destination());
    };
    let log = failure_log();
    let (crashes, fixed) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicBool::new(false)));
    let (crashing, fix) = (Arc::clone(&crashes), Arc::clone(&fixed));
    let failures = stack.failure_log(&sdk, &log);
    let mut pipeline = pipeline_to(&sdk, &stack, failures, |function, invoker| match function {
        "ttl-archiver" => crashing_on_the_deletion(invoker, Arc::clone(&crashing), Arc::clone(&fix)),
        _ => invoker,
    })?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let issues = crate::support::pipeline::issues_table(&stack)?;
    let expired = chrono::Utc::now().timestamp() - 60;
    let item = json!({"id": "expired", "project": "p0", "num": 7, "name": "Expired",
                      "custom_fields": {"f": 7}, "expires_at": expired});
    put(&client, &issues, &item).await?;
    pipeline.settle().await?;
    let archived = || crate::support::pipeline::archived_ids(&sdk, &stack);
    ensure!(
        crashes.load(Ordering::SeqCst) == 2 && archived().await?.is_empty(),
        "the deletion crashed its batch and its one retry, and is not archived: {} crashes",
        crashes.load(Ordering::SeqCst)
    );
    let logged = operations::failures::read_log(&log)?;
    ensure!(logged.len() == 1, "one range given up: {logged:?}");

    // The stream's 24 hours pass: the insert and the deletion are trimmed.
    let trimmed = local_stack::trim_stream(&sdk, &issues).await?;
    ensure!(trimmed == 2, "the insert and the deletion trimmed: {trimmed}");
    let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
    let gone = operations::failures::read(&logged[0], &streams).await?;
    ensure!(
        matches!(&gone, Read::Unavailable(Replayed::NotInStream { reason }) if reason.contains("TrimmedDataAccessException")),
        "the place alone is past saving: {gone:?}"
    );

    // The destination kept the records: the archiver, fixed, archives them from there.
    let kept =
        operations::failures::read_destination(&s3(), &bucket, operations::failures::DESTINATION_PREFIX)
            .await?;
    ensure!(kept.len() == 1, "one range kept: {kept:?}");
    ensure!(
        kept[0].function.starts_with(&format!("{}-ArchiverFunction-", stack.name)),
        "the archiver's: {}",
        kept[0].function
    );
    fixed.store(true, Ordering::SeqCst);
    let Read::Records(records) = operations::failures::read(&kept[0], &streams).await? else {
        anyhow::bail!("the destination kept the records");
    };
    let outcome = replayer(&stack, "ttl-archiver")?.replay(records, Duration::from_secs(60)).await?;
    ensure!(outcome == Replayed::Applied { records: 1 }, "{outcome:?}");
    ensure!(archived().await? == ["expired"], "archived once");
    ensure!(operations::failures::acknowledge_object(&s3(), &kept[0]).await?);
    ensure!(destination_is_empty(&bucket).await?, "nothing left to replay");
    Ok(())
}

/// `binary`'s template environment without its role's credentials: what an operator replaying its
/// failures sets, signing as themself (the emulator's test credentials).
fn as_an_operator(
    stack: &local_stack::Stack,
    binary: &str,
) -> Result<std::collections::BTreeMap<String, String>> {
    let mut env = local_stack::environment(stack.function(binary)?);
    env.retain(|name, _| !name.starts_with("AWS_"));
    Ok(env)
}

/// The operator's trial of 5f4e376, exactly: a counter shard written with a count that is not an
/// integer is parked; `sidestream failures replay` of it, with nothing fixed, parks it again. The
/// replay says so ("parked again: 1"), exits 1, and keeps the parked object, and the stack's
/// status still reports it; with `--output json` stdout is the replay's one JSON line, the
/// function's log and EMF lines on stderr. Once the shard is written again, the stream counts the
/// new value and the parked record is superseded: a replay deletes it without running it, and the
/// total is the sum of the shards as they are.
#[tokio::test]
async fn a_parked_record_that_fails_again_is_kept_and_the_replay_fails() -> Result<()> {
    let Local { sdk, stack, client, .. } = local(&[]).await?;
    let feed = local_stack::cloudwatch::Feed::start(&sdk);
    let mut pipeline = stack
        .pipeline(
            &sdk,
            |function| local_stack::fed_invoker(function, &sdk, &feed),
            stack.failure_log(&sdk, failure_log()),
        )?
        .with_metrics(feed.lambda());
    let counters = stack.table("CounterTable")?.name.clone();
    let shard = |k: u32, count: serde_json::Value| counter_shard("visits", k, &count);
    put(&client, &counters, &shard(0, json!(3))).await?;
    put(&client, &counters, &shard(1, json!(1.5))).await?;
    pipeline.settle().await?;
    let parking = stack.bucket("ParkingBucket")?.name.clone();
    let parked = || async {
        let listed =
            s3().list_objects_v2().bucket(&parking).prefix("parked/counter-aggregator/").send().await?;
        anyhow::Ok(listed.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect::<Vec<_>>())
    };
    let before = parked().await?;
    ensure!(before.len() == 1, "the bad shard's record is parked: {before:?}");

    // The replay, as an operator runs it: the aggregator configured from its template
    // environment, signed as the operator (the emulator's test credentials), not as its role.
    let env = as_an_operator(&stack, "counter-aggregator")?;
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let replay = ["failures", "replay", "--parked", &parking, "--function", "counter-aggregator"];
    let json = [&replay[..], &["--output", "json"]].concat();
    let ran = crate::support::process::sidestream(&json, "", &env);
    ensure!(ran.code == Some(1), "a record parked again fails the replay: {ran:?}");
    let lines: Vec<serde_json::Value> = ran
        .out
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .with_context(|| ran.out.clone())?;
    ensure!(
        lines.len() == 1
            && lines[0]["replayed"]["outcome"] == "parkedAgain"
            && lines[0]["replayed"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("where an integer `count` belongs")),
        "stdout is the one JSON line of the replay, saying why: {}",
        ran.out
    );
    ensure!(ran.err.contains(r#""ParkedRecords":1"#), "the function's EMF line is on stderr: {}", ran.err);
    ensure!(parked().await? == before, "the parked object is kept");
    // The same by the stack's name alone: its parking bucket, and the function's configuration
    // read from the emulator's CloudFormation and Lambda, nothing of it in the environment.
    let by_name = ["failures", "replay", "--stack", &stack.name, "--function", "counter-aggregator"];
    let text = crate::support::process::sidestream(&by_name, "", &[]);
    ensure!(text.code == Some(1) && text.out.contains("parked again: 1"), "{text:?}");
    // And `status` by the name alone finds the parked record in the stack's parking bucket.
    let seen =
        crate::support::process::sidestream(&["status", "--stack", &stack.name, "--output", "json"], "", &[]);
    let seen: serde_json::Value = serde_json::from_str(&seen.out).with_context(|| seen.err.clone())?;
    ensure!(seen["parked"]["counter-aggregator"] == 1, "status --stack: {seen}");
    let status = local_stack::status(&sdk, &stack, &feed).await?;
    ensure!(
        status.parked.get("counter-aggregator") == Some(&1)
            && status.attention.iter().any(|a| a.contains("counter-aggregator parked 1")),
        "status still reports it\n{status}"
    );

    // Fixed at the item: the stream counts the new value, and the parked record is superseded.
    put(&client, &counters, &shard(1, json!(2))).await?;
    pipeline.settle().await?;
    let ran = crate::support::process::sidestream(&json, "", &env);
    ensure!(ran.ok && ran.out.contains(r#""outcome":"superseded""#), "{ran:?}");
    ensure!(parked().await?.is_empty(), "a superseded record's object is deleted");
    let total =
        sharded_counter::Counters::new(client.clone(), &counters, formats::counter::Sharding::new(2)?);
    ensure!(total.total("visits").await? == Some(5), "{:?}", total.total("visits").await?);
    // Nothing is left to replay; the parked-records alarms clear as their windows pass, as
    // CloudWatch's do.
    let status = local_stack::status(&sdk, &stack, &feed).await?;
    ensure!(
        status.parked.is_empty() && !status.attention.iter().any(|a| a.contains("record(s) that can never")),
        "{status}"
    );
    Ok(())
}

/// A given-up range is deleted only when every record of it is applied: a range of the
/// aggregator's, kept by the S3 destination, whose rerun parks one of its records again (a count
/// that is not an integer), stays where it was, and the replay says `parked again`. Once the shard
/// is written again, the same range's bad record is superseded, its good one applied, and the
/// object goes.
#[tokio::test]
async fn a_range_with_a_record_parked_again_is_kept() -> Result<()> {
    let Local { sdk, stack, client, .. } = local(&[]).await?;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), move |function, inner| match function {
        "counter-aggregator" => recording(inner, Arc::clone(&recorded)),
        _ => inner,
    })?;
    let counters = stack.table("CounterTable")?.name.clone();
    let shard = |k: u32, count: serde_json::Value| counter_shard("hits", k, &count);
    put(&client, &counters, &shard(0, json!(4))).await?;
    put(&client, &counters, &shard(1, json!(2.5))).await?;
    pipeline.settle().await?;
    let records = seen.lock().unwrap().clone();
    ensure!(records.len() == 2, "two shard records: {}", records.len());

    // The range as Lambda's S3 on-failure destination keeps it, with its records.
    let parking = stack.bucket("ParkingBucket")?.name.clone();
    let key = "aws/lambda/mapping/shardId-1/2026/11/28/2026-11-28T12.00.00-range";
    s3().put_object().bucket(&parking).key(key).body(b"{}".to_vec().into()).send().await?;
    let sequence = |i: usize| records[i].change.sequence_number.clone().unwrap_or_default();
    let failed = operations::failures::Failed {
        function: "counter-aggregator".into(),
        at: chrono::Utc::now().to_rfc3339(),
        reason: "RetryAttemptsExhausted".into(),
        records: Records::Range {
            source: operations::failures::Source::DynamodbStream,
            stream_arn: records[0].event_source_arn.clone().unwrap_or_default(),
            shard_id: "shardId-1".into(),
            start_sequence_number: sequence(0),
            end_sequence_number: sequence(1),
            batch_size: 2,
            first_arrival: None,
            kept: Some(records.clone()),
        },
        message: None,
        object: Some(format!("s3://{parking}/{key}")),
    };
    let (replayer, clients) = as_an_operator_replays(&stack, "counter-aggregator", &sdk)?;
    let exists = || async { s3().head_object().bucket(&parking).key(key).send().await.is_ok() };
    let timeout = Duration::from_secs(60);
    let again = operations::failures::replay_one(&failed, &replayer, &clients, timeout).await?;
    ensure!(matches!(again, Replayed::ParkedAgain { records: 2, parked: 1, .. }), "{again:?}");
    ensure!(exists().await, "the range's object is kept");

    put(&client, &counters, &shard(1, json!(6))).await?;
    pipeline.settle().await?;
    let done = operations::failures::replay_one(&failed, &replayer, &clients, timeout).await?;
    ensure!(done == Replayed::Applied { records: 1 }, "the superseded record is not run: {done:?}");
    ensure!(!exists().await, "the range's object is deleted once every record is dealt with");
    let total =
        sharded_counter::Counters::new(client.clone(), &counters, formats::counter::Sharding::new(2)?);
    ensure!(total.total("hits").await? == Some(10), "{:?}", total.total("hits").await?);
    Ok(())
}

/// The replayer `failures replay --function BINARY` builds from an operator's copy of the
/// function's environment, and the clients it reads and acknowledges failures with.
fn as_an_operator_replays(
    stack: &local_stack::Stack,
    binary: &str,
    sdk: &aws_config::SdkConfig,
) -> Result<(Replayer, operations::failures::ReplayClients)> {
    let env = as_an_operator(stack, binary)?;
    let lookup = |name: &str| env.get(name).cloned();
    let replayer = Replayer::for_function(
        binary,
        &stream_runtime::Vars::new(&lookup),
        &io_policy::without_sdk_retries(sdk),
    )?;
    let clients = operations::failures::ReplayClients {
        streams: aws_sdk_dynamodbstreams::Client::new(sdk),
        sqs: aws_sdk_sqs::Client::new(sdk),
        s3: s3(),
    };
    Ok((replayer, clients))
}

/// A counter's shard item as the counter table holds it: `COUNTER#<name>#SHARD#<k>` with its count.
fn counter_shard(name: &str, k: u32, count: &serde_json::Value) -> serde_json::Value {
    json!({"pk": format!("COUNTER#{name}#SHARD#{k}"), "count": count})
}

/// Issue 76, finding 2: from Kinesis (`IssuesChangeSource=Kinesis`) Lambda gives a range up as
/// `KinesisBatchInfo`, with Kinesis sequence numbers and Kinesis records as the S3 destination's
/// `payload`; the local stack now gives it up so, and `failures` reads it (it failed the whole
/// listing), its records taken as the indexer took them (versions are change times), beside an
/// object that is no on-failure record, which is listed as unreadable and left. The range is
/// replayed through the stream and the index ends exact.
#[tokio::test]
async fn a_kinesis_range_given_up_is_listed_and_replayed_from_its_kept_records() -> Result<()> {
    let mut given = poison_given_up(&[
        ("IssuesChangeSource", "Kinesis"),
        ("BatchSize", "4"),
        ("MaximumRetryAttempts", "1"),
    ])
    .await?;
    let (stack, s3, bucket, log) =
        (given.stack.name.clone(), given.s3.clone(), given.bucket.clone(), given.log.clone());
    ensure!(given.crashes >= 2, "the indexer crashed on it, then on its retry: {}", given.crashes);
    // Something else in the destination's prefix that is no on-failure record.
    s3.put_object()
        .bucket(&bucket)
        .key("aws/lambda/not-a-record.json")
        .body(b"{\"clicks\": 3}".to_vec().into())
        .send()
        .await?;

    let read = operations::failures::read_destination(&s3, &bucket, operations::failures::DESTINATION_PREFIX)
        .await?;
    let ranges: Vec<&operations::failures::Failed> =
        read.iter().filter(|f| matches!(f.records, Records::Range { .. })).collect();
    let unreadable = read.iter().filter(|f| matches!(f.records, Records::Unreadable { .. })).count();
    ensure!(ranges.len() == 1 && unreadable == 1, "one Kinesis range and one unreadable object: {read:?}");
    let Records::Range { source, stream_arn, start_sequence_number, kept: Some(records), .. } =
        &ranges[0].records
    else {
        anyhow::bail!("a range with its records: {:?}", ranges[0]);
    };
    ensure!(
        *source == operations::failures::Source::Kinesis
            && stream_arn.contains(":kinesis:")
            && start_sequence_number.len() == 56,
        "Lambda's KinesisBatchInfo, Kinesis sequence numbers: {:?}",
        ranges[0]
    );
    ensure!(records.iter().map(id_of).collect::<Vec<_>>() == ["poison"], "{records:?}");
    let version = records[0].change.sequence_number.clone().unwrap_or_default();
    ensure!(version.len() == 16, "the version the indexer took it at, a change time in µs: {version}");
    all_the_indexers(&[ranges[0].clone()], &stack)?;
    // The log holds the same range, without its records.
    let logged = operations::failures::read_log(&log)?;
    ensure!(
        logged.len() == 1
            && matches!(
                logged[0].records,
                Records::Range { source: operations::failures::Source::Kinesis, kept: None, .. }
            ),
        "{logged:?}"
    );

    given.replay_fixed(records, "replay-kinesis").await?;
    ensure!(operations::failures::acknowledge_object(&s3, ranges[0]).await?);
    ensure!(
        !operations::failures::acknowledge_object(
            &s3,
            read.iter().find(|f| matches!(f.records, Records::Unreadable { .. })).context("unreadable")?
        )
        .await?,
        "an unreadable object is left"
    );
    Ok(())
}

/// Issue 76, finding 2, for the aggregator: from Kinesis (`CounterChangeSource=Kinesis`) a batch
/// the aggregator crashed on past its retries is given up with its Kinesis records; `failures`
/// reads it, and the aggregator's replay runs the kept records, versions and all, as the
/// functions took them: the total ends exact, and the object goes.
#[tokio::test]
async fn a_kinesis_range_of_the_aggregator_replays_to_an_exact_total() -> Result<()> {
    let Local { sdk, stack, client, .. } =
        local(&[("CounterChangeSource", "Kinesis"), ("MaximumRetryAttempts", "1")]).await?;
    // The aggregator crashes on shard 1 of "hits" until fixed.
    let (crashing, failures, wrap) = crashing_until_fixed("counter-aggregator", |event| {
        event.records.iter().any(|r| {
            serde_json::to_value(&r.change.keys).ok().and_then(|k| k["pk"]["S"].as_str().map(str::to_owned))
                == Some("COUNTER#hits#SHARD#1".to_owned())
        })
    })
    .await?;
    let Crashing { fixed, crashes: poisonings, bucket } = crashing;
    let mut pipeline = pipeline_to(&sdk, &stack, failures, wrap)?;
    let counters = stack.table("CounterTable")?.name.clone();
    put(&client, &counters, &counter_shard("hits", 0, &json!(4))).await?;
    put(&client, &counters, &counter_shard("hits", 1, &json!(3))).await?;
    pipeline.settle().await?;
    ensure!(poisonings.load(Ordering::SeqCst) >= 2, "crashed, and again on the retry");

    let (range, records) = one_kinesis_range(&bucket).await?;
    let versions: Vec<usize> =
        records.iter().map(|r| r.change.sequence_number.as_deref().unwrap_or_default().len()).collect();
    ensure!(!versions.is_empty() && versions.iter().all(|&n| n == 16), "change times in µs: {versions:?}");

    fixed.store(true, Ordering::SeqCst);
    let (replayer, clients) = as_an_operator_replays(&stack, "counter-aggregator", &sdk)?;
    let done = operations::failures::replay_one(&range, &replayer, &clients, Duration::from_secs(60)).await?;
    ensure!(done.is_done(), "{done:?}");
    let total =
        sharded_counter::Counters::new(client.clone(), &counters, formats::counter::Sharding::new(2)?);
    ensure!(total.total("hits").await? == Some(7), "{:?}", total.total("hits").await?);
    ensure!(destination_is_empty(&bucket).await?, "the object goes once replayed");
    Ok(())
}

/// Issue 76, finding 2, for the archiver: from Kinesis (`IssuesChangeSource=Kinesis`) a TTL
/// deletion the archiver crashed on past its retries is given up with its Kinesis record;
/// `failures` reads it, and the archiver's replay archives the item from the kept record, whole,
/// and the object goes.
#[tokio::test]
async fn a_kinesis_range_of_the_archiver_replays_to_its_archive() -> Result<()> {
    let Local { sdk, stack, client, issues } =
        local(&[("IssuesChangeSource", "Kinesis"), ("ArchiverMaximumRetryAttempts", "1")]).await?;
    // The archiver crashes on every deletion until fixed. (Its mapping's filter is applied
    // inside the delivery from Kinesis, so the INSERT reaches the wrapper, and is passed on.)
    let (crashing, failures, wrap) =
        crashing_until_fixed("ttl-archiver", |event| event.records.iter().any(|r| r.event_name == "REMOVE"))
            .await?;
    let Crashing { fixed, crashes, bucket } = crashing;
    let mut pipeline = pipeline_to(&sdk, &stack, failures, wrap)?;
    let expired = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() - 600;
    let item =
        json!({"id": "gone", "project": "p0", "num": 1, "expires_at": expired, "custom_fields": {"f": 1}});
    put(&client, &issues, &item).await?;
    pipeline.settle().await?;
    ensure!(crashes.load(Ordering::SeqCst) >= 2, "crashed, and again on the retry");

    let (range, records) = one_kinesis_range(&bucket).await?;
    ensure!(records.iter().map(id_of).collect::<Vec<_>>() == ["gone"], "the TTL deletion: {records:?}");

    fixed.store(true, Ordering::SeqCst);
    let (replayer, clients) = as_an_operator_replays(&stack, "ttl-archiver", &sdk)?;
    let done = operations::failures::replay_one(&range, &replayer, &clients, Duration::from_secs(60)).await?;
    ensure!(done.is_done(), "{done:?}");
    let (archive, prefix) = stack.archive_location()?;
    let archived = operations::archive::items(&s3(), &archive, &prefix).await?;
    let ids: Vec<String> = archived
        .iter()
        .map(|a| serde_json::to_value(&a.1).map(|v| v["id"]["S"].as_str().unwrap_or_default().to_owned()))
        .collect::<Result<_, _>>()?;
    ensure!(ids == ["gone"], "archived once: {ids:?}");
    ensure!(destination_is_empty(&bucket).await?, "the object goes once replayed");
    Ok(())
}

/// A function that crashes on the batches `crashes_on` picks until `fixed` is set.
struct Crashing {
    fixed: Arc<AtomicBool>,
    crashes: Arc<AtomicU32>,
    /// The S3 on-failure destination its ranges given up go to.
    bucket: String,
}

/// [`Crashing`] for `function`: its switch and counts, a failure log that gives ranges up to a
/// fresh S3 on-failure destination, and the wrap for [`pipeline_to`].
async fn crashing_until_fixed(
    function: &'static str,
    crashes_on: fn(&stream_runtime::Event) -> bool,
) -> Result<(Crashing, local_stack::replayer::FailureLog, impl Fn(&str, Invoker) -> Invoker)> {
    parking_bucket().await;
    let bucket = unique("on-failure");
    s3().create_bucket().bucket(&bucket).send().await?;
    let (fixed, crashes) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU32::new(0)));
    let (fix, counted) = (Arc::clone(&fixed), Arc::clone(&crashes));
    let failures = local_stack::replayer::FailureLog::new(failure_log()).with_s3_destination(s3(), &bucket);
    let wrap = move |name: &str, inner: Invoker| {
        if name != function {
            return inner;
        }
        let (fix, counted) = (Arc::clone(&fix), Arc::clone(&counted));
        in_process(move |event, deadline| {
            let (inner, fixed, counted) =
                (Arc::clone(&inner), fix.load(Ordering::SeqCst), Arc::clone(&counted));
            async move {
                if !fixed && crashes_on(&event) {
                    counted.fetch_add(1, Ordering::SeqCst);
                    return Invocation::Failed {
                        error_type: "Crash".into(),
                        message: "a bug, until fixed".into(),
                    };
                }
                inner(event, deadline).await
            }
        })
    };
    Ok((Crashing { fixed, crashes, bucket }, failures, wrap))
}

/// The one object in `bucket`'s on-failure prefix: a Kinesis range, with its records.
async fn one_kinesis_range(
    bucket: &str,
) -> Result<(operations::failures::Failed, Vec<stream_runtime::EventRecord>)> {
    let read =
        operations::failures::read_destination(&s3(), bucket, operations::failures::DESTINATION_PREFIX)
            .await?;
    ensure!(read.len() == 1, "{read:?}");
    let Records::Range { source, kept: Some(records), .. } = &read[0].records else {
        anyhow::bail!("a range with its records: {:?}", read[0]);
    };
    ensure!(*source == operations::failures::Source::Kinesis, "{:?}", read[0]);
    Ok((read[0].clone(), records.clone()))
}

/// Whether `bucket`'s on-failure prefix holds nothing (every object replayed and deleted).
async fn destination_is_empty(bucket: &str) -> Result<bool> {
    let read =
        operations::failures::read_destination(&s3(), bucket, operations::failures::DESTINATION_PREFIX)
            .await?;
    Ok(read.is_empty())
}
