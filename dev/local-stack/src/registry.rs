//! registry: the local stack registered with the emulator's CloudFormation and Lambda, so that
//! what reads a deployed stack by its name (`operations::stack::Deployed`, `sidestream … --stack`)
//! reads the local one as it would read one on AWS.
//!
//! CloudFormation on the emulator gets a stack of the same name whose outputs are the template's
//! own, resolved with the stack's parameters and names (those whose `Condition` holds; the few
//! that name what the local stack does not emulate, such as the grid API's URL, are left out),
//! and whose resources are the stream functions, each a Lambda function of its deployed name
//! with its resolved environment (less the `AWS_` variables the local stack sets, as Lambda's
//! own are not in a function's configuration). Their code is a placeholder that is never invoked: the local
//! stack runs the functions itself. Their role is one the registration makes; the roles the
//! functions act under are the template's, in the emulator's IAM check ([`crate::iam`]).

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use aws_sdk_cloudformation::error::DisplayErrorContext;
use aws_sdk_cloudformation::operation::create_stack::CreateStackError;
use serde_json::{Value, json};

use crate::template::Resolver;
use crate::{Stack, StackError};

/// The template's outputs, resolved: those whose condition holds and whose value the local
/// stack can name. A stream ARN is the emulator's (the resolver names a placeholder).
pub(crate) fn outputs(resolver: &Resolver<'_>, root: &Value, stack: &Stack) -> BTreeMap<String, String> {
    let mut outputs = BTreeMap::new();
    for (key, output) in root["Outputs"].as_object().into_iter().flatten() {
        let holds = output["Condition"].as_str().is_none_or(|c| resolver.condition(c).unwrap_or(false));
        if !holds {
            continue;
        }
        let at = format!("Outputs/{key}");
        match resolver.resolve(&output["Value"], &at) {
            Ok(Some(Value::String(value))) => {
                outputs.insert(key.clone(), emulated_stream(&value, stack));
            }
            Ok(Some(other)) => {
                outputs.insert(key.clone(), other.to_string());
            }
            Ok(None) => {}
            Err(e) => {
                let reason = e.to_string();
                tracing::debug!(output = %key, %reason, "an output the local stack does not register");
            }
        }
    }
    outputs
}

/// `value`, or, when it is a stream ARN of one of `stack`'s tables, that table's stream on the
/// emulator.
fn emulated_stream(value: &str, stack: &Stack) -> String {
    let table = value.contains(":dynamodb:").then(|| value.split('/').nth(1)).flatten();
    match table.and_then(|t| stack.streams.get(t)) {
        Some(arn) if value.contains("/stream/") => arn.clone(),
        _ => value.to_owned(),
    }
}

/// Registers `stack` with the emulator's CloudFormation: `outputs`, and its functions.
pub(crate) async fn register(
    sdk: &SdkConfig,
    stack: &Stack,
    outputs: &BTreeMap<String, String>,
) -> Result<(), StackError> {
    let mut resources = serde_json::Map::new();
    resources.insert(
        "SidestreamLocalFunctionRole".into(),
        json!({"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]
        }}}),
    );
    for function in stack.functions.iter().filter(|f| !f.streams.is_empty()) {
        let variables: BTreeMap<&String, &String> =
            function.environment.iter().filter(|(k, _)| !k.starts_with("AWS_")).collect();
        resources.insert(
            function.logical_id.clone(),
            json!({"Type": "AWS::Lambda::Function", "Properties": {
                "FunctionName": crate::function_name(&stack.name, &function.logical_id),
                "Runtime": "provided.al2023",
                "Handler": "bootstrap",
                "Role": {"Fn::GetAtt": ["SidestreamLocalFunctionRole", "Arn"]},
                "Code": {"ZipFile": "the local stack runs this function itself"},
                "Environment": {"Variables": variables},
            }}),
        );
    }
    let outputs: serde_json::Map<String, Value> =
        outputs.iter().map(|(k, v)| (k.clone(), json!({"Value": v}))).collect();
    let template = json!({"Resources": resources, "Outputs": outputs}).to_string();
    let cfn = aws_sdk_cloudformation::Client::new(sdk);
    let failed = |e: &dyn std::fmt::Display| {
        StackError::Unusable(format!("registering {} with the emulator's CloudFormation: {e}", stack.name))
    };
    let created = cfn.create_stack().stack_name(&stack.name).template_body(&template).send().await;
    let Err(e) = created else { return Ok(()) };
    if !e.as_service_error().is_some_and(CreateStackError::is_already_exists_exception) {
        return Err(failed(&DisplayErrorContext(&e)));
    }
    // A stack deployed again under its name (an upgrade, a switch of source) is an update.
    match cfn.update_stack().stack_name(&stack.name).template_body(&template).send().await {
        Ok(_) => Ok(()),
        Err(e) if DisplayErrorContext(&e).to_string().contains("No updates are to be performed") => Ok(()),
        Err(e) => Err(failed(&DisplayErrorContext(&e))),
    }
}
