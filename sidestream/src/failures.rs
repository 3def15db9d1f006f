//! `sidestream failures list|replay`: reads the failure sources, then lists the failures or
//! replays one function's through its code in this process (`failure_replay`).

use std::io::{self, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use failure_replay::{Failed, Records, Replayed};
use stream_kit::Vars;

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
                timeout,
                output,
            } => {
                let failures = read(&sdk, &from).await?;
                let lookup = |name: &str| std::env::var(name).ok();
                let functions_sdk = io_policy::without_sdk_retries(&sdk);
                let invoker =
                    local_stack::function_invoker(function.binary(), &Vars::new(&lookup), &functions_sdk)?;
                let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
                let sqs = aws_sdk_sqs::Client::new(&sdk);
                let mut all_applied = true;
                let mut out = io::stdout().lock();
                for failed in failures.iter().filter(|f| f.function == function.binary()) {
                    let replayed =
                        failure_replay::replay(failed, &streams, &invoker, Duration::from_secs(timeout))
                            .await?;
                    let applied = matches!(replayed, Replayed::Applied { .. });
                    all_applied &= applied;
                    // The queue's message is done with only once its range is applied.
                    if applied {
                        failure_replay::acknowledge(&sqs, failed).await?;
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
                Ok(if all_applied {
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
        failures.extend(failure_replay::read_log(log)?);
    }
    let sqs = aws_sdk_sqs::Client::new(sdk);
    for queue in &from.queues {
        failures.extend(failure_replay::read_queue(&sqs, queue).await?);
    }
    let s3 = local_stack::s3_client(sdk);
    for url in &from.parked {
        let (bucket, prefix) = url
            .strip_prefix("s3://")
            .and_then(|rest| rest.split_once('/').or(Some((rest, ""))))
            .filter(|(bucket, _)| !bucket.is_empty())
            .with_context(|| format!("--parked {url:?} is not s3://BUCKET/PREFIX"))?;
        failures.extend(failure_replay::read_parked(&s3, bucket, prefix).await?);
    }
    Ok(failures)
}

fn list(failures: &[Failed], output: Output) -> anyhow::Result<()> {
    let now = chrono::Utc::now();
    let mut out = io::stdout().lock();
    for failed in failures {
        let replayable = failed.replayable(now);
        match output {
            Output::Json => writeln!(
                out,
                "{}",
                serde_json::json!({"failure": failed, "replayable": replayable})
            )?,
            Output::Text => writeln!(
                out,
                "{}  {}  {}  {}  ({})",
                failed.at,
                failed.function,
                place(failed),
                match (&failed.records, replayable) {
                    (Records::Parked { .. }, _) => "parked: replayable as stored",
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
        Records::Range {
            shard_id,
            start_sequence_number,
            end_sequence_number,
            batch_size,
            ..
        } => format!("{batch_size} records {start_sequence_number}..{end_sequence_number} of {shard_id}"),
        Records::Parked { object, .. } => format!("parked {object}"),
    }
}

fn outcome(replayed: &Replayed) -> String {
    match replayed {
        Replayed::Applied { records } => format!("applied: {records} records"),
        Replayed::StillFailing { records, reason } => format!("STILL FAILING ({records} records): {reason}"),
        Replayed::NotInStream { reason } => {
            format!("NOT IN THE STREAM any more ({reason}): rebuild what it held from the base table")
        }
    }
}
