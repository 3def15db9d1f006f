//! The pipeline the end-to-end tests share: the stack of `template.yaml` on moto, the replayer
//! delivering its streams to the functions in process, the workload's items, and the checks of
//! what the functions keep.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Result, ensure};
use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};

use local_stack::replayer::{FailureLog, Invoker, Pipeline};
use local_stack::{Stack, in_process_invoker, put_json as put, s3_client};
use multikey_indexer::Indexes;
use stream_runtime::{EventRecord, Runtime, StreamFunction, Vars};

use crate::support::moto::unique;

pub(crate) fn template() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml")
}

pub(crate) fn now() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
}

/// A fresh stack (its own tables and bucket) with these template parameters.
pub(crate) async fn stack(sdk: &SdkConfig, parameters: &[(&str, &str)]) -> Result<Stack> {
    let parameters: BTreeMap<String, String> =
        parameters.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    Ok(Stack::create(sdk, &template(), &unique("e2e"), &parameters).await?)
}

/// A fresh stack on moto with these template parameters, what made it, a DynamoDB client for its
/// tables, and its issues table's name: what nearly every end-to-end test opens with.
pub(crate) struct Local {
    pub(crate) sdk: SdkConfig,
    pub(crate) stack: Stack,
    pub(crate) client: aws_sdk_dynamodb::Client,
    pub(crate) issues: String,
}

/// [`Local`] on a fresh [`stack`] with these template parameters.
pub(crate) async fn local(parameters: &[(&str, &str)]) -> Result<Local> {
    let sdk = crate::support::moto::sdk();
    let stack = stack(&sdk, parameters).await?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let issues = issues_table(&stack)?;
    Ok(Local { sdk, stack, client, issues })
}

/// The pipeline with every function in process; `wrap` may replace a function's invoker.
pub(crate) fn pipeline(
    sdk: &SdkConfig,
    stack: &Stack,
    failures: &Path,
    wrap: impl Fn(&str, Invoker) -> Invoker,
) -> Result<Pipeline> {
    pipeline_to(sdk, stack, FailureLog::new(failures), wrap)
}

/// [`pipeline`], giving up to `failures`.
pub(crate) fn pipeline_to(
    sdk: &SdkConfig,
    stack: &Stack,
    failures: FailureLog,
    wrap: impl Fn(&str, Invoker) -> Invoker,
) -> Result<Pipeline> {
    Ok(stack.pipeline(
        sdk,
        |function| {
            let invoker = in_process_invoker(function, sdk)?;
            Ok(wrap(function.binary.as_deref().unwrap_or_default(), invoker))
        },
        failures,
    )?)
}

pub(crate) fn failure_log() -> PathBuf {
    std::env::temp_dir().join(format!("{}.jsonl", unique("sidestream-failures")))
}

pub(crate) async fn delete(client: &aws_sdk_dynamodb::Client, table: &str, id: &str) -> Result<()> {
    client.delete_item().table_name(table).key("id", AttributeValue::S(id.into())).send().await?;
    Ok(())
}

pub(crate) fn issue(id: usize, fields: &Value) -> Value {
    json!({
        "id": format!("i{id:03}"), "name": format!("Issue {id}"), "project": format!("p{}", id % 3),
        "num": id, "state": if id.is_multiple_of(2) { "open" } else { "closed" }, "custom_fields": fields
    })
}

/// The `id`s of the items the stack's archive holds, each deletion read once, sorted.
pub(crate) async fn archived_ids(sdk: &SdkConfig, stack: &Stack) -> Result<Vec<String>> {
    archived_keys(sdk, stack, "id").await
}

/// The string attribute `key` of every item in the stack's archive, sorted.
pub(crate) async fn archived_keys(sdk: &SdkConfig, stack: &Stack, key: &str) -> Result<Vec<String>> {
    let (bucket, prefix) = stack.archive_location()?;
    let archived = operations::archive::items(&s3_client(sdk), &bucket, &prefix).await?;
    let mut keys: Vec<String> = archived
        .iter()
        .map(|(_, item)| {
            serde_json::to_value(item).map(|v| v[key]["S"].as_str().unwrap_or_default().to_owned())
        })
        .collect::<Result<_, _>>()?;
    keys.sort();
    Ok(keys)
}

/// The index table against what the issues table calls for.
pub(crate) async fn assert_index_exact(sdk: &SdkConfig, stack: &Stack) -> Result<usize> {
    let index = local_stack::check_index(&aws_sdk_dynamodb::Client::new(sdk), stack).await?;
    ensure!(index.is_exact(), "index not exact: missing {:#?}, extra {:#?}", index.missing, index.extra);
    // Every call the functions made was allowed by their template roles, and some were checked.
    let permitted = stack.ensure_permitted(sdk).await?;
    ensure!(permitted.checked > 0, "no call was checked under the stack's roles");
    Ok(index.entries)
}

/// Issues created, modified (values changed, fields added and removed, a tiebreaker and a
/// projected attribute changed) and deleted, in several rounds while the replayer runs.
pub(crate) async fn churn(sdk: &SdkConfig, stack: &Stack) -> Result<()> {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let issues = stack.table("IssuesTable")?.name.clone();
    for id in 0..60 {
        put(&client, &issues, &issue(id, &json!({"f1": id, "f2": format!("v{}", id % 7)}))).await?;
    }
    for id in (0..60).step_by(3) {
        put(&client, &issues, &issue(id, &json!({"f1": id * 10, "f3": "new"}))).await?;
    }
    for id in (1..60).step_by(5) {
        let mut moved = issue(id, &json!({"f1": id, "f2": "same"}));
        moved["num"] = json!(1000 + id);
        moved["name"] = json!("Renamed");
        put(&client, &issues, &moved).await?;
    }
    for id in (2..60).step_by(4) {
        delete(&client, &issues, &format!("i{id:03}")).await?;
    }
    put(&client, &issues, &json!({"id": "no-fields", "project": "p0", "num": 5000})).await?;
    Ok(())
}

/// `inner` as a crashing build: every invocation whose event `crashes_on` picks fails with
/// `error_type` (Lambda counts each as an error), counted in `crashes`.
pub(crate) fn crashing(
    inner: Invoker,
    crashes: Arc<AtomicU32>,
    error_type: &'static str,
    crashes_on: impl Fn(&stream_runtime::Event) -> bool + Send + Sync + 'static,
) -> Invoker {
    stream_runtime::delivery::in_process(move |event, deadline| {
        let (inner, crashes) = (Arc::clone(&inner), Arc::clone(&crashes));
        let crash = crashes_on(&event);
        async move {
            if crash {
                crashes.fetch_add(1, Ordering::SeqCst);
                return stream_runtime::delivery::Invocation::Failed {
                    error_type: error_type.into(),
                    message: format!("{error_type}: a crash injected by the test"),
                };
            }
            inner(event, deadline).await
        }
    })
}

/// Whether a record is of the issue `id`.
pub(crate) fn of_issue(record: &stream_runtime::EventRecord, id: &str) -> bool {
    serde_json::to_value(&record.change.keys).is_ok_and(|k| k["id"]["S"] == id)
}

/// Puts the issues `ids` into `table`, each with the custom fields `fields(id)`.
pub(crate) async fn put_issues(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    ids: std::ops::Range<usize>,
    fields: impl Fn(usize) -> Value,
) -> Result<()> {
    for id in ids {
        put(client, table, &issue(id, &fields(id))).await?;
    }
    Ok(())
}

/// Function `F` as its template environment configures it, with `extra` variables.
pub(crate) fn runtime_with<F: StreamFunction>(
    stack: &local_stack::Stack,
    binary: &str,
    extra: &[(&str, &str)],
) -> Result<Runtime<F>> {
    let mut env = local_stack::environment(stack.function(binary)?);
    env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let lookup = |name: &str| env.get(name).cloned();
    Ok(Runtime::<F>::from_vars(&Vars::new(&lookup), &crate::support::moto::sdk())?)
}

/// `stack`'s index against what the in-order `changes` leave in the issues table.
pub(crate) async fn index_check(
    client: &aws_sdk_dynamodb::Client,
    stack: &local_stack::Stack,
    changes: &[EventRecord],
) -> Result<operations::oracle::IndexCheck> {
    let mut base: std::collections::BTreeMap<String, Value> = std::collections::BTreeMap::new();
    for change in changes {
        let key = serde_json::to_string(&change.change.keys)?;
        if change.change.new_image.is_empty() {
            base.remove(&key);
        } else {
            base.insert(key, serde_json::to_value(&change.change.new_image)?);
        }
    }
    let base: Vec<Value> = base.into_values().collect();
    let index = local_stack::scan(client, &stack.table("IndexTable")?.name).await?;
    Ok(operations::oracle::compare(&indexes(stack)?, &base, &index)?)
}

/// The stack's index definitions, as the indexer is configured.
pub(crate) fn indexes(stack: &Stack) -> Result<Indexes> {
    let function = stack.function("multikey-indexer")?;
    let lookup = |name: &str| function.environment.get(name).cloned();
    Ok(Indexes::from_vars(&Vars::new(&lookup))?)
}

/// The name of the stack's issues table.
pub(crate) fn issues_table(stack: &Stack) -> Result<String> {
    Ok(stack.issues_table()?)
}
