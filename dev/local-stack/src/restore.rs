//! The restore job (`RestoreStateMachine`, with `EnableArchiveRestore=true`) run in process:
//! the state machine from the template, its `ItemReader` listing the emulator's archive bucket,
//! and each step of the archive-restorer function configured from its template environment.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use operations::archive::job::{Config, Job, Step};
use stream_runtime::Vars;

use crate::template::Function;
use crate::{Stack, StackError, overridden, s3_client, states};

/// The restore job's state machine.
const MACHINE: &str = "RestoreStateMachine";

/// A [`states::TaskInvoker`] that runs the archive-restorer function in this process,
/// configured from its template environment with `overrides` on top, each invocation given
/// `timeout` before its deadline (a partition stops starting pages 75 s before it).
/// `invocations` counts the invocations.
pub fn restorer_invoker(
    function: &Function,
    sdk: &SdkConfig,
    overrides: &[(&str, &str)],
    timeout: Duration,
    invocations: Arc<AtomicU64>,
) -> Result<states::TaskInvoker, StackError> {
    let sdk = &crate::iam::as_function(sdk, function);
    let env = overridden(function, overrides);
    let lookup = |name: &str| env.get(name).cloned();
    let config = Config::from_vars(&Vars::new(&lookup))
        .map_err(|source| StackError::Config { function: function.logical_id.clone(), cause: source })?;
    let dynamodb = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(sdk));
    let job = Arc::new(Job::new(dynamodb, s3_client(sdk), config));
    Ok(Arc::new(move |_function: String, payload: serde_json::Value| {
        let job = Arc::clone(&job);
        invocations.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            let step: Step = serde_json::from_value(payload)
                .map_err(|e| ("Runtime.UnmarshalError".to_owned(), e.to_string()))?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            let answer = job
                .step(step, Instant::now() + timeout, now)
                .await
                .map_err(|e| ("RestoreError".to_owned(), e.to_string()))?;
            serde_json::to_value(answer).map_err(|e| ("Runtime.MarshalError".to_owned(), e.to_string()))
        })
    }))
}

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
    let invoke = restorer_invoker(function, sdk, overrides, timeout, Arc::clone(invocations))?;
    // As Step Functions runs it: under the state machine's role, which invokes the function and
    // lists the archive for the ItemReader.
    let invoke = stack.state_machine_invoker(sdk, MACHINE, invoke)?;
    let reader = s3_client(&stack.as_state_machine(sdk, MACHINE)?);
    Ok(states::execute_reading(stack.state_machine(MACHINE)?, input, &invoke, reader).await?.output)
}
