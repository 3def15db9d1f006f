//! `operations::verify`: drift injected into an index the indexer built (an entry deleted, an entry
//! added, a stale value, a stale included attribute) is found, each difference as its kind; the
//! verify job (the template's state machine, its segments taking an invocation a page) finds the
//! same and confirms it after its pause; and the mend touches exactly the
//! items of the missing and stale entries and deletes the extra one, so that once the stream has
//! carried the touches the index is exact, and a second verify finds nothing to mend.

use anyhow::{Result, ensure};
use aws_sdk_dynamodb::types::AttributeValue;
use operations::verify;
use serde_json::{Value, json};
use stream_runtime::Vars;

use local_stack::scan_policy;

use crate::support::moto::index_entries;
use crate::support::pipeline::{Local, assert_index_exact, failure_log, local, pipeline, put_issues};

#[tokio::test]
async fn verify_finds_each_kind_of_drift_and_repair_fixes_exactly_that() -> Result<()> {
    let Local { sdk, stack, client, .. } =
        local(&[("IndexVerifySchedule", "rate(1 day)"), ("IndexVerifySegments", "4")]).await?;
    let issues = crate::support::pipeline::issues_table(&stack)?;
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), |_, i| i)?;
    put_issues(&client, &issues, 0..20, |id| json!({"f1": id, "f2": format!("v{id}")})).await?;
    pipeline.settle().await?;
    let entries = assert_index_exact(&sdk, &stack).await?;

    let function = stack.function("multikey-indexer")?;
    let lookup = |name: &str| function.environment.get(name).cloned();
    let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&lookup))?;
    let index = verify::choose(&indexes, None)?;
    let mut scanned = Vec::new();
    let mut progress = |n| scanned.push(n);
    let exact = verify::verify(&client, scan_policy(), &indexes, index, &issues, &mut progress).await?;
    ensure!(exact.is_exact() && exact.entries == entries, "{exact:?}");
    // Both tables' items: the base's, and the index's, entries and tombstones alike.
    let index_items = local_stack::scan(&client, &index.table).await?.len();
    ensure!(index_items >= entries, "{index_items} items in the index table");
    ensure!(scanned.last() == Some(&(20 + index_items)), "both tables' items: {scanned:?}");

    // Drift: one entry deleted, one stale value, one stale included attribute, one extra.
    let table = index.table.to_string();
    let items = index_entries(&client, &table).await?;
    let (pk, sk) = (index.partition_key.as_str(), index.sort_key.as_str());
    let key_of = |item: &Value| {
        let s = |name: &str| AttributeValue::S(item[name]["S"].as_str().unwrap_or_default().to_owned());
        [(pk.to_owned(), s(pk)), (sk.to_owned(), s(sk))]
    };
    let [deleted, stale_value, stale_include, ..] = items.as_slice() else {
        anyhow::bail!("too few entries: {}", items.len());
    };
    client
        .delete_item()
        .table_name(&table)
        .set_key(Some(key_of(deleted).into_iter().collect()))
        .send()
        .await?;
    let mut changed = stale_value.clone();
    changed["value"] = json!({"S": "not what the base says"});
    let mut renamed = stale_include.clone();
    renamed["name"] = json!({"S": "Renamed behind the indexer's back"});
    let mut extra = stale_value.clone();
    extra[sk] = json!({"S": "an entry no item calls for"});
    for item in [&changed, &renamed, &extra] {
        let item: serde_dynamo::Item = serde_json::from_value(item.clone())?;
        client.put_item().table_name(&table).set_item(Some(item.into())).send().await?;
    }

    let drift = verify::verify(&client, scan_policy(), &indexes, index, &issues, &mut |_| {}).await?;
    ensure!(
        (drift.missing.len(), drift.stale.len(), drift.extra.len()) == (1, 2, 1),
        "one missing, two stale, one extra: {drift:#?}"
    );
    // Missing and stale entries are what the base calls for (content, no version); extra ones
    // as the index has them, version included.
    let content = operations::oracle::content;
    ensure!(drift.missing[0] == content(deleted) && drift.extra[0] == extra, "{drift:#?}");
    ensure!(
        drift.stale.contains(&content(stale_value)) && drift.stale.contains(&content(stale_include)),
        "the stale entries, as the base calls for them: {drift:#?}"
    );
    let writer = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));

    job_sees(&sdk, &stack, entries).await?;

    let through_stream = verify::Mender::new(writer.clone(), indexes.clone(), &issues, "repair-test");
    let mended = through_stream.drift(index, &drift).await?;
    let items: std::collections::BTreeSet<String> =
        [deleted, stale_value, stale_include].iter().map(|e| e["id"].to_string()).collect();
    ensure!(
        mended == verify::Mended { touched: items.len(), deleted: 1, ..verify::Mended::default() },
        "the items of the missing and stale entries touched, the extra entry deleted: {mended:?}"
    );
    ensure!(
        assert_index_exact(&sdk, &stack).await.is_err(),
        "the mend put no entry itself: the stream carries the touches"
    );
    pipeline.settle().await?;
    assert_index_exact(&sdk, &stack).await?;
    let again = verify::verify(&client, scan_policy(), &indexes, index, &issues, &mut |_| {}).await?;
    ensure!(again.is_exact(), "{again:#?}");
    let nothing = through_stream.drift(index, &again).await?;
    ensure!(nothing == verify::Mended::default());
    Ok(())
}

/// The verify job, report-only as deployed by default, sees the drift twice (it persists) and
/// writes nothing; its EMF document carries the sum the template's alarm watches. Each
/// invocation has time for one page of 8 items, so that every segment takes several invocations
/// and carries its state through S3 between them.
async fn job_sees(sdk: &aws_config::SdkConfig, stack: &local_stack::Stack, entries: usize) -> Result<()> {
    let invocations = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let local_stack::VerifyJob { run, emf, transitions } = local_stack::verify_job(
        sdk,
        stack,
        &[("VERIFY_CONFIRM_SECONDS", "0"), ("VERIFY_PAGE_SIZE", "8")],
        verify::job::STOP_BEFORE_DEADLINE + std::time::Duration::from_millis(1),
        &invocations,
    )
    .await?;
    ensure!(
        (
            emf["IndexDrift"].as_u64(),
            emf["IndexDriftSeen"].as_u64(),
            emf["IndexRepairs"].as_u64(),
            run.mended.is_none()
        ) == (Some(4), Some(4), Some(0), true),
        "the drift persists through the confirmation: {emf}"
    );
    // Four segments, one page of at most 8 items an invocation: each segment's base pass takes
    // one invocation at least, and the index passes (the entries, and any tombstones) take
    // every page of the index table; the merge and the confirmation one each.
    let invocations = invocations.load(std::sync::atomic::Ordering::Relaxed);
    let least = 4 + entries.div_ceil(8) as u64 + 2;
    ensure!(invocations >= least, "one page an invocation: {invocations} invocations, {least} at least");
    // What Step Functions bills, from the template's states: Segments and EachSegment; in each
    // of the four segments' executions a Check and a SegmentDone per invocation, and Finished;
    // then Merge, Pause and Confirm (two invocations). No retry.
    let checks = invocations - 2;
    ensure!(
        transitions == 2 + (2 * checks + 4) + 3,
        "{transitions} state transitions for {invocations} invocations"
    );
    Ok(())
}

/// `sidestream index verify --repair`, as an operator runs it while the indexer runs: it finds
/// one missing and one extra entry, touches the one item and deletes the other entry, then looks
/// again at what it mended (not the tables) until the stream has brought the entry back, and
/// exits 0 with the index exact. Paced (`--read-units`, `--write-units 1`), its second write waits.
#[tokio::test]
async fn the_cli_repairs_through_the_stream_and_settles_on_what_it_mended() -> Result<()> {
    let Local { sdk, stack, client, issues } = local(&[]).await?;
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), |_, i| i)?;
    put_issues(&client, &issues, 0..10, |id| json!({"f1": id})).await?;
    pipeline.settle().await?;
    assert_index_exact(&sdk, &stack).await?;

    let indexes_json = stack.environment("multikey-indexer")?["MULTIKEY_INDEXES"].clone();
    let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&|name: &str| {
        (name == "MULTIKEY_INDEXES").then(|| indexes_json.clone())
    }))?;
    let index = verify::choose(&indexes, None)?;
    let table = index.table.to_string();
    let (pk, sk) = (index.partition_key.as_str(), index.sort_key.as_str());
    let items = index_entries(&client, &table).await?;
    let Some(deleted) = items.first() else { anyhow::bail!("no entries") };
    let key = |item: &Value| -> Result<_> {
        let item: serde_dynamo::Item =
            serde_json::from_value(json!({pk: item[pk].clone(), sk: item[sk].clone()}))?;
        Ok(item.into())
    };
    client.delete_item().table_name(&table).set_key(Some(key(deleted)?)).send().await?;
    let mut extra = deleted.clone();
    extra[sk] = json!({"S": "an entry no item calls for"});
    let extra: serde_dynamo::Item = serde_json::from_value(extra)?;
    client.put_item().table_name(&table).set_item(Some(extra.into())).send().await?;

    let running = pipeline.spawn(std::time::Duration::from_millis(50));
    let repair = tokio::task::spawn_blocking(move || {
        crate::support::process::sidestream(
            &[
                "index",
                "verify",
                "--table",
                &issues,
                "--repair",
                "--read-units",
                "100",
                "--write-units",
                "1",
                "--output",
                "json",
            ],
            "",
            &[("MULTIKEY_INDEXES", indexes_json.as_str())],
        )
    })
    .await?;
    running.finish().await?;
    ensure!(repair.ok, "{}\n{}", repair.out, repair.err);
    let doc: Value = serde_json::from_str(&repair.out)?;
    ensure!(
        (doc["missing"].as_u64(), doc["extra"].as_u64(), doc["stale"].as_u64())
            == (Some(1), Some(1), Some(0))
            && doc["repaired"]["touched"] == 1
            && doc["repaired"]["deleted"] == 1
            && doc["after"]["exact"] == true,
        "one missing entry mended by a touch, one extra deleted, and then none left: {doc}"
    );
    // At one write a second, the second write waited for its pace.
    ensure!(doc["repaired"]["paced_ms"].as_u64() > Some(0), "the repair's writes were paced: {doc}");
    assert_index_exact(&sdk, &stack).await?;
    Ok(())
}
