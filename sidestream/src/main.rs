//! `sidestream`: the command line. Parses arguments and hands each subcommand stdin and stdout.

use std::io::{self, BufWriter};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
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
    let cli = Cli::parse();
    let (stdin, stdout) = (io::stdin().lock(), BufWriter::new(io::stdout().lock()));
    let summary = match cli.command {
        Command::Key(KeyCommand::Encode { form, partition }) => {
            let options = KeyOptions {
                partition,
                ..form.options()
            };
            key::encode(stdin, stdout, &options)?
        }
        Command::Key(KeyCommand::Decode { form }) => key::decode(stdin, stdout, &form.options())?,
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
