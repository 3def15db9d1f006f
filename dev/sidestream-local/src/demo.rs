//! `sidestream-local demo`: Sidestream's main job on a local emulator. While the replayer runs
//! the three functions, it loads the article's issue tracker (then modifies and deletes
//! issues), a hot write-sharded counter with many concurrent increments, and issues that have
//! expired; once every stream has been replayed it prints what the functions kept, each beside
//! the check that it is exact.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use formats::counter::Sharding;
use local_stack::replayer::{Pipeline, Progress, Running};
use serde_json::{Value, json};
use sharded_counter::Counters;

use local_stack::{Stack, put_json as put, s3_client};

/// The issue tracker the demo loads (`dev/sidestream-local/demo/issue-tracker.json`).
const ISSUE_TRACKER: &str = include_str!("../demo/issue-tracker.json");

/// The hot counter: increments, concurrent writers, shards.
const COUNTER: &str = "page-views";
const INCREMENTS: u64 = 2_000;
const WRITERS: u64 = 32;
const SHARDS: u32 = 16;

/// How often slow steps report progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Runs the demo against `stack`, with `pipeline` replaying its streams; prints to `out`.
/// Returns whether every check held.
pub(crate) async fn run(
    sdk: &SdkConfig,
    stack: &Stack,
    pipeline: Pipeline,
    feed: &local_stack::cloudwatch::Feed,
    metered_before: &local_stack::meter::Metered,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
    let issues = stack.table("IssuesTable")?.name.clone();
    let index = stack.table("IndexTable")?.name.clone();
    let counters = stack.table("CounterTable")?.name.clone();

    let progress = pipeline.progress();
    let replay = pipeline.spawn(Duration::from_millis(100));

    let expiring = load_issues(&dynamodb, &issues, out).await?;

    writeln!(
        out,
        "Loading a hot counter: {INCREMENTS} increments of {COUNTER} from {WRITERS} concurrent writers, over {SHARDS} shards of {counters}"
    )?;
    let counter = Counters::new(
        aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(sdk)),
        &counters,
        Sharding::new(SHARDS)?,
    );
    let true_sum = increment(&counter, out).await?;

    writeln!(out, "Replaying the streams until every record is delivered")?;
    let pipeline = wait(replay, &progress, out).await?;
    let (mut invocations, mut records) = (0, 0);
    for (function, counts) in pipeline.counts() {
        writeln!(out, "  {function:<18} {counts}")?;
        invocations += counts.invocations;
        records += counts.read;
    }
    let metered = local_stack::meter::read(sdk).await?.since(metered_before).only(&stack.name);
    // The demo runs no job: no state transitions.
    let bill = local_stack::bench::cost::RunBill::of(&metered, invocations, 0, records)?;
    writeln!(out, "  billed (the emulator's meter since the stack was made; docs/cost.md): {}", bill.line())?;

    let mut ok = true;
    ok &= print_index(&dynamodb, stack, &index, out).await?;
    ok &= print_counter(&counter, true_sum, out).await?;
    ok &= print_archive(sdk, stack, &expiring, out).await?;
    ok &= print_status(sdk, stack, feed, out).await?;
    ok &= print_permissions(sdk, stack, out).await?;
    writeln!(out, "\n{}", if ok { "Every check holds." } else { "SOME CHECKS FAILED." })?;
    Ok(ok)
}

/// The article's issue tracker, then changes to it, then issues that expire; returns the
/// expiring issues as `(id, name, expires_at)`.
async fn load_issues(
    dynamodb: &aws_sdk_dynamodb::Client,
    issues: &str,
    out: &mut dyn Write,
) -> anyhow::Result<Vec<(&'static str, &'static str, i64)>> {
    let tracker: Value = serde_json::from_str(ISSUE_TRACKER).context("demo/issue-tracker.json")?;
    let (projects, loaded) = (array(&tracker, "projects"), array(&tracker, "issues"));
    writeln!(
        out,
        "Loading the article's issue tracker into {issues}: {} projects, {} issues",
        projects.len(),
        loaded.len()
    )?;
    for item in projects.iter().chain(loaded) {
        put(dynamodb, issues, item).await?;
    }
    writeln!(
        out,
        "  then: issue b707's Cost -20 -> 250, 67d1 loses its Due date, af34 renamed, 83a4 deleted by a user"
    )?;
    let edits = [
        ("b707", "SET custom_fields.#f = :v", "3fe6", Some(AttributeValue::N("250".into()))),
        ("67d1", "REMOVE custom_fields.#f", "882a", None),
        ("af34", "SET #f = :v", "name", Some(AttributeValue::S("Girder replaced".into()))),
    ];
    for (id, expression, name, value) in edits {
        update(dynamodb, issues, id, expression, name, value).await?;
    }
    local_stack::delete_json(dynamodb, issues, &json!({"id": "83a4"})).await?;

    let now = epoch_seconds();
    let expiring = vec![
        ("e001", "Draft: spring inspection", now - 3_600),
        ("e002", "Draft: paint order", now - 7_200),
        ("e003", "Draft: duplicate of 020e", now - 60),
        ("e004", "Draft: still current", now + 86_400),
    ];
    writeln!(out, "Loading {} issues with expires_at set, three of them in the past", expiring.len())?;
    for (num, (id, name, expires_at)) in expiring.iter().enumerate() {
        let item = json!({
            "id": id, "name": name, "project": "7b7e", "num": 100 + num, "state": "draft",
            "expires_at": expires_at, "custom_fields": {"3fe6": 1}
        });
        put(dynamodb, issues, &item).await?;
    }

    Ok(expiring)
}

fn array<'a>(value: &'a Value, field: &str) -> &'a [Value] {
    value.get(field).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn epoch_seconds() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

async fn update(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    id: &str,
    expression: &str,
    name: &str,
    value: Option<AttributeValue>,
) -> anyhow::Result<()> {
    client
        .update_item()
        .table_name(table)
        .key("id", AttributeValue::S(id.into()))
        .update_expression(expression)
        .expression_attribute_names("#f", name)
        .set_expression_attribute_values(value.map(|v| [(":v".to_owned(), v)].into()))
        .send()
        .await
        .with_context(|| format!("UpdateItem {table} {id}"))?;
    Ok(())
}

/// The concurrent increments; returns their true sum.
async fn increment(counter: &Counters, out: &mut dyn Write) -> anyhow::Result<i64> {
    let (sum, done) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicU64::new(0)));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (counter, sum, done) = (counter.clone(), Arc::clone(&sum), Arc::clone(&done));
            tokio::spawn(async move {
                for i in (w..INCREMENTS).step_by(usize::try_from(WRITERS).unwrap_or(1)) {
                    let n = i64::try_from(i % 5 + 1).unwrap_or(1);
                    counter.increment(COUNTER, n).await?;
                    sum.fetch_add(n, Ordering::Relaxed);
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, sharded_counter::CounterError>(())
            })
        })
        .collect();
    let all = futures_util::future::try_join_all(writers);
    tokio::pin!(all);
    let started = Instant::now();
    loop {
        tokio::select! {
            results = &mut all => {
                for result in results? {
                    result?;
                }
                break;
            }
            () = tokio::time::sleep(PROGRESS_EVERY) => {
                writeln!(out, "  … {}/{INCREMENTS} increments ({:.0?})", done.load(Ordering::Relaxed), started.elapsed())?;
            }
        }
    }
    Ok(sum.load(Ordering::Relaxed))
}

/// Waits for the replayer to settle, with progress.
async fn wait(replay: Running, progress: &Progress, out: &mut dyn Write) -> anyhow::Result<Pipeline> {
    let finish = replay.finish();
    tokio::pin!(finish);
    let started = Instant::now();
    loop {
        tokio::select! {
            done = &mut finish => return Ok(done?),
            () = tokio::time::sleep(PROGRESS_EVERY) => {
                writeln!(
                    out,
                    "  … {} records read, {} delivered in {} invocations, {} expired items swept ({:.0?})",
                    progress.read.load(Ordering::Relaxed),
                    progress.delivered.load(Ordering::Relaxed),
                    progress.invocations.load(Ordering::Relaxed),
                    progress.swept.load(Ordering::Relaxed),
                    started.elapsed()
                )?;
            }
        }
    }
}

/// Project 35e9 sorted by two custom fields, read through the index; then the whole index
/// against the issues table.
async fn print_index(
    client: &aws_sdk_dynamodb::Client,
    stack: &Stack,
    index: &str,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    for (field, title, forward) in [("3fe6", "Cost", true), ("3812", "Start date", false)] {
        let pk = format!("35e9#{field}");
        writeln!(
            out,
            "\nProject 35e9 sorted by {title} ({field}), {}: Query pk = {pk} on {index}, tombstones filtered out",
            if forward { "ascending" } else { "descending" },
        )?;
        let entries = local_stack::index_entries(client, index, ("pk", &pk), forward)
            .await
            .with_context(|| format!("Query {index}"))?;
        writeln!(out, "  {:>4}  {:<12}  {:<6}  name", "num", title, "state")?;
        for item in &entries {
            let text = |name: &str| match item.get(name) {
                Some(AttributeValue::S(s) | AttributeValue::N(s)) => s.clone(),
                _ => String::new(),
            };
            writeln!(
                out,
                "  {:>4}  {:<12}  {:<6}  {}",
                text("num"),
                text("value"),
                text("state"),
                text("name")
            )?;
        }
    }
    let index = local_stack::check_index(client, stack).await?;
    let exact = index.is_exact();
    if exact {
        writeln!(
            out,
            "The index holds exactly the {} entries the issues table calls for: ok",
            index.entries
        )?;
    } else {
        writeln!(
            out,
            "The index is WRONG: {} entries missing, {} extra",
            index.missing.len(),
            index.extra.len()
        )?;
        for line in index.missing.iter().take(5) {
            writeln!(out, "  missing: {line}")?;
        }
        for line in index.extra.iter().take(5) {
            writeln!(out, "  extra:   {line}")?;
        }
    }
    Ok(exact)
}

async fn print_counter(counter: &Counters, true_sum: i64, out: &mut dyn Write) -> anyhow::Result<bool> {
    let total = counter.total(COUNTER).await?;
    let shards = counter.exact(COUNTER).await?;
    let exact = total == Some(i128::from(true_sum)) && shards == i128::from(true_sum);
    writeln!(
        out,
        "\nThe counter {COUNTER}: total item {} (one GetItem), true sum of the increments {true_sum}, sum of the {SHARDS} shards {shards}: {}",
        total.map_or_else(|| "missing".to_owned(), |t| t.to_string()),
        if exact { "ok" } else { "WRONG" }
    )?;
    Ok(exact)
}

/// Every call the functions made under their template roles, as the emulator's IAM check
/// decided it: all allowed.
async fn print_permissions(sdk: &SdkConfig, stack: &Stack, out: &mut dyn Write) -> anyhow::Result<bool> {
    let report = local_stack::iam::report(sdk, &stack.roles).await?;
    let calls: u64 = report.calls.values().flat_map(|actions| actions.values()).sum();
    let ok = report.checked > 0 && report.denials.is_empty();
    writeln!(
        out,
        "\nPermissions: {} requests ({calls} IAM calls) made under {} of the template's roles, each checked against its policies; {} refused: {}",
        report.checked,
        report.calls.len(),
        report.denials.len(),
        if ok { "ok" } else { "WRONG" }
    )?;
    for denial in report.denials.iter().take(10) {
        writeln!(out, "  refused: {denial}")?;
    }
    Ok(ok)
}

/// The stack's health, as an operator sees it with `sidestream status`: healthy.
async fn print_status(
    sdk: &SdkConfig,
    stack: &Stack,
    feed: &local_stack::cloudwatch::Feed,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    writeln!(out, "\n$ {}", stack.status_command()?)?;
    let status = local_stack::status(sdk, stack, feed).await?;
    writeln!(out, "{status}")?;
    Ok(status.healthy())
}

/// The archive read back from S3: exactly the expired issues, not the user's delete.
async fn print_archive(
    sdk: &SdkConfig,
    stack: &Stack,
    expiring: &[(&str, &str, i64)],
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let (bucket, prefix) = stack.archive_location()?;
    writeln!(out, "\nArchived by TTL, read back from s3://{bucket}/{prefix}")?;
    let read_back = operations::archive::items(&s3_client(sdk), &bucket, &prefix).await?;
    let mut ids = Vec::new();
    for (key, item) in &read_back {
        let item = serde_json::to_value(item)?;
        let text = |name: &str| {
            item.get(name)
                .and_then(|v| v.get("S").or_else(|| v.get("N")))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        writeln!(out, "  {}  {:<26} expires_at {}  in {key}", text("id"), text("name"), text("expires_at"))?;
        ids.push(text("id"));
    }
    ids.sort();
    let now = epoch_seconds();
    let expected: Vec<String> =
        expiring.iter().filter(|(_, _, at)| *at < now).map(|(id, _, _)| (*id).to_owned()).collect();
    let exact = ids == expected;
    writeln!(
        out,
        "Archived: {} (expected the expired {}); the user's delete of 83a4 and the unexpired e004 are not archived: {}",
        ids.join(", "),
        expected.join(", "),
        if exact { "ok" } else { "WRONG" }
    )?;
    Ok(exact)
}
