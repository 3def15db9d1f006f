//! `sidestream local bench`: resolves the flags into [`bench_e2e::Options`], shows a progress
//! bar while the cases run, and renders the [`bench_e2e::Report`] as tables or as JSON.

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;

use crate::args::{BenchArgs, BenchPart, Output};
use crate::progress::Bar;

/// How often the progress bar is redrawn.
const REDRAW: Duration = Duration::from_millis(500);

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let stack = format!(
        "sidestream-bench-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    );
    let mut options = bench_e2e::Options::full(args.template, stack);
    options.latency = Duration::from_millis(args.latency_ms);
    options.repeats = args.repeats;
    options.hot_rounds = args.hot_rounds;
    options.capacities = args.capacity;
    options.binaries = args.binaries;
    if !args.only.is_empty() {
        options.parts = args
            .only
            .iter()
            .map(|p| match p {
                BenchPart::WritePath => bench_e2e::Part::WritePath,
                BenchPart::Hot => bench_e2e::Part::Hot,
                BenchPart::Throttled => bench_e2e::Part::Throttled,
                BenchPart::Cold => bench_e2e::Part::Cold,
            })
            .collect();
    }
    if args.quick {
        options
            .batches
            .retain(|b| matches!(b, bench_e2e::events::Batch::Records(_)));
        options.repeats = 1;
    }
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .context("AWS_ENDPOINT_URL: the emulator's endpoint (scripts/bench-e2e sets it)")?;

    let report = crate::runtime()?.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let progress = bench_e2e::Progress::default();
        let run = bench_e2e::run(&sdk, &endpoint, &options, &progress);
        tokio::pin!(run);
        let mut bar = (args.output == Output::Text).then(|| Bar::new("cases"));
        loop {
            let last = tokio::select! {
                report = &mut run => Some(report),
                () = tokio::time::sleep(REDRAW) => None,
            };
            if let Some(bar) = &mut bar {
                let (done, cases) = (
                    progress.done.load(Ordering::Relaxed),
                    progress.cases.load(Ordering::Relaxed),
                );
                bar.show(done, cases, "", last.is_some());
            }
            if let Some(report) = last {
                return report;
            }
        }
    })?;

    let mut out = io::stdout().lock();
    match args.output {
        Output::Json => writeln!(out, "{}", serde_json::to_string(&report)?)?,
        Output::Text => render(&report, &mut out)?,
    }
    let exact = report.hot.iter().all(|r| r.exact);
    Ok(if exact {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn render(report: &bench_e2e::Report, out: &mut impl Write) -> io::Result<()> {
    if !report.write_path.is_empty() {
        write_path(report, out)?;
    }
    if !report.hot.is_empty() {
        hot(report, out)?;
    }
    if !report.throttled.is_empty() {
        throttled(report, out)?;
    }
    if !report.cold.is_empty() {
        cold(report, out)?;
    }
    Ok(())
}

fn write_path(report: &bench_e2e::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Write path: each invocation from its event's bytes to its response, {} ms added to every call; \
         upstream moto, or the sink (the proxy answering every call itself after the latency)",
        report.latency_ms
    )?;
    writeln!(
        out,
        "{:<8} {:<19} {:<14} {:>7} {:>9} {:>5} {:>9} {:>9} {:>8} {:>7} {:>9} {:>6} {:>9} {:>6}",
        "upstream",
        "function",
        "batch",
        "records",
        "bytes",
        "conc",
        "wall ms",
        "rec/s",
        "requests",
        "retries",
        "bound ms",
        "ratio",
        "floor ms",
        "ratio"
    )?;
    for r in &report.write_path {
        writeln!(
            out,
            "{:<8} {:<19} {:<14} {:>7} {:>9} {:>5} {:>9.1} {:>9.0} {:>8} {:>7} {:>9.1} {:>5.2}× {:>9.1} {:>5.2}×",
            r.upstream,
            r.function,
            r.batch,
            r.records,
            r.event_bytes,
            r.concurrency,
            r.wall_ms,
            r.records_per_second,
            r.requests,
            r.retries,
            r.bound_ms,
            r.ratio,
            r.floor_ms,
            r.floor_ratio
        )?;
    }
    Ok(())
}

fn hot(report: &bench_e2e::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\nHot counters: concurrent invocations folding shard records of the same {} counters",
        bench_e2e::hot::COUNTERS
    )?;
    writeln!(
        out,
        "{:>11} {:>8} {:>14} {:>10} {:>11} {:>9} {:>8} {:>12} {:>9} {:>6}",
        "invocations",
        "batches",
        "conflict-free",
        "conflicts",
        "per batch",
        "requests",
        "retries",
        "redelivered",
        "round ms",
        "exact"
    )?;
    for r in &report.hot {
        writeln!(
            out,
            "{:>11} {:>8} {:>13.0}% {:>10} {:>11.2} {:>9} {:>8} {:>12} {:>9.1} {:>6}",
            r.invocations,
            r.batches,
            r.conflict_free_share * 100.0,
            r.conflicts,
            r.conflicts_per_batch,
            r.requests,
            r.retries,
            r.redelivered,
            r.round_ms,
            if r.exact { "yes" } else { "NO" }
        )?;
        if !r.exact {
            writeln!(out, "            {}", r.detail)?;
        }
    }
    Ok(())
}

fn throttled(report: &bench_e2e::Report, out: &mut impl Write) -> io::Result<()> {
    if let Some(first) = report.throttled.first() {
        writeln!(
            out,
            "\nThrottled: the indexer on a {}-record batch, the sink serving so many requests per second and throttling the rest",
            first.records
        )?;
        writeln!(
            out,
            "{:>9} {:<14} {:>9} {:>9} {:>11} {:>9} {:>8} {:>10}",
            "capacity", "window", "wall ms", "rec/s", "deliveries", "requests", "retries", "throttled"
        )?;
        for r in &report.throttled {
            writeln!(
                out,
                "{:>9} {:<14} {:>9.1} {:>9.0} {:>11} {:>9} {:>8} {:>10}",
                if r.capacity == 0 {
                    "none".to_owned()
                } else {
                    r.capacity.to_string()
                },
                r.setting,
                r.wall_ms,
                r.records_per_second,
                r.deliveries,
                r.requests,
                r.retries,
                r.throttled
            )?;
        }
    }
    Ok(())
}

fn cold(report: &bench_e2e::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\nCold start: each binary started against a local Runtime API, its calls {} ms away (medians)",
        report.latency_ms
    )?;
    writeln!(
        out,
        "{:<19} {:<7} {:>9} {:>10} {:>11} {:>12} {:>7} {:>16}",
        "function", "primed", "init ms", "first ms", "second ms", "init+first", "starts", "peak MiB (6 MB)"
    )?;
    for r in &report.cold {
        writeln!(
            out,
            "{:<19} {:<7} {:>9.1} {:>10.1} {:>11.1} {:>12.1} {:>7} {:>16.1}",
            r.function,
            if r.primed { "yes" } else { "no" },
            r.init_ms,
            r.first_ms,
            r.second_ms,
            r.cold_ms,
            r.starts,
            r.peak_rss_mib
        )?;
    }
    Ok(())
}
