//! iam: every caller of the local stack acts under the role the template gives it, and the
//! emulator decides each of its calls as IAM would (`scripts/iam_gate.py`, docs/local.md).
//!
//! The stack registers each role of the template it creates with the emulator: an access key id
//! of its own, its ARN, and its identity policies as the template resolves them (its inline
//! `Policies` and the `AWS::IAM::ManagedPolicy` resources in its `ManagedPolicyArns`), with the
//! stack's bucket policies as resource policies. A function, a state machine's task or the grid
//! API then signs with its role's key ([`as_role`]); the emulator refuses, as AWS does, what the
//! role does not allow, and [`report`] names every refusal, so that a run that made one fails
//! ([`Stack::ensure_permitted`](crate::Stack::ensure_permitted)).

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use serde_json::{Value, json};

use crate::template::{Resolver, Template, TemplateError};
use crate::{StackError, states};

/// A role of the template, as the stack registers it.
#[derive(Debug, Clone, PartialEq)]
pub struct Role {
    /// Its logical id.
    pub logical_id: String,
    /// Its ARN, as CloudFormation names a role without `RoleName`.
    pub arn: String,
    /// The access key id its callers sign with.
    pub key: String,
    /// Its identity policies: (name, document), resolved.
    pub policies: Vec<(String, Value)>,
}

/// What the emulator's IAM check saw of a stack's roles.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Requests signed with the roles' keys, each checked.
    pub checked: u64,
    /// Every call refused.
    pub denials: Vec<Denial>,
    /// The calls decided, by role and action: how many.
    pub calls: BTreeMap<String, BTreeMap<String, u64>>,
}

/// A call the emulator refused, as AWS would have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The role's logical id.
    pub role: String,
    /// The IAM action refused (`dynamodb:PutItem`).
    pub action: String,
    /// The resource it was refused on.
    pub resource: String,
    /// Why: which decision, and what the evaluator said.
    pub reason: String,
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} may not {} on {}: {}", self.role, self.action, self.resource, self.reason)
    }
}

/// How often a running pipeline asks the emulators whether a function's call was refused.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// The roles a pipeline's functions act under, watched while it runs: a call refused to one of
/// them stops the run ([`Watch::refused`]). A refusal is a systemic failure, which every retry
/// of the batch would meet alike: on AWS the mapping would retry it until its records expire,
/// with the function's alarms saying why; locally the run stops and says it.
#[derive(Clone)]
pub struct Watch {
    sdk: SdkConfig,
    roles: BTreeMap<String, Role>,
    /// The functions acting under each watched role (by its logical id), by their deployed names.
    functions: BTreeMap<String, Vec<String>>,
}

impl Watch {
    /// A watch of `roles`, the functions acting under each named by `functions`.
    pub fn new(
        sdk: &SdkConfig,
        roles: BTreeMap<String, Role>,
        functions: BTreeMap<String, Vec<String>>,
    ) -> Watch {
        Watch { sdk: sdk.clone(), roles, functions }
    }

    /// Completes with the first refusal the emulators report for a watched role, asking every
    /// two seconds; never, while none is.
    pub async fn refused(&self) -> crate::replayer::ReplayError {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            match report(&self.sdk, &self.roles).await {
                Ok(report) => {
                    if let Some(denial) = report.denials.into_iter().next() {
                        let function = self
                            .functions
                            .get(&denial.role)
                            .map_or_else(|| "a function".to_owned(), |names| names.join(" and "));
                        return crate::replayer::ReplayError::Refused { function, denial };
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot ask the emulator's IAM check for refused calls"),
            }
        }
    }
}

/// The access key id a role's callers sign with: derived from the stack, its Region and the
/// role, so that two stacks on one emulator never share one.
pub fn access_key(stack: &str, region: &str, role: &str) -> String {
    let hash = crate::replayer::faults::hash(format!("{stack}/{region}/{role}").as_bytes());
    format!("AKIALOCAL{hash:016X}")
}

/// The secret access key of every role's key (the emulator checks no signature).
pub const ROLE_SECRET: &str = "local-role-secret";

/// `sdk`, signing with `key`'s credentials: a caller acting under that role.
pub fn as_role(sdk: &SdkConfig, key: &str) -> SdkConfig {
    let credentials = Credentials::new(key, ROLE_SECRET, None, None, "local-stack-role");
    sdk.to_builder().credentials_provider(SharedCredentialsProvider::new(credentials)).build()
}

/// `sdk` as `function`'s caller: under its role when the template gives it one.
pub fn as_function(sdk: &SdkConfig, function: &crate::template::Function) -> SdkConfig {
    function.access_key.as_deref().map_or_else(|| sdk.clone(), |key| as_role(sdk, key))
}

/// The logical id of the role a resource's `Role` property names (`!GetAtt X.Arn`).
pub(crate) fn role_of(template: &Template, logical_id: &str) -> Option<String> {
    let role = template.root().pointer(&format!("/Resources/{logical_id}/Properties/Role"))?;
    let get_att = role.get("Fn::GetAtt")?;
    let target = match get_att {
        Value::Array(parts) => parts.first()?.as_str()?,
        Value::String(text) => text.split_once('.')?.0,
        _ => return None,
    };
    Some(target.to_owned())
}

/// Resource policies (a bucket's policy), by the resource's ARN.
pub type ResourcePolicies = BTreeMap<String, Value>;

/// The role of each of `resources` (state machines, by logical id) that names one.
pub(crate) fn roles_of<'a>(
    template: &Template,
    resources: impl Iterator<Item = &'a String>,
) -> BTreeMap<String, String> {
    resources.filter_map(|id| Some((id.clone(), role_of(template, id)?))).collect()
}

/// The template's roles that exist with these parameters, by logical id, registered with the
/// emulators' IAM check with the stack's resource policies.
pub(crate) async fn registered(
    sdk: &SdkConfig,
    resolver: &Resolver<'_>,
    path: &str,
    (stack, region, account): (&str, &str, &str),
) -> Result<BTreeMap<String, Role>, StackError> {
    let in_template = |cause| StackError::Template { path: path.to_owned(), cause };
    let (roles, resource_policies) = roles(resolver, stack, region, account).map_err(in_template)?;
    register(sdk, &roles, &resource_policies).await?;
    Ok(roles)
}

/// The template's roles that exist with these parameters, by logical id, and the stack's
/// resource policies (its buckets' policies).
fn roles(
    resolver: &Resolver<'_>,
    stack: &str,
    region: &str,
    account: &str,
) -> Result<(BTreeMap<String, Role>, ResourcePolicies), TemplateError> {
    let mut managed = BTreeMap::new();
    for (id, properties) in resolver.resolved("AWS::IAM::ManagedPolicy")? {
        let reference = resolver.resolve(&json!({ "Ref": id }), id)?.unwrap_or_default();
        managed.insert(
            reference.as_str().unwrap_or_default().to_owned(),
            (id, properties["PolicyDocument"].clone()),
        );
    }
    let mut roles = BTreeMap::new();
    for (id, properties) in resolver.resolved("AWS::IAM::Role")? {
        let mut policies = Vec::new();
        for policy in properties["Policies"].as_array().into_iter().flatten() {
            let name = policy["PolicyName"].as_str().unwrap_or(id).to_owned();
            policies.push((name, policy["PolicyDocument"].clone()));
        }
        for arn in properties["ManagedPolicyArns"].as_array().into_iter().flatten() {
            let arn = arn.as_str().unwrap_or_default();
            let (policy, document) = managed.get(arn).ok_or_else(|| {
                TemplateError::invalid(
                    &format!("Resources/{id}/Properties/ManagedPolicyArns"),
                    format!("{arn} is not a managed policy of this template: the local stack knows no other's document"),
                )
            })?;
            policies.push(((*policy).to_owned(), document.clone()));
        }
        let name = crate::resource_name(stack, id);
        roles.insert(
            id.to_owned(),
            Role {
                logical_id: id.to_owned(),
                arn: format!("arn:aws:iam::{account}:role/{name}"),
                key: access_key(stack, region, id),
                policies,
            },
        );
    }
    let mut resource_policies = BTreeMap::new();
    for (_, properties) in resolver.resolved("AWS::S3::BucketPolicy")? {
        let bucket = properties["Bucket"].as_str().unwrap_or_default();
        resource_policies.insert(format!("arn:aws:s3:::{bucket}"), properties["PolicyDocument"].clone());
    }
    Ok((roles, resource_policies))
}

/// Registers `roles` and `resource_policies` with the emulator's IAM check.
async fn register(
    sdk: &SdkConfig,
    roles: &BTreeMap<String, Role>,
    resource_policies: &ResourcePolicies,
) -> Result<u64, StackError> {
    let registered: serde_json::Map<String, Value> = roles
        .values()
        .map(|role| {
            let session = role.arn.replace(":iam::", ":sts::").replace(":role/", ":assumed-role/");
            let policies: Vec<Value> =
                role.policies.iter().map(|(name, policy)| json!({"name": name, "policy": policy})).collect();
            (
                role.key.clone(),
                json!({"Arn": role.arn, "Name": role.logical_id, "Principal": format!("{session}/local"), "Policies": policies}),
            )
        })
        .collect();
    let body = json!({"Roles": registered, "ResourcePolicies": resource_policies});
    let mut registered = 0;
    for endpoint in emulators(sdk)? {
        let answer = crate::control_at(&endpoint, "PutRoles", &body).await?;
        registered = answer["Registered"].as_u64().ok_or_else(|| {
            StackError::Unusable(format!("the emulator at {endpoint} did not register the roles: {answer}"))
        })?;
    }
    Ok(registered)
}

/// The emulators a stack's callers may reach: each of `SIDESTREAM_MOTO_ENDPOINTS` (`scripts/moto`
/// with several motos, among which a chaos run splits its tables), or else `sdk`'s endpoint.
fn emulators(sdk: &SdkConfig) -> Result<Vec<String>, StackError> {
    let listed: Vec<String> = std::env::var("SIDESTREAM_MOTO_ENDPOINTS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    if !listed.is_empty() {
        return Ok(listed);
    }
    sdk.endpoint_url().map(|e| vec![e.to_owned()]).ok_or_else(|| {
        StackError::Unusable("no emulator endpoint to register the stack's roles with".to_owned())
    })
}

/// What the emulators' IAM check saw of `roles` since they were registered, over every
/// emulator the stack's callers may reach.
pub async fn report(sdk: &SdkConfig, roles: &BTreeMap<String, Role>) -> Result<Report, StackError> {
    let keys: Vec<&str> = roles.values().map(|r| r.key.as_str()).collect();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut report = Report::default();
    for endpoint in emulators(sdk)? {
        let answer = crate::control_at(&endpoint, "IamReport", &json!({ "Keys": keys })).await?;
        report.checked += answer["Checked"].as_u64().unwrap_or(0);
        report.denials.extend(answer["Denials"].as_array().into_iter().flatten().map(|d| Denial {
            role: text(&d["role"]),
            action: text(&d["action"]),
            resource: text(&d["resource"]),
            reason: text(&d["reason"]),
        }));
        for (role, actions) in answer["Calls"].as_object().into_iter().flatten() {
            let counts = report.calls.entry(role.clone()).or_default();
            for (action, n) in actions.as_object().into_iter().flatten() {
                *counts.entry(action.clone()).or_default() += n.as_u64().unwrap_or(0);
            }
        }
    }
    Ok(report)
}

/// The calls Lambda makes under its functions' roles, decided once per function and mapping: the
/// local stack writes a function's logs to a file, and the local replayer reads each stream once
/// for all the mappings on it (with the emulator's own key), so neither can be signed by each.
/// Each function's role must let Lambda write its logs (`logs:CreateLogStream` and
/// `logs:PutLogEvents` in its `LoggingConfig.LogGroup`; `logs:CreateLogGroup` too for the default
/// `/aws/lambda/<name>`); each mapping's, read its stream (`dynamodb:DescribeStream`,
/// `GetShardIterator`, `GetRecords` on the stream, `ListStreams`; or Kinesis's five) and write a
/// range it gives up to its on-failure destination (`s3:PutObject` under `aws/lambda/`, or
/// `sqs:SendMessage`): refusals are among [`report`]'s.
pub(crate) async fn check_mappings(sdk: &SdkConfig, stack: &crate::Stack) -> Result<(), StackError> {
    for function in &stack.functions {
        let Some(key) = function.access_key.as_deref() else { continue };
        let name = stack.function_arn(function).rsplit(':').next().unwrap_or_default().to_owned();
        let group = function.log_group.clone().unwrap_or_else(|| format!("/aws/lambda/{name}"));
        let group_arn = format!("arn:aws:logs:{}:{}:log-group:{group}", stack.region, crate::ACCOUNT);
        // A stream as Lambda names one: the day, the version, the instance.
        let stream = format!("{group_arn}:log-stream:2026/01/01/[$LATEST]0123456789abcdef");
        let mut logs = vec![("logs:CreateLogStream", stream.clone()), ("logs:PutLogEvents", stream)];
        if function.log_group.is_none() {
            logs.push(("logs:CreateLogGroup", format!("{group_arn}:*")));
        }
        for (action, resource) in logs {
            let _ = authorize(sdk, key, action, &resource).await?;
        }
        for source in function.streams.iter().filter(|s| s.enabled) {
            let stream = source.stream.as_str();
            let reads: &[&str] = if stream.contains(":kinesis:") {
                &[
                    "kinesis:DescribeStream",
                    "kinesis:DescribeStreamSummary",
                    "kinesis:GetRecords",
                    "kinesis:GetShardIterator",
                    "kinesis:ListShards",
                ]
            } else {
                &["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"]
            };
            let mut calls: Vec<(&str, String)> = reads.iter().map(|a| (*a, stream.to_owned())).collect();
            if !stream.contains(":kinesis:") {
                calls.push(("dynamodb:ListStreams", "*".to_owned()));
            }
            let mapping =
                crate::mapping_uuid(&stack.name, &format!("{}{}", function.logical_id, source.name));
            match source.on_failure.as_deref() {
                Some(bucket) if bucket.starts_with("arn:aws:s3:::") => {
                    calls.push((
                        "s3:PutObject",
                        format!("{bucket}/aws/lambda/{mapping}/shardId-00000001/range.json"),
                    ));
                }
                Some(queue) if queue.contains(":sqs:") => calls.push(("sqs:SendMessage", queue.to_owned())),
                _ => {}
            }
            for (action, resource) in calls {
                // A refusal is kept by the emulator, and reported with the run's.
                let _ = authorize(sdk, key, action, &resource).await?;
            }
        }
    }
    Ok(())
}

/// IAM's decision on one call made under the role whose key is `key`, outside the emulator (a
/// state machine's invocation of a function, the deployment hook's calls): `Err` with why, if
/// the role may not make it. The decision is counted in [`report`], a refusal among its denials.
pub async fn authorize(
    sdk: &SdkConfig,
    key: &str,
    action: &str,
    resource: &str,
) -> Result<Result<(), String>, StackError> {
    let region = sdk.region().map_or("us-east-1", |r| r.as_ref());
    let body = json!({"Key": key, "Action": action, "Resource": resource, "Region": region});
    let answer = crate::control_answer(sdk, "Authorize", &body).await?;
    Ok(if answer["Allowed"].as_bool() == Some(true) { Ok(()) } else { Err(text_of(&answer["Reason"])) })
}

/// `invoke` as a state machine's task invokes it: each invocation first authorized as
/// `lambda:InvokeFunction` on the task's function under the state machine's role (`key`),
/// failing as Step Functions fails a task Lambda refuses (`Lambda.AWSLambdaException`).
pub fn invoking_as(sdk: &SdkConfig, key: &str, invoke: states::TaskInvoker) -> states::TaskInvoker {
    let (sdk, key) = (sdk.clone(), key.to_owned());
    std::sync::Arc::new(move |function: String, payload: Value| {
        let (sdk, key, invoke) = (sdk.clone(), key.clone(), std::sync::Arc::clone(&invoke));
        Box::pin(async move {
            authorize(&sdk, &key, "lambda:InvokeFunction", &function)
                .await
                .map_err(|e| ("Lambda.SdkClientException".to_owned(), e.to_string()))?
                .map_err(|why| ("Lambda.AWSLambdaException".to_owned(), why))?;
            invoke(function, payload).await
        })
    })
}

fn text_of(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}
