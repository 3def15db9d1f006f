//! Reads Sidestream's SAM template (`template.yaml`) the way deployment would see it.
//!
//! - [`Template::parse`] reads YAML with CloudFormation's short tags into canonical JSON;
//!   [`Template::parse_with`] also inlines nested stacks whose templates are local files (their
//!   resources named by the nested stack's id and their own), as CloudFormation creates them.
//! - [`Template::resolver`] resolves intrinsics (`Ref`, `Fn::Sub`, `Fn::If`, `Fn::GetAtt`,
//!   `Fn::Select`, `Fn::Split`, `Fn::Join`) and conditions for one set of parameter values, with
//!   resource names the caller picks; [`Resolver::broken_rules`] checks the template's `Rules`
//!   for those values, as CloudFormation does before it deploys.
//! - [`Template::functions`] gives each function's build settings, environment and DynamoDB
//!   stream sources, with SAM's `Globals` applied.
//! - [`Template::tables`] and [`Template::buckets`] give the storage it declares, for creating
//!   the same tables and buckets on an emulator.
//! - [`check`] reports what cfn-lint accepts but Lambda gets wrong: `FunctionResponseTypes`,
//!   `StartingPosition`, and filter patterns ([`Pattern`]) that are not JSON, use unknown
//!   operators, or match a DynamoDB attribute above its type (which never matches).
//!
//! The crate does no I/O; callers read the file.

mod check;
mod eval;
mod load;
mod model;
mod nested;
mod resources;

pub use check::check;
pub use eval::{Names, Resolver};
pub use model::{Function, StreamSource, Template};
pub use resources::{Bucket, GlobalIndex, KeyAttribute, Table};
pub use stream_runtime::filter::{Comparison, Matcher, Node, Pattern, PatternError};

/// For the module's tests: `text` parsed and resolved for `parameters` in a stack named `stack`
/// in eu-west-1 (each resource named `stack-<logical id, lowercase>`), then read by `read`.
#[cfg(test)]
fn resolved<T>(
    text: &str,
    parameters: &[(&str, &str)],
    read: impl FnOnce(&Template, &Resolver<'_>) -> Result<T, TemplateError>,
) -> Result<T, TemplateError> {
    let template = Template::parse(text)?;
    let name = |id: &str| format!("stack-{}", id.to_lowercase());
    let names = Names {
        region: "eu-west-1".into(),
        account: "123456789012".into(),
        stack: "stack".into(),
        resource: &name,
    };
    let parameters: std::collections::BTreeMap<String, String> =
        parameters.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    read(&template, &template.resolver(&parameters, names))
}

/// A template that cannot be read or resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// Not YAML.
    #[error("template is not valid YAML: {0}")]
    Yaml(String),
    /// A part of the template has the wrong shape or cannot be resolved.
    #[error("template {at}: {reason}")]
    Invalid {
        /// Where, as a path like `Resources/IndexerFunction/Properties`.
        at: String,
        /// What is wrong.
        reason: String,
    },
}

impl TemplateError {
    pub(crate) fn invalid(at: &str, reason: impl Into<String>) -> TemplateError {
        TemplateError::Invalid { at: at.trim_start_matches('/').to_owned(), reason: reason.into() }
    }
}
