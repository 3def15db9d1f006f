//! `sidestream`: the command line. Parses arguments and hands each subcommand stdin and stdout.

use std::io::{self, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use sidestream::archive;
use sidestream::key::{self, KeyOptions};
use sidestream::local::{self, Emulated, Stack};
use stream_kit::Vars;
use stream_replayer::FailureLog;

/// Sidestream: DynamoDB stream processing toolkit.
#[derive(Debug, Parser)]
#[command(name = "sidestream", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Order-preserving DynamoDB keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Runs a function's planning step on an event file, without touching AWS.
    ///
    /// Configuration comes from the same environment variables as the Lambda (multikey-indexer:
    /// `MULTIKEY_INDEXES`; ttl-archiver: `ARCHIVE_PREFIX`, `ARCHIVE_GZIP_LEVEL`;
    /// counter-aggregator: `COUNTER_PARTITION_KEY`). Prints one JSON object per planned write
    /// (multikey-indexer), per archive object (ttl-archiver) or per counter total to update
    /// (counter-aggregator); what is left out and the record planning stopped at go to stderr,
    /// and a stop exits with status 1.
    Plan {
        /// The function whose plan to run.
        function: Function,
        /// A DynamoDB stream event (`{"Records":[…]}`), as Lambda delivers it.
        #[arg(long, value_name = "FILE")]
        event: PathBuf,
        /// ttl-archiver: also write the archive objects under DIR, at their keys.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// The ttl-archiver's archives: read them, restore them.
    ///
    /// S3 and DynamoDB are reached with the usual AWS configuration (`AWS_PROFILE`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL` for an emulator); set `S3_FORCE_PATH_STYLE=true` for emulators that
    /// need it.
    #[command(subcommand)]
    Archive(ArchiveCommand),
    /// The stack of `template.yaml` on a local AWS emulator (moto), with Lambda's event source
    /// mappings replayed.
    ///
    /// Tables and buckets are created from the template (existing ones are kept) and named
    /// `<stack>-<logicalid>`. Each function runs as its real binary behind `cargo lambda watch`
    /// (or in process) with the template's environment, and gets its stream's records the way
    /// Lambda would deliver them: `FilterCriteria`, `BatchSize`, `batchItemFailures`, bisection,
    /// `MaximumRetryAttempts` (given-up ranges go to the failure log). Items whose TTL attribute
    /// is past are deleted, and their REMOVE records carry DynamoDB's service identity.
    /// The emulator is reached with `AWS_ENDPOINT_URL` (scripts/moto sets it).
    #[command(subcommand)]
    Local(LocalCommand),
    /// One page of a scope's items sorted by an indexed field (the multikey index's read side):
    /// the items that have the field in its order, then those without it in `num` order.
    ///
    /// Prints a table and `next: <cursor>`; pass the cursor back with --cursor for the next page.
    /// Cursors are signed with `GRID_CURSOR_KEY` (a built-in development key when unset, which
    /// makes them tamper-evident but not unforgeable) and last a day.
    Grid(GridArgs),
}

#[derive(Debug, Args)]
struct GridArgs {
    /// The base table (the issues).
    #[arg(long)]
    table: String,
    /// The multikey index table.
    #[arg(long)]
    index_table: String,
    /// The scope's value, e.g. a project id.
    #[arg(long)]
    scope: String,
    /// The field to sort by (a key of the indexed map).
    #[arg(long)]
    field: String,
    /// Highest values first (items without the field still come last).
    #[arg(long)]
    desc: bool,
    /// Items per page (1-100).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// The cursor a previous page printed.
    #[arg(long)]
    cursor: Option<String>,
    /// Values from this one (a typed component, e.g. `{"N":"10"}` or `{"S":"2023-05-01"}`).
    #[arg(long, value_name = "JSON")]
    from: Option<String>,
    /// Values up to this one, included.
    #[arg(long, value_name = "JSON")]
    to: Option<String>,
    /// String values beginning with this.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    prefix: Option<String>,
    /// Base attributes to show besides the index's (fetched with one `BatchGetItem`).
    #[arg(long, value_delimiter = ',')]
    attributes: Vec<String>,
    /// The base table's key attribute.
    #[arg(long, default_value = "id")]
    key: String,
    /// The scope attribute.
    #[arg(long, default_value = "project")]
    scope_attribute: String,
    /// The order attribute of the nulls phase.
    #[arg(long, default_value = "num")]
    order: String,
    /// The indexed map attribute.
    #[arg(long, default_value = "custom_fields")]
    source: String,
    /// The base table's index by scope and order.
    #[arg(long, default_value = "project-num")]
    nulls_index: String,
    /// The base attributes the index items carry (the indexer's `include`).
    #[arg(long, value_delimiter = ',', default_value = "name,state")]
    projected: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum LocalCommand {
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
    },
}

#[derive(Debug, Args)]
struct LocalOptions {
    /// The SAM template.
    #[arg(long, default_value = "template.yaml", value_name = "FILE")]
    template: PathBuf,
    /// The stack name, the prefix of every resource name.
    #[arg(long, default_value = "sidestream-local")]
    stack: String,
    /// A template parameter, `NAME=VALUE` (repeatable); the rest take their defaults.
    #[arg(long = "parameter", value_name = "NAME=VALUE", value_parser = parse_parameter)]
    parameters: Vec<(String, String)>,
    /// Run the functions' library handlers in this process instead of their binaries.
    #[arg(long)]
    in_process: bool,
    /// Where the function binaries are (default: beside this program).
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// The cargo-lambda program.
    #[arg(long, default_value = "cargo-lambda", value_name = "PATH")]
    cargo_lambda: PathBuf,
    /// Ranges of records given up on after `MaximumRetryAttempts`, one JSON line each.
    #[arg(long, default_value = "target/local/failures.jsonl", value_name = "FILE")]
    failure_log: PathBuf,
    /// Where the function binaries' logs go.
    #[arg(long, default_value = "target/local/logs", value_name = "DIR")]
    log_dir: PathBuf,
}

fn parse_parameter(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))
}

#[derive(Debug, Subcommand)]
enum ArchiveCommand {
    /// Prints an archive object as plain JSON lines: items as ordinary JSON (sets as arrays,
    /// binary as base64, numbers exact), metadata lines with their keys likewise.
    Cat {
        /// `s3://BUCKET/KEY`, or a local file.
        source: String,
        /// Print the lines as archived, in DynamoDB JSON.
        #[arg(long)]
        typed: bool,
    },
    /// Puts the items archived under a prefix back into an existing table, object by object in
    /// key order, replacing items with the same key. Progress goes to stderr.
    Restore {
        /// The archive bucket.
        #[arg(long)]
        bucket: String,
        /// The key prefix to restore, for example `archive/table=issues/` or a single day.
        #[arg(long)]
        prefix: String,
        /// The table to put the items into.
        #[arg(long)]
        table: String,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Function {
    /// The multikey index.
    MultikeyIndexer,
    /// The TTL archive.
    TtlArchiver,
    /// The sharded counters' totals.
    CounterAggregator,
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Encodes typed tuples, one JSON array per line, into keys: `{"S":"…"}` or `{"B":"…"}`.
    ///
    /// Components are DynamoDB JSON ({"S":"Open"}, {"N":"42"}, {"B":"AQI="}, {"BOOL":true},
    /// {"NULL":true}) or {"DATE":"2024-05-01"} / {"DATETIME":"2024-05-01T12:34:56Z"}.
    /// A line that cannot be encoded yields {"error":"…"}; the exit status is then 1.
    Encode {
        #[command(flatten)]
        form: Form,
        /// Check against the 2048-byte partition-key limit instead of the 1024-byte sort-key one.
        #[arg(long)]
        partition: bool,
    },
    /// Decodes keys, one per line ({"S":"…"}, {"B":"…"}, or the bare key), into JSON arrays.
    Decode {
        #[command(flatten)]
        form: Form,
    },
}

#[derive(Debug, Args)]
struct Form {
    /// The binary form (B keys, base64) instead of the text form (S keys).
    #[arg(long)]
    binary: bool,
    /// Comma-separated 0-based positions that sort descending, e.g. `--desc 1,2`. When decoding,
    /// the key's recorded directions are checked against it.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    desc: Option<Vec<usize>>,
}

impl Form {
    fn options(&self) -> KeyOptions {
        KeyOptions {
            binary: self.binary,
            desc: self
                .desc
                .as_ref()
                .map(|positions| positions.iter().copied().collect()),
            partition: false,
        }
    }
}

fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Command::Key(command) => run_key(command),
        Command::Plan { function, event, out } => run_plan(function, &event, out.as_deref()),
        Command::Archive(command) => run_archive(command),
        Command::Local(command) => run_local(command),
        Command::Grid(args) => run_grid(args),
    }
}

fn run_local(command: LocalCommand) -> anyhow::Result<ExitCode> {
    let (options, demo, until_settled) = match command {
        LocalCommand::Run {
            options,
            until_settled,
        } => (options, false, until_settled),
        LocalCommand::Demo { options } => (options, true, true),
    };
    // JSON logs on stderr; the demo keeps its output readable with warnings and errors only.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(if demo { "warn" } else { "info" }));
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .init();
    runtime()?.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let parameters = options.parameters.iter().cloned().collect();
        let stack = Stack::create(&sdk, &options.template, &options.stack, &parameters).await?;
        // Not locked: in-process handlers print their EMF lines to stdout meanwhile.
        let mut out = io::stdout();
        writeln!(
            out,
            "The stack {} of {} on {}",
            options.stack,
            options.template.display(),
            sdk.endpoint_url().unwrap_or("AWS")
        )?;
        for table in &stack.tables {
            writeln!(out, "  table  {}", table.name)?;
        }
        for bucket in &stack.buckets {
            writeln!(out, "  bucket {}", bucket.name)?;
        }
        let bin_dir = match &options.bin_dir {
            Some(dir) => dir.clone(),
            None => std::env::current_exe()?
                .parent()
                .context("this program's folder")?
                .to_owned(),
        };
        let mut running = Vec::new();
        let pipeline = stack.pipeline(
            &sdk,
            |function| {
                if options.in_process {
                    return local::in_process_invoker(function, &sdk);
                }
                let emulated =
                    Emulated::function(&options.cargo_lambda, &bin_dir, function, &options.log_dir)?;
                let invoker = emulated.invoker();
                running.push(emulated);
                Ok(invoker)
            },
            FailureLog::new(&options.failure_log),
        )?;
        for emulated in &running {
            writeln!(
                out,
                "  function http://127.0.0.1:{} (log {})",
                emulated.port,
                emulated.log.display()
            )?;
        }
        writeln!(out, "  failure log {}", options.failure_log.display())?;
        out.flush()?;
        if demo {
            let ok = sidestream::demo::run(&sdk, &stack, pipeline, &mut out).await?;
            return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
        let mut pipeline = pipeline;
        if until_settled {
            pipeline.settle().await?;
        } else {
            pipeline
                .run_until(std::future::pending(), std::time::Duration::from_millis(200))
                .await?;
        }
        for (function, counts) in pipeline.counts() {
            writeln!(out, "  {function:<18} {counts}")?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn run_key(command: KeyCommand) -> anyhow::Result<ExitCode> {
    let (stdin, stdout) = (io::stdin().lock(), BufWriter::new(io::stdout().lock()));
    let summary = match command {
        KeyCommand::Encode { form, partition } => {
            let options = KeyOptions {
                partition,
                ..form.options()
            };
            key::encode(stdin, stdout, &options)?
        }
        KeyCommand::Decode { form } => key::decode(stdin, stdout, &form.options())?,
    };
    if summary.errors > 0 {
        eprintln!(
            "sidestream: {} of {} lines could not be converted",
            summary.errors, summary.lines
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn run_plan(function: Function, event: &Path, out: Option<&Path>) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(event).with_context(|| format!("cannot read {}", event.display()))?;
    let (stdout, stderr) = (BufWriter::new(io::stdout().lock()), io::stderr().lock());
    let stopped = match function {
        Function::MultikeyIndexer => {
            anyhow::ensure!(out.is_none(), "--out is for the ttl-archiver's objects");
            let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&Vars::process_lookup))?;
            let plan = sidestream::plan::multikey_indexer(&indexes, &bytes, stdout, stderr)
                .with_context(|| format!("cannot plan {}", event.display()))?;
            plan.stopped.is_some() || !plan.rejected.is_empty()
        }
        Function::TtlArchiver => {
            let layout = ttl_archiver::Layout::from_vars(&Vars::new(&Vars::process_lookup))?;
            let plan = sidestream::plan::ttl_archiver(&layout, &bytes, out, stdout, stderr)
                .with_context(|| format!("cannot plan {}", event.display()))?;
            plan.stopped.is_some() || !plan.rejected.is_empty()
        }
        Function::CounterAggregator => {
            anyhow::ensure!(out.is_none(), "--out is for the ttl-archiver's objects");
            let key = Vars::new(&Vars::process_lookup)
                .optional("COUNTER_PARTITION_KEY")
                .unwrap_or_else(|| sharded_counter::layout::DEFAULT_PARTITION_KEY.to_owned());
            let plan = sidestream::plan::counter_aggregator(&key, &bytes, stdout, stderr)
                .with_context(|| format!("cannot plan {}", event.display()))?;
            plan.stopped.is_some() || !plan.rejected.is_empty()
        }
    };
    Ok(if stopped {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn run_grid(args: GridArgs) -> anyhow::Result<ExitCode> {
    let bound = |text: &Option<String>| -> anyhow::Result<std::ops::Bound<key_codec::Value>> {
        Ok(match text {
            None => std::ops::Bound::Unbounded,
            Some(text) => {
                let json: serde_json::Value =
                    serde_json::from_str(text).with_context(|| format!("{text} is not JSON"))?;
                std::ops::Bound::Included(
                    sidestream::typed_json::value_from_json(&json).map_err(anyhow::Error::msg)?,
                )
            }
        })
    };
    let filter = match (&args.prefix, &args.from, &args.to) {
        (Some(prefix), _, _) => grid_view::Filter::Prefix(prefix.clone()),
        (None, None, None) => grid_view::Filter::None,
        _ => grid_view::Filter::Range(bound(&args.from)?, bound(&args.to)?),
    };
    let query = grid_view::Query {
        scope: args.scope,
        field: args.field,
        descending: args.desc,
        limit: args.limit,
        filter,
        attributes: args.attributes,
    };
    let layout = grid_view::Layout {
        table: args.table,
        key: args.key,
        scope: args.scope_attribute,
        order: args.order,
        source: args.source,
        nulls_index: args.nulls_index,
        index_table: args.index_table,
        projected: args.projected,
    };
    let key = Vars::new(&Vars::process_lookup)
        .optional("GRID_CURSOR_KEY")
        .unwrap_or_else(|| "sidestream-grid-development-key".to_owned());
    let signer = grid_view::Signer::new(key.as_bytes(), 24 * 3600);
    runtime()?.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let grid = grid_view::Grid::new(
            aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk)),
            layout.clone(),
            signer,
        );
        let page = grid.page(&query, args.cursor.as_deref()).await?;
        sidestream::grid::render(
            &page,
            &layout,
            &query.field,
            &query.attributes,
            io::stdout().lock(),
        )?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The async runtime for the commands that call AWS.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn run_archive(command: ArchiveCommand) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let s3 = local::s3_client(&sdk);
        match command {
            ArchiveCommand::Cat { source, typed } => {
                let bytes = archive::Source::parse(&source)?.fetch(&s3).await?;
                archive::cat(&bytes, BufWriter::new(io::stdout().lock()), typed)
                    .with_context(|| format!("cannot read {source}"))?;
            }
            ArchiveCommand::Restore {
                bucket,
                prefix,
                table,
            } => {
                let dynamodb = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
                archive::restore(&s3, &dynamodb, &bucket, &prefix, &table, io::stderr().lock()).await?;
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
