//! `sidestream index verify [--repair]`: the index against the base table (`operations::verify`),
//! mended through the stream (`operations::verify::mend`), rendered for people or as JSON; and
//! `index untouch`, the touch marker removed (`operations::backfill::untouch`). `index backfill`
//! is in [`crate::backfill`].

use std::io::{self, Write as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use io_policy::Policy;
use operations::verify::{Drift, Mended, Mender};
use stream_runtime::Vars;

use crate::args::{IndexCommand, Output};

/// Examples of each kind of difference shown.
const EXAMPLES: usize = 5;

pub(crate) fn run(command: IndexCommand) -> anyhow::Result<ExitCode> {
    match command {
        IndexCommand::Verify { stack, table, index, repair, settle, read_units, write_units, output } => {
            verify(
                stack.as_deref(),
                table,
                index.as_deref(),
                repair.then_some(Duration::from_secs(settle)),
                Pace { read_units, write_units },
                output,
            )
        }
        IndexCommand::Untouch { table, read_units, write_units, output } => {
            untouch(&table, operations::backfill::untouch::Pace { read_units, write_units }, output)
        }
        IndexCommand::Backfill(args) => crate::backfill::run(args, false),
        IndexCommand::Rebuild(args) => crate::backfill::run(args, true),
    }
}

/// How often a repair's verification is tried again while the stream carries its touches.
const SETTLE_POLL: Duration = Duration::from_secs(2);

/// How fast a verification reads and its repair writes (units per second; `None`: no limit).
#[derive(Debug, Clone, Copy)]
struct Pace {
    read_units: Option<f64>,
    write_units: Option<f64>,
}

fn verify(
    stack: Option<&str>,
    table: Option<String>,
    index: Option<&str>,
    repair: Option<Duration>,
    pace: Pace,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let stack = crate::stack::read_blocking(stack)?;
    let table =
        &crate::stack::or_stack(table, stack.as_ref(), "--table", operations::stack::Deployed::issues_table)?;
    let environment = crate::stack::environment(stack.as_ref(), "multikey-indexer")?;
    let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&crate::stack::layered(&environment)))?;
    let index = operations::verify::choose(&indexes, index)?;
    let runtime = crate::runtime()?;
    runtime.block_on(async {
        let sdk = crate::sdk().await?;
        // The I/O policy does the retrying of every call.
        let client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
        let mut bar = (output == Output::Text).then(|| operations::progress::Bar::new("items scanned"));
        // The total is DynamoDB's estimate of both tables' items.
        let total = operations::verify::estimated_items(&client, table).await
            + operations::verify::estimated_items(&client, &index.table).await;
        let mut scanned = 0_u64;
        let mut show = |n: usize| {
            scanned = n as u64;
            if let Some(bar) = &mut bar {
                bar.show(scanned, total.max(scanned), "", false);
            }
        };
        let drift = operations::verify::verify_paced(
            &client,
            Policy::default(),
            &indexes,
            index,
            table,
            pace.read_units,
            &mut show,
        )
        .await?;
        if let Some(bar) = &mut bar {
            bar.show(scanned, scanned, "", true);
        }
        let mut repaired = None;
        let mut after = None;
        if let Some(settle) = repair.filter(|_| !drift.is_exact()) {
            let mut mender =
                Mender::new(client.clone(), indexes.clone(), table, &operations::verify::run_id("repair"))
                    .paced(pace.write_units);
            if output == Output::Text {
                // At most a touch per base item and a delete per extra entry.
                let most = (drift.missing.len() + drift.stale.len() + drift.extra.len()) as u64;
                let bar = std::sync::Mutex::new(operations::progress::Bar::new("repair writes"));
                mender = mender.with_progress(move |written| {
                    if let Ok(mut bar) = bar.lock() {
                        bar.show(written as u64, most.max(written as u64), "", written as u64 >= most);
                    }
                });
            }
            repaired = Some(mender.drift(index, &drift).await?);
            // The touched items' entries come back through the stream: look again at what was
            // mended, key by key, until it is there (not the tables again: at 50 million items a
            // verification takes hours, a confirmation of 3,000 keys a second).
            let until = Instant::now() + settle;
            loop {
                let again =
                    operations::verify::confirm(&client, Policy::default(), &indexes, index, table, &drift)
                        .await?;
                let done = again.is_exact() || Instant::now() >= until;
                after = Some(again);
                if done {
                    break;
                }
                tokio::time::sleep(SETTLE_POLL).await;
            }
        }
        let exact = after.as_ref().unwrap_or(&drift).is_exact();
        let mut out = io::stdout().lock();
        match output {
            Output::Json => writeln!(out, "{}", json(&drift, repaired, after.as_ref()))?,
            Output::Text => text(&drift, repaired, after.as_ref(), &mut out)?,
        }
        Ok(if exact { ExitCode::SUCCESS } else { ExitCode::FAILURE })
    })
}

fn json(drift: &Drift, repaired: Option<Mended>, after: Option<&Drift>) -> serde_json::Value {
    let mut doc = drift.report(EXAMPLES);
    if let Some(repaired) = repaired {
        doc["repaired"] = serde_json::json!(repaired);
    }
    if let Some(after) = after {
        let mut counts = after.report(0);
        if let Some(counts) = counts.as_object_mut() {
            counts.remove("examples");
        }
        doc["after"] = counts;
    }
    doc
}

fn text(
    drift: &Drift,
    repaired: Option<Mended>,
    after: Option<&Drift>,
    out: &mut impl io::Write,
) -> io::Result<()> {
    writeln!(
        out,
        "{} ({}): {} entries, {} called for by the base table: {} missing, {} stale, {} extra",
        drift.index,
        drift.table,
        drift.entries,
        drift.expected,
        drift.counts.missing,
        drift.counts.stale,
        drift.counts.extra
    )?;
    for (kind, items) in
        [("missing", &drift.missing), ("stale (as it should be)", &drift.stale), ("extra", &drift.extra)]
    {
        for item in items.iter().take(EXAMPLES) {
            writeln!(out, "  {kind}: {item}")?;
        }
    }
    if repaired.is_some() && drift.truncated() {
        writeln!(
            out,
            "More than {} differences of a kind: the first {} of each were repaired; run again for the rest.",
            operations::verify::KEPT,
            operations::verify::KEPT
        )?;
    }
    if let Some(repaired) = repaired {
        writeln!(
            out,
            "Repaired through the stream: {} items touched (the indexer re-puts their entries), {} gone since; \
             {} entries deleted, {} kept because their item calls for them again, {} because they were written again",
            repaired.touched, repaired.gone, repaired.deleted, repaired.called_for, repaired.newer
        )?;
        if repaired.paced_ms > 0 {
            let (seconds, tenths) = (repaired.paced_ms / 1000, repaired.paced_ms % 1000 / 100);
            writeln!(out, "The writes waited {seconds}.{tenths} s in all for their pace (--write-units).")?;
        }
    }
    if let Some(after) = after {
        writeln!(
            out,
            "After the repair: {} missing, {} stale, {} extra",
            after.counts.missing, after.counts.stale, after.counts.extra
        )?;
    }
    writeln!(
        out,
        "{}",
        if after.unwrap_or(drift).is_exact() { "The index is exact." } else { "THE INDEX HAS DRIFTED." }
    )
}

/// `index untouch`: the touch marker removed from `table`'s items, whose key `MULTIKEY_INDEXES`
/// names.
fn untouch(
    table: &str,
    pace: operations::backfill::untouch::Pace,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let lookup = |name: &str| std::env::var(name).ok();
    let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&lookup))?;
    let runtime = crate::runtime()?;
    runtime.block_on(async {
        let sdk = crate::sdk().await?;
        let client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
        let total = operations::verify::estimated_items(&client, table).await;
        let mut bar = (output == Output::Text).then(|| operations::progress::Bar::new("items scanned"));
        let mut show = |done: &operations::backfill::untouch::Untouched| {
            if let Some(bar) = &mut bar {
                bar.show(done.scanned, total.max(done.scanned), &format!("{} removed", done.removed), false);
            }
        };
        let done =
            operations::backfill::untouch::untouch(&client, Policy::default(), table, &indexes.base_key, pace, &mut show)
                .await?;
        if let Some(bar) = &mut bar {
            bar.show(done.scanned, done.scanned, &format!("{} removed", done.removed), true);
        }
        let mut out = io::stdout().lock();
        match output {
            Output::Json => writeln!(out, "{}", serde_json::json!(done))?,
            Output::Text => writeln!(
                out,
                "{table}: the touch marker removed from {} items ({} read); {} left, touched again or deleted since the scan",
                done.removed, done.scanned, done.changed
            )?,
        }
        Ok(ExitCode::SUCCESS)
    })
}
