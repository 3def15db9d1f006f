//! `sidestream failures list|replay`: reads the failure sources, then lists the failures or
//! replays one function's through its code in this process (`failure_replay`).

use std::io::{self, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use std::collections::BTreeSet;

use operations::failures::{Failed, FunctionMatch, Records, ReplayClients, Replayed, Replayer, Source};
use stream_runtime::Vars;

use crate::args::{FailureSources, FailuresCommand, Output};

pub(crate) fn run(command: FailuresCommand) -> anyhow::Result<ExitCode> {
    let runtime = crate::runtime()?;
    runtime.block_on(async {
        let sdk = crate::sdk().await?;
        let mut command = command;
        let from = match &mut command {
            FailuresCommand::List { from, .. } | FailuresCommand::Replay { from, .. } => from,
        };
        let stack = match from.stack.clone() {
            Some(name) => Some(with_stack(from, crate::stack::read(&sdk, &name).await?)?),
            None => None,
        };
        match command {
            FailuresCommand::List { from, output } => {
                let failures = read(&sdk, &from).await?;
                list(&failures, output)?;
                if failures.is_empty() {
                    nothing_in(&from, output, "nothing given up, nothing parked")?;
                }
                Ok(ExitCode::SUCCESS)
            }
            FailuresCommand::Replay { from, function, mut function_names, timeout, output } => {
                // The replayed function's logs go to stderr, as its EMF lines do: stdout holds
                // this command's own lines only.
                crate::logs_to_stderr();
                let failures = read(&sdk, &from).await?;
                if failures.is_empty() {
                    nothing_in(&from, output, "nothing to replay")?;
                    return Ok(ExitCode::SUCCESS);
                }
                // The stack's configuration of the function, before this process's environment;
                // its deployed name, among those a range may name.
                let environment = crate::stack::environment(stack.as_ref(), &function)?;
                if let Some((name, _)) = stack.as_ref().and_then(|s| s.function(&function)) {
                    function_names.push(name.to_owned());
                }
                let wanted = FunctionMatch {
                    binary: function.clone(),
                    logical_id: match sidestream_combined::Function::named(&function) {
                        Some(f) => f.logical_id,
                        None => sidestream_combined::COMBINED_LOGICAL_ID,
                    }
                    .to_owned(),
                    deployed: function_names,
                };
                let mine: Vec<&Failed> = failures.iter().filter(|f| wanted.matches(f)).collect();
                if mine.is_empty() {
                    let seen: BTreeSet<&str> = failures.iter().map(|f| f.function.as_str()).collect();
                    anyhow::bail!(
                        "no failure of {} among the {} read from {}: searched for {}; the failures read name {}",
                        function,
                        failures.len(),
                        from.describe(),
                        wanted.describe(),
                        seen.into_iter().collect::<Vec<_>>().join(", ")
                    );
                }
                replay(&sdk, (&function, &environment), &mine, Duration::from_secs(timeout), output).await
            }
        }
    })
}

/// Replays `mine` with `function`'s replayer, printing a line each, then (in text) the tally.
/// Exit status 1 unless every failure was replayed whole.
async fn replay(
    sdk: &aws_config::SdkConfig,
    (function, environment): (&str, &std::collections::BTreeMap<String, String>),
    mine: &[&Failed],
    timeout: Duration,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let lookup = crate::stack::layered(environment);
    let vars = Vars::new(&lookup);
    let replay_with = Replayer::for_function(function, &vars, &io_policy::without_sdk_retries(sdk))?;
    let clients = ReplayClients {
        streams: aws_sdk_dynamodbstreams::Client::new(sdk),
        sqs: aws_sdk_sqs::Client::new(sdk),
        s3: stream_runtime::aws::s3_client(sdk, &vars)?,
    };
    let mut tally = Tally::default();
    let mut out = io::stdout().lock();
    for failed in mine {
        let replayed = operations::failures::replay_one(failed, &replay_with, &clients, timeout).await?;
        tally.add(&replayed);
        match output {
            Output::Json => {
                writeln!(out, "{}", serde_json::json!({"failure": failed, "replayed": replayed}))?;
            }
            Output::Text => writeln!(out, "{}  {}", place(failed), outcome(&replayed))?,
        }
    }
    if output == Output::Text {
        writeln!(out, "{tally}")?;
    }
    Ok(if tally.done == mine.len() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// What a replay came to, over its failures.
#[derive(Debug, Default)]
struct Tally {
    done: usize,
    parked_again: usize,
    failing: usize,
    unavailable: usize,
}

impl Tally {
    fn add(&mut self, replayed: &Replayed) {
        let parked_again = |r: &Replayed| matches!(r, Replayed::ParkedAgain { .. });
        match replayed {
            r if r.is_done() => self.done += 1,
            Replayed::ParkedAgain { .. } => self.parked_again += 1,
            Replayed::Combined { functions } if functions.iter().any(|p| parked_again(&p.replayed)) => {
                self.parked_again += 1;
            }
            Replayed::NotInStream { .. } | Replayed::ShortRead { .. } => self.unavailable += 1,
            _ => self.failing += 1,
        }
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "replayed: {}; parked again: {}; still failing: {}; not readable: {}",
            self.done, self.parked_again, self.failing, self.unavailable
        )?;
        if self.parked_again + self.failing + self.unavailable > 0 {
            write!(
                f,
                ". What was not replayed is kept where it was: fix its cause (a parked record's \
                 content, with the item it came from), then replay again (docs/operations.md)"
            )?;
        }
        Ok(())
    }
}

/// Says that `from` held nothing (`what`): a line on stdout for people; on stderr with
/// `--output json`, whose stdout has one line per failure and so none.
fn nothing_in(from: &FailureSources, output: Output, what: &str) -> anyhow::Result<()> {
    let line = format!("No failures in {}: {what}.", from.describe());
    match output {
        Output::Text => writeln!(io::stdout().lock(), "{line}")?,
        Output::Json => writeln!(io::stderr().lock(), "{line}")?,
    }
    Ok(())
}

/// `from` with `stack`'s parking bucket among its sources: its parked records, and the ranges
/// Lambda gave up there (its on-failure destination). The stack, for what else it says.
fn with_stack(
    from: &mut FailureSources,
    stack: operations::stack::Deployed,
) -> anyhow::Result<operations::stack::Deployed> {
    let bucket = stack
        .output("ParkingBucket")
        .ok_or_else(|| anyhow::anyhow!("stack {}: no ParkingBucket output", stack.name))?
        .to_owned();
    let place = crate::args::S3Place { bucket, prefix: String::new() };
    from.parked.push(place.clone());
    from.destinations.push(place);
    Ok(stack)
}

async fn read(sdk: &aws_config::SdkConfig, from: &FailureSources) -> anyhow::Result<Vec<Failed>> {
    let mut failures = Vec::new();
    for log in &from.logs {
        failures.extend(operations::failures::read_log(log)?);
    }
    let sqs = aws_sdk_sqs::Client::new(sdk);
    for queue in &from.queues {
        failures.extend(operations::failures::read_queue(&sqs, queue).await?);
    }
    let s3 = stream_runtime::aws::s3_client(sdk, &Vars::new(&Vars::process_lookup))?;
    for place in &from.parked {
        failures.extend(operations::failures::read_parked(&s3, &place.bucket, &place.prefix).await?);
    }
    for place in &from.destinations {
        let prefix =
            if place.prefix.is_empty() { operations::failures::DESTINATION_PREFIX } else { &place.prefix };
        failures.extend(operations::failures::read_destination(&s3, &place.bucket, prefix).await?);
    }
    Ok(failures)
}

fn list(failures: &[Failed], output: Output) -> anyhow::Result<()> {
    let now = chrono::Utc::now();
    let mut out = io::stdout().lock();
    for failed in failures {
        let replayable = failed.replayable(now);
        match output {
            Output::Json => {
                writeln!(out, "{}", serde_json::json!({"failure": failed, "replayable": replayable}))?;
            }
            Output::Text => writeln!(
                out,
                "{}  {}  {}  {}  ({})",
                failed.at,
                failed.function,
                place(failed),
                match (&failed.records, replayable) {
                    (Records::Unreadable { .. }, _) => "UNREADABLE: not replayed, left where it is",
                    (Records::Parked { .. }, _) => "parked: replayable as stored",
                    (Records::Range { kept: Some(_), .. }, _) => "kept by the S3 destination: replayable",
                    (Records::Range { source: Source::Kinesis, .. }, _) => {
                        "given up from Kinesis, its records not kept: read them from the Kinesis stream"
                    }
                    (Records::Range { .. }, true) => "still in the stream",
                    (Records::Range { .. }, false) => "past the stream's 24 hours: rebuild what it held",
                },
                failed.reason
            )?,
        }
    }
    Ok(())
}

fn place(failed: &Failed) -> String {
    match &failed.records {
        Records::Range { shard_id, start_sequence_number, end_sequence_number, batch_size, .. } => {
            format!("{batch_size} records {start_sequence_number}..{end_sequence_number} of {shard_id}")
        }
        Records::Parked { object, .. } => format!("parked {object}"),
        Records::Unreadable { .. } => failed
            .object
            .clone()
            .or_else(|| failed.message.as_ref().map(|m| m.message_id.clone()))
            .unwrap_or_default(),
    }
}

fn outcome(replayed: &Replayed) -> String {
    match replayed {
        Replayed::Applied { records } => format!("applied: {records} records"),
        Replayed::Combined { functions } => functions
            .iter()
            .map(|part| format!("{}: {}", part.function, outcome(&part.replayed)))
            .collect::<Vec<_>>()
            .join("; "),
        Replayed::Mended { records, touched, gone, deleted, newer } => format!(
            "replayed through the stream: {records} records; {touched} items touched, {gone} gone since; \
             {deleted} entries deleted, {newer} kept as written since"
        ),
        Replayed::ShortRead { read, reason } => {
            format!("NOT REPLAYED: the stream gave back part of the range ({read} records; {reason})")
        }
        Replayed::StillFailing { records, reason } => format!("STILL FAILING ({records} records): {reason}"),
        Replayed::Superseded { records, by } => {
            format!("superseded, not run: {records} records whose state a newer record has replaced ({by})")
        }
        Replayed::ParkedAgain { records, parked, reason } => {
            format!("PARKED AGAIN ({parked} of {records} records; kept, not deleted): {reason}")
        }
        Replayed::NotInStream { reason } => {
            format!("NOT IN THE STREAM any more ({reason}): rebuild what it held from the base table")
        }
    }
}
