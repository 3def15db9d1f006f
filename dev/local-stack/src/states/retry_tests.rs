//! A `Task`'s failed invocation as Step Functions names it: an invocation that died (crashed,
//! timed out, out of memory) is `Lambda.Unknown`, which only a `Retry` or `Catch` naming it, or
//! `States.ALL`, or `States.TaskFailed`, takes; a function's error is its own type.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::{Death, LambdaInvoker, TaskFailure, TaskInvoker, execute};

/// An invoker whose first invocation dies of `death` and whose next ones answer their payload,
/// each counted in `calls`.
fn dies_once(death: Death, calls: &Arc<AtomicU64>) -> LambdaInvoker {
    let calls = Arc::clone(calls);
    Arc::new(move |_function: String, payload: Value| {
        let n = calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move { if n == 0 { Err(TaskFailure::Died(death)) } else { Ok(payload) } })
    })
}

/// A state machine of one `Task` (its output the function's answer), whose `Retry` names
/// `retried` (two attempts more) and whose `Catch`, if any, names `caught` and goes on to a
/// `Pass`.
fn machine(retried: &[&str], caught: Option<&[&str]>) -> Value {
    let mut task = json!({
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": "f", "Payload.$": "$"},
        "OutputPath": "$.Payload",
        "Retry": [{"ErrorEquals": retried, "IntervalSeconds": 2, "BackoffRate": 2, "MaxAttempts": 2}],
        "End": true
    });
    if let Some(caught) = caught {
        task["Catch"] = json!([{"ErrorEquals": caught, "Next": "Caught"}]);
    }
    json!({"StartAt": "Step", "States": {"Step": task, "Caught": {"Type": "Pass", "End": true}}})
}

const DEATHS: [Death; 3] = [Death::Crashed, Death::TimedOut, Death::OutOfMemory];

#[tokio::test]
async fn a_crashed_invocation_is_retried_by_a_retrier_naming_lambda_unknown_or_a_wildcard() {
    let retriers: [&[&str]; 4] = [
        &["Lambda.Unknown"],
        &["Lambda.ServiceException", "Lambda.Unknown"],
        &["States.ALL"],
        &["States.TaskFailed"],
    ];
    for retried in retriers {
        for death in DEATHS {
            let calls = Arc::new(AtomicU64::new(0));
            let execution =
                execute(&machine(retried, None), json!({"n": 1}), &dies_once(death, &calls)).await.unwrap();
            assert_eq!(execution.output, json!({"n": 1}), "{retried:?}, {death:?}");
            assert_eq!(calls.load(Ordering::Relaxed), 2, "{retried:?}, {death:?}: the crash and its retry");
            // The Task entered, and its retry: Step Functions bills a retry as a transition.
            assert_eq!(execution.transitions, 2, "{retried:?}, {death:?}");
        }
    }
}

#[tokio::test]
async fn a_crashed_invocation_fails_the_task_as_lambda_unknown_when_no_retrier_names_it() {
    let retried = ["Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException"];
    for death in DEATHS {
        let calls = Arc::new(AtomicU64::new(0));
        let error = execute(&machine(&retried, None), json!({}), &dies_once(death, &calls))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("state Step: f failed: Lambda.Unknown: The cause could not be determined because Lambda did not return an error type."),
            "{death:?}: {error}"
        );
        assert!(error.contains(death.message()), "{death:?}: {error}");
        assert_eq!(calls.load(Ordering::Relaxed), 1, "{death:?}: not retried");
    }
}

#[tokio::test]
async fn a_catcher_takes_a_crash_its_retrier_leaves() {
    let calls = Arc::new(AtomicU64::new(0));
    let execution = execute(
        &machine(&["Lambda.ServiceException"], Some(&["Lambda.Unknown"][..])),
        json!({}),
        &dies_once(Death::OutOfMemory, &calls),
    )
    .await
    .unwrap();
    // The Task, then the Pass its catcher goes on to.
    assert_eq!(execution.transitions, 2);
    let output = execution.output;
    assert_eq!(output["Error"], "Lambda.Unknown", "{output}");
    assert!(output["Cause"].as_str().unwrap().contains("signal: killed"), "{output}");
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

/// A [`TaskInvoker`]'s every failure is the function's own error: `Lambda.Unknown` does not
/// take it, its type does.
#[tokio::test]
async fn a_functions_error_is_its_own_type_not_lambda_unknown() {
    let calls = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&calls);
    let invoke: TaskInvoker = Arc::new(move |_function: String, _payload: Value| {
        counted.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move { Err::<Value, _>(("VerifyError".to_owned(), "drift".to_owned())) })
    });
    let error =
        execute(&machine(&["Lambda.Unknown"], None), json!({}), &invoke).await.unwrap_err().to_string();
    assert_eq!(error, "state Step: f failed: VerifyError: drift");
    assert_eq!(calls.load(Ordering::Relaxed), 1, "not retried by Lambda.Unknown");

    let caught =
        execute(&machine(&["Lambda.Unknown"], Some(&["VerifyError"][..])), json!({}), &invoke).await.unwrap();
    assert_eq!(caught.output, json!({"Error": "VerifyError", "Cause": "drift"}));
    let retried =
        execute(&machine(&["VerifyError"], Some(&["States.ALL"][..])), json!({}), &invoke).await.unwrap();
    assert_eq!(
        retried.output,
        json!({"Error": "VerifyError", "Cause": "drift"}),
        "retried twice, then caught"
    );
    // Task and Pass; then Task, its two retries and Pass.
    assert_eq!((caught.transitions, retried.transitions), (2, 4));
    assert_eq!(calls.load(Ordering::Relaxed), 1 + 1 + 3);
}
