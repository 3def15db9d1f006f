//! Kinesis Data Streams for DynamoDB as the change source (`CHANGE_SOURCE=kinesis`): one item's
//! records out of order and more than once, as AWS documents Kinesis may deliver them
//! (`local_stack::replayer::kinesis`), handled by the functions' real runtimes against moto. The
//! aggregator's totals are exact, because each record's version is its change time; the same
//! disorder read as a DynamoDB stream's order is not, which shows the disorder did cross one
//! item's records. The archive holds each TTL deletion once. The indexer indexes exactly in any
//! order (`MULTIKEY_ORDER=any`), and in order is refused a Kinesis source.

use std::time::Duration;

use anyhow::{Result, ensure};
use formats::counter::Sharding;
use io_policy::Deadline;
use local_stack::bench::events::CounterSim;
use local_stack::replayer::kinesis::{Disorder, Writer, disorder};
use serde_json::{Value, json};
use sharded_counter::Counters;
use stream_runtime::EventRecord;
use stream_runtime::{Runtime, StreamFunction};

use crate::support::moto::sdk;
use crate::support::pipeline::{Local, index_check, local, runtime_with, stack};

const STREAM: &str = "arn:aws:kinesis:us-east-1:123456789012:stream/changes";

/// Records per Kinesis batch.
const BATCH: usize = 40;

/// Function `F` as its template environment configures it, with `extra` variables, reading a
/// Kinesis data stream.
fn runtime<F: StreamFunction>(
    stack: &local_stack::Stack,
    binary: &str,
    extra: &[(&str, &str)],
) -> Result<Runtime<F>> {
    let mut vars = vec![(stream_runtime::source::SOURCE_VAR, "kinesis")];
    vars.extend_from_slice(extra);
    runtime_with::<F>(stack, binary, &vars)
}

/// Indexing in order diffs each record's images in stream order, so out of order it would leave
/// a stale index: the runtime refuses the indexer a Kinesis source at cold start unless it
/// indexes in any order, naming both variables.
#[tokio::test]
async fn the_indexer_in_order_is_refused_a_kinesis_source() -> Result<()> {
    let stack = stack(&sdk(), &[]).await?;
    let Err(error) = runtime::<multikey_indexer::Indexer>(&stack, "multikey-indexer", &[]) else {
        anyhow::bail!("the indexer accepted CHANGE_SOURCE=kinesis");
    };
    let message = error.to_string();
    ensure!(
        message.contains("CHANGE_SOURCE")
            && message.contains("multikey-indexer as configured needs each item's records in order")
            && message.contains("set MULTIKEY_ORDER=any"),
        "{message}"
    );
    Ok(())
}

/// The synthetic issues' changes, shuffled and duplicated as Kinesis may deliver them, indexed
/// by the indexer with `MULTIKEY_ORDER=any`: the index is exactly what the issues' final state
/// calls for, by the independent oracle. Read in arrival order as a DynamoDB stream, the same
/// disorder leaves the index wrong, which shows that it crossed one item's records.
#[tokio::test]
async fn shuffled_and_duplicated_issue_changes_index_exactly_in_any_order() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[]).await?;
    let indexer =
        runtime::<multikey_indexer::Indexer>(&stack, "multikey-indexer", &[("MULTIKEY_ORDER", "any")])?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let changes = multikey_indexer::synthetic::batch(600, 30, 8).records;
    let mut writer = Writer::new(STREAM, &stack.table("IssuesTable")?.name);
    let written: Vec<Value> = changes.iter().map(|c| writer.write(c)).collect();
    let (delivered, counts) = disorder(&written, 16, 0.1, 3, item_of);
    ensure!(
        counts.crossed > 20 && counts.duplicated > 10,
        "the disorder crossed one item's records and duplicated some: {counts:?}"
    );
    deliver_kinesis(&indexer, &delivered).await?;
    let check = index_check(&client, &stack, &changes).await?;
    ensure!(
        check.is_exact(),
        "{} entries; missing {:?}; extra {:?}",
        check.entries,
        check.missing,
        check.extra
    );
    ensure!(check.entries > 50, "the issues call for entries: {}", check.entries);

    // The same disorder through the indexer in order, on a fresh stack.
    let naive_stack = crate::support::pipeline::stack(&sdk, &[]).await?;
    let naive = runtime_with::<multikey_indexer::Indexer>(&naive_stack, "multikey-indexer", &[])?;
    let (arrived, _) =
        disorder(&changes, 16, 0.1, 3, |r| serde_json::to_string(&r.change.keys).unwrap_or_default());
    in_arrival_order(&naive, &arrived).await?;
    let naive_check = index_check(&client, &naive_stack, &changes).await?;
    ensure!(!naive_check.is_exact(), "in arrival order, the index misses what the disorder reordered");
    Ok(())
}

/// A whole run through Kinesis (`IssuesChangeSource=Kinesis`, `CounterChangeSource=Kinesis`): the
/// local stack writes each table's changes to its emulated Kinesis stream and delivers them
/// shuffled within each batch, some twice, each batch cut in two invocations. The index, the
/// archive and the totals are exact, and the disorder is counted.
#[tokio::test]
async fn a_whole_run_through_kinesis_keeps_index_archive_and_totals_exact() -> Result<()> {
    let Local { sdk, stack, client, .. } =
        local(&[("IssuesChangeSource", "Kinesis"), ("CounterChangeSource", "Kinesis"), ("BatchSize", "7")])
            .await?;
    let issues = crate::support::pipeline::issues_table(&stack)?;
    let counters = Counters::new(client.clone(), &stack.table("CounterTable")?.name, Sharding::new(4)?);
    let mut pipeline =
        crate::support::pipeline::pipeline(&sdk, &stack, &crate::support::pipeline::failure_log(), |_, i| i)?;
    let now = crate::support::pipeline::now();
    for (id, expires_at) in [("gone-1", now - 10), ("gone-2", now - 60), ("future", now + 3_600)] {
        let item = json!({"id": id, "project": "p", "num": 1, "expires_at": expires_at});
        local_stack::put_json(&client, &issues, &item).await?;
    }
    crate::support::pipeline::churn(&sdk, &stack).await?;
    // Items changed several times in a row: their records share batches, where they cross.
    for id in 0..20 {
        for round in 0..4 {
            let fields = json!({"f1": round, "f2": format!("r{round}")});
            local_stack::put_json(&client, &issues, &crate::support::pipeline::issue(id, &fields)).await?;
        }
    }
    for i in 0..200 {
        counters.increment("hot", i).await?;
    }
    pipeline.step().await?;
    crate::support::pipeline::churn(&sdk, &stack).await?;
    pipeline.settle().await?;

    let entries = crate::support::pipeline::assert_index_exact(&sdk, &stack).await?;
    ensure!(entries > 50, "{entries} entries");
    let archived = crate::support::pipeline::archived_ids(&sdk, &stack).await?;
    ensure!(archived == ["gone-1", "gone-2"], "archived {archived:?}");
    let hot: i128 = (0..200).sum();
    ensure!(counters.total("hot").await? == Some(hot), "hot {:?}", counters.total("hot").await?);
    let kinesis =
        |function: &str| -> Result<std::sync::Arc<local_stack::replayer::kinesis::delivery::Stream>> {
            let arn = &stack.function(function)?.streams[0].stream;
            ensure!(arn.contains(":kinesis:"), "{function} reads {arn}");
            local_stack::replayer::kinesis::delivery::Stream::registered(arn)
                .ok_or_else(|| anyhow::anyhow!("no stream {arn}"))
        };
    for function in ["multikey-indexer", "counter-aggregator"] {
        let stream = kinesis(function)?;
        let disorder = stream.disorder();
        ensure!(
            // One in ten of 200 or more delivered records twice: 3 or fewer in less than one
            // run in 500,000 (binomial).
            disorder.crossed > 5 && disorder.duplicated > 3,
            "{function}: one item's records crossed and some came twice: {disorder:?}"
        );
    }
    Ok(())
}

fn item_of(record: &Value) -> String {
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD
        .decode(record["kinesis"]["data"].as_str().unwrap_or_default())
        .unwrap_or_default();
    let data: Value = serde_json::from_slice(&data).unwrap_or(Value::Null);
    data["dynamodb"]["Keys"].to_string()
}

/// Delivers `records` in Kinesis batches of [`BATCH`], as Lambda does: again from a batch's
/// checkpoint until it finishes. Deliveries made.
async fn deliver_kinesis<F: StreamFunction>(runtime: &Runtime<F>, records: &[Value]) -> Result<usize> {
    let mut deliveries = 0;
    for chunk in records.chunks(BATCH) {
        let mut rest = chunk.to_vec();
        loop {
            deliveries += 1;
            ensure!(deliveries < 10 * records.len(), "a batch never finishes");
            let event = json!({"Records": rest});
            let deadline = Deadline::after(Duration::from_secs(60));
            let response = stream_runtime::source::kinesis(runtime, &event, deadline)
                .await
                .map_err(|d| anyhow::anyhow!("{}: {}", d.error_type, d.error_message))?;
            let Some(failure) = response.batch_item_failures.first() else {
                break;
            };
            let at = rest
                .iter()
                .position(|r| r["kinesis"]["sequenceNumber"].as_str() == failure.item_identifier.as_deref())
                .unwrap_or(0);
            rest = rest.split_off(at);
        }
    }
    Ok(deliveries)
}

/// Hands `arrived` to `runtime` as a DynamoDB stream would, in batches of [`BATCH`], each record
/// versioned by its place in the arrival: out of order, read as if in order.
async fn in_arrival_order<F: StreamFunction>(runtime: &Runtime<F>, arrived: &[EventRecord]) -> Result<()> {
    for (place, chunk) in arrived.chunks(BATCH).enumerate() {
        let mut event = stream_runtime::Event::default();
        event.records = chunk.to_vec();
        for (i, record) in event.records.iter_mut().enumerate() {
            record.change.sequence_number = Some((10_u128.pow(20) + (place * BATCH + i) as u128).to_string());
        }
        runtime.handle(event, Deadline::after(Duration::from_secs(60))).await?;
    }
    Ok(())
}

/// The counters whose totals differ from their shards' sums.
async fn wrong_totals(counters: &Counters, sim: &CounterSim) -> Result<Vec<String>> {
    let mut wrong = Vec::new();
    for (i, name) in sim.names().iter().enumerate() {
        let total = counters.total(name).await?;
        if total != Some(sim.sum(i)) {
            wrong.push(format!("{name}: {total:?}, the shards sum to {}", sim.sum(i)));
        }
    }
    Ok(wrong)
}

#[tokio::test]
async fn shuffled_and_duplicated_kinesis_records_total_exactly() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[]).await?;
    let aggregator = runtime::<counter_aggregator::Aggregator>(&stack, "counter-aggregator", &[])?;
    let table = stack.table("CounterTable")?.name.clone();
    let sharding = Sharding::new(4)?;
    let counters = Counters::new(aws_sdk_dynamodb::Client::new(&sdk), &table, sharding.clone());

    // 400 increments of 5 counters' shards, written to Kinesis in order, delivered out of order.
    let mut sim = CounterSim::new("kinesis", 5, sharding.clone(), 3);
    let changes: Vec<EventRecord> = sim.changes(400).into_iter().map(|c| c.record).collect();
    let mut writer = Writer::new(STREAM, &table);
    let written: Vec<Value> = changes.iter().map(|c| writer.write(c)).collect();
    let (delivered, counts) = disorder(&written, 16, 0.1, 11, item_of);
    ensure!(
        counts.crossed > 20 && counts.duplicated > 10,
        "the disorder crossed one shard's records and duplicated some: {counts:?}"
    );
    let deliveries = deliver_kinesis(&aggregator, &delivered).await?;
    let wrong = wrong_totals(&counters, &sim).await?;
    ensure!(wrong.is_empty(), "after {deliveries} deliveries, {counts:?}: {wrong:?}");

    // The same disorder read as a DynamoDB stream's order (each record versioned by its place in
    // the delivery): the totals are not exact, so the disorder mattered.
    let mut naive = CounterSim::new("in-arrival-order", 5, sharding, 3);
    let changes: Vec<EventRecord> = naive.changes(400).into_iter().map(|c| c.record).collect();
    let (arrived, again): (Vec<EventRecord>, Disorder) =
        disorder(&changes, 16, 0.1, 11, |r| serde_json::to_string(&r.change.keys).unwrap_or_default());
    ensure!(again == counts, "the same disorder: {again:?} {counts:?}");
    in_arrival_order(&aggregator, &arrived).await?;
    let naive_wrong = wrong_totals(&counters, &naive).await?;
    ensure!(
        !naive_wrong.is_empty(),
        "read in arrival order, some total misses a change that arrived before an older one"
    );
    Ok(())
}

#[tokio::test]
async fn shuffled_and_duplicated_ttl_deletions_are_archived_once_each() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[]).await?;
    let archiver = runtime::<ttl_archiver::Archiver>(&stack, "ttl-archiver", &[])?;
    let deletions = ttl_archiver::synthetic::ttl_batch(120, 5, 1_795_168_800, 0.5).records;
    let mut writer = Writer::new(STREAM, "sessions");
    let written: Vec<Value> = deletions.iter().map(|d| writer.write(d)).collect();
    let (delivered, counts) = disorder(&written, 16, 0.2, 5, |r| r["kinesis"]["sequenceNumber"].to_string());
    ensure!(counts.duplicated > 10, "{counts:?}");
    deliver_kinesis(&archiver, &delivered).await?;
    let keys = crate::support::pipeline::archived_keys(&sdk, &stack, "sk").await?;
    let mut expected: Vec<String> = (0..120).map(|i| format!("SESSION#{i:08}")).collect();
    expected.sort();
    ensure!(
        keys == expected,
        "each of the 120 deletions read back once, {} duplicates delivered: {} read",
        counts.duplicated,
        keys.len()
    );
    Ok(())
}
