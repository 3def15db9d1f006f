//! The template's roles on the emulator (`local_stack::iam`, `scripts/iam_gate.py`): every call a
//! function, a job or the grid API makes is decided against its role's policies as IAM decides
//! it, a call the role does not allow fails as AWS fails it and names itself, and S3 answers a
//! missing key as AWS does to a caller that may not list its bucket.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use aws_sdk_s3::error::ProvideErrorMetadata as _;
use serde_json::json;

use local_stack::replayer::ReplayError;
use local_stack::{Stack, StackError, iam, put_json as put, s3_client};

use crate::support::moto::{sdk, unique};
use crate::support::pipeline::{Local, failure_log, issue, local, pipeline, template};

/// `template.yaml` with the statement `sid` of `role`'s inline policy taken out, written into a
/// folder of its own beside a copy of the nested templates it names.
fn without_statement(role: &str, sid: &str) -> Result<PathBuf> {
    let text = std::fs::read_to_string(template())?;
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| *l == format!("  {role}:")).context("the role")?;
    let at = start
        + lines[start..].iter().position(|l| l.trim() == format!("- Sid: {sid}")).context("the statement")?;
    let indent = lines[at].len() - lines[at].trim_start().len();
    // The statement runs to the next line as indented as its `- ` or less.
    let end = at
        + 1
        + lines[at + 1..]
            .iter()
            .position(|l| !l.trim().is_empty() && l.len() - l.trim_start().len() <= indent)
            .context("the statement's end")?;
    let kept: Vec<&str> = lines[..at].iter().chain(&lines[end..]).copied().collect();
    let folder = std::env::temp_dir().join(unique("sidestream-iam-template"));
    let deploy = folder.join("deploy");
    std::fs::create_dir_all(&deploy)?;
    let source = template().parent().context("the template's folder")?.join("deploy");
    for entry in std::fs::read_dir(&source)? {
        let entry = entry?;
        if entry.path().extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(entry.path(), deploy.join(entry.file_name()))?;
        }
    }
    let path = folder.join("template.yaml");
    std::fs::write(&path, kept.join("\n") + "\n")?;
    Ok(path)
}

async fn stack_from(template: &Path, parameters: &[(&str, &str)]) -> Result<Stack> {
    let parameters: BTreeMap<String, String> =
        parameters.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    Ok(Stack::create(&sdk(), template, &unique("iam"), &parameters).await?)
}

/// The indexer's role without its index-writing statement: the indexer's calls are refused as
/// AWS refuses them; the run, whose mapping retries a failing batch for ever (the template's
/// `MaximumRetryAttempts` of -1), stops at the refusal with an error naming the function, the
/// role, the call and the resource (not at a timeout: `settle` has none); the run's permission
/// check names them too, and no index entry is written.
#[tokio::test]
async fn a_statement_taken_out_of_a_role_fails_the_run_naming_the_call() -> Result<()> {
    let sdk = sdk();
    let stack = stack_from(&without_statement("IndexerRole", "WriteIndex")?, &[]).await?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let issues = stack.table("IssuesTable")?.name.clone();
    let index = stack.table("IndexTable")?.name.clone();
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), |_, i| i)?;
    for id in 0..3 {
        put(&client, &issues, &issue(id, &json!({"f1": id}))).await?;
    }
    let stopped = pipeline.settle().await;
    let Err(ReplayError::Refused { function, denial }) = stopped else {
        bail!("the run did not stop at the refusal: {stopped:?}");
    };
    let indexer = stack.function_arn(stack.function("multikey-indexer")?);
    ensure!(indexer.ends_with(&format!(":{function}")), "the refused function is the indexer: {function}");
    let retried: u64 = pipeline.counts().iter().map(|(_, c)| c.retries).sum();
    ensure!(retried >= 1, "the mapping retried the refused batch before the run stopped: {retried}");
    let said = ReplayError::Refused { function, denial }.to_string();
    ensure!(
        said.contains("IndexerRole may not dynamodb:")
            && said.contains(&index)
            && said.contains(&indexer[indexer.rfind(':').unwrap_or(0) + 1..]),
        "the error names the function, the role, the call and the table: {said}"
    );
    let Err(StackError::Denied(denials)) = stack.ensure_permitted(&sdk).await else {
        bail!("the indexer wrote without WriteIndex, or its refusal was not reported");
    };
    let index_arn = format!("arn:aws:dynamodb:{}:123456789012:table/{index}", stack.region);
    ensure!(
        denials.iter().all(|d| d.role == "IndexerRole")
            && denials.iter().any(|d| d.action.starts_with("dynamodb:") && d.resource == index_arn),
        "the refusals name the indexer's role, a DynamoDB call and the index table: {denials:?}"
    );
    let message = StackError::Denied(denials).to_string();
    ensure!(message.contains("IndexerRole may not dynamodb:") && message.contains(&index_arn), "{message}");
    let written = client.scan().table_name(&index).send().await?.count;
    ensure!(written == 0, "no entry is written without the permission: {written}");
    Ok(())
}

/// The whole stack's pipeline under its roles: every call allowed, and each function's calls
/// checked (counted by role and action).
#[tokio::test]
async fn every_function_acts_under_its_role_and_every_call_is_checked() -> Result<()> {
    let Local { sdk, stack, client, .. } = local(&[]).await?;
    let issues = stack.table("IssuesTable")?.name.clone();
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), |_, i| i)?;
    let now = crate::support::pipeline::now();
    for id in 0..5 {
        put(&client, &issues, &issue(id, &json!({"f1": id}))).await?;
    }
    let mut expired = issue(9, &json!({}));
    expired["expires_at"] = json!(now - 10);
    put(&client, &issues, &expired).await?;
    pipeline.settle().await?;
    let report = stack.ensure_permitted(&sdk).await?;
    let calls =
        |role: &str, action: &str| report.calls.get(role).and_then(|a| a.get(action)).copied().unwrap_or(0);
    ensure!(calls("IndexerRole", "dynamodb:PutItem") >= 5, "the indexer's puts: {:?}", report.calls);
    ensure!(calls("ArchiverRole", "s3:PutObject") >= 1, "the archiver's object: {:?}", report.calls);
    Ok(())
}

/// S3 answers a missing key with 404 `NoSuchKey` only to a caller that may list the bucket, and
/// with 403 `AccessDenied` to any other (S3 API reference, `GetObject`, "Permissions"): the
/// verifier's first read of a segment's state is of a key that does not exist yet, so its role
/// must be able to list the verify bucket.
#[tokio::test]
async fn a_missing_key_is_not_found_only_for_a_role_that_may_list_the_bucket() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[("IndexVerifySchedule", "rate(1 day)")]).await?;
    let bucket = stack.bucket("VerifyBucket")?.name.clone();
    let verifier = stack.roles.get("VerifierRole").context("the verifier's role")?;
    let as_verifier = s3_client(&iam::as_role(&sdk, &verifier.key));
    let missing = as_verifier.get_object().bucket(&bucket).key("verify/run-1/segment-0.json").send().await;
    let code = missing.err().and_then(|e| e.code().map(str::to_owned));
    ensure!(code.as_deref() == Some("NoSuchKey"), "the verifier reads a missing state as absent: {code:?}");
    // Without its ListBucket statement (the template before issue 63), the same read is refused.
    let without = stack_from(
        &without_statement("VerifierRole", "ListJobState")?,
        &[("IndexVerifySchedule", "rate(1 day)")],
    )
    .await?;
    let bucket = without.bucket("VerifyBucket")?.name.clone();
    let verifier = without.roles.get("VerifierRole").context("the verifier's role")?;
    let refused = s3_client(&iam::as_role(&sdk, &verifier.key))
        .get_object()
        .bucket(&bucket)
        .key("verify/run-1/segment-0.json")
        .send()
        .await;
    let code = refused.err().and_then(|e| e.code().map(str::to_owned));
    ensure!(
        code.as_deref() == Some("AccessDenied"),
        "a role that may not list the bucket is refused: {code:?}"
    );
    let Err(StackError::Denied(denials)) = without.ensure_permitted(&sdk).await else {
        bail!("the refusal was not reported");
    };
    ensure!(
        denials.iter().any(|d| d.role == "VerifierRole" && d.action == "s3:ListBucket"),
        "the refusal names the missing s3:ListBucket: {denials:?}"
    );
    Ok(())
}

/// The condition keys the template scopes writes with are evaluated from the request: the
/// aggregator's role may write a counter's total item (`dynamodb:LeadingKeys` like
/// `COUNTER#*#TOTAL`), never one of its shards, which belong to the application.
#[tokio::test]
async fn the_aggregator_may_write_totals_and_never_shards() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[]).await?;
    let counters = stack.table("CounterTable")?.name.clone();
    let aggregator = stack.roles.get("AggregatorRole").context("the aggregator's role")?;
    let client = aws_sdk_dynamodb::Client::new(&iam::as_role(&sdk, &aggregator.key));
    put(&client, &counters, &json!({"pk": "COUNTER#views#TOTAL", "total": 1})).await?;
    let shard = put(&client, &counters, &json!({"pk": "COUNTER#views#SHARD#3", "count": 1})).await;
    ensure!(
        matches!(&shard, Err(e) if e.to_string().contains("AccessDeniedException") && e.to_string().contains("dynamodb:PutItem")),
        "a shard is refused: {shard:?}"
    );
    let Err(StackError::Denied(denials)) = stack.ensure_permitted(&sdk).await else {
        bail!("the refusal was not reported");
    };
    ensure!(denials.len() == 1 && denials[0].role == "AggregatorRole", "{denials:?}");
    Ok(())
}
