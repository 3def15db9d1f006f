//! `sidestream`: the command line. [`args`] parses the flags; this file resolves them into library
//! objects, runs the subcommand, and renders its output.

use std::io::{self, BufWriter, Write as _};
use std::path::Path;
use std::process::ExitCode;

mod args;
mod backfill;
mod failures;
mod grid;
mod index;
mod key;
mod plan;
mod stack;
mod status;
mod typed_json;

use crate::args::{ArchiveCommand, Cli, Command, GridArgs, KeyCommand, Output, ServeArgs};
use crate::key::KeyOptions;
use anyhow::Context as _;
use clap::Parser as _;
use operations::archive;
use stream_runtime::Vars;

/// The functions' allocator (see their `main.rs`), so that the functions run in this process
/// (`plan`, `failures replay`) run as on Lambda.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs the command; an error is printed as one line (its causes after colons), never with a
/// backtrace, and exits with status 1.
fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sidestream: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Key(command) => run_key(command),
        Command::Plan { function, event, out } => run_plan(&function, &event, out.as_deref()),
        Command::Archive(command) => run_archive(command),
        Command::Failures(command) => crate::failures::run(command),
        Command::Index(command) => crate::index::run(command),
        Command::Grid(args) => run_grid(args),
        Command::Status(args) => crate::status::run(&args),
        Command::Serve(args) => run_serve(args),
    }
}

fn run_key(command: KeyCommand) -> anyhow::Result<ExitCode> {
    let (stdin, stdout) = (io::stdin().lock(), BufWriter::new(io::stdout().lock()));
    let summary = match command {
        KeyCommand::Encode { form, partition } => {
            let options = KeyOptions { partition, ..form.options() };
            key::encode(stdin, stdout, &options)?
        }
        KeyCommand::Decode { form } => key::decode(stdin, stdout, &form.options())?,
    };
    if summary.errors > 0 {
        eprintln!("sidestream: {} of {} lines could not be converted", summary.errors, summary.lines);
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn run_plan(function: &str, event: &Path, out: Option<&Path>) -> anyhow::Result<ExitCode> {
    let function = sidestream_combined::Function::named(function)
        .with_context(|| format!("{function} is not a stream function"))?;
    let bytes = std::fs::read(event).with_context(|| format!("cannot read {}", event.display()))?;
    let mut printer = crate::plan::Printer::new(out);
    let failed = function
        .explain(&Vars::new(&Vars::process_lookup), &bytes, &mut printer)
        .with_context(|| format!("cannot plan {}", event.display()))?;
    printer.finish()?;
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn run_grid(args: GridArgs) -> anyhow::Result<ExitCode> {
    let bound = |text: &Option<String>| -> anyhow::Result<std::ops::Bound<key_codec::Value>> {
        Ok(match text {
            None => std::ops::Bound::Unbounded,
            Some(text) => {
                let json: serde_json::Value =
                    serde_json::from_str(text).with_context(|| format!("{text} is not JSON"))?;
                std::ops::Bound::Included(
                    crate::typed_json::value_from_json(&json).map_err(anyhow::Error::msg)?,
                )
            }
        })
    };
    let filter = match (&args.prefix, &args.from, &args.to) {
        (Some(prefix), _, _) => operations::grid::Filter::Prefix(prefix.clone()),
        (None, None, None) => operations::grid::Filter::None,
        _ => operations::grid::Filter::Range(bound(&args.from)?, bound(&args.to)?),
    };
    let query = operations::grid::Query {
        scope: args.scope,
        field: args.field,
        descending: args.desc,
        limit: args.limit,
        filter,
        attributes: args.attributes,
    };
    let schema = grid_schema(args.source)?;
    let signer = grid_signer();
    runtime()?.block_on(async {
        let sdk = crate::sdk().await?;
        let grid = operations::grid::Grid::new(
            aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk)),
            schema,
            signer,
        );
        let page = grid.page(&query, args.cursor.as_deref()).await?;
        let out = BufWriter::new(io::stdout().lock());
        match args.output {
            Output::Text => crate::grid::render(&page, grid.schema(), &query, out)?,
            Output::Json => crate::grid::json_lines(&page, grid.schema(), &query, out)?,
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// JSON logs on stderr, at `RUST_LOG`'s levels or else warnings and errors: for the commands that
/// run a function's or a server's code, whose stdout is their own output.
pub(crate) fn logs_to_stderr() {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(io::stderr)
        .init();
}

fn run_serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    logs_to_stderr();
    let schema = grid_schema(args.source)?;
    runtime()?.block_on(async {
        let sdk = crate::sdk().await?;
        let client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
        let grid = operations::grid::Grid::new(client.clone(), schema, grid_signer());
        operations::grid_server::serve_on_loopback(
            operations::grid_server::App::new(grid, client),
            args.port,
            "",
            &mut io::stdout(),
        )
        .await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The grid over `source`'s tables, as `MULTIKEY_INDEXES` describes the index: the stack's
/// indexer's, or this process's.
fn grid_schema(source: crate::args::GridSource) -> anyhow::Result<operations::grid::GridSchema> {
    let stack = crate::stack::read_blocking(source.stack.as_deref())?;
    let stack = stack.as_ref();
    let table =
        crate::stack::or_stack(source.table, stack, "--table", operations::stack::Deployed::issues_table)?;
    let nulls_index = source
        .nulls_index
        .or_else(|| stack.and_then(|s| s.output("GridNullsIndex")).map(str::to_owned))
        .unwrap_or_else(|| DEFAULT_NULLS_INDEX.to_owned());
    let environment = crate::stack::environment(stack, "multikey-indexer")?;
    let indexes = multikey_indexer::Indexes::from_vars(&Vars::new(&crate::stack::layered(&environment)))?;
    Ok(operations::grid::GridSchema::new(&indexes, source.index.as_deref(), table, nulls_index)?)
}

/// The grid's index of the items without a value when neither `--nulls-index` nor the stack
/// names one: the one a stack that creates the issues table makes.
const DEFAULT_NULLS_INDEX: &str = "project-num";

/// The grid's cursor signer: `GRID_CURSOR_KEY`, or a development key; cursors last a day.
fn grid_signer() -> formats::cursor::Signer {
    let key = Vars::new(&Vars::process_lookup)
        .optional("GRID_CURSOR_KEY")
        .unwrap_or_else(|| "sidestream-grid-development-key".to_owned());
    formats::cursor::Signer::new(key.as_bytes(), 24 * 3600)
}

/// The AWS configuration every command calls AWS with (`AWS_PROFILE`, `AWS_REGION`,
/// `AWS_ENDPOINT_URL`, …). A missing Region is named here, before any request, as the systemic
/// failure it is: every request would fail alike until it is set.
pub(crate) async fn sdk() -> anyhow::Result<aws_config::SdkConfig> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    region_of(&sdk)?;
    Ok(sdk)
}

/// Fails, naming the variable, when `sdk` has no Region: for a command that calls AWS only for
/// some of its inputs (`archive cat` of an S3 object, not of a file).
fn region_of(sdk: &aws_config::SdkConfig) -> anyhow::Result<()> {
    anyhow::ensure!(
        sdk.region().is_some(),
        "no AWS Region is set (systemic: every request would fail alike): set AWS_REGION, or the \
         `region` of the profile AWS_PROFILE names"
    );
    Ok(())
}

/// The async runtime for the commands that call AWS.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")
}

fn run_archive(command: ArchiveCommand) -> anyhow::Result<ExitCode> {
    runtime()?.block_on(async {
        // `archive cat` of a local file needs no AWS, and so no Region.
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let s3 = stream_runtime::aws::s3_client(&sdk, &Vars::new(&Vars::process_lookup))?;
        if !matches!(&command, ArchiveCommand::Cat { source, .. } if !source.starts_with("s3://")) {
            region_of(&sdk)?;
        }
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
                ttl_attribute,
                ttl,
                if_absent,
                output,
            } => {
                let dynamodb = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
                let options = archive::RestoreOptions {
                    ttl_attribute,
                    ttl,
                    if_absent,
                    now: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
                };
                let mut bar = (output == Output::Text).then(|| operations::progress::Bar::new("items"));
                let mut show = |p: archive::RestoreProgress<'_>| {
                    if let Some(bar) = &mut bar {
                        let last = p.objects.0 == p.objects.1;
                        let extra = format!(" | object {}/{}", p.objects.0, p.objects.1);
                        bar.show(p.items.0 as u64, p.items.1 as u64, &extra, last);
                    }
                };
                let done = archive::restore(&s3, &dynamodb, (&bucket, &prefix, &table), &options, &mut show).await?;
                let mut out = io::stdout().lock();
                match output {
                    Output::Json => writeln!(out, "{}", serde_json::to_string(&done)?)?,
                    Output::Text => writeln!(
                        out,
                        "Restored {} items from {} objects into {table}: {} already there and left as they were, \
                         {} lines that repeated an earlier object's left out, {} items had {} in the past, {} had it {}",
                        done.items,
                        done.objects,
                        done.existing,
                        done.duplicates,
                        done.expired,
                        options.ttl_attribute,
                        done.ttl_changed,
                        match options.ttl {
                            Some(archive::TtlChoice::Clear) => "cleared",
                            Some(archive::TtlChoice::Extend { .. }) => "extended",
                            _ => "changed",
                        }
                    )?,
                }
            }
            ArchiveCommand::Import { bucket, prefix, source, table, partition_key, sort_key, no_wait, output } => {
                let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
                let import =
                    archive::import::Import::of_source(&bucket, &prefix, &source, &table, (partition_key, sort_key));
                let mut state = archive::import::start(&s3, &dynamodb, &import).await?;
                if !no_wait {
                    let mut bar = (output == Output::Text).then(|| operations::progress::Bar::new("lines"));
                    let mut show = |now: &archive::import::Imported| {
                        if let Some(bar) = &mut bar {
                            let read = u64::try_from(now.processed_items).unwrap_or(0);
                            let extra = format!(" | {} items imported, {}", now.imported_items, now.status);
                            bar.show(read, read, &extra, now.ended());
                        }
                    };
                    state = archive::import::wait(&dynamodb, &state.import_arn, &mut show).await?;
                }
                let mut out = io::stdout().lock();
                match output {
                    Output::Json => writeln!(out, "{}", serde_json::to_string(&state)?)?,
                    Output::Text => writeln!(
                        out,
                        "Import {} into {table} (s3://{bucket}/{}): {}, {} lines read, {} items imported, {} errors{}",
                        state.import_arn,
                        import.prefix,
                        state.status,
                        state.processed_items,
                        state.imported_items,
                        state.errors,
                        state.failure.as_deref().map(|f| format!(": {f}")).unwrap_or_default()
                    )?,
                }
                if state.ended() && state.status != "COMPLETED" {
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
