//! A Step Functions state machine from the template, run in process: the states and the few
//! path and intrinsic forms the template's definitions use, no more.
//!
//! It runs the backfill's, the verify's and the restore's state machines as written in
//! `template.yaml` (their `Pass` with `States.ArrayRange`, their Distributed `Map` over segments,
//! the restore's `Map` over the objects its `ItemReader` lists (`s3:listObjectsV2`, against the
//! emulator's S3) in `ItemBatcher` batches, their `Task`s that invoke a function, their `Choice`
//! loops, the verify's `Wait`, `ResultPath: null`), with each Lambda invocation handed to a
//! caller-given invoker, and `$$.Execution.Name` the execution's.
//! What it does not know (another state type, a field it would have to ignore, another
//! intrinsic) is an error naming it, never a silent difference. Retry intervals are not waited:
//! a retry happens at once, and counts against `MaxAttempts`. A `Wait` waits, as Step Functions
//! does.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use crate::StackError;

/// Invokes a Lambda function (by the `FunctionName` the definition gives) with a payload: its
/// answer, or its error's type and message.
pub(crate) type TaskInvoker = Arc<
    dyn Fn(String, Value) -> Pin<Box<dyn Future<Output = Result<Value, (String, String)>> + Send>>
        + Send
        + Sync,
>;

fn unusable(message: impl Into<String>) -> StackError {
    StackError::Unusable(message.into())
}

/// What a state machine's states reach: Lambda (its `Task`s), and S3 for a `Map`'s `ItemReader`.
struct Engine {
    invoke: TaskInvoker,
    s3: Option<aws_sdk_s3::Client>,
}

/// Runs `definition` (ASL, as JSON) on `input` and returns its output; the execution's name
/// (`$$.Execution.Name`) is made unique in this process.
pub async fn execute(definition: &Value, input: Value, invoke: &TaskInvoker) -> Result<Value, StackError> {
    execute_on(definition, input, Engine { invoke: Arc::clone(invoke), s3: None }).await
}

/// [`execute`], with `s3` for a `Map` whose `ItemReader` lists objects (`s3:listObjectsV2`).
pub async fn execute_reading(
    definition: &Value,
    input: Value,
    invoke: &TaskInvoker,
    s3: aws_sdk_s3::Client,
) -> Result<Value, StackError> {
    execute_on(definition, input, Engine { invoke: Arc::clone(invoke), s3: Some(s3) }).await
}

async fn execute_on(definition: &Value, input: Value, engine: Engine) -> Result<Value, StackError> {
    static EXECUTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let n = EXECUTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("local-{}-{n}", since.as_millis());
    run(definition, input, &json!({"Execution": {"Name": name}}), &engine).await
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
            let state = &machine["States"][&name];
            let kind = state["Type"].as_str().unwrap_or_default();
            data = match kind {
                "Pass" => match state.get("Result") {
                    Some(result) => result.clone(),
                    None => parameters(state, &data, context)?,
                },
                "Task" => {
                    let result = task(&name, state, &data, context, &engine.invoke).await?;
                    output(&name, state, data, result, context)?
                }
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

/// A `Task` that invokes a Lambda function (`arn:aws:states:::lambda:invoke`): its result,
/// `{"Payload": …, "StatusCode": 200}`.
async fn task(
    name: &str,
    state: &Value,
    data: &Value,
    context: &Value,
    invoke: &TaskInvoker,
) -> Result<Value, StackError> {
    if state["Resource"] != "arn:aws:states:::lambda:invoke" {
        return Err(unusable(format!("state {name}: only lambda:invoke tasks are emulated")));
    }
    let request = parameters(state, data, context)?;
    let function = request["FunctionName"].as_str().unwrap_or_default().to_owned();
    let retriers = state["Retry"].as_array().cloned().unwrap_or_default();
    let mut attempts = vec![0_u64; retriers.len()];
    loop {
        match invoke(function.clone(), request["Payload"].clone()).await {
            Ok(payload) => return Ok(json!({ "Payload": payload, "StatusCode": 200 })),
            Err((error, message)) => {
                let retrier = retriers.iter().position(|r| {
                    r["ErrorEquals"]
                        .as_array()
                        .is_some_and(|e| e.iter().any(|e| e == error.as_str() || e == "States.ALL"))
                });
                let allowed = |i: usize| retriers[i]["MaxAttempts"].as_u64().unwrap_or(3);
                match retrier {
                    Some(i) if attempts[i] < allowed(i) => attempts[i] += 1,
                    _ => {
                        return Err(unusable(format!("state {name}: {function} failed: {error}: {message}")));
                    }
                }
            }
        }
    }
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
/// most `MaxConcurrency` (or `MaxConcurrencyPath`) at once: the results, in order.
async fn map(
    name: &str,
    state: &Value,
    data: &Value,
    context: &Value,
    engine: &Engine,
) -> Result<Value, StackError> {
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
    let results: Vec<Result<Value, StackError>> = futures_util::stream::iter(inputs)
        .map(|input| run(processor, input, &Value::Null, engine))
        .buffered(concurrency)
        .collect()
        .await;
    Ok(Value::Array(results.into_iter().collect::<Result<_, _>>()?))
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
mod tests;
