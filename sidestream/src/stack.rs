//! `--stack NAME`: what a deployed stack says about itself (`operations::stack::Deployed`: its
//! outputs, its stream functions' names and environments), read once and resolved under the
//! flags in one place: a flag given wins, then the stack, then this process's environment.

use std::collections::BTreeMap;

use operations::stack::Deployed;

/// Reads the stack `name` from CloudFormation and Lambda.
pub(crate) async fn read(sdk: &aws_config::SdkConfig, name: &str) -> anyhow::Result<Deployed> {
    let cfn = aws_sdk_cloudformation::Client::new(sdk);
    let lambda = aws_sdk_lambda::Client::new(sdk);
    Ok(Deployed::read(&cfn, &lambda, name).await?)
}

/// Reads the stack `name`, if one is given, with its own runtime: for the commands that resolve
/// their flags before they start theirs.
pub(crate) fn read_blocking(name: Option<&str>) -> anyhow::Result<Option<Deployed>> {
    let Some(name) = name else { return Ok(None) };
    crate::runtime()?.block_on(async { read(&crate::sdk().await?, name).await.map(Some) })
}

/// The configuration the stream function `binary` has in `stack` (none without a stack), to be
/// read before this process's environment.
pub(crate) fn environment(
    stack: Option<&Deployed>,
    binary: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let Some(stack) = stack else { return Ok(BTreeMap::new()) };
    stack.environment_of(binary).cloned().ok_or_else(|| {
        anyhow::anyhow!(
            "stack {}: no output names the {binary} function (its outputs: {})",
            stack.name,
            stack.outputs.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

/// A lookup of configuration: `first`, then this process's environment.
pub(crate) fn layered(first: &BTreeMap<String, String>) -> impl Fn(&str) -> Option<String> + '_ {
    move |name| first.get(name).cloned().or_else(|| std::env::var(name).ok())
}

/// `given`, or else the stack's `what` (`from`), naming both when neither is there.
pub(crate) fn or_stack(
    given: Option<String>,
    stack: Option<&Deployed>,
    what: &str,
    from: impl FnOnce(&Deployed) -> Option<String>,
) -> anyhow::Result<String> {
    if let Some(given) = given {
        return Ok(given);
    }
    let stack = stack.ok_or_else(|| anyhow::anyhow!("give {what}, or --stack"))?;
    from(stack)
        .ok_or_else(|| anyhow::anyhow!("stack {}: its outputs do not name {what}; give it", stack.name))
}
