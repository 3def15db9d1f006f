//! The deployment gate (template.yaml's `PreTrafficHook`, deploy/pre-traffic-hook/hook.py):
//! the hook passes a new version only when it takes the canary batch, fails it on any other
//! answer or error, and never leaves `CodeDeploy` waiting; and the canary batch, from either
//! source, is taken by every stream function's real binary without a write.

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use local_stack::Stack;
use serde_json::{Value, json};

use crate::support::lambda::Function;
use crate::support::moto::{s3, sdk, unique};
use crate::support::pipeline::{Local, local, stack};
use crate::support::process::root;
use crate::support::template::stream_functions;

/// Runs `script` with deploy/pre-traffic-hook importable as `hook`; its stdout as JSON.
fn python(script: &str) -> Result<Value> {
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .env("PYTHONPATH", root().join("deploy/pre-traffic-hook"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .context("running python3")?;
    ensure!(output.status.success(), "python3: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout)?;
    let last = stdout.lines().last().context("no output")?;
    Ok(serde_json::from_str(last)?)
}

/// The hook against stub `CodeDeploy` and Lambda clients: for each case, the status it reported,
/// the versions it invoked, and the events it sent.
#[test]
fn the_pre_traffic_hook_passes_only_a_version_that_takes_the_canary() -> Result<()> {
    let outcome = python(
        r#"
import io, json, hook

class CodeDeploy:
    def __init__(self, targets): self.targets, self.reported = targets, []
    def list_deployment_targets(self, deploymentId): return {"targetIds": [t for t, _ in self.targets]}
    def get_deployment_target(self, deploymentId, targetId):
        name, version = targetId.split(":")
        return {"deploymentTarget": {"lambdaTarget": {"lambdaFunctionInfo": {"functionName": name, "targetVersion": version}}}}
    def put_lifecycle_event_hook_execution_status(self, **kw): self.reported.append(kw["status"])

class Lambda:
    def __init__(self, answers, sources): self.answers, self.sources, self.invoked, self.events = answers, sources, [], []
    def get_function_configuration(self, FunctionName):
        source = self.sources.get(FunctionName.split(":")[0])
        return {"Environment": {"Variables": {"CHANGE_SOURCE": source} if source else {}}}
    def invoke(self, FunctionName, Payload):
        self.invoked.append(FunctionName); self.events.append(json.loads(Payload))
        answer = self.answers[FunctionName]
        if isinstance(answer, Exception): raise answer
        error, body = answer
        response = {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(body).encode())}
        if error: response["FunctionError"] = error
        return response

def run(answers, sources={}, targets=None):
    targets = targets if targets is not None else [(t, None) for t in answers]
    codedeploy, lam = CodeDeploy(targets), Lambda(answers, sources)
    status = hook.handler({"DeploymentId": "d-1", "LifecycleEventHookExecutionId": "h-1"}, None, (codedeploy, lam))
    return {"status": status, "reported": codedeploy.reported, "invoked": lam.invoked, "events": lam.events}

ok = (None, {"batchItemFailures": []})
cases = {
    "passes": run({"indexer:7": ok, "aggregator:3": ok}, {"aggregator": "kinesis"}),
    "function error": run({"indexer:7": ("Unhandled", {"errorMessage": "init failed"})}),
    "a record failed": run({"indexer:7": (None, {"batchItemFailures": [{"itemIdentifier": "1"}]})}),
    "not a batch response": run({"indexer:7": (None, None)}),
    "invoke raised": run({"indexer:7": RuntimeError("throttled")}),
    "no targets": run({}, targets=[]),
}
print(json.dumps(cases))
"#,
    )?;
    let passes = &outcome["passes"];
    ensure!(passes["status"] == "Succeeded" && passes["reported"] == json!(["Succeeded"]), "{passes}");
    ensure!(
        passes["invoked"] == json!(["indexer:7", "aggregator:3"]),
        "each target's new version is invoked once: {}",
        passes["invoked"]
    );
    // The canary is a DynamoDB stream batch, or a Kinesis one where the version reads Kinesis.
    let events = passes["events"].as_array().context("events")?;
    ensure!(events.len() == 2, "{events:?}");
    ensure!(
        events[0]["Records"][0]["eventSource"] == "aws:dynamodb"
            && events[1]["Records"][0]["eventSource"] == "aws:kinesis",
        "{events:?}"
    );
    for case in ["function error", "a record failed", "not a batch response", "invoke raised", "no targets"] {
        let failed = &outcome[case];
        ensure!(
            failed["status"] == "Failed" && failed["reported"] == json!(["Failed"]),
            "{case}: the deployment is failed, and CodeDeploy told: {failed}"
        );
    }
    Ok(())
}

/// A team's definition (`MultikeyIndexes`): the canary carries every `base_key` attribute, and a
/// definition the stack cannot serve is refused before any invocation, naming the field: an
/// index in another table than the stack's (the roles write that one alone), a source other than
/// `IndexedAttribute` (the stream filters test that one), a `base_key` other than
/// `BaseKeyAttributes` (the touch grants name that one).
#[test]
fn the_pre_traffic_hook_keys_the_canary_by_the_definition_and_refuses_what_the_stack_cannot_serve()
-> Result<()> {
    let outcome = python(
        r#"
import json, hook

definition = {"base_key": ["PK", "SK"], "indexes": [{"name": "fields", "source": "fields", "scope": ["projectId"], "tiebreakers": ["seq"]}]}
def env(**index):
    d = json.loads(json.dumps(definition)); d["indexes"][0].update(index)
    return {"MULTIKEY_INDEXES": json.dumps(d), "MULTIKEY_INDEX_TABLE": "stack-index"}
stack = {"INDEX_TABLE": "stack-index", "INDEXED_ATTRIBUTE": "fields", "BASE_KEY_ATTRIBUTES": "PK,SK"}
print(json.dumps({
    "keys": sorted(hook.canary_event(False, "us-east-1", hook.base_key(env()))["Records"][0]["dynamodb"]["Keys"]),
    "default keys": sorted(hook.canary_event(False, "us-east-1", hook.base_key({}))["Records"][0]["dynamodb"]["Keys"]),
    "fits": hook.definition_errors(env(), stack),
    "named table": hook.definition_errors(env(table="stack-index"), stack),
    "other table": hook.definition_errors(env(table="elsewhere"), stack),
    "other source": hook.definition_errors(env(source="tags"), stack),
    "other key": hook.definition_errors(env(), dict(stack, BASE_KEY_ATTRIBUTES="id")),
    "default definition": hook.definition_errors({}, dict(stack, BASE_KEY_ATTRIBUTES="id")),
}))
"#,
    )?;
    ensure!(outcome["keys"] == json!(["PK", "SK", "id", "pk"]), "{outcome}");
    ensure!(outcome["default keys"] == json!(["id", "pk"]), "{outcome}");
    ensure!(outcome["fits"] == json!([]) && outcome["named table"] == json!([]), "{outcome}");
    let named = |case: &str, field: &str| {
        outcome[case].as_array().is_some_and(|e| e.len() == 1 && e[0].as_str().unwrap_or("").contains(field))
    };
    ensure!(named("other table", "indexes[0].table is 'elsewhere'"), "{outcome}");
    ensure!(
        named("other source", "indexes[0].source is 'tags', but IndexedAttribute is 'fields'"),
        "{outcome}"
    );
    ensure!(named("other key", "base_key is ['PK', 'SK'], but BaseKeyAttributes is 'id'"), "{outcome}");
    ensure!(outcome["default definition"] == json!([]), "{outcome}");
    Ok(())
}

/// Every call the hook makes during a deployment, recorded by stub clients, decided under the
/// hook's template role (`PreTrafficHookRole`) as IAM decides it: all allowed. `CodeDeploy`'s
/// three calls take no resource type (Service Authorization Reference), so only a statement on
/// `"*"` can allow them.
#[tokio::test]
async fn the_pre_traffic_hook_may_make_every_call_it_makes() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[]).await?;
    let role = stack.roles.get("PreTrafficHookRole").context("the hook's role")?;
    let targets: Vec<String> = stream_functions()
        .iter()
        .map(|binary| {
            Ok(format!("{}:7", local_stack::function_name(&stack.name, &stack.function(binary)?.logical_id)))
        })
        .collect::<Result<_>>()?;
    let calls = python(&format!(
        r#"
import io, json, hook

calls = []
class Recorder:
    def __init__(self, service): self.service = service
    def __getattr__(self, method):
        def call(**kw):
            calls.append([self.service, method, kw.get("FunctionName", "")])
            if method == "list_deployment_targets": return {{"targetIds": {targets:?}}}
            if method == "get_deployment_target":
                name, version = kw["targetId"].split(":")
                return {{"deploymentTarget": {{"lambdaTarget": {{"lambdaFunctionInfo": {{"functionName": name, "targetVersion": version}}}}}}}}
            if method == "get_function_configuration": return {{"Environment": {{"Variables": {{}}}}}}
            if method == "invoke": return {{"StatusCode": 200, "Payload": io.BytesIO(b'{{"batchItemFailures": []}}')}}
            return {{}}
        return call

status = hook.handler({{"DeploymentId": "d-1", "LifecycleEventHookExecutionId": "h-1"}}, None, (Recorder("codedeploy"), Recorder("lambda")))
print(json.dumps({{"status": status, "calls": calls}}))
"#
    ))?;
    ensure!(calls["status"] == "Succeeded", "{calls}");
    let calls = calls["calls"].as_array().context("calls")?;
    let functions = format!("arn:aws:lambda:{}:123456789012:function:", stack.region);
    for call in calls {
        let (service, method, function) = (
            call[0].as_str().unwrap_or_default(),
            call[1].as_str().unwrap_or_default(),
            call[2].as_str().unwrap_or_default(),
        );
        let (action, resource) = match (service, method) {
            ("codedeploy", "list_deployment_targets") => ("codedeploy:ListDeploymentTargets", "*".to_owned()),
            ("codedeploy", "get_deployment_target") => ("codedeploy:GetDeploymentTarget", "*".to_owned()),
            ("codedeploy", "put_lifecycle_event_hook_execution_status") => {
                ("codedeploy:PutLifecycleEventHookExecutionStatus", "*".to_owned())
            }
            ("lambda", "get_function_configuration") => {
                ("lambda:GetFunctionConfiguration", format!("{functions}{function}"))
            }
            ("lambda", "invoke") => ("lambda:InvokeFunction", format!("{functions}{function}")),
            _ => anyhow::bail!("the hook makes a call this test does not know: {call}"),
        };
        local_stack::iam::authorize(&sdk, &role.key, action, &resource)
            .await?
            .map_err(|why| anyhow::anyhow!("the hook may not {action} on {resource}: {why}"))?;
    }
    ensure!(calls.len() == 2 + 3 * 3, "the listing, 3 targets' 3 calls each, the status: {calls:?}");
    stack.ensure_permitted(&sdk).await?;
    Ok(())
}

/// The canary batch the hook sends to a function with this environment, from `python3`: a
/// DynamoDB stream's or a Kinesis stream's, keyed as its `MULTIKEY_INDEXES` says.
fn canary(env: &BTreeMap<String, String>) -> Result<Value> {
    python(&format!(
        "import json, hook; env = json.loads({env:?}); \
         print(json.dumps(hook.canary_event(env.get('CHANGE_SOURCE') == 'kinesis', 'us-east-1', hook.base_key(env))))",
        env = serde_json::to_string(env)?
    ))
}

/// Every item in a table of the stack.
async fn items(stack: &Stack, logical_id: &str) -> Result<Vec<Value>> {
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    Ok(local_stack::scan(&client, &stack.table(logical_id)?.name).await?)
}

/// The canary, through each stream function's real binary configured as the template configures
/// it, from DynamoDB Streams and from Kinesis, separate and combined: each answers an empty
/// batchItemFailures, and nothing is written: no index entry or head, no total, nothing parked,
/// nothing archived.
#[tokio::test]
async fn every_stream_function_takes_the_canary_and_writes_nothing() -> Result<()> {
    let sdk = sdk();
    let mut taken = 0;
    for parameters in [
        vec![],
        vec![("Consumers", "Combined")],
        vec![("IssuesChangeSource", "Kinesis"), ("CounterChangeSource", "Kinesis")],
        vec![("Consumers", "Combined"), ("IssuesChangeSource", "Kinesis")],
        // A team's PK/SK definition: the canary must carry both key attributes.
        vec![("MultikeyIndexes", crate::support::template::PK_SK_INDEXES), ("IndexedAttribute", "fields")],
    ] {
        let stack = stack(&sdk, &parameters).await?;
        let combined = parameters.contains(&("Consumers", "Combined"));
        let binaries =
            if combined { vec!["sidestream-combined", "counter-aggregator"] } else { stream_functions() };
        for binary in binaries {
            let env: BTreeMap<String, String> = local_stack::environment(stack.function(binary)?);
            let file = std::env::temp_dir().join(format!("{}.json", unique("canary")));
            std::fs::write(&file, serde_json::to_vec(&canary(&env)?)?)?;
            let function = Function::start(binary, &env)?;
            let response = function.invoke(&file.to_string_lossy())?;
            ensure!(response == json!({"batchItemFailures": []}), "{parameters:?} {binary}: {response}");
            taken += 1;
        }
        for table in ["IndexTable", "CounterTable"] {
            let written = items(&stack, table).await?;
            ensure!(written.is_empty(), "{parameters:?}: the canary wrote to {table}: {written:?}");
        }
        let parking = stack.environment("counter-aggregator")?["PARKING_BUCKET"].clone();
        let mut buckets = vec![parking];
        if let Ok((archive, _)) = stack.archive_location() {
            buckets.push(archive);
        } else if let Ok(env) = stack.environment("sidestream-combined") {
            buckets.extend(env.get("ARCHIVE_BUCKET").cloned());
        }
        for bucket in buckets {
            let listed = s3().list_objects_v2().bucket(&bucket).send().await?;
            ensure!(
                listed.contents().is_empty(),
                "{parameters:?}: the canary wrote to {bucket}: {:?}",
                listed.contents()
            );
        }
    }
    ensure!(taken == 13, "the canary went through {taken} functions");
    Ok(())
}
