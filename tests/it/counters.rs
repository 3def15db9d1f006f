//! Write-sharded counters against moto: concurrent increments through the library, the exact
//! read, and the counter-aggregator keeping the total items exact from the table's stream.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use counter_aggregator::Aggregator;
use formats::counter::Sharding;
use io_policy::Deadline;
use sharded_counter::Counters;
use stream_runtime::Runtime;
use stream_runtime::{Event, EventRecord};

use crate::support::moto::{create_table, runtime, sdk, stream_records, unique};

/// The emulator is as atomic as DynamoDB for a single item: 32 concurrent writers make 100
/// `ADD`s each over 4 items, and every one of the 3,200 is counted. Plain moto loses some
/// (`scripts/moto-atomicity`); `scripts/moto` serializes DynamoDB requests so that it cannot.
#[tokio::test]
async fn the_emulator_counts_every_concurrent_add() {
    let (client, table) = counter_table("atomic").await;
    let writers: Vec<_> = (0..32)
        .map(|_| {
            let (client, table) = (client.clone(), table.clone());
            tokio::spawn(async move {
                for i in 0..100 {
                    client
                        .update_item()
                        .table_name(&table)
                        .key("pk", AttributeValue::S(format!("k{}", i % 4)))
                        .update_expression("ADD #c :one")
                        .expression_attribute_names("#c", "count")
                        .expression_attribute_values(":one", AttributeValue::N("1".into()))
                        .send()
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    for k in 0..4 {
        let item = client
            .get_item()
            .table_name(&table)
            .key("pk", AttributeValue::S(format!("k{k}")))
            .send()
            .await
            .unwrap()
            .item
            .unwrap();
        assert_eq!(item["count"].as_n().unwrap(), "800", "k{k}");
    }
}

/// Four writers make 250 increments each on one counter (and a few on another); the exact read
/// sums the shards to the true totals, and the shards really are spread.
#[tokio::test]
async fn concurrent_increments_sum_exactly() {
    let (client, table) = counter_table("counters").await;
    let counters = Counters::new(client.clone(), &table, Sharding::new(10).unwrap());

    let writers: Vec<_> = (0..4_u64)
        .map(|w| {
            let counters = counters.clone();
            tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(w);
                let mut sum = 0_i128;
                for _ in 0..250 {
                    let n = rng.i64(1..=5);
                    counters.increment("votes#alice", n).await.unwrap();
                    sum += i128::from(n);
                }
                counters.increment("votes#bob", -2).await.unwrap();
                sum
            })
        })
        .collect();
    let mut truth = 0;
    for writer in writers {
        truth += writer.await.unwrap();
    }
    assert_eq!(counters.exact("votes#alice").await.unwrap(), truth);
    assert_eq!(counters.exact("votes#bob").await.unwrap(), -8);
    assert_eq!(counters.exact("nobody").await.unwrap(), 0);
    assert_eq!(counters.total("votes#alice").await.unwrap(), None, "no aggregator has run");

    let scanned = client.scan().table_name(&table).send().await.unwrap();
    let shards = scanned
        .items()
        .iter()
        .filter(|i| i["pk"].as_s().unwrap().starts_with("COUNTER#votes%23alice#SHARD#"))
        .count();
    assert!(shards >= 8, "1,000 random increments touch (nearly) all 10 shards, got {shards}");
}

/// More shards than one `BatchGetItem` reads, and a shard holding something that is not a count,
/// which the exact read names and an increment of it is refused for, at once.
#[tokio::test]
async fn exact_reads_chunk_by_100_and_reject_non_counts() {
    let (client, table) = counter_table("counters").await;
    let counters = Counters::new(client.clone(), &table, Sharding::new(250).unwrap());
    for shard in [0, 99, 100, 199, 249] {
        counters.increment_shard("wide", shard, i64::from(shard) + 1).await.unwrap();
    }
    assert_eq!(counters.exact("wide").await.unwrap(), 1 + 100 + 101 + 200 + 250);

    client
        .put_item()
        .table_name(&table)
        .item("pk", aws_sdk_dynamodb::types::AttributeValue::S("COUNTER#odd#SHARD#3".to_owned()))
        .item("count", aws_sdk_dynamodb::types::AttributeValue::S("many".to_owned()))
        .send()
        .await
        .unwrap();
    let err = counters.exact("odd").await.unwrap_err().to_string();
    assert!(
        err.contains(r#"item "COUNTER#odd#SHARD#3" has count = S("many"), not an integer count"#),
        "{err}"
    );
    // An increment of that shard can never succeed: refused as record-permanent, not retried
    // as a transient cancellation until the operation's time runs out.
    match counters.increment_shard("odd", 3, 1).await {
        Err(sharded_counter::CounterError::Request(failed)) => {
            assert_eq!(failed.kind, io_policy::FailureKind::RecordPermanent, "{failed}");
        }
        other => panic!("an ADD to a string count: {other:?}"),
    }
}

async fn aggregator(table: &str) -> Runtime<Aggregator> {
    runtime(&[("COUNTER_TABLE", table)]).await
}

/// Delivers `records` as one batch; returns the conflicts the invocation met.
async fn deliver(aggregator: &Runtime<Aggregator>, records: &[EventRecord]) -> u64 {
    let mut event = Event::default();
    event.records = records.to_vec();
    let (response, metrics) =
        aggregator.handle_counted(event, Deadline::after(Duration::from_secs(60))).await;
    let response = response.unwrap();
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    metrics.get(stream_runtime::Metric::Conflicts)
}

/// The shard number of a shard record, from its key `COUNTER#<name>#SHARD#<k>`.
fn shard_of(record: &EventRecord) -> usize {
    let key = serde_json::to_value(&record.change.keys).unwrap();
    key["pk"]["S"].as_str().and_then(|k| k.rsplit('#').next()).and_then(|k| k.parse().ok()).unwrap_or(0)
}

/// A batch delivered again (Lambda's at-least-once) finds its deltas already applied: each
/// counter's first conditional `UpdateItem` fails and returns the total item, which already holds
/// the batch, so nothing more is sent: one request per counter, and the totals do not move.
#[tokio::test]
async fn a_redelivered_batch_costs_one_request_per_counter() {
    let (client, table) = counter_table("redelivered").await;
    let event = counter_aggregator::synthetic::increments(300, 4, 5, 11);
    let one = aggregator(&table).await;
    let deadline = || Deadline::after(Duration::from_secs(60));

    let (first, _) = one.handle_counted(event.clone(), deadline()).await;
    assert!(first.unwrap().batch_item_failures.is_empty());
    let counters = Counters::new(client.clone(), &table, Sharding::new(5).unwrap());
    let totals = |counters: Counters| async move {
        let mut totals = Vec::new();
        for c in 0..4 {
            totals.push(counters.total(&format!("c{c}")).await.unwrap());
        }
        totals
    };
    let before = totals(counters.clone()).await;
    assert!(before.iter().all(Option::is_some), "{before:?}");

    let (again, metrics) = one.handle_counted(event, deadline()).await;
    assert!(again.unwrap().batch_item_failures.is_empty());
    assert_eq!(metrics.get(stream_runtime::Metric::Requests), 4, "one UpdateItem per counter");
    assert_eq!(metrics.get(stream_runtime::Metric::Writes), 0);
    assert_eq!(metrics.get(stream_runtime::Metric::Conflicts), 0);
    assert_eq!(totals(counters).await, before);
}

/// Four concurrent writers make 2,000 increments on three counters and remove one shard; the
/// aggregator then consumes the stream with every batch delivered twice, one batch retried from
/// its middle, and eight invocations racing on the same total items, until they have met a
/// conflict. Every total equals the exact sum of its shards.
///
/// Invocations of different shards never conflict (each sends a delta write conditioned on its
/// own shards only). A conflict needs a read-merge-write racing with them: each racing batch
/// starts again from its shard's last record already applied, as a retry from an earlier
/// checkpoint does, so its delta's condition fails and it merges instead, while the other
/// shards' deltas move the total's version under it.
#[tokio::test]
async fn the_aggregator_keeps_totals_exact_under_redelivery_and_races() {
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    let table = unique("counters");
    create_table(&client, &table, "pk", None, true).await;
    let counters = Counters::new(client.clone(), &table, Sharding::new(8).unwrap());
    let names = ["votes/alice", "votes/bob", "likes#7"];
    let writers: Vec<_> = (0..4_u64)
        .map(|w| {
            let counters = counters.clone();
            tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(100 + w);
                for _ in 0..500 {
                    let name = names[rng.usize(..names.len())];
                    counters.increment(name, rng.i64(1..=5)).await.unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let removed = counters.layout().shard_key("votes/bob", 3).unwrap();
    client
        .delete_item()
        .table_name(&table)
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(removed))
        .send()
        .await
        .unwrap();

    let records = stream_records(&sdk(), &client, &table).await;
    assert!(records.len() >= 2_000, "{} records", records.len());
    let one = aggregator(&table).await;
    for batch in records[..1_000].chunks(100) {
        deliver(&one, batch).await;
        deliver(&one, batch).await;
    }
    // A batch that failed after its first half and was retried from record 1,050.
    deliver(&one, &records[1_000..1_100]).await;
    deliver(&one, &records[1_050..1_200]).await;
    // The rest split by shard, as stream shards split a table, and delivered by one invocation
    // per shard at once: they race on the same total items. A round of fresh increments follows
    // until the race has produced a conflict (the version-conditioned write failing, re-read and
    // merged), at most five rounds.
    let mut delivered = records.len();
    let mut rest = records[1_200..].to_vec();
    let mut applied: Vec<Option<EventRecord>> = vec![None; 8];
    for record in &records[..1_200] {
        applied[shard_of(record)] = Some(record.clone());
    }
    let mut conflicts = 0;
    for round in 0..5 {
        let mut by_shard: Vec<Vec<EventRecord>> =
            applied.iter().map(|r| r.iter().cloned().collect()).collect();
        for record in rest {
            by_shard[shard_of(&record)].push(record);
        }
        for (last, batch) in applied.iter_mut().zip(&by_shard) {
            *last = batch.last().cloned();
        }
        let mut invocations = Vec::new();
        for _ in 0..8 {
            invocations.push(aggregator(&table).await);
        }
        let met = futures_util::future::join_all(
            invocations.iter().zip(&by_shard).map(|(runtime, batch)| deliver(runtime, batch)),
        )
        .await;
        conflicts += met.iter().sum::<u64>();
        if conflicts > 0 {
            break;
        }
        for (i, name) in names.iter().enumerate() {
            counters.increment_shard(name, u32::try_from(i + round).unwrap() % 8, 1).await.unwrap();
        }
        let all = stream_records(&sdk(), &client, &table).await;
        rest = all[delivered..].to_vec();
        delivered = all.len();
    }
    assert!(conflicts > 0, "the racing invocations never met a conflict");

    for name in names {
        let exact = counters.exact(name).await.unwrap();
        assert!(exact > 0, "{name}");
        assert_eq!(counters.total(name).await.unwrap(), Some(exact), "{name}");
    }
}

/// A fresh table named `prefix…` keyed by `pk`, as counters use, and a client of it.
async fn counter_table(prefix: &str) -> (aws_sdk_dynamodb::Client, String) {
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    let table = unique(prefix);
    create_table(&client, &table, "pk", None, false).await;
    (client, table)
}

/// An increment counts once however often it is retried: 150 increments through the fault
/// proxy, which applies some requests and then answers 500 (apply-then-fail) and throttles
/// others, each retried by the client's policy; the exact read equals the sum sent. The same
/// increments as plain `ADD`s (the client without its token) through the same faults count some
/// twice, so the faults did reach applied requests, and the token is what makes the difference.
#[tokio::test]
async fn a_retried_increment_counts_once_under_apply_then_fail() -> anyhow::Result<()> {
    let (direct, table) = counter_table("once").await;
    let spec = local_stack::fault_proxy::Spec::parse("apply-then-fail=0.3,throttle=0.1,seed=5")?;
    let proxy = local_stack::fault_proxy::start(&std::env::var("SIDESTREAM_MOTO_ENDPOINT")?, spec).await?;
    let through = io_policy::without_sdk_retries(&sdk())
        .to_builder()
        .endpoint_url(format!("http://{}", proxy.addr))
        .build();
    let client = aws_sdk_dynamodb::Client::new(&through);
    let counters = Counters::new(client.clone(), &table, Sharding::new(4)?);
    let mut sent = 0_i128;
    for i in 0..150_i64 {
        counters.increment("once", i % 5 + 1).await?;
        sent += i128::from(i % 5 + 1);
    }
    let applied_then_failed = proxy.counts.applied_then_failed.load(std::sync::atomic::Ordering::SeqCst);
    anyhow::ensure!(applied_then_failed >= 20, "only {applied_then_failed} increments applied then failed");
    let exact = Counters::new(direct.clone(), &table, Sharding::new(4)?).exact("once").await?;
    anyhow::ensure!(exact == sent, "counted {exact}, sent {sent}: a retried increment counted twice");

    // The idempotence taken out: the same `ADD`, retried by the same policy, without a token.
    let before = proxy.counts.applied_then_failed.load(std::sync::atomic::Ordering::SeqCst);
    let policy = io_policy::Policy::default();
    for i in 0..150_i64 {
        let add = client
            .update_item()
            .table_name(&table)
            .key("pk", AttributeValue::S("plain".into()))
            .update_expression("ADD #count :n")
            .expression_attribute_names("#count", "count")
            .expression_attribute_values(":n", AttributeValue::N((i % 5 + 1).to_string()));
        policy
            .within(Duration::from_secs(20))
            .call(|| {
                let sent = add.clone().send();
                async move { sent.await.map_err(|e| io_policy::classify("UpdateItem", &e)) }
            })
            .await?;
    }
    let doubled = proxy.counts.applied_then_failed.load(std::sync::atomic::Ordering::SeqCst) - before;
    let plain = direct
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("plain".into()))
        .consistent_read(true)
        .send()
        .await?
        .item
        .and_then(|i| i.get("count").and_then(|c| c.as_n().ok()).and_then(|n| n.parse::<i128>().ok()))
        .unwrap_or_default();
    anyhow::ensure!(
        doubled > 0 && plain > sent,
        "without the token, {doubled} faults counted {plain} of {sent}"
    );
    Ok(())
}
