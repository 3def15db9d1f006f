//! `sidestream-local bench`: resolves the flags into [`local_stack::bench::Options`], shows a progress
//! bar while the cases run, and renders the [`local_stack::bench::Report`] as tables or as JSON.

use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;

use crate::args::{BenchArgs, Output};
use crate::table::Align::{Left, Right};
use crate::table::Table;
use operations::progress::Bar;

/// How often the progress bar is redrawn.
const REDRAW: Duration = Duration::from_millis(500);

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let stack = format!(
        "sidestream-bench-{}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis())
    );
    let mut options = local_stack::bench::Options::full(args.template, stack);
    options.latency = Duration::from_millis(args.latency_ms);
    options.repeats = args.repeats;
    options.hot_rounds = args.hot_rounds;
    options.capacities = args.capacity;
    options.binaries = args.binaries;
    options.cost_changes = args.changes;
    options.cost_shape = local_stack::bench::cost::Shape {
        fields: usize::from(args.fields),
        include_edits: args.include_edits,
        changes_per_second: args.changes_per_second,
        grid_pages_per_second: args.grid_pages_per_second,
    };
    if !args.only.is_empty() {
        options.parts = args.only;
    }
    if args.quick {
        options.batches.retain(|b| matches!(b, local_stack::bench::events::Batch::Records(_)));
        options.repeats = 1;
        options.cost_changes = options.cost_changes.min(4_000);
    }
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .context("AWS_ENDPOINT_URL: the emulator's endpoint (scripts/bench-e2e sets it)")?;

    let report = crate::runtime()?.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let progress = local_stack::bench::Progress::default();
        let run = local_stack::bench::run(&sdk, &endpoint, &options, &progress);
        tokio::pin!(run);
        let mut bar = (args.output == Output::Text).then(|| Bar::new("cases"));
        loop {
            let last = tokio::select! {
                report = &mut run => Some(report),
                () = tokio::time::sleep(REDRAW) => None,
            };
            if let Some(bar) = &mut bar {
                let (done, cases) =
                    (progress.done.load(Ordering::Relaxed), progress.cases.load(Ordering::Relaxed));
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
    Ok(if exact { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// A section of the report, written when its part ran.
type Section<W> = fn(&local_stack::bench::Report, &mut W) -> io::Result<()>;

fn render<W: Write>(report: &local_stack::bench::Report, out: &mut W) -> io::Result<()> {
    let sections: [(bool, Section<W>); 8] = [
        (report.write_path.is_empty(), write_path),
        (report.hot.is_empty(), hot),
        (report.throttled.is_empty(), throttled),
        (report.cold.is_empty(), cold),
        (report.combined.is_empty(), combined),
        (report.kinesis.is_empty(), kinesis),
        (report.any_order.is_empty(), any_order),
        (report.cost.is_none(), cost),
    ];
    for (empty, section) in sections {
        if !empty {
            section(report, out)?;
        }
    }
    Ok(())
}

fn write_path(report: &local_stack::bench::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Write path: each invocation from its event's bytes to its response, {} ms added to every call; \
         upstream moto, or the sink (the proxy answering every call itself after the latency)",
        report.latency_ms
    )?;
    let mut t = case_table(&[
        ("bytes", Right),
        ("conc", Right),
        ("wall ms", Right),
        ("rec/s", Right),
        ("requests", Right),
        ("retries", Right),
        ("bound ms", Right),
        ("ratio", Right),
        ("floor ms", Right),
        ("ratio", Right),
    ]);
    for r in &report.write_path {
        t.row(case_row(
            &r.case,
            [
                r.event_bytes.to_string(),
                r.concurrency.to_string(),
                format!("{:.1}", r.wall_ms),
                format!("{:.0}", r.records_per_second),
                r.requests.to_string(),
                r.retries.to_string(),
                format!("{:.1}", r.bound_ms),
                format!("{:.2}×", r.ratio),
                format!("{:.1}", r.floor_ms),
                format!("{:.2}×", r.floor_ratio),
            ],
        ));
    }
    t.write(out)
}

fn hot(report: &local_stack::bench::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\nHot counters: concurrent invocations folding shard records of the same {} counters",
        local_stack::bench::hot::COUNTERS
    )?;
    let mut t = Table::new(&[
        ("invocations", Right),
        ("batches", Right),
        ("conflict-free", Right),
        ("conflicts", Right),
        ("per batch", Right),
        ("requests", Right),
        ("retries", Right),
        ("redelivered", Right),
        ("round ms", Right),
        ("exact", Right),
    ]);
    for r in &report.hot {
        t.row(vec![
            r.invocations.to_string(),
            r.batches.to_string(),
            format!("{:.0}%", r.conflict_free_share * 100.0),
            r.conflicts.to_string(),
            format!("{:.2}", r.conflicts_per_batch),
            r.requests.to_string(),
            r.retries.to_string(),
            r.redelivered.to_string(),
            format!("{:.1}", r.round_ms),
            if r.exact { "yes" } else { "NO" }.to_owned(),
        ]);
    }
    t.write(out)?;
    for r in report.hot.iter().filter(|r| !r.exact) {
        writeln!(out, "not exact at {} invocations: {}", r.invocations, r.detail)?;
    }
    Ok(())
}

fn throttled(report: &local_stack::bench::Report, out: &mut impl Write) -> io::Result<()> {
    let Some(first) = report.throttled.first() else {
        return Ok(());
    };
    writeln!(
        out,
        "\nThrottled: the indexer on a {}-record batch, the sink serving so many requests per second and throttling the rest",
        first.records
    )?;
    let mut t = Table::new(&[
        ("capacity", Right),
        ("window", Left),
        ("wall ms", Right),
        ("rec/s", Right),
        ("deliveries", Right),
        ("requests", Right),
        ("retries", Right),
        ("throttled", Right),
    ]);
    for r in &report.throttled {
        t.row(vec![
            if r.capacity == 0 { "none".to_owned() } else { r.capacity.to_string() },
            r.setting.clone(),
            format!("{:.1}", r.wall_ms),
            format!("{:.0}", r.records_per_second),
            r.deliveries.to_string(),
            r.requests.to_string(),
            r.retries.to_string(),
            r.throttled.to_string(),
        ]);
    }
    t.write(out)
}

fn cold(report: &local_stack::bench::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\nCold start: each binary started against a local Runtime API, its calls {} ms away (medians)",
        report.latency_ms
    )?;
    let mut t = Table::new(&[
        ("function", Left),
        ("primed", Left),
        ("init ms", Right),
        ("first ms", Right),
        ("second ms", Right),
        ("init+first", Right),
        ("starts", Right),
        ("peak MiB (6 MB)", Right),
    ]);
    for r in &report.cold {
        t.row(vec![
            r.function.to_owned(),
            if r.primed { "yes" } else { "no" }.to_owned(),
            format!("{:.1}", r.init_ms),
            format!("{:.1}", r.first_ms),
            format!("{:.1}", r.second_ms),
            format!("{:.1}", r.cold_ms),
            r.starts.to_string(),
            format!("{:.1}", r.peak_rss_mib),
        ]);
    }
    t.write(out)
}

fn combined(report: &local_stack::bench::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\nOne reader or two: the issues stream (9 issue changes to 1 TTL deletion) read by the indexer's and the \
         archiver's own mappings at once (Consumers=Separate), and by one combined function (Consumers=Combined); \
         wall: until the batch is done; billed: the invocations' durations summed (medians)"
    )?;
    let mut t = Table::new(&[
        ("upstream", Left),
        ("batch", Left),
        ("records", Right),
        ("indexer", Right),
        ("archiver", Right),
        ("separate wall", Right),
        ("billed", Right),
        ("requests", Right),
        ("combined wall", Right),
        ("billed", Right),
        ("requests", Right),
        ("wall", Right),
        ("billed", Right),
    ]);
    for r in &report.combined {
        t.row(vec![
            r.upstream.to_owned(),
            r.batch.clone(),
            r.records.to_string(),
            r.indexer_records.to_string(),
            r.archiver_records.to_string(),
            format!("{:.1}", r.separate.wall_ms),
            format!("{:.1}", r.separate.billed_ms),
            r.separate.requests.to_string(),
            format!("{:.1}", r.combined.wall_ms),
            format!("{:.1}", r.combined.billed_ms),
            r.combined.requests.to_string(),
            format!("{:.2}×", r.wall_ratio),
            format!("{:.2}×", r.billed_ratio),
        ]);
    }
    t.write(out)
}

fn kinesis(report: &local_stack::bench::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\nA DynamoDB stream or a Kinesis data stream: the same changes as Lambda's DynamoDB event and as its Kinesis \
         event, each invocation from the event's bytes to its response (medians)"
    )?;
    let mut t = case_table(&[
        ("DynamoDB bytes", Right),
        ("Kinesis bytes", Right),
        ("DynamoDB ms", Right),
        ("Kinesis ms", Right),
        ("ratio", Right),
        ("requests", Right),
    ]);
    for r in &report.kinesis {
        t.row(case_row(
            &r.case,
            [
                r.dynamodb_bytes.to_string(),
                r.kinesis_bytes.to_string(),
                format!("{:.1}", r.dynamodb_ms),
                format!("{:.1}", r.kinesis_ms),
                format!("{:.2}×", r.ratio),
                format!("{} / {}", r.requests.0, r.requests.1),
            ],
        ));
    }
    t.write(out)
}

fn any_order(report: &local_stack::bench::Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "\nThe indexer in order (MULTIKEY_ORDER=stream) and in any order (any), on the same batches in stream order, \
         each with its own index table; upstream moto (medians)"
    )?;
    let mut t = Table::new(&[
        ("batch", Left),
        ("records", Right),
        ("in order ms", Right),
        ("any order ms", Right),
        ("wall", Right),
        ("requests", Right),
        ("requests ratio", Right),
        ("writes", Right),
    ]);
    for r in &report.any_order {
        t.row(vec![
            r.batch.clone(),
            r.records.to_string(),
            format!("{:.1}", r.stream.wall_ms),
            format!("{:.1}", r.any.wall_ms),
            format!("{:.2}×", r.wall_ratio),
            format!("{} / {}", r.stream.requests, r.any.requests),
            format!("{:.2}×", r.requests_ratio),
            format!("{} / {}", r.stream.writes, r.any.writes),
        ]);
    }
    t.write(out)
}

fn cost(report: &local_stack::bench::Report, out: &mut impl Write) -> io::Result<()> {
    let Some(cost) = &report.cost else { return Ok(()) };
    writeln!(
        out,
        "\nWhat a million source changes cost (docs/cost.md): a seeded workload of {} issue changes of {} custom \
         fields (20% inserts, 70% modifies, {:.0}% of them of an included attribute, 10% TTL removes) and as many \
         counter increments, billed by the emulator's meter at the prices of scripts/prices.json ({}); Lambda at \
         each invocation's wall time, {} ms added to every call",
        cost.changes,
        cost.shape.fields,
        cost.shape.include_edits * 100.0,
        cost.prices,
        report.latency_ms
    )?;
    let mut t = Table::new(&[
        ("function", Left),
        ("invocations", Right),
        ("DynamoDB req", Right),
        ("WRU", Right),
        ("RRU", Right),
        ("GB-s", Right),
        ("S3 put", Right),
        ("S3 get", Right),
        ("log MB", Right),
        ("$", Right),
    ]);
    let row = |name: String, invocations: String, b: &local_stack::bench::cost::Bill| {
        vec![
            name,
            invocations,
            format!("{:.0}", b.dynamodb_requests),
            format!("{:.0}", b.wru),
            format!("{:.0}", b.rru),
            format!("{:.0}", b.gb_seconds),
            format!("{:.0}", b.s3_put_requests),
            format!("{:.0}", b.s3_get_requests),
            format!("{:.1}", b.log_bytes / 1e6),
            format!("{:.2}", b.usd),
        ]
    };
    for f in &cost.functions {
        t.row(row(f.function.clone(), format!("{:.0}", f.per_million.lambda_requests), &f.per_million));
    }
    t.row(row("total (in order)".to_owned(), format!("{:.0}", cost.total.lambda_requests), &cost.total));
    t.write(out)?;
    writeln!(
        out,
        "index_wru_per_plain_write: {:.3} in order, {:.3} in any order; tombstones: {:.0} per million changes, \
         adding {:.1}% to the bytes a Query reads while they live; Kinesis CDC units: {:.0} per million",
        cost.index_wru_per_plain_write.stream,
        cost.index_wru_per_plain_write.any,
        cost.tombstones,
        cost.tombstone_read_share * 100.0,
        cost.functions.first().map_or(0.0, |f| f.per_million.kinesis_cdc_units),
    )?;
    let m = &cost.monthly;
    writeln!(
        out,
        "A month (730 hours) at {} changes a second: {:.0} million changes, ${:.2} for the stack; {} grid pages a \
         second, {:.0} million pages at {:.2} RRU each (a page of 20 index entries), ${:.2}: ${:.2} a month",
        cost.shape.changes_per_second,
        m.changes / 1e6,
        m.stack_usd,
        cost.shape.grid_pages_per_second,
        m.grid_pages / 1e6,
        m.rru_per_page,
        m.grid_usd,
        m.usd
    )
}

/// A table whose first columns name the case (upstream, function, batch, records), then `rest`.
fn case_table(rest: &[(&'static str, crate::table::Align)]) -> Table {
    let columns: Vec<_> = [("upstream", Left), ("function", Left), ("batch", Left), ("records", Right)]
        .into_iter()
        .chain(rest.iter().copied())
        .collect();
    Table::new(&columns)
}

/// A row of a [`case_table`]: the case's cells, then `rest`.
fn case_row(case: &local_stack::bench::Case, rest: impl IntoIterator<Item = String>) -> Vec<String> {
    [case.upstream.to_owned(), case.function.to_owned(), case.batch.clone(), case.records.to_string()]
        .into_iter()
        .chain(rest)
        .collect()
}
