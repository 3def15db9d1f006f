//! `sidestream`: the command line. Parses arguments and hands each subcommand stdin and stdout.

use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use sidestream::key::{self, KeyOptions};

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
    /// Configuration comes from the same environment variables as the Lambda (for the
    /// multikey-indexer, `MULTIKEY_INDEXES`). Prints one JSON object per planned write; values left
    /// out and the record planning stopped at go to stderr, and a stop exits with status 1.
    Plan {
        /// The function whose plan to run.
        function: Function,
        /// A DynamoDB stream event (`{"Records":[…]}`), as Lambda delivers it.
        #[arg(long, value_name = "FILE")]
        event: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Function {
    /// The multikey index.
    MultikeyIndexer,
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
        Command::Plan {
            function: Function::MultikeyIndexer,
            event,
        } => run_plan(&event),
    }
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

fn run_plan(event: &std::path::Path) -> anyhow::Result<ExitCode> {
    let config = multikey_indexer::Config::from_env()?;
    let bytes = std::fs::read(event).with_context(|| format!("cannot read {}", event.display()))?;
    let stdout = BufWriter::new(io::stdout().lock());
    let plan = sidestream::plan::multikey_indexer(&config.indexes, &bytes, stdout, io::stderr().lock())
        .with_context(|| format!("cannot plan {}", event.display()))?;
    Ok(if plan.stopped.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
