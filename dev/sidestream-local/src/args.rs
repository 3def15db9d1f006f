//! `sidestream-local`'s flags: every subcommand and option, parsed by clap in this one layer, and
//! resolved into library objects by `main.rs`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The stack of `template.yaml` on a local AWS emulator (moto), with Lambda's event source
/// mappings replayed: Sidestream's development and proving ground.
///
/// Tables and buckets are created from the template (existing ones are kept) and named
/// `<stack>-<logicalid>`. Each function runs as its real binary behind `cargo lambda watch`
/// (or in process) with the template's environment, and gets its stream's records the way
/// Lambda would deliver them: `FilterCriteria`, `BatchSize`, `batchItemFailures`, bisection,
/// `MaximumRetryAttempts` (given-up ranges go to the failure log). Items whose TTL attribute
/// is past are deleted, and their REMOVE records carry DynamoDB's service identity.
/// The emulator is reached with `AWS_ENDPOINT_URL` (scripts/moto sets it).
#[derive(Debug, Parser)]
#[command(name = "sidestream-local", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// For people.
    Text,
    /// For programs: JSON.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Creates the stack and replays its streams until interrupted (or, with --until-settled,
    /// until everything written so far is delivered).
    Run {
        #[command(flatten)]
        options: LocalOptions,
        /// Stop once every stream has been replayed to its end.
        #[arg(long)]
        until_settled: bool,
    },
    /// Creates the stack, loads the article's issue tracker, a hot counter and expiring issues
    /// while the replayer runs, then prints what the functions kept and checks it is exact
    /// (exit status 1 if not).
    Demo {
        #[command(flatten)]
        options: LocalOptions,
        /// After the checks, keep the stack up and serve the web grid over it.
        #[arg(long)]
        serve: bool,
        /// The web grid's port on 127.0.0.1 (0: any free port).
        #[arg(long, default_value_t = 8080)]
        port: u16,
    },
    /// Creates a fresh stack and runs a generated workload through the three functions (in
    /// process) under every AWS fault (a proxy before the emulator) and every Lambda fault
    /// (killed processes, timeouts, batches delivered twice), over split shards with parallel
    /// batches; then checks the index, the archive and the counters against independent
    /// oracles. Exit status 1 on any difference.
    Chaos(ChaosArgs),
    /// Measures each function's whole invocation on a fresh stack, behind a proxy that adds a
    /// fixed latency to every call: `BatchSize` 100, 1,000 and a 6 MB batch against the request
    /// bound and a floor measured in the same run; hot counters under concurrent invocations;
    /// fixed and adaptive write concurrency against a write capacity. See docs/benchmarks.md.
    Bench(BenchArgs),
    /// Writes items into a table of a running local stack, one JSON line each from stdin (or
    /// --file): an item in plain JSON is put (numbers become N, strings S, objects M, arrays L;
    /// a put of an item that exists replaces it, as an update would), and `{"delete": {KEY}}`
    /// deletes the item with that key. Reaches the emulator `AWS_ENDPOINT_URL` names (`run`
    /// prints it). Prints how many lines were put and deleted.
    Put {
        /// The table (`run` prints its tables, e.g. `$ISSUES_TABLE`).
        #[arg(long)]
        table: String,
        /// Read the lines from this file instead of stdin.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Prints one item of a table as plain JSON (sets as arrays, numbers as numbers), read
    /// consistently; exit status 1 if there is none.
    Get {
        /// The table.
        #[arg(long)]
        table: String,
        /// The item's key as plain JSON, e.g. `{"pk": "COUNTER#visits#TOTAL"}`.
        #[arg(long, value_name = "JSON")]
        key: String,
    },
    /// Waits until a running `sidestream-local run` has delivered everything written to its
    /// tables before this command began (and swept what had expired by then), so that what
    /// the functions keep can be read. Exit status 1 if it has not within --timeout.
    Wait {
        /// The stack's name, as given to `run`.
        #[arg(long, default_value = "sidestream-local")]
        stack: String,
        /// The folder `run` keeps its files in (its --failure-log's).
        #[arg(long, default_value = "target/local", value_name = "DIR")]
        dir: PathBuf,
        /// Seconds to wait at most.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Added by the proxy to every data call, in milliseconds.
    #[arg(long, default_value_t = 10)]
    pub(crate) latency_ms: u64,
    /// Invocations per write-path case (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) repeats: usize,
    /// Rounds of concurrent invocations per hot-counter case.
    #[arg(long, default_value_t = 10)]
    pub(crate) hot_rounds: usize,
    /// The throttling cases' write capacities in requests per second (comma-separated; 0: no
    /// limit, the windows on a clean service).
    #[arg(long, value_delimiter = ',', default_value = "0,250,800", value_name = "N,…")]
    pub(crate) capacity: Vec<u32>,
    /// Only `BatchSize` 100 and 1,000 (no 6 MB batch), one invocation each, and 4,000 changes
    /// for the cost: a quick look.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Source changes in the cost part's seeded workload.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub(crate) changes: usize,
    /// The cost part's workload: custom fields per item (each an index entry).
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=100))]
    pub(crate) fields: u16,
    /// The cost part's workload: the share of modifies (0 to 1) that edit an `include`d attribute,
    /// each rewriting every entry of its item.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE", value_parser = share)]
    pub(crate) include_edits: f64,
    /// The cost part's month: source changes a second.
    #[arg(long, default_value_t = 100.0, value_name = "N", value_parser = rate)]
    pub(crate) changes_per_second: f64,
    /// The cost part's month: grid pages read a second.
    #[arg(long, default_value_t = 10.0, value_name = "N", value_parser = rate)]
    pub(crate) grid_pages_per_second: f64,
    /// Where the functions' binaries are, for the cold starts (scripts/bench-e2e builds them).
    #[arg(long, default_value = "target/fuzz", value_name = "DIR")]
    pub(crate) binaries: PathBuf,
    /// Run only these parts (comma-separated; all by default).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "PART")]
    pub(crate) only: Vec<local_stack::bench::Part>,
    /// The SAM template.
    #[arg(long, default_value = "template.yaml", value_name = "FILE")]
    pub(crate) template: PathBuf,
    /// `text` (a progress bar, then tables) or `json` (one object).
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub(crate) output: Output,
}

#[derive(Debug, Args)]
pub(crate) struct ChaosArgs {
    /// Ops in the workload: issue puts and deletes, expiring items, counter increments.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) records: u64,
    /// Seeds the workload and the faults (replacing the spec's seed).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// `default`, `none`, or `name=value` pairs: the fault proxy's (throttle, 5xx, partial,
    /// apply-then-fail, reset, stall, stall-for, latency) and the replayer's (kill, timeout,
    /// duplicate); see docs/local.md.
    #[arg(long, default_value = "default", value_name = "SPEC")]
    pub(crate) faults: String,
    /// `ParallelizationFactor` of every mapping (1-10).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..=10))]
    pub(crate) parallelization: u8,
    /// Concurrent workload writers.
    #[arg(long, default_value_t = 16)]
    pub(crate) writers: usize,
    /// The SAM template.
    #[arg(long, default_value = "template.yaml", value_name = "FILE")]
    pub(crate) template: PathBuf,
    /// A template parameter, `NAME=VALUE` (repeatable).
    #[arg(long = "parameter", value_name = "NAME=VALUE", value_parser = parse_parameter)]
    pub(crate) parameters: Vec<(String, String)>,
    /// Regions of a global table: 2 replicates the issues and counter tables between two
    /// stacks, deployed as docs/global-tables.md says.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub(crate) regions: u8,
    /// Where the functions read the tables' changes: `kinesis` sets `IssuesChangeSource` and
    /// `CounterChangeSource` to `Kinesis` (a `--parameter` naming either wins).
    #[arg(long, value_enum, default_value_t = ChangeSource::DynamodbStreams)]
    pub(crate) source: ChangeSource,
    /// The scheduled verifications during the run only look, and repair nothing: an exact end then
    /// means the functions' own writes left the index right.
    #[arg(long)]
    pub(crate) no_repair: bool,
    /// The workload goes into a team's own single-table design: a table keyed `PK`/`SK` with its
    /// own attribute names and GSI, made first, and the stack deployed around it by parameters
    /// (docs/your-table.md).
    #[arg(long, conflicts_with_all = ["regions", "lifecycle"])]
    pub(crate) team_table: bool,
    /// One stack through a life instead (docs/local.md, "The lifecycle run"): an existing table
    /// backfilled, a canary of the previous release moved back and forward, a switch to Kinesis
    /// and back, Kinesis ranges given up and replayed, and a bulk edit that leaves
    /// `--tombstones` tombstones while the grid pages through them.
    #[arg(long, conflicts_with_all = ["source", "regions", "no_repair"])]
    pub(crate) lifecycle: bool,
    /// With `--lifecycle`: the tombstones the bulk edit leaves in one index partition.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) tombstones: u64,
    /// `text` (a progress bar, then a report) or `json` (one object).
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub(crate) output: Output,
}

/// Where a chaos run's functions read the tables' changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ChangeSource {
    /// The tables' DynamoDB streams.
    DynamodbStreams,
    /// Kinesis data streams the tables write to, delivered out of order and twice.
    Kinesis,
}

#[derive(Debug, Args)]
pub(crate) struct LocalOptions {
    /// The SAM template.
    #[arg(long, default_value = "template.yaml", value_name = "FILE")]
    pub(crate) template: PathBuf,
    /// The stack name, the prefix of every resource name.
    #[arg(long, default_value = "sidestream-local")]
    pub(crate) stack: String,
    /// A template parameter, `NAME=VALUE` (repeatable); the rest take their defaults.
    #[arg(long = "parameter", value_name = "NAME=VALUE", value_parser = parse_parameter)]
    pub(crate) parameters: Vec<(String, String)>,
    /// Run the functions' library handlers in this process instead of their binaries.
    #[arg(long)]
    pub(crate) in_process: bool,
    /// Where the function binaries are (default: beside this program).
    #[arg(long, value_name = "DIR")]
    pub(crate) bin_dir: Option<PathBuf>,
    /// The cargo-lambda program.
    #[arg(long, default_value = "cargo-lambda", value_name = "PATH")]
    pub(crate) cargo_lambda: PathBuf,
    /// Ranges of records given up on after `MaximumRetryAttempts`, one JSON line each.
    #[arg(long, default_value = "target/local/failures.jsonl", value_name = "FILE")]
    pub(crate) failure_log: PathBuf,
    /// Where the function binaries' logs go.
    #[arg(long, default_value = "target/local/logs", value_name = "DIR")]
    pub(crate) log_dir: PathBuf,
    /// Put a fault-injecting proxy between the functions and the emulator: `default`, or
    /// `name=value` pairs such as `throttle=0.05,5xx=0.02,partial=0.2,apply-then-fail=0.02,
    /// reset=0.01,stall=0.003,stall-for=12000ms,latency=2ms,seed=1` (see docs/local.md).
    #[arg(long, value_name = "SPEC")]
    pub(crate) faults: Option<String>,
}

fn parse_parameter(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))
}

/// A share: a number from 0 to 1.
fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if (0.0..=1.0).contains(&share) => Ok(share),
        _ => Err(format!("{text:?} is not a share from 0 to 1")),
    }
}

/// A rate a second: a number of 0 or more.
fn rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate >= 0.0 => Ok(rate),
        _ => Err(format!("{text:?} is not a rate a second of 0 or more")),
    }
}
