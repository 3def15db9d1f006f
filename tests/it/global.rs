//! A global table's two Regions on the local stack (`local_stack::replayer::global`: replication with
//! a delay, last writer wins, TTL deletes replicated, with or without the TTL service's identity,
//! which AWS does not document). Each function's safe deployment (docs/global-tables.md) is
//! exact in both Regions under both answers; the unsafe ones fail as the page says they would,
//! which is why the template guards against them.

use std::time::Duration;

use anyhow::{Result, ensure};
use aws_config::{Region, SdkConfig};
use formats::counter::Sharding;
use local_stack::Stack;
use local_stack::replayer::Pipeline;
use local_stack::replayer::global::{Replica, Replication, ReplicationCounts};
use serde_json::json;
use sharded_counter::Counters;
use stream_runtime::delivery::StreamReader;

use crate::support::moto::{sdk, unique};
use crate::support::pipeline::{archived_ids, assert_index_exact, failure_log, issue, now, pipeline};

/// The replication delay.
const DELAY: Duration = Duration::from_millis(200);

/// One Region: its SDK, its stack, its functions.
struct Regional {
    sdk: SdkConfig,
    stack: Stack,
    pipeline: Pipeline,
}

/// Two Regions' stacks of the same name over replicated issues and counter tables.
struct Global {
    regions: [Regional; 2],
    issues: Replication,
    counters: Replication,
}

impl Global {
    /// Both Regions (`us-east-1`, `eu-west-1`) deployed with `parameters`, replicating with a
    /// replicated TTL delete keeping the service identity if `ttl_identity`. TTL expires items in
    /// the Regions `sweeps` names: where it does not, items leave by replicated deletes only.
    async fn deploy(parameters: &[(&str, &str)], ttl_identity: bool, sweeps: [bool; 2]) -> Result<Global> {
        let name = unique("global");
        let parameters: std::collections::BTreeMap<String, String> =
            parameters.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let template = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
        let mut regions = Vec::new();
        for (region, sweeps) in ["us-east-1", "eu-west-1"].into_iter().zip(sweeps) {
            let sdk = sdk().to_builder().region(Region::new(region)).build();
            // A stack per Region, as CloudFormation deploys it: its own bucket names.
            let stack = Stack::create(&sdk, &template, &format!("{name}-{region}"), &parameters).await?;
            let pipeline = if sweeps {
                pipeline(&sdk, &stack, &failure_log(), |_, i| i)?
            } else {
                Pipeline::new(
                    &aws_sdk_dynamodbstreams::Client::new(&sdk),
                    stack.sources(|f| local_stack::in_process_invoker(f, &sdk))?,
                    Vec::new(),
                    local_stack::replayer::FailureLog::new(failure_log()),
                )
            };
            regions.push(Regional { sdk, stack, pipeline });
        }
        let replicas = |logical: &str| -> Result<[Replica; 2]> {
            let one = |r: &Regional| -> Result<Replica> {
                let table = r.stack.table(logical)?.name.clone();
                let reader = StreamReader::new(
                    aws_sdk_dynamodbstreams::Client::new(&r.sdk),
                    r.stack.streams[&table].clone(),
                );
                let region = r.sdk.region().map_or("", |x| x.as_ref()).to_owned();
                Ok(Replica::new(&region, aws_sdk_dynamodb::Client::new(&r.sdk), &table, reader))
            };
            Ok([one(&regions[0])?, one(&regions[1])?])
        };
        let [ia, ib] = replicas("IssuesTable")?;
        let [ca, cb] = replicas("CounterTable")?;
        let regions: [Regional; 2] = regions.try_into().map_err(|_| anyhow::anyhow!("two Regions"))?;
        Ok(Global {
            regions,
            issues: Replication::new(ia, ib, DELAY, ttl_identity),
            counters: Replication::new(ca, cb, DELAY, ttl_identity),
        })
    }

    fn client(&self, region: usize) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.regions[region].sdk)
    }

    fn table(&self, region: usize, logical: &str) -> Result<String> {
        Ok(self.regions[region].stack.table(logical)?.name.clone())
    }

    /// Replicates and runs both Regions' functions and sweepers until nothing is left to do.
    async fn settle(&mut self) -> Result<()> {
        for _ in 0..4 {
            self.issues.settle(Duration::from_secs(60)).await?;
            self.counters.settle(Duration::from_secs(60)).await?;
            for region in &mut self.regions {
                region.pipeline.settle().await?;
            }
        }
        self.issues.settle(Duration::from_secs(60)).await?;
        self.counters.settle(Duration::from_secs(60)).await?;
        ensure!(self.issues.pending() == 0 && self.counters.pending() == 0);
        Ok(())
    }

    /// Issues written in each Region (each its own), and items that expire there.
    async fn write_issues(&self) -> Result<Vec<String>> {
        let mut expired = Vec::new();
        for region in 0..2 {
            let (client, table) = (self.client(region), self.table(region, "IssuesTable")?);
            for i in 0..15 {
                let id = region * 100 + i;
                local_stack::put_json(&client, &table, &issue(id, &json!({"f1": id, "f2": format!("v{i}")})))
                    .await?;
            }
            for i in 0..5 {
                let id = format!("gone-{region}-{i}");
                let item = json!({"id": id, "project": "p", "num": i, "expires_at": now() - 10});
                local_stack::put_json(&client, &table, &item).await?;
                expired.push(id);
            }
            let future = json!({"id": format!("future-{region}"), "project": "p", "num": 9, "expires_at": now() + 3600});
            local_stack::put_json(&client, &table, &future).await?;
        }
        expired.sort();
        Ok(expired)
    }

    /// Each Region's counters client, with `sharding(region)`.
    fn counters(&self, region: usize, sharding: Sharding) -> Result<Counters> {
        Ok(Counters::new(self.client(region), &self.table(region, "CounterTable")?, sharding))
    }
}

/// The safe deployment: the archiver and the aggregator in `us-east-1` only, the indexer in both
/// with a regional index, the counters' shards per Region. TTL expires items in `eu-west-1`
/// only, so that every TTL deletion reaches the archiving Region as a replicated delete.
async fn safe(ttl_identity: bool) -> Result<ReplicationCounts> {
    let region = "us-east-1";
    let parameters = [("Consumers", "Combined"), ("ArchiveRegion", region), ("AggregatorRegion", region)];
    let mut global = Global::deploy(&parameters, ttl_identity, [false, true]).await?;
    let expired = global.write_issues().await?;
    for (r, from) in [(0_u32, 1_i64), (1, 101)] {
        let counters = global.counters(r as usize, Sharding::new(4)?.in_region(r, 2)?)?;
        for n in from..from + 30 {
            counters.increment("hot", n).await?;
        }
    }
    global.settle().await?;

    // Each TTL deletion archived once, by the one archiving Region.
    let archived = archived_ids(&global.regions[0].sdk, &global.regions[0].stack).await?;
    ensure!(archived == expired, "identity kept {ttl_identity}: archived {archived:?}");
    // Each Region's own index exact against its own replica, and the replicas alike.
    for region in &global.regions {
        let entries = assert_index_exact(&region.sdk, &region.stack).await?;
        ensure!(entries > 40, "{entries} entries");
    }
    let base = |r: usize| {
        let (client, table) = (global.client(r), global.table(r, "IssuesTable"));
        async move {
            Ok::<_, anyhow::Error>(operations::oracle::lines(&local_stack::scan(&client, &table?).await?))
        }
    };
    ensure!(base(0).await? == base(1).await?, "the replicas converge");
    // Totals summed once, in the aggregating Region, from both Regions' shards; the total item
    // replicated to the other Region.
    let sum: i128 = (1..31).chain(101..131).sum();
    for r in 0..2 {
        let counters = global.counters(r, Sharding::new(4)?.in_region(0, 2)?)?;
        ensure!(counters.total("hot").await? == Some(sum), "Region {r}: {:?}", counters.total("hot").await?);
    }
    ensure!(global.counters(0, Sharding::new(4)?.in_region(0, 2)?)?.exact("hot").await? == sum);
    Ok(global.issues.counts())
}

/// Every TTL deletion reached the archiving Region replicated (10 items expired), so its
/// archive was exact with them alone.
fn replicated_into_the_archiving_region(counts: ReplicationCounts) -> Result<()> {
    ensure!(counts.ttl_deletes_into == [10, 0] && counts.replicated > 30 && counts.echoes > 30, "{counts:?}");
    Ok(())
}

#[tokio::test]
async fn safe_modes_are_exact_in_both_regions_when_replicated_ttl_deletes_keep_the_identity() -> Result<()> {
    replicated_into_the_archiving_region(safe(true).await?)
}

#[tokio::test]
async fn safe_modes_are_exact_in_both_regions_when_replicated_ttl_deletes_lose_the_identity() -> Result<()> {
    replicated_into_the_archiving_region(safe(false).await?)
}

/// The unsafe deployments the template's parameters guard against: the archiver in every Region
/// archives each TTL deletion in every Region's archive when the replicated delete keeps the
/// identity (twice in all), and two Regions incrementing the same shard lose increments to last
/// writer wins.
#[tokio::test]
async fn unsafe_modes_double_archive_and_lose_increments() -> Result<()> {
    let mut global = Global::deploy(&[("Consumers", "Combined")], true, [true, true]).await?;
    let expired = global.write_issues().await?;
    // Both Regions increment the one shard of `hot` before either's writes have replicated.
    for r in 0..2 {
        let counters = global.counters(r, Sharding::new(1)?)?;
        for _ in 0..10 {
            counters.increment("hot", 1).await?;
        }
    }
    global.settle().await?;
    for region in &global.regions {
        let archived = archived_ids(&region.sdk, &region.stack).await?;
        ensure!(archived == expired, "each deletion archived in {}: {archived:?}", region.stack.region);
    }
    let counters = global.counters(0, Sharding::new(1)?)?;
    let (total, exact) = (counters.total("hot").await?, counters.exact("hot").await?);
    // The aggregator sums what the shard holds; the shard lost what replication overwrote.
    ensure!(
        exact < 20 && total == Some(exact) && global.counters.counts().lost > 0,
        "20 increments acknowledged; the shard holds {exact}, the total {total:?}: {:?}",
        global.counters.counts()
    );
    Ok(())
}

/// A Region's own write that lands after the replication read that Region's stream, and before
/// the replicated write of an older change of the item: the replicated write's condition fails,
/// the stream is read again, and the later write wins in both Regions, as DynamoDB's last writer
/// wins. Three such races: a put over a put, a put over a delete, and a put over an item the
/// Region's stream had never shown. Unconditioned, each would leave the replicas apart (the test
/// fails without the conditions).
#[tokio::test]
async fn a_local_write_after_the_stream_was_read_wins_in_both_regions() -> Result<()> {
    let parameters =
        [("Consumers", "Combined"), ("ArchiveRegion", "us-east-1"), ("AggregatorRegion", "us-east-1")];
    let mut global = Global::deploy(&parameters, false, [false, false]).await?;
    let clients = [global.client(0), global.client(1)];
    let tables = [global.table(0, "IssuesTable")?, global.table(1, "IssuesTable")?];
    let put = |r: usize, id: usize, version: &str| {
        let (client, table) = (&clients[r], &tables[r]);
        let item = issue(id, &json!({"f1": version}));
        async move { local_stack::put_json(client, table, &item).await }
    };
    put(0, 1, "v0").await?;
    put(0, 2, "v0").await?;
    global.settle().await?;

    // The older changes, all in us-east-1, read by the replication before eu-west-1's writes.
    put(0, 1, "old").await?;
    put(0, 2, "old").await?;
    put(0, 3, "old").await?;
    global.issues.read().await?;
    tokio::time::sleep(Duration::from_millis(5)).await;
    put(1, 1, "new").await?;
    clients[1]
        .delete_item()
        .table_name(&tables[1])
        .key("id", aws_sdk_dynamodb::types::AttributeValue::S("i002".into()))
        .send()
        .await?;
    put(1, 3, "new").await?;
    tokio::time::sleep(DELAY).await;
    let before = global.issues.counts();
    global.issues.apply_due().await?;
    let after = global.issues.counts();
    // The first condition to fail read eu-west-1's stream again, which showed all three writes.
    ensure!(
        after.raced - before.raced == 1 && after.lost - before.lost == 3,
        "a race caught by a condition, and the three older changes lost to the later writes: {after:?}"
    );
    global.settle().await?;

    let base = |r: usize| {
        let (client, table) = (clients[r].clone(), tables[r].clone());
        async move { Ok::<_, anyhow::Error>(local_stack::scan(&client, &table).await?) }
    };
    let (a, b) = (base(0).await?, base(1).await?);
    ensure!(operations::oracle::lines(&a) == operations::oracle::lines(&b), "the replicas converge");
    let versions: Vec<(String, String)> = a
        .iter()
        .map(|item| {
            let f1 = item["custom_fields"]["M"]["f1"]["S"].as_str().unwrap_or_default();
            (item["id"]["S"].as_str().unwrap_or_default().to_owned(), f1.to_owned())
        })
        .collect();
    let mut versions = versions;
    versions.sort();
    ensure!(
        versions == [("i001".to_owned(), "new".to_owned()), ("i003".to_owned(), "new".to_owned())],
        "the later writes won: {versions:?}"
    );
    // The index of each Region is exact against its own replica.
    for region in &global.regions {
        assert_index_exact(&region.sdk, &region.stack).await?;
    }
    Ok(())
}
