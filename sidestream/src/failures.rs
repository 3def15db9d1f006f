//! `sidestream failures list|replay`: reads the failure sources, then lists the failures or
//! replays one function's through its code in this process (`failure_replay`).

use std::io::{self, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use std::collections::BTreeSet;

use anyhow::Context as _;
use operations::failures::{Failed, FunctionMatch, Read, Records, Replayed, Replayer};
use stream_runtime::Vars;

use crate::args::{FailureSources, FailuresCommand, Output};

pub(crate) fn run(command: FailuresCommand) -> anyhow::Result<ExitCode> {
    let runtime = crate::runtime()?;
    runtime.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        match command {
            FailuresCommand::List { from, output } => {
                let failures = read(&sdk, &from).await?;
                list(&failures, output)?;
                Ok(ExitCode::SUCCESS)
            }
            FailuresCommand::Replay {
                from,
                function,
                function_names,
                timeout,
                output,
            } => {
                let failures = read(&sdk, &from).await?;
                let logical_id = match sidestream_combined::Function::named(&function) {
                    Some(f) => f.logical_id,
                    None => sidestream_combined::COMBINED_LOGICAL_ID,
                };
                let wanted = FunctionMatch {
                    binary: function.clone(),
                    logical_id: logical_id.to_owned(),
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
                        if seen.is_empty() {
                            "no function".to_owned()
                        } else {
                            seen.into_iter().collect::<Vec<_>>().join(", ")
                        }
                    );
                }
                let lookup = |name: &str| std::env::var(name).ok();
                let vars = Vars::new(&lookup);
                let functions_sdk = io_policy::without_sdk_retries(&sdk);
                let replay_with = Replayer::for_function(&function, &vars, &functions_sdk)?;
                let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
                let sqs = aws_sdk_sqs::Client::new(&sdk);
                let s3 = stream_runtime::aws::s3_client(&sdk, &vars)?;
                let mut all_done = true;
                let mut out = io::stdout().lock();
                for failed in mine {
                    let replayed = match operations::failures::read(failed, &streams).await? {
                        Read::Unavailable(outcome) => outcome,
                        Read::Records(records) => replay_with.replay(records, Duration::from_secs(timeout)).await?,
                    };
                    let done = replayed.is_done();
                    all_done &= done;
                    // The queue's message, or the destination's object, is done with only once its
                    // range is replayed.
                    if done {
                        operations::failures::acknowledge(&sqs, failed).await?;
                        operations::failures::acknowledge_object(&s3, failed).await?;
                    }
                    match output {
                        Output::Json => writeln!(
                            out,
                            "{}",
                            serde_json::json!({"failure": failed, "replayed": replayed})
                        )?,
                        Output::Text => writeln!(out, "{}  {}", place(failed), outcome(&replayed))?,
                    }
                }
                Ok(if all_done {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                })
            }
        }
    })
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
    for url in &from.parked {
        let (bucket, prefix) = s3_url("--parked", url)?;
        failures.extend(operations::failures::read_parked(&s3, bucket, prefix).await?);
    }
    for url in &from.destinations {
        let (bucket, prefix) = s3_url("--destination", url)?;
        let prefix = if prefix.is_empty() { operations::failures::DESTINATION_PREFIX } else { prefix };
        failures.extend(operations::failures::read_destination(&s3, bucket, prefix).await?);
    }
    Ok(failures)
}

/// `s3://BUCKET/PREFIX` (or `s3://BUCKET`) as (bucket, prefix).
pub(crate) fn s3_url<'a>(flag: &str, url: &'a str) -> anyhow::Result<(&'a str, &'a str)> {
    url.strip_prefix("s3://")
        .and_then(|rest| rest.split_once('/').or(Some((rest, ""))))
        .filter(|(bucket, _)| !bucket.is_empty())
        .with_context(|| format!("{flag} {url:?} is not s3://BUCKET/PREFIX"))
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
                    (Records::Parked { .. }, _) => "parked: replayable as stored",
                    (Records::Range { kept: Some(_), .. }, _) => "kept by the S3 destination: replayable",
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
        Replayed::NotInStream { reason } => {
            format!("NOT IN THE STREAM any more ({reason}): rebuild what it held from the base table")
        }
    }
}
