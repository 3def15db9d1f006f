//! `index_backfill` on a table the indexer has never seen: 2,000 issues (20,000 at full scale,
//! [`crate::support::scale`]) written while the
//! indexer was detached, then backfilled by touching them while two writers modify, re-scope and
//! delete a tenth of them and the indexer runs; `operations::verify` then finds no drift. Once straight
//! through, and once killed midway and resumed from its checkpoint file.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use formats::touch::TOUCH_ATTRIBUTE;
use local_stack::scan_policy;
use multikey_indexer::Indexes;
use operations::backfill::{Backfill, Checkpoint, Settings, Target};
use serde_json::json;
use stream_runtime::delivery::StreamReader;
use stream_runtime::{ItemWrite, Op, Vars};

use crate::support::moto::{sdk_on, unique};
use crate::support::pipeline::{Local, failure_log, issue, local, pipeline, stack};

/// The issues written before the backfill: 2,000, or 20,000 at full scale. CI runs 2,000: what
/// the race proves is the order of the writers' changes against the backfill's touches, not the
/// table's size. At 2,000 the scan still takes twenty pages (of 100), the writers' 200 changes are
/// spread over them so that they meet items both before and after their touch (each counted and
/// asserted), the kill still falls between pages with touches in flight, and the verify still
/// reads every item and entry; 20,000 adds pages of the same kinds.
fn items() -> usize {
    crate::support::scale::size(2_000, 20_000)
}
/// Every tenth item is changed by a writer during the backfill.
const CHANGED_EVERY: usize = 10;
const SEGMENTS: u32 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_while_two_writers_change_items_leaves_no_drift() -> Result<()> {
    backfill_with_writers(false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_killed_midway_resumes_and_leaves_no_drift() -> Result<()> {
    backfill_with_writers(true).await
}

/// What the writers saw of the race: how many of their changes met an item the backfill had
/// already touched, and how many one it had not (yet).
#[derive(Debug, Default)]
struct Race {
    after_touch: AtomicU64,
    before_touch: AtomicU64,
}

#[expect(clippy::too_many_lines, reason = "one scenario, told in order")]
async fn backfill_with_writers(kill: bool) -> Result<()> {
    let items = items();
    // The two runs (killed or not) go at once, each on a moto of its own (when scripts/test
    // starts two): on one, they took 18 minutes each at full scale, where one alone takes 6.
    let sdk = sdk_on(usize::from(kill));
    let stack = stack(&sdk, &[]).await?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let writer_client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let issues = crate::support::pipeline::issues_table(&stack)?;
    let index_table = stack.table("IndexTable")?.name.clone();

    // The items exist before the indexer does: it is detached (answers without seeing the
    // records) while they are written and their stream records delivered.
    let (mut pipeline, attached) = detachable(&sdk, &stack)?;
    let seeding = Instant::now();
    seed(&writer_client, &issues, items).await?;
    eprintln!("written {} items in {:.1} s", items, seeding.elapsed().as_secs_f64());
    pipeline.settle().await?;
    ensure!(local_stack::scan(&client, &index_table).await?.is_empty(), "the detached indexer wrote nothing");
    eprintln!("seeded {items} items in {:.1} s", seeding.elapsed().as_secs_f64());
    attached.store(true, Ordering::SeqCst);
    let running = pipeline.spawn(Duration::from_millis(50));

    // Two writers, each changing a twentieth of the items in step with the backfill's progress.
    let scanned = Arc::new(AtomicU64::new(0));
    let race = Arc::new(Race::default());
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (client, issues) = (client.clone(), issues.clone());
            let (scanned, race) = (Arc::clone(&scanned), Arc::clone(&race));
            tokio::spawn(async move {
                let ids: Vec<usize> = (0..items).step_by(CHANGED_EVERY).skip(w).step_by(2).collect();
                let spread = (items as u64) * 9 / 10;
                for (n, id) in ids.iter().enumerate() {
                    let due = spread * (n as u64 + 1) / ids.len() as u64;
                    while scanned.load(Ordering::SeqCst) < due {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    let old = change(&client, &issues, *id).await?;
                    let counter = if old.contains_key(TOUCH_ATTRIBUTE) {
                        &race.after_touch
                    } else {
                        &race.before_touch
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                anyhow::Ok(ids.len())
            })
        })
        .collect();

    let function = stack.function("multikey-indexer")?;
    let lookup = |name: &str| function.environment.get(name).cloned();
    let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&lookup))?;
    let target = Target::new(&issues, &indexes, None)?;
    // Twenty pages in all, so that the writers meet the backfill both ahead of and behind it.
    let settings = Settings { page_size: i32::try_from(items / 20)?, ..Settings::default() };
    let path = std::env::temp_dir().join(format!("{}.json", unique("backfill-checkpoint")));
    let started = Instant::now();
    let mut checkpoint =
        Checkpoint::new(&issues, &operations::backfill::new_run_id(), &target.sources, SEGMENTS);
    let halfway = tokio::sync::Notify::new();
    {
        let backfill = Backfill::new(writer_client.clone(), target.clone(), settings.clone());
        let mut save = |c: &Checkpoint| {
            c.save(&path)?;
            if kill && c.counts().scanned >= items as u64 / 2 {
                halfway.notify_one();
            }
            Ok(())
        };
        let mut progress = |c: &operations::backfill::Counts| scanned.store(c.scanned, Ordering::SeqCst);
        let run = backfill.run(&mut checkpoint, &mut save, &mut progress);
        tokio::select! {
            result = run => result?,
            () = halfway.notified() => {}
        }
    }
    if kill {
        // Killed: the run's future dropped with touches in flight. Resume from the file alone.
        let saved = Checkpoint::load(&path)?.context("the killed run saved a checkpoint")?;
        let before = saved.counts().scanned;
        ensure!(
            !saved.is_done() && before >= items as u64 / 2 && before < items as u64,
            "killed midway: {:?}",
            saved.counts()
        );
        saved.matches(&issues, &target.sources, SEGMENTS).map_err(anyhow::Error::msg)?;
        checkpoint = saved;
        let backfill = Backfill::new(writer_client.clone(), target.clone(), settings);
        let mut save = |c: &Checkpoint| c.save(&path);
        let mut progress = |c: &operations::backfill::Counts| scanned.store(c.scanned, Ordering::SeqCst);
        backfill.run(&mut checkpoint, &mut save, &mut progress).await?;
        eprintln!("killed at {before} items scanned, resumed");
    }
    let took = started.elapsed();
    scanned.store(u64::MAX, Ordering::SeqCst);
    let mut changed = 0;
    for writer in writers {
        changed += writer.await??;
    }
    eprintln!("backfill and writers done in {:.1} s", started.elapsed().as_secs_f64());
    running.finish().await?;
    eprintln!("stream settled in {:.1} s", started.elapsed().as_secs_f64());
    let counts = checkpoint.counts();
    ensure!(checkpoint.is_done(), "{checkpoint:?}");
    eprintln!(
        "backfill: {counts:?} in {:.1} s, {:.0} items/s",
        took.as_secs_f64(),
        f64::from(u32::try_from(counts.scanned)?) / took.as_secs_f64()
    );
    ensure!(changed == items / CHANGED_EVERY, "{changed} changes");
    let race = (race.after_touch.load(Ordering::Relaxed), race.before_touch.load(Ordering::Relaxed));
    ensure!(race.0 > 0 && race.1 > 0, "writers changed items both after and before their touch: {race:?}");
    // Every item still there was touched (or found touched on resuming); deleted ones may have
    // been scanned first.
    let remaining = items - items / CHANGED_EVERY / 3;
    ensure!(counts.touched + counts.already >= remaining as u64 && counts.unindexed == 0, "{counts:?}");

    let verifying = Instant::now();
    let index = operations::verify::choose(&indexes, None)?;
    let drift =
        operations::verify::verify(&client, scan_policy(), &indexes, index, &issues, &mut |_| {}).await?;
    eprintln!(
        "verify: {} base items and {} entries in {:.1} s; writers' changes after touch {}, before {}",
        remaining,
        drift.entries,
        verifying.elapsed().as_secs_f64(),
        race.0,
        race.1
    );
    ensure!(
        drift.is_exact() && drift.entries >= remaining,
        "drift after the backfill: {} missing, {} stale, {} extra; first: {:?} {:?} {:?}",
        drift.missing.len(),
        drift.stale.len(),
        drift.extra.len(),
        drift.missing.first(),
        drift.stale.first(),
        drift.extra.first()
    );
    std::fs::remove_file(&path).ok();
    Ok(())
}

/// The stack's pipeline, with the indexer detached until the flag is set: while detached, it
/// answers every batch without seeing its records, like an indexer that did not exist yet. No
/// TTL sweeps: nothing expires here, and sweeping thousands of items every second would be most of
/// moto's work.
fn detachable(
    sdk: &aws_config::SdkConfig,
    stack: &local_stack::Stack,
) -> Result<(local_stack::replayer::Pipeline, Arc<AtomicBool>)> {
    let attached = Arc::new(AtomicBool::new(false));
    let gate = Arc::clone(&attached);
    let pipeline = pipeline(sdk, stack, &failure_log(), move |name, inner| {
        if name != "multikey-indexer" {
            return inner;
        }
        let gate = Arc::clone(&gate);
        stream_runtime::delivery::in_process(move |event, deadline| {
            let (inner, gate) = (Arc::clone(&inner), Arc::clone(&gate));
            async move {
                let event = if gate.load(Ordering::SeqCst) {
                    event
                } else {
                    stream_runtime::delivery::event(Vec::new())
                };
                inner(event, deadline).await
            }
        })
    })?
    .without_ttl_sweeps();
    Ok((pipeline, attached))
}

/// Issues `0..items`, two custom fields each, written in batches.
async fn seed(client: &aws_sdk_dynamodb::Client, issues: &str, items: usize) -> Result<()> {
    let table: Arc<str> = Arc::from(issues);
    let writes: Vec<ItemWrite> = (0..items)
        .map(|id| -> Result<ItemWrite> {
            let item = issue(id, &json!({"f1": id % 97, "f2": format!("v{}", id % 13)}));
            Ok(ItemWrite {
                table: Arc::clone(&table),
                op: Op::Put(serde_dynamo::to_item(&item)?),
                origin: id,
            })
        })
        .collect::<Result<_>>()?;
    let report = stream_runtime::writer::Writer::new(client.clone())
        .write(writes, &io_policy::Policy::default().within(Duration::from_secs(600)))
        .await;
    ensure!(report.failures.is_empty(), "seeding: {:?}", report.failures.first());
    Ok(())
}

/// The template's backfill state machine (`EnableBackfill`), run in process by the local stack
/// with the backfill function in process: its segments fan out, each loops through invocations
/// of one page until its cursor is done, and the index is then exact.
#[tokio::test]
async fn the_templates_state_machine_backfills_through_the_local_stack() -> Result<()> {
    const SMALL: usize = 300;
    let Local { sdk, stack, client, issues } = local(&[("EnableBackfill", "true")]).await?;
    let (mut pipeline, attached) = detachable(&sdk, &stack)?;
    seed(&aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk)), &issues, SMALL).await?;
    pipeline.settle().await?;
    attached.store(true, Ordering::SeqCst);

    let invocations = Arc::new(AtomicU64::new(0));
    // Each invocation's deadline leaves it time for one page of 25 items, so that a segment
    // takes several invocations and the Choice loop carries its cursor between them.
    let invoke = local_stack::task_invoker::<operations::backfill::Backfill>(
        stack.function("index-backfiller")?,
        &sdk,
        &[("BACKFILL_PAGE_SIZE", "25")],
        operations::backfill::task::STOP_BEFORE_DEADLINE + Duration::from_millis(1),
        Arc::clone(&invocations),
    )
    .await?;
    // Invoked as the state machine invokes it: under its role.
    let invoke = stack.state_machine_invoker(&sdk, "BackfillStateMachine", invoke)?;
    let input = json!({"run_id": "bf-local", "total_segments": 3, "max_concurrency": 2});
    let output = local_stack::states::execute(stack.state_machine("BackfillStateMachine")?, input, &invoke)
        .await?
        .output;
    ensure!(output == json!({"segments": 3}), "{output}");
    let invocations = invocations.load(Ordering::Relaxed);
    // States.ArrayRange's 1,000 items bound the segments: more, or none, fail by name before
    // any invocation.
    // And a max_concurrency of 0 (no limit) or above the function's reserved concurrency (10 by
    // default: segments would wait throttled) fails by name too.
    for (total_segments, max_concurrency, error) in [
        (1001, 2, "SegmentsOutOfRange"),
        (0, 2, "SegmentsOutOfRange"),
        (3, 0, "ConcurrencyOutOfRange"),
        (3, 11, "ConcurrencyOutOfRange"),
    ] {
        let input = json!({"run_id": "bf-local", "total_segments": total_segments, "max_concurrency": max_concurrency});
        let refused =
            local_stack::states::execute(stack.state_machine("BackfillStateMachine")?, input, &invoke).await;
        ensure!(
            matches!(&refused, Err(e) if e.to_string().contains(error)),
            "{total_segments} segments, max_concurrency {max_concurrency}: {refused:?}"
        );
    }
    ensure!(invocations >= (SMALL / 25) as u64, "one page of 25 per invocation: {invocations} invocations");
    pipeline.settle().await?;

    let function = stack.function("multikey-indexer")?;
    let lookup = |name: &str| function.environment.get(name).cloned();
    let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&lookup))?;
    let index = operations::verify::choose(&indexes, None)?;
    let drift =
        operations::verify::verify(&client, scan_policy(), &indexes, index, &issues, &mut |_| {}).await?;
    ensure!(drift.is_exact() && drift.entries == 2 * SMALL, "{drift:?}");
    // The backfill's touches and the state machine's invocations, each allowed by its role.
    let permitted = stack.ensure_permitted(&sdk).await?;
    let calls = |role: &str, action: &str| {
        permitted.calls.get(role).and_then(|a| a.get(action)).copied().unwrap_or(0)
    };
    ensure!(
        calls("BackfillRole", "dynamodb:UpdateItem") > 0
            && calls("BackfillStateMachineRole", "lambda:InvokeFunction") >= invocations,
        "the backfill's calls were checked under its roles: {:?}",
        permitted.calls
    );
    Ok(())
}

/// One writer's change to item `id`: a modification (a whole-item put, which drops the marker),
/// a re-scope (an update of the scope attribute, which keeps it) or a delete, by `id % 3`.
/// Returns the item as it was.
async fn change(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    id: usize,
) -> Result<std::collections::HashMap<String, AttributeValue>> {
    let key = AttributeValue::S(format!("i{id:03}"));
    let old = match id % 3 {
        0 => {
            let item = issue(id, &json!({"f1": id + 1, "f3": "changed"}));
            let item: serde_dynamo::Item = serde_dynamo::to_item(&item)?;
            client
                .put_item()
                .table_name(table)
                .set_item(Some(item.into()))
                .return_values(ReturnValue::AllOld)
                .send()
                .await?
                .attributes
        }
        1 => {
            client
                .update_item()
                .table_name(table)
                .key("id", key)
                .update_expression("SET #p = :p")
                .expression_attribute_names("#p", "project")
                .expression_attribute_values(":p", AttributeValue::S("moved".into()))
                .return_values(ReturnValue::AllOld)
                .send()
                .await?
                .attributes
        }
        _ => {
            client
                .delete_item()
                .table_name(table)
                .key("id", key)
                .return_values(ReturnValue::AllOld)
                .send()
                .await?
                .attributes
        }
    };
    old.context("the writers change existing items")
}

/// Changing an index's definition (docs/operations.md): the new definition is deployed beside the
/// old one, with its own table; `index rebuild` creates that table and backfills it; verify finds
/// both exact; the configuration then drops the old index, its table is deleted, and the new
/// index stays exact as items keep changing.
#[tokio::test]
async fn a_changed_index_definition_is_rebuilt_into_a_new_table_verified_and_switched() -> Result<()> {
    const N: usize = 200;
    let Local { sdk, stack, client, issues } = local(&[]).await?;
    let writer = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let deployed: Arc<std::sync::Mutex<Option<stream_runtime::delivery::Invoker>>> = Arc::default();
    let slot = Arc::clone(&deployed);
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), move |name, inner| {
        if name != "multikey-indexer" {
            return inner;
        }
        *slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(inner);
        let slot = Arc::clone(&slot);
        stream_runtime::delivery::in_process(move |event, deadline| {
            let current = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            async move {
                match current {
                    Some(invoke) => invoke(event, deadline).await,
                    None => panic!("no indexer deployed"),
                }
            }
        })
    })?
    .without_ttl_sweeps();
    let environment = stack.environment("multikey-indexer")?.clone();
    let deploy = |indexes: &serde_json::Value| -> Result<Indexes> {
        let text = indexes.to_string();
        let lookup = |name: &str| {
            if name == "MULTIKEY_INDEXES" { Some(text.clone()) } else { environment.get(name).cloned() }
        };
        let vars = Vars::new(&lookup);
        let invoker = sidestream_combined::Built::new("multikey-indexer", "multikey-indexer", &vars, &sdk)?
            .invoker(sidestream_combined::MetricsTo::Stdout);
        *deployed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(invoker);
        Ok(Indexes::from_vars(&vars)?)
    };
    let verify = async |indexes: &Indexes, name: &str| -> Result<operations::verify::Drift> {
        let index = operations::verify::choose(indexes, Some(name))?;
        Ok(operations::verify::verify(&client, scan_policy(), indexes, index, &issues, &mut |_| {}).await?)
    };

    seed(&writer, &issues, N).await?;
    pipeline.settle().await?;
    let original: serde_json::Value =
        serde_json::from_str(&stack.environment("multikey-indexer")?["MULTIKEY_INDEXES"])?;
    let old_name = original["indexes"][0]["name"].as_str().unwrap_or_default().to_owned();

    // The new definition: no tiebreaker, a smaller include list, its own table; deployed beside
    // the old one.
    let mut v2 = original["indexes"][0].clone();
    v2["name"] = json!("custom-fields-v2");
    v2["table"] = json!(unique("ix-v2"));
    v2["tiebreakers"] = json!([]);
    v2["include"] = json!(["name"]);
    let mut both = original.clone();
    both["indexes"] = json!([original["indexes"][0].clone(), v2.clone()]);
    let indexes = deploy(&both)?;
    let new_index = operations::verify::choose(&indexes, Some("custom-fields-v2"))?;
    ensure!(operations::backfill::rebuild::create_index_table(&writer, new_index).await?, "created");
    ensure!(!operations::backfill::rebuild::create_index_table(&writer, new_index).await?, "exists");
    for id in 0..10 {
        change(&client, &issues, id * 3).await?; // live modifications, before the rebuild
    }
    let target = Target::new(&issues, &indexes, Some("custom-fields-v2"))?;
    let mut checkpoint = Checkpoint::new(&issues, "bf-rebuild", &target.sources, 2);
    Backfill::new(writer.clone(), target, Settings::default())
        .run(&mut checkpoint, &mut |_| Ok(()), &mut |_| {})
        .await?;
    ensure!(checkpoint.counts().touched == N as u64, "{:?}", checkpoint.counts());
    pipeline.settle().await?;
    let new = verify(&indexes, "custom-fields-v2").await?;
    let old = verify(&indexes, &old_name).await?;
    ensure!(new.is_exact() && new.entries == 2 * N, "{new:?}");
    ensure!(old.is_exact() && old.entries == 2 * N, "{old:?}");

    // Switch: the old index leaves the configuration, its table is retired.
    let mut only_new = original.clone();
    only_new["indexes"] = json!([v2]);
    let indexes = deploy(&only_new)?;
    client
        .delete_table()
        .table_name(original["indexes"][0]["table"].as_str().unwrap_or_default())
        .send()
        .await?;
    for id in 10..20 {
        change(&client, &issues, id * 3 + 1).await?; // re-scoped after the switch
    }
    pipeline.settle().await?;
    let after = verify(&indexes, "custom-fields-v2").await?;
    ensure!(after.is_exact() && after.entries == 2 * N, "{after:?}");
    Ok(())
}

/// `sidestream index backfill` and `index rebuild` as a user types them: a dry run counts and
/// writes nothing; a run touches every item and leaves its checkpoint; running it again resumes
/// the finished checkpoint and touches nothing more; a rebuild without `--index` is refused; and
/// once done, `index untouch` removes every marker it left, and nothing else.
#[tokio::test]
async fn the_cli_backfills_dry_and_for_real_and_resumes_its_checkpoint() -> Result<()> {
    const N: usize = 30;
    let Local { stack, client, issues, .. } = local(&[]).await?;
    seed(&client, &issues, N).await?;
    let indexes = stack.environment("multikey-indexer")?["MULTIKEY_INDEXES"].clone();
    let checkpoint = std::env::temp_dir().join(format!("{}.json", unique("cli-backfill")));
    let checkpoint = checkpoint.display().to_string();
    let env = [("MULTIKEY_INDEXES", indexes.as_str())];
    let run = |extra: &[&str]| {
        let mut args =
            vec!["index", "backfill", "--table", &issues, "--checkpoint", &checkpoint, "--output", "json"];
        args.extend_from_slice(extra);
        crate::support::process::sidestream(&args, "", &env)
    };
    let touched = async || -> Result<usize> {
        let items = local_stack::scan(&client, &issues).await?;
        Ok(items.iter().filter(|i| formats::touch::MARKERS.iter().any(|m| i.get(m).is_some())).count())
    };

    let dry = run(&["--dry-run"]);
    ensure!(dry.ok, "{}", dry.err);
    let doc: serde_json::Value = serde_json::from_str(&dry.out)?;
    ensure!(doc["dry_run"] == true && doc["counts"]["touched"] == N, "{doc}");
    ensure!(touched().await? == 0 && !std::path::Path::new(&checkpoint).exists(), "a dry run writes nothing");

    let real = run(&["--segments", "2"]);
    ensure!(real.ok, "{}", real.err);
    let doc: serde_json::Value = serde_json::from_str(&real.out)?;
    ensure!(doc["counts"]["touched"] == N && doc["resumed"] == false, "{doc}");
    ensure!(touched().await? == N, "every item carries the marker");

    let again = run(&["--segments", "2"]);
    let doc: serde_json::Value = serde_json::from_str(&again.out)?;
    ensure!(
        doc["resumed"] == true && doc["counts"]["touched"] == N && doc["counts"]["scanned"] == N,
        "{doc}"
    );
    let other = run(&["--segments", "3"]);
    ensure!(!other.ok && other.err.contains("pass --segments 2"), "{}", other.err);
    std::fs::remove_file(&checkpoint)?;

    // The work done, the markers removed: every one, and the items as they were otherwise.
    let before: Vec<serde_json::Value> = local_stack::scan(&client, &issues).await?;
    let untouch = crate::support::process::sidestream(
        &[
            "index",
            "untouch",
            "--table",
            &issues,
            "--read-units",
            "500",
            "--write-units",
            "500",
            "--output",
            "json",
        ],
        "",
        &env,
    );
    ensure!(untouch.ok, "{}", untouch.err);
    let doc: serde_json::Value = serde_json::from_str(&untouch.out)?;
    ensure!(doc["removed"] == N && doc["changed"] == 0 && doc["scanned"] == N, "{doc}");
    ensure!(touched().await? == 0, "no item carries the marker");
    let mut after = local_stack::scan(&client, &issues).await?;
    for (was, now) in before.iter().zip(after.iter_mut()) {
        let mut was = was.clone();
        was.as_object_mut().map(|m| m.remove(TOUCH_ATTRIBUTE));
        ensure!(&was == now, "an item changed besides its marker: {was} then {now}");
    }

    let rebuild = crate::support::process::sidestream(&["index", "rebuild", "--table", &issues], "", &env);
    ensure!(!rebuild.ok && rebuild.err.contains("index rebuild needs --index"), "{}", rebuild.err);
    Ok(())
}

/// An item that cannot take the marker (here at the emulator's item size limit, as an item at
/// DynamoDB's 400 KB would be) does not stop the backfill: it is counted and listed by key, and
/// every other item is touched.
#[tokio::test]
async fn an_item_that_cannot_take_the_marker_is_listed_and_the_backfill_goes_on() -> Result<()> {
    let Local { sdk, stack, issues, .. } = local(&[]).await?;
    let writer = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    for id in 0..4 {
        local_stack::put_json(&writer, &issues, &issue(id, &json!({"f": id}))).await?;
    }
    // moto refuses an item whose attribute names and values pass 405,000 bytes (DynamoDB's limit
    // is 409,600): 24 bytes of id and custom_fields, 3 of the name `pad`, and the pad itself
    // fit; the marker's 16 bytes and its run id's do not.
    let big = json!({"id": "big", "custom_fields": {"f": 1}, "pad": "x".repeat(404_960)});
    local_stack::put_json(&writer, &issues, &big).await?;
    let function = stack.function("multikey-indexer")?;
    let lookup = |name: &str| function.environment.get(name).cloned();
    let indexes = Indexes::from_vars(&Vars::new(&lookup))?;
    let target = Target::new(&issues, &indexes, None)?;
    let mut checkpoint = Checkpoint::new(&issues, "bf-1800000000", &target.sources, 2);
    Backfill::new(writer, target, Settings::default())
        .run(&mut checkpoint, &mut |_| Ok(()), &mut |_| {})
        .await?;
    let counts = checkpoint.counts();
    ensure!((counts.scanned, counts.touched, counts.untouchable) == (5, 4, 1), "{counts:?}");
    ensure!(checkpoint.untouchable() == [json!({"id": {"S": "big"}})], "{:?}", checkpoint.untouchable());
    Ok(())
}

/// Another consumer of the table's stream adds `formats::touch::KEEP_CHANGES_FILTERS` to its
/// mapping and gets every change of the application's and none of the touches: two backfills
/// (the second moving each marker to the other attribute, and once more finding every item
/// already touched), the application's puts, updates and deletes between them, and `untouch`.
/// Every record the table's stream holds goes through the filters as Lambda applies them (the
/// local stack's matcher), and what they keep is exactly what `is_touch_only` calls a change.
#[tokio::test]
async fn another_consumers_filters_drop_the_touches_and_keep_every_change() -> Result<()> {
    use stream_runtime::filter::Pattern;
    const N: usize = 6;
    let Local { sdk, stack, client, issues } = local(&[]).await?;
    let filters: Vec<Pattern> = formats::touch::KEEP_CHANGES_FILTERS
        .iter()
        .map(|f| Pattern::parse_dynamodb(f))
        .collect::<Result<_, _>>()?;
    let operations_md = std::fs::read_to_string(crate::support::process::root().join("docs/operations.md"))?;
    for filter in formats::touch::KEEP_CHANGES_FILTERS {
        ensure!(operations_md.contains(filter), "docs/operations.md shows the filter {filter}");
    }
    seed(&client, &issues, N).await?;
    let function = stack.function("multikey-indexer")?;
    let lookup = |name: &str| function.environment.get(name).cloned();
    let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&lookup))?;
    let backfill = async |run_id: &str| -> Result<operations::backfill::Counts> {
        let target = Target::new(&issues, &indexes, None)?;
        let mut checkpoint = Checkpoint::new(&issues, run_id, &target.sources, 1);
        Backfill::new(client.clone(), target, Settings::default())
            .run(&mut checkpoint, &mut |_| Ok(()), &mut |_| {})
            .await?;
        Ok(checkpoint.counts())
    };
    let mut touches = 0;
    touches += backfill("bf-first").await?.touched;
    change(&client, &issues, 0).await?; // a whole put: the marker dropped
    change(&client, &issues, 1).await?; // an update: the marker kept
    touches += backfill("bf-second").await?.touched;
    let again = backfill("bf-second").await?;
    ensure!(
        again.touched == 0 && again.already == N as u64,
        "the second run again touches nothing: {again:?}"
    );
    change(&client, &issues, 4).await?; // an update of an item with the second marker
    change(&client, &issues, 3).await?; // a whole put dropping it
    change(&client, &issues, 5).await?; // a delete
    let untouched = operations::backfill::untouch::untouch(
        &client,
        io_policy::Policy::default(),
        &issues,
        &["id".to_owned()],
        operations::backfill::untouch::Pace::default(),
        &mut |_| {},
    )
    .await?;
    ensure!(touches == 2 * N as u64, "every item touched by both runs: {touches}");
    ensure!(untouched.removed == 4 && untouched.changed == 0, "{untouched:?}");

    let arn = stack.streams.get(&issues).context("the issues table's stream")?.clone();
    let mut reader = StreamReader::new(aws_sdk_dynamodbstreams::Client::new(&sdk), arn);
    let mut records = Vec::new();
    let mut empty = 0;
    while empty < 3 {
        let polled = reader.poll().await?;
        empty = if polled.is_empty() { empty + 1 } else { 0 };
        records.extend(polled.into_iter().map(|(_, record)| record));
    }
    let (mut kept, mut dropped) = (0, 0);
    for (record, wire) in records.iter().zip(stream_runtime::wire::WireRecord::view_all(&records)) {
        let keeps = filters.iter().any(|f| f.matches(&stream_runtime::delivery::reader::record_json(record)));
        let checked = stream_runtime::record::Record::new(&wire)?;
        let touch = formats::touch::is_touch_only(checked.before()?, checked.after()?);
        ensure!(
            keeps != touch,
            "the filters {} a record that is{} a touch: {record:?}",
            if keeps { "keep" } else { "drop" },
            if touch { "" } else { " not" }
        );
        if keeps { kept += 1 } else { dropped += 1 }
    }
    // Six inserts, five changes of the application's, four removals by untouch; twelve touches.
    ensure!(kept == N + 5 + 4 && dropped == 2 * N, "kept {kept}, dropped {dropped}");
    Ok(())
}

/// The backfill paces on what DynamoDB bills: its reads on `Scan`'s `ConsumedCapacity`, which the
/// emulator answers by the same rules its meter bills (scripts/meter.py), and its writes on each
/// touch's size. On items of about 1 KB and 3 KB, once bound by its reads and once by its writes,
/// the units it counted are the units the meter billed the table, reads and writes alike, and it
/// never spent them faster than it was given (the pacer starts with no credit, and waits for
/// each page's units, the last one's too, before it goes on). The rates it held are printed
/// (`-- --nocapture`). CI touches 24 items of each size, which proves the accounting; at full
/// scale (`scripts/test --scale`) 240, for 8 to 30 s a run.
#[tokio::test]
async fn the_backfill_paces_on_the_capacity_dynamodb_bills() -> Result<()> {
    const READS: f64 = 4.0;
    const WRITES: f64 = 24.0;
    let items = crate::support::scale::size(24, 240);
    let Local { sdk, stack, issues, .. } = local(&[]).await?;
    let writer = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let function = stack.function("multikey-indexer")?;
    let lookup = |name: &str| function.environment.get(name).cloned();
    let indexes = Indexes::from_vars(&Vars::new(&lookup))?;
    let mut runs = 0;
    for size in [1_000_usize, 3_000] {
        // This size's items alone in the table.
        for n in 0..items {
            let item = json!({"id": format!("{size}-{n:03}"), "custom_fields": {"f": n}, "pad": "x".repeat(size - 40)});
            local_stack::put_json(&writer, &issues, &item).await?;
        }
        for (reads, writes) in [(Some(READS), None), (None, Some(WRITES))] {
            runs += 1;
            let before = local_stack::meter::read(&sdk).await?;
            let target = Target::new(&issues, &indexes, None)?;
            let mut checkpoint = Checkpoint::new(&issues, &format!("bf-pace-{runs}"), &target.sources, 1);
            let settings = Settings {
                page_size: 8,
                read_units_per_second: reads,
                write_units_per_second: writes,
                ..Settings::default()
            };
            let started = Instant::now();
            let backfill = Backfill::new(writer.clone(), target, settings);
            backfill.run(&mut checkpoint, &mut |_| Ok(()), &mut |_| {}).await?;
            let elapsed = started.elapsed().as_secs_f64();
            let billed = local_stack::meter::read(&sdk).await?.since(&before);
            let billed = billed.dynamodb.tables.get(&issues).copied().unwrap_or_default();
            let counts = checkpoint.counts();
            ensure!(counts.touched == u64::try_from(items)?, "{size} B: every item touched: {counts:?}");
            ensure!(
                (counts.read_units - billed.rru).abs() < 1e-9
                    && (counts.write_units - billed.wru).abs() < 1e-9,
                "{size} B: the backfill paced on {} read and {} write units; the table was billed {} and {}",
                counts.read_units,
                counts.write_units,
                billed.rru,
                billed.wru
            );
            let (what, units, rate) =
                reads.map_or(("write", billed.wru, WRITES), |r| ("read", billed.rru, r));
            ensure!(
                units <= rate * elapsed,
                "{size} B: {units} {what} units in {elapsed:.2} s is faster than {rate} a second"
            );
            println!(
                "pacing, {size} B items, bound by {what}s: {:.2} {what} units/s for {rate} given ({:.1}%), {units} units in {elapsed:.2} s",
                units / elapsed,
                100.0 * units / elapsed / rate,
            );
        }
        for n in 0..items {
            let key = HashMap::from([("id".to_owned(), AttributeValue::S(format!("{size}-{n:03}")))]);
            writer.delete_item().table_name(&issues).set_key(Some(key)).send().await?;
        }
    }
    Ok(())
}

/// A team's table whose global index projects every attribute, the markers too: each touch also
/// writes the index (GSI.html: "If an update to the table only changes the value of projected
/// attributes … one write is required"), which an estimate from the item's size alone misses.
/// The touch asks for its `ConsumedCapacity` and the backfill counts and pays what DynamoDB says:
/// two units a touch here, as the meter billed.
#[tokio::test]
async fn a_touch_counts_the_index_that_projects_the_markers() -> Result<()> {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
        ScalarAttributeType,
    };
    const ITEMS: u32 = 6;
    let Local { sdk, stack, .. } = local(&[]).await?;
    let client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let table = unique("projected");
    let key = |name: &str, kind| KeySchemaElement::builder().attribute_name(name).key_type(kind).build();
    let attribute =
        |name: &str, kind| AttributeDefinition::builder().attribute_name(name).attribute_type(kind).build();
    client
        .create_table()
        .table_name(&table)
        .billing_mode(aws_sdk_dynamodb::types::BillingMode::PayPerRequest)
        .key_schema(key("id", KeyType::Hash)?)
        .attribute_definitions(attribute("id", ScalarAttributeType::S)?)
        .attribute_definitions(attribute("project", ScalarAttributeType::S)?)
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name("by-project")
                .key_schema(key("project", KeyType::Hash)?)
                .projection(Projection::builder().projection_type(ProjectionType::All).build())
                .build()?,
        )
        .send()
        .await?;
    for n in 0..ITEMS {
        local_stack::put_json(
            &client,
            &table,
            &json!({"id": format!("i{n}"), "project": "p", "custom_fields": {"f": n}}),
        )
        .await?;
    }
    let function = stack.function("multikey-indexer")?;
    let lookup = |name: &str| function.environment.get(name).cloned();
    let indexes = Indexes::from_vars(&Vars::new(&lookup))?;
    let target = Target::new(&table, &indexes, None)?;
    let mut checkpoint = Checkpoint::new(&table, "bf-projected", &target.sources, 1);
    let before = local_stack::meter::read(&sdk).await?;
    let settings = Settings { write_units_per_second: Some(1_000.0), ..Settings::default() };
    Backfill::new(client, target, settings).run(&mut checkpoint, &mut |_| Ok(()), &mut |_| {}).await?;
    let billed = local_stack::meter::read(&sdk).await?.since(&before);
    let billed = billed.dynamodb.tables.get(&table).copied().unwrap_or_default();
    let counts = checkpoint.counts();
    ensure!(counts.touched == u64::from(ITEMS), "{counts:?}");
    ensure!(
        (counts.write_units - billed.wru).abs() < 1e-9
            && (counts.write_units - 2.0 * f64::from(ITEMS)).abs() < 1e-9,
        "a touch is a table write and an index write: the backfill counted {}, the table was billed {}",
        counts.write_units,
        billed.wru
    );
    Ok(())
}
