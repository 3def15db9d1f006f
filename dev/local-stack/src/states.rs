//! A Step Functions state machine from the template, run in process: the states and the few
//! path and intrinsic forms the template's definitions use, no more.
//!
//! It runs the backfill's, the verify's and the restore's state machines as written in
//! `template.yaml` (their `Pass` with `States.ArrayRange`, their Distributed `Map` over segments,
//! the restore's `Map` over the objects its `ItemReader` lists (`s3:listObjectsV2`, against the
//! emulator's S3) in `ItemBatcher` batches, its children's results written by its
//! `ResultWriter` (`s3:putObject`), their `Task`s that invoke a function, their `Choice` loops,
//! the verify's `Wait`, `ResultPath: null`), with each Lambda invocation handed to a
//! caller-given invoker, and `$$.Execution.Name` the execution's.
//! What it does not know (another state type, a field it would have to ignore, another
//! intrinsic) is an error naming it, never a silent difference. Retry intervals are not waited:
//! a retry happens at once, and counts against `MaxAttempts`. A `Wait` waits, as Step Functions
//! does.
//!
//! A `Task`'s error is named as Step Functions names it: a function's error by its `errorType`,
//! and an invocation that died without answering (its runtime process crashed, timed out or ran
//! out of memory: [`TaskFailure::Died`]) `Lambda.Unknown`. A `Retry` or `Catch` matches an error
//! by its name, by `States.ALL` (any error) or by `States.TaskFailed` (any but `States.Timeout`);
//! the first retrier that matches decides, as its `MaxAttempts` allows, then the first catcher
//! (a `Task`'s only).
//!
//! A Distributed `Map`'s `ResultWriter` (`s3:putObject` to a `Bucket` under a `Prefix`, without
//! `WriterConfig`) writes as Step Functions does (developer guide, "`ResultWriter` (Map)"), through
//! the S3 client the `ItemReader` uses (the state machine's role's): the record of each child
//! execution, its input and output unchanged (`Transformation` `NONE`, the default with a
//! `Resource`), in `<Prefix>/<map run id>/SUCCEEDED_0.json`, then `manifest.json` beside it,
//! which lists it; the `Map`'s result is then `{"MapRunArn": …, "ResultWriterDetails":
//! {"Bucket": …, "Key": "<Prefix>/<map run id>/manifest.json"}}`, not its children's outputs,
//! and `ResultSelector`, `ResultPath` and `OutputPath` apply to it. Its ARNs name the state
//! machine [`STATE_MACHINE`] (the emulator is not given the name). A Map Run with a failed child
//! fails the state as without a `ResultWriter`, and writes nothing: Step Functions would write
//! `FAILED_0.json` and `PENDING_0.json` too, which the error says.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use crate::{ACCOUNT, StackError};

/// Invokes a Lambda function (by the `FunctionName` the definition gives) with a payload: its
/// answer, or its error's type and message (the function's error: a [`LambdaInvoker`] can also
/// report an invocation that died).
pub(crate) type TaskInvoker = Arc<
    dyn Fn(String, Value) -> Pin<Box<dyn Future<Output = Result<Value, (String, String)>> + Send>>
        + Send
        + Sync,
>;

/// Invokes a Lambda function as a [`TaskInvoker`] does, its failure a [`TaskFailure`]: the
/// function's error, or an invocation that died without answering.
pub type LambdaInvoker = Arc<
    dyn Fn(String, Value) -> Pin<Box<dyn Future<Output = Result<Value, TaskFailure>> + Send>> + Send + Sync,
>;

/// The error under which a `Task` surfaces an invocation that died ([`TaskFailure::Died`]), as
/// Step Functions does: only a `Retry` or `Catch` naming it (or `States.ALL`, or
/// `States.TaskFailed`) takes it.
pub const LAMBDA_UNKNOWN: &str = "Lambda.Unknown";

/// How a `Task`'s Lambda invocation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskFailure {
    /// The function answered with an error: the `Task`'s error is its type.
    Error {
        /// The error's type (`errorType`): `RestoreError`, `Runtime.UnmarshalError`, or one of
        /// Lambda's own (`Lambda.TooManyRequestsException`, …).
        error: String,
        /// Its message (`errorMessage`): the `Task`'s cause.
        message: String,
    },
    /// The invocation gave no answer: its runtime process died. The `Task`'s error is
    /// [`LAMBDA_UNKNOWN`].
    Died(Death),
}

/// Why an invocation's runtime process died before it answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    /// It crashed: it exited, or a signal ended it.
    Crashed,
    /// It ran past the function's timeout, and Lambda stopped it.
    TimedOut,
    /// It ran out of the function's memory, and was killed.
    OutOfMemory,
}

impl Death {
    /// What the payload Lambda returns for it says (an `errorMessage`, without an `errorType`).
    fn message(self) -> &'static str {
        match self {
            Death::Crashed => "Runtime exited without providing a reason",
            Death::TimedOut => "Task timed out",
            Death::OutOfMemory => "Runtime exited with error: signal: killed",
        }
    }
}

impl From<(String, String)> for TaskFailure {
    /// A [`TaskInvoker`]'s failure: the function's error type and message.
    fn from((error, message): (String, String)) -> TaskFailure {
        TaskFailure::Error { error, message }
    }
}

impl TaskFailure {
    /// The `Task`'s error name and cause, as Step Functions gives them.
    fn error_and_cause(self) -> (String, String) {
        match self {
            TaskFailure::Error { error, message } => (error, message),
            TaskFailure::Died(death) => (
                LAMBDA_UNKNOWN.to_owned(),
                format!(
                    "The cause could not be determined because Lambda did not return an error type. \
                     Returned payload: {}",
                    json!({ "errorMessage": death.message() })
                ),
            ),
        }
    }
}

/// What [`execute`] runs a state machine's `Task`s with: a [`TaskInvoker`], or a
/// [`LambdaInvoker`].
pub trait ToLambdaInvoker {
    /// The invoker as a [`LambdaInvoker`].
    fn to_lambda_invoker(&self) -> LambdaInvoker;
}

impl ToLambdaInvoker for TaskInvoker {
    /// Each of its failures a [`TaskFailure::Error`].
    fn to_lambda_invoker(&self) -> LambdaInvoker {
        let invoke = Arc::clone(self);
        Arc::new(move |function: String, payload: Value| {
            let answer = invoke(function, payload);
            Box::pin(async move { answer.await.map_err(TaskFailure::from) })
        })
    }
}

impl ToLambdaInvoker for LambdaInvoker {
    fn to_lambda_invoker(&self) -> LambdaInvoker {
        Arc::clone(self)
    }
}

fn unusable(message: impl Into<String>) -> StackError {
    StackError::Unusable(message.into())
}

/// What a state machine's states reach: Lambda (its `Task`s), and S3 for a `Map`'s `ItemReader`
/// and `ResultWriter`; and the state transitions the execution has made ([`Execution`]).
struct Engine {
    invoke: LambdaInvoker,
    s3: Option<aws_sdk_s3::Client>,
    transitions: std::sync::atomic::AtomicU64,
}

impl Engine {
    fn new(invoke: LambdaInvoker, s3: Option<aws_sdk_s3::Client>) -> Engine {
        Engine { invoke, s3, transitions: std::sync::atomic::AtomicU64::new(0) }
    }

    /// One state transition more.
    fn transition(&self) {
        self.transitions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// An execution's end: its output, and the state transitions Step Functions would bill for it
/// (a Standard workflow, its pricing page): one for every state entered, by a Distributed `Map`'s
/// child executions too (`ExecutionType: STANDARD`, billed as the parent is), and one more for
/// each retry of a `Task`.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// The last state's output.
    pub output: Value,
    /// State transitions made.
    pub transitions: u64,
}

/// Runs `definition` (ASL, as JSON) on `input` and returns its output; the execution's name
/// (`$$.Execution.Name`) is made unique in this process. Each `Task`'s invocation goes to
/// `invoke` (a [`TaskInvoker`] or a [`LambdaInvoker`]).
pub async fn execute(
    definition: &Value,
    input: Value,
    invoke: &impl ToLambdaInvoker,
) -> Result<Execution, StackError> {
    execute_on(definition, input, Engine::new(invoke.to_lambda_invoker(), None)).await
}

/// [`execute`], with `s3` for a `Map` whose `ItemReader` lists objects (`s3:listObjectsV2`) or
/// whose `ResultWriter` puts its children's results (`s3:putObject`).
pub async fn execute_reading(
    definition: &Value,
    input: Value,
    invoke: &impl ToLambdaInvoker,
    s3: aws_sdk_s3::Client,
) -> Result<Execution, StackError> {
    execute_on(definition, input, Engine::new(invoke.to_lambda_invoker(), Some(s3))).await
}

async fn execute_on(definition: &Value, input: Value, engine: Engine) -> Result<Execution, StackError> {
    static EXECUTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let n = EXECUTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("local-{}-{n}", since.as_millis());
    let output = run(definition, input, &json!({"Execution": {"Name": name}}), &engine).await?;
    Ok(Execution { output, transitions: engine.transitions.into_inner() })
}

/// Runs the states of `machine` (`StartAt`, `States`) from its start, with `context` as `$$`.
fn run<'a>(
    machine: &'a Value,
    input: Value,
    context: &'a Value,
    engine: &'a Engine,
) -> Pin<Box<dyn Future<Output = Result<Value, StackError>> + Send + 'a>> {
    Box::pin(async move {
        let mut name = machine["StartAt"]
            .as_str()
            .ok_or_else(|| unusable("a state machine without StartAt"))?
            .to_owned();
        let mut data = input;
        loop {
            engine.transition();
            let state = &machine["States"][&name];
            let kind = state["Type"].as_str().unwrap_or_default();
            if kind != "Task" && state.get("Catch").is_some() {
                return Err(unusable(format!("state {name}: Catch is emulated on Task states only")));
            }
            data = match kind {
                "Pass" => match state.get("Result") {
                    Some(result) => result.clone(),
                    None => parameters(state, &data, context)?,
                },
                "Task" => match task(&name, state, &data, context, engine).await? {
                    Ok(result) => output(&name, state, data, result, context)?,
                    Err(failed) => {
                        let (next, caught) = catch(&name, state, data, failed)?;
                        name = next;
                        data = caught;
                        continue;
                    }
                },
                "Map" => {
                    let result = map(&name, state, &data, context, engine).await?;
                    output(&name, state, data, result, context)?
                }
                "Wait" => {
                    let seconds = match state.get("SecondsPath").and_then(Value::as_str) {
                        Some(p) => evaluate(p, &data, context)?.as_u64(),
                        None => state["Seconds"].as_u64(),
                    }
                    .ok_or_else(|| {
                        unusable(format!("state {name}: Seconds or SecondsPath must give whole seconds"))
                    })?;
                    tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
                    data
                }
                "Choice" => {
                    name = choose(&name, state, &data)?;
                    continue;
                }
                "Succeed" => return Ok(data),
                "Fail" => {
                    return Err(unusable(format!(
                        "the execution failed in state {name}: {}: {}",
                        state["Error"].as_str().unwrap_or("States.Fail"),
                        state["Cause"].as_str().unwrap_or_default()
                    )));
                }
                other => return Err(unusable(format!("state {name}: type {other:?} is not emulated"))),
            };
            if state["End"] == true {
                return Ok(data);
            }
            name = state["Next"]
                .as_str()
                .ok_or_else(|| unusable(format!("state {name} has neither Next nor End")))?
                .to_owned();
        }
    })
}

/// The state's `Parameters` applied to `data`, or `data` when it has none.
fn parameters(state: &Value, data: &Value, context: &Value) -> Result<Value, StackError> {
    match state.get("Parameters") {
        Some(template) => fill(template, data, context),
        None => Ok(data.clone()),
    }
}

/// A payload template filled in: each `key.$` takes the path's or intrinsic's value.
fn fill(template: &Value, data: &Value, context: &Value) -> Result<Value, StackError> {
    match template {
        Value::Object(fields) => {
            let mut out = Map::new();
            for (key, value) in fields {
                match key.strip_suffix(".$") {
                    Some(key) => {
                        let expr = value
                            .as_str()
                            .ok_or_else(|| unusable(format!("{key}.$ must be a path or an intrinsic")))?;
                        out.insert(key.to_owned(), evaluate(expr, data, context)?);
                    }
                    None => {
                        out.insert(key.clone(), fill(value, data, context)?);
                    }
                }
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

/// A path (`$`, `$.a.b`, `$$.Map.Item.Value`), an intrinsic (`States.…(…)`), or an integer.
fn evaluate(expr: &str, data: &Value, context: &Value) -> Result<Value, StackError> {
    let expr = expr.trim();
    if let Some(rest) = expr.strip_prefix("$$") {
        return path(context, rest, expr);
    }
    if let Some(rest) = expr.strip_prefix('$') {
        return path(data, rest, expr);
    }
    if let Ok(n) = expr.parse::<i64>() {
        return Ok(json!(n));
    }
    let (name, args) = expr
        .strip_suffix(')')
        .and_then(|e| e.split_once('('))
        .ok_or_else(|| unusable(format!("{expr:?} is not a path, an integer or an intrinsic")))?;
    let args = split_arguments(args)
        .into_iter()
        .map(|a| evaluate(a, data, context))
        .collect::<Result<Vec<_>, _>>()?;
    let int = |i: usize| {
        args.get(i)
            .and_then(Value::as_i64)
            .ok_or_else(|| unusable(format!("{name}: argument {i} is not an integer")))
    };
    match name {
        "States.ArrayRange" => {
            let (first, last, step) = (int(0)?, int(1)?, int(2)?);
            if step == 0 || (last - first) / step > 1000 {
                return Err(unusable(format!("{expr}: at most 1,000 elements")));
            }
            let mut out = Vec::new();
            let mut n = first;
            while (step > 0 && n <= last) || (step < 0 && n >= last) {
                out.push(json!(n));
                n += step;
            }
            Ok(Value::Array(out))
        }
        "States.MathAdd" => Ok(json!(int(0)? + int(1)?)),
        "States.ArrayLength" => args
            .first()
            .and_then(Value::as_array)
            .map(|a| json!(a.len()))
            .ok_or_else(|| unusable(format!("{expr}: not an array"))),
        other => Err(unusable(format!("the intrinsic {other} is not emulated"))),
    }
}

/// An intrinsic's arguments, split at the commas outside parentheses.
fn split_arguments(args: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0_i32, 0);
    for (i, c) in args.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&args[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !args[start..].trim().is_empty() {
        out.push(&args[start..]);
    }
    out
}

fn path(root: &Value, rest: &str, expr: &str) -> Result<Value, StackError> {
    let mut at = root;
    for part in rest.split('.').filter(|p| !p.is_empty()) {
        at = at.get(part).ok_or_else(|| unusable(format!("the path {expr} finds nothing in {root}")))?;
    }
    Ok(at.clone())
}

/// A `Task`'s or a `Map`'s output from its input `data` and its `result`: `ResultSelector`,
/// then `ResultPath` (`$`, the default, takes the result; `null` keeps the input), then
/// `OutputPath`.
fn output(
    name: &str,
    state: &Value,
    data: Value,
    result: Value,
    context: &Value,
) -> Result<Value, StackError> {
    let result = match state.get("ResultSelector") {
        Some(selector) => fill(selector, &result, context)?,
        None => result,
    };
    let combined = match state.get("ResultPath") {
        None => result,
        Some(Value::Null) => data,
        Some(Value::String(p)) if p == "$" => result,
        Some(other) => return Err(unusable(format!("state {name}: ResultPath {other} is not emulated"))),
    };
    match state["OutputPath"].as_str() {
        Some(out) => evaluate(out, &combined, context),
        None => Ok(combined),
    }
}

/// A `Task` whose invocation failed, and which its `Retry` retries no more: its function, and
/// its error's name and cause.
struct Failed {
    function: String,
    error: String,
    cause: String,
}

/// A `Task` that invokes a Lambda function (`arn:aws:states:::lambda:invoke`), retried as its
/// `Retry` says: its result, `{"Payload": …, "StatusCode": 200}`, or its failure.
async fn task(
    name: &str,
    state: &Value,
    data: &Value,
    context: &Value,
    engine: &Engine,
) -> Result<Result<Value, Failed>, StackError> {
    let invoke = &engine.invoke;
    if state["Resource"] != "arn:aws:states:::lambda:invoke" {
        return Err(unusable(format!("state {name}: only lambda:invoke tasks are emulated")));
    }
    let request = parameters(state, data, context)?;
    let function = request["FunctionName"].as_str().unwrap_or_default().to_owned();
    let retriers = state["Retry"].as_array().cloned().unwrap_or_default();
    let mut attempts = vec![0_u64; retriers.len()];
    loop {
        match invoke(function.clone(), request["Payload"].clone()).await {
            Ok(payload) => return Ok(Ok(json!({ "Payload": payload, "StatusCode": 200 }))),
            Err(failure) => {
                let (error, cause) = failure.error_and_cause();
                let retrier = retriers.iter().position(|r| matches_error(&r["ErrorEquals"], &error));
                let allowed = |i: usize| retriers[i]["MaxAttempts"].as_u64().unwrap_or(3);
                match retrier {
                    Some(i) if attempts[i] < allowed(i) => {
                        attempts[i] += 1;
                        engine.transition();
                    }
                    _ => return Ok(Err(Failed { function, error, cause })),
                }
            }
        }
    }
}

/// Whether a retrier's or a catcher's `ErrorEquals` matches the error named `error`: by its
/// name, by `States.ALL` (any error), or by `States.TaskFailed` (any but `States.Timeout`).
fn matches_error(error_equals: &Value, error: &str) -> bool {
    error_equals.as_array().is_some_and(|names| {
        names.iter().filter_map(Value::as_str).any(|name| {
            name == error
                || name == "States.ALL"
                || (name == "States.TaskFailed" && error != "States.Timeout")
        })
    })
}

/// A failed `Task`'s first catcher whose `ErrorEquals` matches its error: the next state, and
/// its input, `{"Error": …, "Cause": …}` at the catcher's `ResultPath` (`$`, the default, takes
/// it; `null` keeps the state's input `data`). Without one, the execution fails, naming the
/// state, the function and the error.
fn catch(name: &str, state: &Value, data: Value, failed: Failed) -> Result<(String, Value), StackError> {
    let catcher = state["Catch"]
        .as_array()
        .and_then(|catchers| catchers.iter().find(|c| matches_error(&c["ErrorEquals"], &failed.error)));
    let Some(catcher) = catcher else {
        let Failed { function, error, cause } = failed;
        return Err(unusable(format!("state {name}: {function} failed: {error}: {cause}")));
    };
    let next = catcher["Next"]
        .as_str()
        .ok_or_else(|| unusable(format!("state {name}: a catcher without Next")))?
        .to_owned();
    let error = json!({ "Error": failed.error, "Cause": failed.cause });
    let input = match catcher.get("ResultPath") {
        None => error,
        Some(Value::Null) => data,
        Some(Value::String(p)) if p == "$" => error,
        Some(other) => {
            return Err(unusable(format!("state {name}: a catcher's ResultPath {other} is not emulated")));
        }
    };
    Ok((next, input))
}

/// A `Choice` of rules on one `Variable` each (`BooleanEquals`, `NumericGreaterThan`,
/// `NumericGreaterThanPath`, `NumericLessThan`): the next state's name.
fn choose(name: &str, state: &Value, data: &Value) -> Result<String, StackError> {
    for rule in state["Choices"].as_array().into_iter().flatten() {
        let variable = rule["Variable"]
            .as_str()
            .ok_or_else(|| unusable(format!("state {name}: a rule without Variable")))?;
        let value = evaluate(variable, data, &Value::Null).ok();
        let number = value.as_ref().and_then(Value::as_f64);
        let matched = if let Some(expected) = rule.get("BooleanEquals") {
            value.as_ref() == Some(expected)
        } else if let Some(bound) = rule["NumericGreaterThan"].as_f64() {
            number.is_some_and(|n| n > bound)
        } else if let Some(bound) = rule["NumericLessThan"].as_f64() {
            number.is_some_and(|n| n < bound)
        } else if let Some(bound) = rule["NumericGreaterThanPath"].as_str() {
            let bound = evaluate(bound, data, &Value::Null)?;
            let bound = bound.as_f64().ok_or_else(|| {
                unusable(format!("state {name}: NumericGreaterThanPath {bound} is not a number"))
            })?;
            number.is_some_and(|n| n > bound)
        } else {
            return Err(unusable(format!(
                "state {name}: only BooleanEquals, NumericGreaterThan, NumericGreaterThanPath and \
                 NumericLessThan rules are emulated"
            )));
        };
        if matched {
            return rule["Next"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| unusable(format!("state {name}: a rule without Next")));
        }
    }
    state["Default"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| unusable(format!("state {name}: no rule matched and no Default")))
}

/// A `Map` over `ItemsPath`, or over the objects its `ItemReader` lists: each item's
/// `ItemSelector` input, grouped by `ItemBatcher` when it has one, run through `ItemProcessor`, at
/// most `MaxConcurrency` (or `MaxConcurrencyPath`) at once: the results, in order; or, with a
/// `ResultWriter`, written to S3 ([`export`]), and where they are.
async fn map(
    name: &str,
    state: &Value,
    data: &Value,
    context: &Value,
    engine: &Engine,
) -> Result<Value, StackError> {
    // Checked before any child runs, as Step Functions checks a definition before it runs it.
    let writer = match state.get("ResultWriter") {
        Some(writer) => {
            let destination = result_writer(name, state, writer, data, context)?;
            let s3 = engine.s3.as_ref().ok_or_else(|| {
                unusable(format!("state {name}: a ResultWriter needs S3: run with execute_reading"))
            })?;
            Some((destination, s3))
        }
        None => None,
    };
    let items = if let Some(reader) = state.get("ItemReader") {
        list_objects(name, reader, data, context, engine.s3.as_ref()).await?
    } else {
        let items = evaluate(state["ItemsPath"].as_str().unwrap_or("$"), data, &Value::Null)?;
        items.as_array().ok_or_else(|| unusable(format!("state {name}: ItemsPath is not an array")))?.clone()
    };
    let concurrency = match state["MaxConcurrencyPath"].as_str() {
        Some(p) => evaluate(p, data, &Value::Null)?.as_u64(),
        None => state["MaxConcurrency"].as_u64(),
    }
    .filter(|n| *n > 0)
    .map_or(items.len().max(1), |n| usize::try_from(n).unwrap_or(usize::MAX));
    let mut inputs = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let context = json!({
            "Execution": context["Execution"].clone(),
            "Map": {"Item": {"Index": index, "Value": item}},
        });
        inputs.push(match state.get("ItemSelector") {
            Some(selector) => fill(selector, data, &context)?,
            None => context["Map"]["Item"]["Value"].clone(),
        });
    }
    if let Some(batcher) = state.get("ItemBatcher") {
        inputs = batches(name, batcher, &inputs, data, context)?;
    }
    let processor = &state["ItemProcessor"];
    let children: Vec<Child> = futures_util::stream::iter(inputs)
        .map(move |input| async move {
            let started = SystemTime::now();
            let output = run(processor, input.clone(), &Value::Null, engine).await;
            Child { input, output, started, stopped: SystemTime::now() }
        })
        .buffered(concurrency)
        .collect()
        .await;
    let Some((destination, s3)) = writer else {
        return Ok(Value::Array(children.into_iter().map(|c| c.output).collect::<Result<_, _>>()?));
    };
    let region = s3
        .config()
        .region()
        .map(ToString::to_string)
        .ok_or_else(|| unusable(format!("state {name}: the ResultWriter's S3 client has no region")))?;
    let map_run = MapRun::new(name, state, &region, context);
    let (objects, result) = export(name, &destination, &map_run, &children)?;
    put_results(name, s3, &destination.bucket, objects).await?;
    Ok(result)
}

/// One child execution of a `Map`: its input, its output (or why it failed), and when it
/// started and stopped.
struct Child {
    input: Value,
    output: Result<Value, StackError>,
    started: SystemTime,
    stopped: SystemTime,
}

/// The `ResultWriter` resource the emulator writes with.
const PUT_OBJECT: &str = "arn:aws:states:::s3:putObject";

/// The state machine's name in the ARNs the emulator makes for a Map Run and its child
/// executions: it is not given the state machine's name (`$$.StateMachine` is not emulated).
pub const STATE_MACHINE: &str = "local";

/// The largest result file Step Functions writes (developer guide, "`ResultWriter` (Map)": "up to
/// 5 GB", S3's largest single `PutObject`, 5 GiB); past it, it goes on in `SUCCEEDED_1.json`.
const MAX_RESULT_FILE: u64 = 5 << 30;

/// Where a `Map`'s `ResultWriter` writes its Map Run's results: its `Parameters`' `Bucket`, and
/// its `Prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResultWriter {
    bucket: String,
    prefix: String,
}

/// The `ResultWriter` of the `Map` state `name`, its `Parameters` filled from the state's input
/// `data`: only an `s3:putObject` writer of a `DISTRIBUTED` `Map` (Step Functions takes one
/// there only), with a `Bucket` and a `Prefix` and nothing else, as the template's is.
fn result_writer(
    name: &str,
    state: &Value,
    writer: &Value,
    data: &Value,
    context: &Value,
) -> Result<ResultWriter, StackError> {
    if state["ItemProcessor"]["ProcessorConfig"]["Mode"] != "DISTRIBUTED" {
        return Err(unusable(format!("state {name}: a ResultWriter is for a DISTRIBUTED Map only")));
    }
    // `WriterConfig` (its `Transformation`, its `OutputType`) and JSONata's `Arguments` are not
    // emulated: the template uses neither.
    let other = |fields: &Value, known: [&str; 2]| {
        fields.as_object().and_then(|f| f.keys().find(|k| !known.contains(&k.as_str())).cloned())
    };
    if let Some(field) = other(writer, ["Resource", "Parameters"]) {
        return Err(unusable(format!("state {name}: the ResultWriter's {field} is not emulated")));
    }
    if writer["Resource"] != PUT_OBJECT {
        return Err(unusable(format!("state {name}: only a ResultWriter of {PUT_OBJECT} is emulated")));
    }
    let parameters = fill(&writer["Parameters"], data, context)?;
    if let Some(field) = other(&parameters, ["Bucket", "Prefix"]) {
        return Err(unusable(format!("state {name}: the ResultWriter's {field} is not emulated")));
    }
    // Where Step Functions writes without a `Prefix` is undocumented: one is required here.
    let field = |key: &str| {
        parameters[key]
            .as_str()
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| unusable(format!("state {name}: the ResultWriter names no {key}")))
    };
    Ok(ResultWriter { bucket: field("Bucket")?, prefix: field("Prefix")? })
}

/// A `Map` state's run (a Map Run): its id, its ARN (`mapRun:<state machine>/<label>:<id>`), and
/// its child executions' state machine (`stateMachine:<state machine>/<label>`) and ARNs
/// (`execution:<state machine>/<label>:<name>`), as Step Functions names them.
struct MapRun {
    id: String,
    arn: String,
    children: String,
    executions: String,
}

impl MapRun {
    /// A new Map Run of the `Map` state `name` in `region`, in the execution of `context`.
    fn new(name: &str, state: &Value, region: &str, context: &Value) -> MapRun {
        // A UUID, new each run: how Step Functions makes it is undocumented.
        let nonce = fastrand::u64(..).to_string();
        let execution = context["Execution"]["Name"].as_str().unwrap_or_default();
        let id = crate::replayer::failures::uuid(&[execution, name, &nonce]);
        // The state's `Label`; without one Step Functions generates one (how is undocumented),
        // and the emulator takes the state's name.
        let label = state["Label"].as_str().unwrap_or(name);
        let arn = |kind: &str| format!("arn:aws:states:{region}:{ACCOUNT}:{kind}:{STATE_MACHINE}/{label}");
        MapRun {
            arn: format!("{}:{id}", arn("mapRun")),
            children: arn("stateMachine"),
            executions: arn("execution"),
            id,
        }
    }

    /// The record of its child `index` that succeeded with `output`, as a result file holds it
    /// (developer guide, "`ResultWriter` (Map)": a child execution with its input and output as
    /// JSON text, `Transformation` `NONE`). Its name is a UUID, as Step Functions names a Map
    /// Run's children.
    fn succeeded(&self, index: usize, child: &Child, output: &Value) -> Value {
        let name = crate::replayer::failures::uuid(&[&self.id, &index.to_string()]);
        json!({
            "ExecutionArn": format!("{}:{name}", self.executions),
            "Input": child.input.to_string(),
            "InputDetails": {"Included": true},
            "Name": name,
            "Output": output.to_string(),
            "OutputDetails": {"Included": true},
            "RedriveCount": 0,
            "RedriveStatus": "NOT_REDRIVABLE",
            "RedriveStatusReason": "Execution is SUCCEEDED and cannot be redriven",
            "StartDate": date(child.started),
            "StateMachineArn": self.children,
            "Status": "SUCCEEDED",
            "StopDate": date(child.stopped),
        })
    }
}

/// `at` as a result file gives a date: ISO 8601, in UTC, to the millisecond.
fn date(at: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(at).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// What the `ResultWriter` of the `Map` state `name` writes of `map_run`'s `children` under
/// `<Prefix>/<map run id>/` (developer guide, "`ResultWriter` (Map)"): the objects to put, in
/// order (`SUCCEEDED_0.json`, the succeeded children's records in item order, then
/// `manifest.json`, which lists it with its size), and the `Map`'s result, where they are.
///
/// A status none of the children has gets no file, and the manifest an empty list for it (as
/// the guide's manifest shows `FAILED` and `PENDING`); whether a Map Run without children writes
/// an empty `SUCCEEDED_0.json` is undocumented: it writes none here. The order of records in a
/// file, the JSON's spacing, and a `Prefix` ending in `/` (taken as without it) are undocumented.
/// An object a Map Run exports: its key and its bytes.
type Export = (String, Vec<u8>);

fn export(
    name: &str,
    writer: &ResultWriter,
    map_run: &MapRun,
    children: &[Child],
) -> Result<(Vec<Export>, Value), StackError> {
    let mut records = Vec::with_capacity(children.len());
    for (index, child) in children.iter().enumerate() {
        let output = child.output.as_ref().map_err(|e| {
            unusable(format!(
                "{e} (state {name}'s ResultWriter wrote nothing: the results of a Map Run with a failed \
                 child, its FAILED_0.json and PENDING_0.json, are not emulated)"
            ))
        })?;
        records.push(map_run.succeeded(index, child, output));
    }
    let base = format!("{}/{}", writer.prefix.trim_end_matches('/'), map_run.id);
    let mut objects = Vec::new();
    let mut succeeded = Vec::new();
    if !records.is_empty() {
        let key = format!("{base}/SUCCEEDED_0.json");
        let body = Value::Array(records).to_string().into_bytes();
        if u64::try_from(body.len()).unwrap_or(u64::MAX) > MAX_RESULT_FILE {
            return Err(unusable(format!(
                "state {name}: its results take {} bytes, over a result file's 5 GB: more files \
                 (SUCCEEDED_1.json, …) are not emulated",
                body.len()
            )));
        }
        succeeded.push(json!({"Key": key, "Size": body.len()}));
        objects.push((key, body));
    }
    let manifest_key = format!("{base}/manifest.json");
    let manifest = json!({
        "DestinationBucket": writer.bucket,
        "MapRunArn": map_run.arn,
        "ResultFiles": {"FAILED": [], "PENDING": [], "SUCCEEDED": succeeded},
    });
    objects.push((manifest_key.clone(), manifest.to_string().into_bytes()));
    let result = json!({
        "MapRunArn": map_run.arn,
        "ResultWriterDetails": {"Bucket": writer.bucket, "Key": manifest_key},
    });
    Ok((objects, result))
}

/// Puts a Map Run's result objects in `bucket`, in order: one S3 refuses fails the state
/// (`States.ResultWriterFailed`).
async fn put_results(
    name: &str,
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    objects: Vec<(String, Vec<u8>)>,
) -> Result<(), StackError> {
    for (key, body) in objects {
        s3.put_object()
            .bucket(bucket)
            .key(&key)
            .body(aws_sdk_s3::primitives::ByteStream::from(body))
            .send()
            .await
            .map_err(|e| {
                unusable(format!(
                    "state {name}: States.ResultWriterFailed: PutObject s3://{bucket}/{key}: {e:?}"
                ))
            })?;
    }
    Ok(())
}

/// Items grouped as `ItemBatcher` says (`MaxItemsPerBatch`; `BatchInput` filled from the
/// state's input): each child's input, `{"BatchInput": …, "Items": […]}`.
fn batches(
    name: &str,
    batcher: &Value,
    items: &[Value],
    data: &Value,
    context: &Value,
) -> Result<Vec<Value>, StackError> {
    let size = batcher["MaxItemsPerBatch"]
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| unusable(format!("state {name}: only ItemBatcher's MaxItemsPerBatch is emulated")))?;
    let batch_input = batcher.get("BatchInput").map(|b| fill(b, data, context)).transpose()?;
    Ok(items
        .chunks(size)
        .map(|chunk| {
            let mut batch = json!({ "Items": chunk });
            if let Some(input) = &batch_input {
                batch["BatchInput"] = input.clone();
            }
            batch
        })
        .collect())
}

/// The objects an `ItemReader` with `s3:listObjectsV2` lists (`Bucket`, `Prefix`), each as
/// Step Functions gives it: `Etag`, `Key`, `LastModified` (epoch seconds), `Size`,
/// `StorageClass`, in key order.
async fn list_objects(
    name: &str,
    reader: &Value,
    data: &Value,
    context: &Value,
    s3: Option<&aws_sdk_s3::Client>,
) -> Result<Vec<Value>, StackError> {
    if reader["Resource"] != "arn:aws:states:::s3:listObjectsV2" || reader.get("ReaderConfig").is_some() {
        return Err(unusable(format!(
            "state {name}: only an ItemReader of s3:listObjectsV2 without ReaderConfig is emulated"
        )));
    }
    let parameters = fill(&reader["Parameters"], data, context)?;
    if parameters.as_object().is_some_and(|p| p.keys().any(|k| k != "Bucket" && k != "Prefix")) {
        return Err(unusable(format!("state {name}: only the ItemReader's Bucket and Prefix are emulated")));
    }
    let bucket = parameters["Bucket"]
        .as_str()
        .ok_or_else(|| unusable(format!("state {name}: the ItemReader names no Bucket")))?;
    let prefix = parameters["Prefix"].as_str().unwrap_or_default();
    let s3 = s3
        .ok_or_else(|| unusable(format!("state {name}: an ItemReader needs S3: run with execute_reading")))?;
    let mut pages = s3.list_objects_v2().bucket(bucket).prefix(prefix).into_paginator().send();
    let mut objects = Vec::new();
    while let Some(page) = pages.next().await {
        let page =
            page.map_err(|e| unusable(format!("state {name}: ListObjectsV2 s3://{bucket}/{prefix}: {e:?}")))?;
        objects.extend(page.contents().iter().map(|o| {
            json!({
                "Etag": o.e_tag(),
                "Key": o.key(),
                "LastModified": o.last_modified().map(aws_smithy_types::DateTime::secs),
                "Size": o.size(),
                "StorageClass": o.storage_class().map(|c| c.as_str().to_owned()),
            })
        }));
    }
    Ok(objects)
}

#[cfg(test)]
mod result_writer_tests;

#[cfg(test)]
mod retry_tests;

#[cfg(test)]
mod tests;
