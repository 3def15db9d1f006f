//! The template's state machines (the backfill's, the verify's and the restore's) against a
//! Lambda invocation that dies: Step Functions surfaces a crash, a timeout or an out-of-memory
//! kill as `Lambda.Unknown` (and a timeout on its side of the call as
//! `Lambda.ClientExecutionTimeoutException`), which only a retrier naming it retries. Every
//! `Task` of every state machine, each run alone on the local stack's emulator, retries one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, ensure};
use local_stack::states::{Death, LambdaInvoker, TaskFailure};
use serde_json::{Value, json};

use crate::support::pipeline::{Local, local};

/// The state machines, by logical id.
const MACHINES: [&str; 3] = ["BackfillStateMachine", "VerifyStateMachine", "RestoreStateMachine"];

/// Every `Task` state of `machine` (its `States`, its `Map`s' `ItemProcessor`s' included), by
/// name.
fn tasks(machine: &Value) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    for (name, state) in machine["States"].as_object().into_iter().flatten() {
        match state["Type"].as_str() {
            Some("Task") => found.push((name.clone(), state.clone())),
            Some("Map") => found.extend(tasks(&state["ItemProcessor"])),
            _ => {}
        }
    }
    found
}

/// `task` as the whole of a state machine: its resource, function and `Retry`, invoked with an
/// empty payload, its result its output.
fn alone(task: &Value) -> Value {
    json!({"StartAt": "Task", "States": {"Task": {
        "Type": "Task",
        "Resource": task["Resource"],
        "Parameters": {"FunctionName": task["Parameters"]["FunctionName"], "Payload": {}},
        "Retry": task["Retry"],
        "End": true
    }}})
}

/// An invoker whose first invocation fails with `failure` and whose next ones answer `{}`, each
/// counted in `calls`.
fn fails_once(failure: TaskFailure, calls: &Arc<AtomicU64>) -> LambdaInvoker {
    let calls = Arc::clone(calls);
    Arc::new(move |_function: String, _payload: Value| {
        let n = calls.fetch_add(1, Ordering::Relaxed);
        let failure = failure.clone();
        Box::pin(async move { if n == 0 { Err(failure) } else { Ok(json!({})) } })
    })
}

#[tokio::test]
async fn every_task_of_the_templates_state_machines_retries_an_invocation_that_died() -> Result<()> {
    let Local { stack, .. } = local(&[
        ("EnableBackfill", "true"),
        ("IndexVerifySchedule", "rate(1 day)"),
        ("EnableArchiveRestore", "true"),
    ])
    .await?;
    let failures = [
        TaskFailure::Died(Death::Crashed),
        TaskFailure::Died(Death::TimedOut),
        TaskFailure::Died(Death::OutOfMemory),
        TaskFailure::Error {
            error: "Lambda.ClientExecutionTimeoutException".to_owned(),
            message: "the invocation outlasted the client's timeout".to_owned(),
        },
    ];
    for id in MACHINES {
        let machine = stack.state_machine(id)?;
        let tasks = tasks(machine);
        ensure!(!tasks.is_empty(), "{id} has no Task state");
        for (name, task) in tasks {
            for failure in &failures {
                let calls = Arc::new(AtomicU64::new(0));
                let invoke = fails_once(failure.clone(), &calls);
                let execution = local_stack::states::execute(&alone(&task), json!({}), &invoke)
                    .await
                    .with_context(|| format!("{id}'s {name} is not retried after {failure:?}"))?;
                let output = execution.output;
                ensure!(output == json!({"Payload": {}, "StatusCode": 200}), "{id}'s {name}: {output}");
                // The state entered and its retry, as Step Functions bills them.
                ensure!(execution.transitions == 2, "{id}'s {name}: {} transitions", execution.transitions);
                let calls = calls.load(Ordering::Relaxed);
                ensure!(
                    calls == 2,
                    "{id}'s {name} after {failure:?}: {calls} invocations, not the failure and its retry"
                );
            }
        }
    }
    Ok(())
}
