//! The end-to-end bench's parts, small: every function's invocation through its runtime behind
//! the latency proxy, against moto and against the proxy's sink, with its requests counted
//! against the request bound; ten concurrent invocations on the same counter totals, exact,
//! with no conflict retry; and the issues stream read by two mappings and by one, with the same
//! writes. No figure is timed here: the bench measures, this checks that what it measures
//! happened.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use local_stack::bench::events::Batch;
use local_stack::bench::{Options, Part, Progress};

use crate::support::moto::{sdk, unique};
use crate::support::template::stream_functions;

fn options(parts: Vec<Part>) -> Options {
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    let mut options = Options::full(template, unique("bench"));
    options.latency = Duration::from_millis(1);
    options.repeats = 1;
    options.batches = vec![Batch::Records(100)];
    options.hot_invocations = vec![10];
    options.hot_rounds = 3;
    options.parts = parts;
    options
}

#[tokio::test]
async fn each_function_is_invoked_whole_and_its_requests_counted() -> Result<()> {
    let (report, progress, summary) = bench(Part::WritePath).await?;
    let cases: Vec<(&str, &str)> =
        report.write_path.iter().map(|r| (r.case.upstream, r.case.function)).collect();
    let functions = stream_functions();
    let expected: Vec<(&str, &str)> =
        ["moto", "sink"].into_iter().flat_map(|u| functions.iter().map(move |f| (u, *f))).collect();
    ensure!(cases == expected, "cases {cases:?}: {summary}");
    for row in &report.write_path {
        ensure!(
            row.case.records == 100 && row.requests > 0 && row.writes > 0,
            "{} {}: {} records, {} requests, {} writes",
            row.case.upstream,
            row.case.function,
            row.case.records,
            row.requests,
            row.writes
        );
        // The bound is computed from the runtime's count of its requests; the proxy counts them
        // on the wire, independently, and the floor replays exactly those.
        ensure!(row.replayed as u64 == row.requests, "replayed: {summary}");
        // No count can be below what the writes need: a PutItem (the indexer's, each guarded
        // by its version) and a PutObject carry one, a BatchWriteItem 25 item writes.
        let per_request = match row.case.function {
            "ttl-archiver" | "multikey-indexer" => 1,
            _ => 25,
        };
        ensure!(
            row.requests >= row.writes.div_ceil(per_request),
            "{} {}: {} requests for {} writes",
            row.case.upstream,
            row.case.function,
            row.requests,
            row.writes
        );
    }
    // One case per function and upstream.
    ensure_cases(&progress, 6, &summary)?;
    Ok(())
}

#[tokio::test]
async fn ten_invocations_on_the_same_totals_are_exact_without_conflicts() -> Result<()> {
    let (report, _, summary) = bench(Part::Hot).await?;
    let [row] = report.hot.as_slice() else {
        anyhow::bail!("one case expected: {summary}");
    };
    ensure!(row.invocations == 10 && row.batches == 30, "{summary}");
    ensure!(row.exact, "a total differs from its shards' sum: {}", row.detail);
    ensure!(row.conflicts == 0 && row.conflict_free == row.batches, "{summary}");
    // Conflict-free because each total is updated by one delta write per batch: a batch of the
    // 4 counters sends 4 requests. In the first round the totals do not exist yet, so each of
    // the 10 invocations may also send a delta that finds none and a creation (one wins).
    // Read-merge-write would send at least 2 per counter per batch: 240 here.
    let counters = local_stack::bench::hot::COUNTERS as u64;
    let most = row.batches * counters + 2 * counters * 10;
    ensure!(row.requests <= most, "more requests than delta writes: {summary}");
    Ok(())
}

#[tokio::test]
async fn one_mapping_makes_the_writes_two_mappings_make() -> Result<()> {
    let (report, progress, summary) = bench(Part::Combined).await?;
    let upstreams: Vec<&str> = report.combined.iter().map(|r| r.upstream).collect();
    ensure!(upstreams == ["moto", "sink"], "upstreams {upstreams:?}: {summary}");
    for row in &report.combined {
        // The indexer's mapping has no filter for a map attribute: every record. The archiver's
        // passes the TTL deletions: one in ten, at positions 8, 18, … of the first hundred.
        ensure!(
            row.records == 100 && row.indexer_records == 100 && row.archiver_records == 10,
            "filtered: {summary}"
        );
        ensure!(row.separate.invocations == 2 && row.combined.invocations == 1, "invocations: {summary}");
        // The same batch both ways: the same writes, each counted once.
        ensure!(row.separate.writes > 10 && row.separate.writes == row.combined.writes, "writes: {summary}");
        ensure!(row.separate.requests > 0 && row.combined.requests > 0, "requests: {summary}");
    }
    ensure_cases(&progress, 2, &summary)?;
    Ok(())
}

#[tokio::test]
async fn a_kinesis_event_makes_the_requests_its_dynamodb_event_makes() -> Result<()> {
    let (report, _, summary) = bench(Part::Kinesis).await?;
    let cases: Vec<(&str, &str)> =
        report.kinesis.iter().map(|r| (r.case.upstream, r.case.function)).collect();
    let expected: Vec<(&str, &str)> = ["moto", "sink"]
        .into_iter()
        .flat_map(|u| ["counter-aggregator", "ttl-archiver"].map(|f| (u, f)))
        .collect();
    ensure!(cases == expected, "cases {cases:?}: {summary}");
    for row in &report.kinesis {
        // The same changes from each source: the same writes, so the same requests; and the
        // Kinesis event larger (base64).
        ensure!(
            row.case.records == 100 && row.requests.0 > 0 && row.requests.0 == row.requests.1,
            "requests: {summary}"
        );
        ensure!(row.kinesis_bytes > row.dynamodb_bytes, "bytes: {summary}");
    }
    Ok(())
}

#[tokio::test]
async fn indexing_in_any_order_leaves_the_index_in_order_leaves() -> Result<()> {
    let endpoint = std::env::var("SIDESTREAM_MOTO_ENDPOINT")?;
    let progress = Progress::default();
    let options = options(vec![Part::AnyOrder]);
    let report = Box::pin(local_stack::bench::run(&sdk(), &endpoint, &options, &progress)).await?;
    let summary = serde_json::to_string_pretty(&report)?;
    ensure!(report.any_order.len() == 1, "{summary}");
    let row = &report.any_order[0];
    // Both modes plan and write alike: each entry and tombstone a guarded put.
    ensure!(
        row.records == 100
            && row.stream.writes > 10
            && row.any.writes == row.stream.writes
            && row.any.requests == row.stream.requests,
        "{summary}"
    );
    // Each side's own table: the same entries and the same tombstones.
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    let indexes = multikey_indexer::Indexes::from_json(multikey_indexer::synthetic::INDEXES_JSON)
        .map_err(anyhow::Error::msg)?;
    let mut entries = Vec::new();
    for order in ["stream", "any"] {
        let items = local_stack::scan(&client, &format!("{}-order0-{order}", options.stack)).await?;
        let (items, tombstones): (Vec<_>, Vec<_>) =
            items.into_iter().partition(|i| operations::oracle::is_entry(&indexes, i));
        ensure!(!tombstones.is_empty(), "{order}: no tombstones");
        entries.push(operations::oracle::lines(&items));
    }
    ensure!(
        entries[0].len() > 10 && entries[0] == entries[1],
        "{} entries in order, {} in any order",
        entries[0].len(),
        entries[1].len()
    );
    Ok(())
}

/// The cost part bills each function by the emulator's meter: the index's writes cost what the
/// same writes cost plain (within 10%) in both order modes, every function's bill has its parts,
/// the workload left tombstones whose share of a page's reads is reported, and a month at the
/// shape's rates adds the grid's pages at their measured read units.
#[tokio::test]
async fn a_million_changes_are_billed_and_the_index_costs_what_its_writes_cost() -> Result<()> {
    let mut options = options(vec![Part::Cost]);
    options.cost_changes = 2_000;
    let endpoint = std::env::var("SIDESTREAM_MOTO_ENDPOINT")?;
    let progress = Progress::default();
    let report = Box::pin(local_stack::bench::run(&sdk(), &endpoint, &options, &progress)).await?;
    let summary = serde_json::to_string_pretty(&report.cost)?;
    let cost = report.cost.as_ref().context("the cost part ran")?;
    let ratio = cost.index_wru_per_plain_write;
    ensure!(ratio.stream >= 1.0 && ratio.stream <= 1.10, "in order: {summary}");
    ensure!(ratio.any >= 1.0 && ratio.any <= 1.10, "in any order: {summary}");
    let names: Vec<&str> = cost.functions.iter().map(|f| f.function.as_str()).collect();
    ensure!(
        names
            == ["multikey-indexer (stream)", "multikey-indexer (any)", "ttl-archiver", "counter-aggregator"],
        "{names:?}"
    );
    let [indexer, any, archiver, aggregator] = &cost.functions[..] else { unreachable!("four rows") };
    // Per million changes: the indexer about 2.3 write units a change (the mix's plain writes),
    // the same in both modes; the archiver S3 PUTs and no DynamoDB writes; the aggregator its
    // totals' writes and reads.
    let bill = |row: &local_stack::bench::cost::Row| row.per_million;
    ensure!((1.8e6..3.0e6).contains(&bill(indexer).wru), "{summary}");
    ensure!((bill(indexer).wru - bill(any).wru).abs() < 1.0, "{summary}");
    ensure!(bill(archiver).s3_put_requests > 0.0 && bill(archiver).wru == 0.0, "{summary}");
    ensure!(bill(aggregator).wru > 0.0 && bill(aggregator).rru >= 0.0, "{summary}");
    for row in &cost.functions {
        let b = bill(row);
        ensure!(
            b.gb_seconds > 0.0 && b.lambda_requests > 0.0 && b.log_bytes > 0.0 && b.usd > 0.0,
            "{summary}"
        );
    }
    ensure!(cost.tombstones > 0.0 && cost.tombstone_read_share > 0.0, "{summary}");
    ensure!(cost.total.usd > bill(indexer).usd, "{summary}");
    // A month at the shape's rates: the bill per million scaled, and the grid's pages at the
    // read units a page of the index measured.
    let (m, shape) = (&cost.monthly, &cost.shape);
    let month = local_stack::bench::cost::MONTH_SECONDS;
    ensure!((m.changes - shape.changes_per_second * month).abs() < 1.0, "{summary}");
    ensure!((m.stack_usd - cost.total.usd * m.changes / 1e6).abs() < 1e-6, "{summary}");
    ensure!(m.rru_per_page > 0.0 && m.rru_per_page < 10.0 && m.grid_usd > 0.0, "{summary}");
    ensure!((m.usd - m.stack_usd - m.grid_usd).abs() < 1e-9, "{summary}");
    ensure_cases(&progress, 4, &summary)?;
    Ok(())
}

/// The run measured `cases` cases, by its progress.
fn ensure_cases(progress: &Progress, cases: u64, summary: &str) -> Result<()> {
    let done = progress.done.load(std::sync::atomic::Ordering::Relaxed);
    ensure!(done == cases, "{done} cases done: {summary}");
    Ok(())
}

/// The bench's part `part` run against the test's moto: its report, its progress, and the
/// report as pretty JSON for messages.
async fn bench(part: Part) -> Result<(local_stack::bench::Report, Progress, String)> {
    let endpoint = std::env::var("SIDESTREAM_MOTO_ENDPOINT")?;
    let progress = Progress::default();
    let report =
        Box::pin(local_stack::bench::run(&sdk(), &endpoint, &options(vec![part]), &progress)).await?;
    let summary = serde_json::to_string_pretty(&report)?;
    Ok((report, progress, summary))
}
