//! Write-sharded counters against moto: concurrent increments through the library, then the
//! exact read equals the true sum.

use sharded_counter::{Counters, Layout};

use crate::moto::{create_table, sdk, unique};

/// Four writers make 250 increments each on one counter (and a few on another); the exact read
/// sums the shards to the true totals, and the shards really are spread.
#[tokio::test]
async fn concurrent_increments_sum_exactly() {
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    let table = unique("counters");
    create_table(&client, &table, "pk", None, false).await;
    let counters = Counters::new(client.clone(), &table, Layout::new(10).unwrap());

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
    assert_eq!(
        counters.total("votes#alice").await.unwrap(),
        None,
        "no aggregator has run"
    );

    let scanned = client.scan().table_name(&table).send().await.unwrap();
    let shards = scanned
        .items()
        .iter()
        .filter(|i| {
            i["pk"]
                .as_s()
                .unwrap()
                .starts_with("COUNTER#votes%23alice#SHARD#")
        })
        .count();
    assert!(
        shards >= 8,
        "1,000 random increments touch (nearly) all 10 shards, got {shards}"
    );
}

/// More shards than one `BatchGetItem` reads, and a shard holding something that is not a count.
#[tokio::test]
async fn exact_reads_chunk_by_100_and_reject_non_counts() {
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    let table = unique("counters");
    create_table(&client, &table, "pk", None, false).await;
    let counters = Counters::new(client.clone(), &table, Layout::new(250).unwrap());
    for shard in [0, 99, 100, 199, 249] {
        counters
            .increment_shard("wide", shard, i64::from(shard) + 1)
            .await
            .unwrap();
    }
    assert_eq!(counters.exact("wide").await.unwrap(), 1 + 100 + 101 + 200 + 250);

    client
        .put_item()
        .table_name(&table)
        .item(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("COUNTER#odd#SHARD#3".to_owned()),
        )
        .item(
            "count",
            aws_sdk_dynamodb::types::AttributeValue::S("many".to_owned()),
        )
        .send()
        .await
        .unwrap();
    let err = counters.exact("odd").await.unwrap_err().to_string();
    assert!(
        err.contains(r#"item "COUNTER#odd#SHARD#3" has count = S("many"), not an integer count"#),
        "{err}"
    );
}
