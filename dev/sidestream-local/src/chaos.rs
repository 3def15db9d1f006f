//! `sidestream-local chaos`: resolves the flags into [`local_stack::chaos::Options`], shows a progress bar
//! while the run goes, and renders its [`local_stack::chaos::Report`] for people or as JSON.

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::args::{ChangeSource, ChaosArgs, Output};
use operations::progress::Bar;

/// How often the progress bar is redrawn.
const REDRAW: Duration = Duration::from_millis(500);

pub(crate) fn run(args: ChaosArgs) -> anyhow::Result<ExitCode> {
    let spec = if args.faults.trim() == "none" { "" } else { args.faults.as_str() };
    let faults = local_stack::chaos::Faults::parse(spec, Some(args.seed))?;
    let stack = format!(
        "sidestream-chaos-{}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis())
    );
    let mut options = local_stack::chaos::Options::new(args.records, args.seed, faults, args.template, stack);
    options.parallelization = args.parallelization;
    options.writers = args.writers;
    options.parameters = args.parameters.into_iter().collect();
    options.regions = args.regions;
    options.repair = !args.no_repair;
    options.team_table = args.team_table;
    if args.source == ChangeSource::Kinesis {
        for name in ["IssuesChangeSource", "CounterChangeSource"] {
            options.parameters.entry(name.to_owned()).or_insert_with(|| "Kinesis".to_owned());
        }
    }
    let endpoints = local_stack::chaos::endpoints_from_env()?;

    let runtime = crate::runtime()?;
    let progress = local_stack::chaos::Progress::default();
    let text = args.output == Output::Text;
    if args.lifecycle {
        let run = local_stack::chaos::lifecycle::run(&endpoints, &options, args.tombstones, &progress);
        let report = runtime.block_on(showing(run, &progress, text))?;
        let mut out = io::stdout().lock();
        match args.output {
            Output::Json => writeln!(out, "{}", serde_json::to_string(&report)?)?,
            Output::Text => render_lifecycle(&report, &mut out)?,
        }
        return Ok(if report.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    let run = local_stack::chaos::run(&endpoints, &options, &progress);
    let report = runtime.block_on(showing(run, &progress, text))?;

    let mut out = io::stdout().lock();
    match args.output {
        Output::Json => writeln!(out, "{}", serde_json::to_string(&report)?)?,
        Output::Text => render(&report, &options, &mut out)?,
    }
    Ok(if report.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Awaits `run`, redrawing a progress bar of `progress` meanwhile when `bar`.
async fn showing<T>(
    run: impl std::future::Future<Output = T>,
    progress: &local_stack::chaos::Progress,
    bar: bool,
) -> T {
    tokio::pin!(run);
    let mut bar = bar.then(|| Bar::new("ops"));
    loop {
        tokio::select! {
            report = &mut run => {
                if let Some(bar) = &mut bar {
                    draw(bar, progress, true);
                }
                return report;
            }
            () = tokio::time::sleep(REDRAW) => {
                if let Some(bar) = &mut bar {
                    draw(bar, progress, false);
                }
            }
        }
    }
}

/// A lifecycle run's report: each era, what the operator did, the bulk edit, the verdicts.
fn render_lifecycle(report: &local_stack::chaos::lifecycle::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "Lifecycle run: {} ops, seed {}, in {:.1} s", report.ops, report.seed, report.seconds)?;
    let phases: Vec<String> = report.phases.iter().map(|(phase, s)| format!("{phase} {s:.1} s")).collect();
    writeln!(out, "  {}", phases.join(", "))?;
    writeln!(out, "\nThe indexer's mapping, era by era:")?;
    for era in &report.eras {
        writeln!(
            out,
            "  {:<58} {} records passed over at its start, {} read, {} delivered in {} invocations{}",
            era.name,
            era.passed_over,
            era.read,
            era.delivered,
            era.invocations,
            if era.removed_mid_flight { "; removed mid-flight" } else { "" }
        )?;
    }
    let (invocations, transactions, refused) = report.previous_release;
    writeln!(
        out,
        "\nThe backfill scanned {} items and touched {}. The previous release took {invocations} invocations and wrote {transactions} transactions; {refused} were refused by a newer head.",
        report.backfill.0, report.backfill.1
    )?;
    writeln!(
        out,
        "Kinesis: {} ranges given up ({} records), {} replayed by `failures replay`. Repairs (touched, deleted): {:?}",
        report.kinesis_given_up.0, report.kinesis_given_up.1, report.kinesis_replayed, report.repairs
    )?;
    let b = &report.bulk;
    writeln!(
        out,
        "Bulk edit: {} issues moved {} times, {} tombstones in their partition; {} grid pages, the most Queries on one {} ({} Queries cut at 1 MB in all), {} over the bound, {} short",
        b.issues, b.passes, b.tombstones, b.pages, b.most_queries, b.cut_at_1mb, b.over_bound, b.short
    )?;
    render_faults(report.wire_faults.iter().map(|(kind, n)| (kind.as_str(), *n)), out)?;
    render_verdicts(&report.verdicts, 28, out)?;
    writeln!(out, "\n{}", if report.ok() { "Exact through the whole life." } else { "DIFFERENCES FOUND." })
}

/// The faults injected on the wire, by kind.
fn render_faults<'k>(
    faults: impl IntoIterator<Item = (&'k str, u64)>,
    out: &mut impl Write,
) -> io::Result<()> {
    let faults: Vec<String> = faults.into_iter().map(|(kind, n)| format!("{kind} {n}")).collect();
    writeln!(out, "AWS faults injected (fault proxy): {}", faults.join(", "))
}

/// Each oracle's verdict, its name in a column `width` wide.
fn render_verdicts(
    verdicts: &[local_stack::chaos::Verdict],
    width: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "\nOracles:")?;
    for v in verdicts {
        writeln!(out, "  {:<width$} {}  {}", v.oracle, if v.ok { "exact" } else { "DIFFERS" }, v.detail)?;
    }
    Ok(())
}

/// Lambda's side, per function; with two Regions the replication, and with Kinesis the disorder.
fn render_lambda(report: &local_stack::chaos::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "\nLambda, per function:")?;
    for m in &report.mappings {
        writeln!(
            out,
            "  {:<18} {} records read, {} delivered, {} filtered out, {} invocations, {} retries, {} bisections, {} timed out, {} given up; injected: {} kills, {} short timeouts, {} duplicate deliveries",
            m.function,
            m.read,
            m.delivered,
            m.filtered_out,
            m.invocations,
            m.retries,
            m.bisections,
            m.timed_out,
            m.given_up,
            m.kills,
            m.short_timeouts,
            m.duplicates
        )?;
    }
    for r in &report.replication {
        let c = &r.counts;
        writeln!(
            out,
            "  {} replicated between {}: {} writes, {} of them TTL deletes ({} removed an item in {}, {} in {}), {} lost to last writer wins ({} caught by a write's condition)",
            r.table,
            local_stack::chaos::REGIONS.join(" and "),
            c.replicated,
            c.ttl_deletes,
            c.ttl_deletes_into[0],
            local_stack::chaos::REGIONS[0],
            c.ttl_deletes_into[1],
            local_stack::chaos::REGIONS[1],
            c.lost,
            c.raced
        )?;
    }
    for k in &report.kinesis {
        writeln!(
            out,
            "  Kinesis {}: {} invocations (each batch shuffled and cut in two), {} records filtered out, {} pairs of one item's records crossed, {} records twice",
            k.stream, k.invocations, k.filtered, k.crossed, k.duplicated
        )?;
    }
    Ok(())
}

/// The faults injected on the wire, and the requests each emulator served.
fn render_wire(report: &local_stack::chaos::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(out)?;
    render_faults(report.wire_faults.iter().map(|(kind, n)| (*kind, *n)), out)?;
    writeln!(
        out,
        "Late writes refused by a version guard or a condition (a newer write of the key had landed): {}",
        report.late_refused
    )?;
    let emulators: Vec<String> = report.emulator_requests.iter().map(u64::to_string).collect();
    writeln!(
        out,
        "Requests to the emulator{}: {}",
        if emulators.len() > 1 { "s (the issues table's, the rest)" } else { "" },
        emulators.join(", ")
    )
}

/// The progress bar: ops written, then the replay catching up.
fn draw(bar: &mut Bar, progress: &local_stack::chaos::Progress, last: bool) {
    let (ops, written) = (progress.ops.load(Ordering::Relaxed), progress.written.load(Ordering::Relaxed));
    let replay = progress.replay.get().map_or_else(String::new, |p| {
        format!(
            " | replayed {} records in {} invocations",
            p.read.load(Ordering::Relaxed),
            p.invocations.load(Ordering::Relaxed)
        )
    });
    let settling = if progress.settling.load(Ordering::Relaxed) { " | settling" } else { "" };
    bar.show(written, ops, &format!("{settling}{replay}"), last);
}

fn render(
    report: &local_stack::chaos::Report,
    options: &local_stack::chaos::Options,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "Chaos run: {} ops, seed {}, ParallelizationFactor {}, shards split every {} records",
        report.ops,
        report.seed,
        options.parallelization,
        options.split_every.map_or_else(|| "never".to_owned(), |n| n.to_string())
    )?;
    render_wire(report, out)?;
    render_lambda(report, out)?;
    let r = &report.runtime;
    writeln!(
        out,
        "\nFunctions' runtimes: {} requests, {} retries, {} parked records, {} transient stops, {} systemic stops, {} counter conflicts",
        r.requests, r.retries, r.parked, r.transient_stops, r.systemic_stops, r.conflicts
    )?;
    let o = &report.operations;
    writeln!(
        out,
        "\nOperations while the workload ran: {} verifications {} ({} persistent drift seen; {} items touched, \
         {} entries deleted, {} deletes refused), a backfill ({} of {} items touched), {} old indexer records replayed \
         through the stream ({} items touched, {} entries deleted), {} aggregator and archiver records rerun; \
         persistent drift at the end: {}",
        o.verifications,
        if o.repair { "with repair" } else { "without repair" },
        o.drift_during_run,
        o.repair_touches,
        o.repair_deletes,
        o.repair_deletes_refused,
        o.backfill_touches,
        o.backfill_scanned,
        o.indexer_records_replayed,
        o.replay_touches,
        o.replay_deletes,
        o.records_rerun,
        o.drift_at_end
    )?;
    writeln!(
        out,
        "\n{} stream records in {:.1} s: {:.0} records/s",
        report.stream_records, report.seconds, report.records_per_second
    )?;
    let p = &report.phases;
    writeln!(
        out,
        "  writing {:.1} s, the operations' last round {:.1} s, settling {:.1} s, checking {:.1} s",
        p.writing, p.operating, p.settling, p.checking
    )?;
    writeln!(
        out,
        "\nWhat an operator sees at the end (sidestream status of the first Region's stack):\n{}",
        report.status
    )?;
    render_verdicts(&report.verdicts, 10, out)?;
    writeln!(out, "\nBill (the emulators' meters, scripts/prices.json): {}", report.bill.line())?;
    writeln!(out, "\n{}", if report.ok() { "Nothing lost, nothing doubled." } else { "DIFFERENCES FOUND." })
}
