//! The restore job (`RestoreStateMachine`, with `EnableArchiveRestore=true`) run in process:
//! the state machine from the template, its `ItemReader` listing the emulator's archive bucket,
//! and each step of the archive-restorer function configured from its template environment.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use aws_config::SdkConfig;
use operations::archive::job::Job;

use crate::{Stack, StackError, s3_client, states};

/// The restore job's state machine.
const MACHINE: &str = "RestoreStateMachine";

/// Runs the restore job once in process on `input` (the execution's input: `prefix`, `ttl`,
/// `if_absent`, `partitions`, `max_concurrency`), each invocation given `timeout` before its
/// deadline and counted in `invocations`: the report step's answer.
pub async fn restore_job(
    sdk: &SdkConfig,
    stack: &Stack,
    input: serde_json::Value,
    overrides: &[(&str, &str)],
    timeout: Duration,
    invocations: &Arc<AtomicU64>,
) -> Result<serde_json::Value, StackError> {
    let function = stack.function("archive-restorer")?;
    let invoke =
        crate::task_invoker::<Job>(function, sdk, overrides, timeout, Arc::clone(invocations)).await?;
    // As Step Functions runs it: under the state machine's role, which invokes the function and
    // lists the archive for the ItemReader.
    let invoke = stack.state_machine_invoker(sdk, MACHINE, invoke)?;
    let reader = s3_client(&stack.as_state_machine(sdk, MACHINE)?);
    Ok(states::execute_reading(stack.state_machine(MACHINE)?, input, &invoke, reader).await?.output)
}
