//! `sidestream-fuzz [--execs N] [--seed S] [TARGET...]`: runs each target (all by default) for N
//! executions (10^6 by default), one thread per core, printing progress, then one line per
//! target: executions, rate, the slowest input, failures. Exits 1 if any input failed; the
//! failing inputs are written to target/fuzz-failures/<target>-<n>.bin.

use std::io::Write as _;
use std::time::Instant;

use anyhow::{Context as _, bail};
use fuzz::{Target, run};

fn main() -> anyhow::Result<std::process::ExitCode> {
    let mut execs: u64 = 1_000_000;
    let mut seed: u64 = 1;
    let mut targets = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--execs" => execs = args.next().context("--execs takes a number")?.parse()?,
            "--seed" => seed = args.next().context("--seed takes a number")?.parse()?,
            name => match Target::from_name(name) {
                Some(t) => targets.push(t),
                None => bail!(
                    "unknown target {name:?}; the targets are {}",
                    Target::ALL.map(Target::name).join(", ")
                ),
            },
        }
    }
    if targets.is_empty() {
        targets = Target::ALL.to_vec();
    }
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let started = Instant::now();
    let mut results = Vec::new();
    for chunk in targets.chunks(threads) {
        let handles: Vec<_> = chunk
            .iter()
            .map(|&target| {
                std::thread::spawn(move || {
                    let begun = Instant::now();
                    let report = run(target, execs, seed, |n| {
                        if n % 100_000 == 0 {
                            eprintln!("fuzz: {} {n}/{execs} ({:.0?})", target.name(), begun.elapsed());
                        }
                    });
                    (target, report, begun.elapsed())
                })
            })
            .collect();
        for handle in handles {
            results.push(handle.join().map_err(|_| anyhow::anyhow!("a fuzz thread panicked"))?);
        }
    }
    let mut out = std::io::stdout().lock();
    let mut failed = false;
    std::fs::create_dir_all("target/fuzz-failures")?;
    for (target, report, took) in &results {
        #[allow(clippy::cast_precision_loss, reason = "a rate for people")]
        let rate = report.execs as f64 / took.as_secs_f64().max(1e-9);
        writeln!(
            out,
            "{:<15} {:>10} execs  {:>9.0}/s  slowest input {:>8.2?}  {} failed",
            target.name(),
            report.execs,
            rate,
            report.slowest,
            report.failed
        )?;
        for (i, (input, message)) in report.failures.iter().enumerate() {
            let path = format!("target/fuzz-failures/{}-{i}.bin", target.name());
            std::fs::write(&path, input)?;
            writeln!(out, "  {path}: {message}")?;
            failed = true;
        }
    }
    writeln!(out, "fuzz: {} targets in {:.0?}", results.len(), started.elapsed())?;
    Ok(if failed { std::process::ExitCode::FAILURE } else { std::process::ExitCode::SUCCESS })
}
