//! The parts of a SAM template Sidestream reads: its functions, their environment and their
//! DynamoDB stream event sources, with SAM's `Globals` applied and intrinsics resolved.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::template::eval::{Names, Resolver};
use crate::template::{TemplateError, load, nested};

/// The runtimes of the functions this workspace builds (`provided.al2023`, …): a bootstrap.
const CUSTOM_RUNTIME: &str = "provided";

/// A parsed template, in canonical JSON (long-form intrinsics).
#[derive(Debug, Clone)]
pub struct Template {
    root: Value,
}

/// One `AWS::Serverless::Function`, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// The logical id.
    pub logical_id: String,
    /// `Metadata.BuildMethod`.
    pub build_method: Option<String>,
    /// `Metadata.BuildProperties.Binary`: the cargo binary this function runs.
    pub binary: Option<String>,
    /// `Runtime`.
    pub runtime: Option<String>,
    /// `Handler`.
    pub handler: Option<String>,
    /// `Architectures`.
    pub architectures: Vec<String>,
    /// `LoggingConfig.LogFormat`.
    pub log_format: Option<String>,
    /// `LoggingConfig.LogGroup`: the log group Lambda writes the function's logs to, under its
    /// role (`/aws/lambda/<name>` when unset).
    pub log_group: Option<String>,
    /// `Timeout`, in seconds.
    pub timeout: Option<i64>,
    /// `MemorySize`, in MB (128 when unset, as Lambda's default).
    pub memory_size: i64,
    /// `Environment.Variables`.
    pub environment: BTreeMap<String, String>,
    /// The event sources of type `DynamoDB`.
    pub streams: Vec<StreamSource>,
    /// The logical id of its role (`Role: !GetAtt <Role>.Arn`).
    pub role: Option<String>,
    /// The access key id it signs with, under its role: set by the stack that registers the
    /// role with the emulator's IAM check (`crate::iam`).
    pub access_key: Option<String>,
}

/// One DynamoDB stream event source of a function.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSource {
    /// The event's name under `Events`.
    pub name: String,
    /// `Stream`: the stream ARN.
    pub stream: String,
    /// `StartingPosition`.
    pub starting_position: Option<String>,
    /// `BatchSize`.
    pub batch_size: Option<i64>,
    /// `MaximumBatchingWindowInSeconds`.
    pub batching_window: Option<i64>,
    /// `FunctionResponseTypes`.
    pub function_response_types: Vec<String>,
    /// `BisectBatchOnFunctionError`.
    pub bisect: Option<bool>,
    /// `MaximumRetryAttempts`.
    pub maximum_retry_attempts: Option<i64>,
    /// `MaximumRecordAgeInSeconds`.
    pub maximum_record_age: Option<i64>,
    /// `ParallelizationFactor`: concurrent batches per shard.
    pub parallelization_factor: Option<i64>,
    /// `DestinationConfig.OnFailure.Destination`.
    pub on_failure: Option<String>,
    /// `FilterCriteria.Filters[].Pattern`, as written (JSON text).
    pub filters: Vec<String>,
    /// `Enabled` (true unless the template says `false`): a disabled mapping polls nothing. An
    /// operator disables a deployed one with `aws lambda update-event-source-mapping
    /// --no-enabled`; tests do it by setting this.
    pub enabled: bool,
}

impl Template {
    /// Parses a template (YAML or JSON).
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let root = load::parse(text)?;
        if !root.get("Resources").is_some_and(Value::is_object) {
            return Err(TemplateError::invalid("Resources", "the template has no Resources"));
        }
        Ok(Template { root })
    }

    /// Parses a template and inlines its nested stacks whose templates are local files
    /// ([`Template::nested`]): `read` gives a location's text (the caller reads the file,
    /// relative to the parent's folder). One level: a nested template's own nested stacks are
    /// refused.
    pub fn parse_with(
        text: &str,
        read: &mut dyn FnMut(&str) -> Result<String, String>,
    ) -> Result<Template, TemplateError> {
        let mut template = Template::parse(text)?;
        for (id, location) in nested::locations(&template.root) {
            let at = format!("Resources/{id}");
            let child_text = read(&location)
                .map_err(|e| TemplateError::invalid(&at, format!("cannot read {location}: {e}")))?;
            let child = Template::parse(&child_text)?;
            if !nested::locations(&child.root).is_empty() {
                return Err(TemplateError::invalid(&at, format!("{location} nests stacks itself")));
            }
            nested::inline(&mut template.root, &id, &child.root)?;
        }
        Ok(template)
    }

    /// The nested stacks whose templates are local files: (logical id, location).
    pub fn nested(&self) -> Vec<(String, String)> {
        nested::locations(&self.root)
    }

    /// The template as canonical JSON.
    pub fn root(&self) -> &Value {
        &self.root
    }

    /// A resolver for these parameter values (the rest take their defaults) and names.
    pub fn resolver<'a>(&'a self, parameters: &BTreeMap<String, String>, names: Names<'a>) -> Resolver<'a> {
        Resolver::new(&self.root, parameters, names)
    }

    /// Logical ids of the resources of a type, in template order.
    pub fn resources_of_type(&self, kind: &str) -> Vec<&str> {
        self.resources()
            .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some(kind))
            .map(|(id, _)| id)
            .collect()
    }

    fn resources(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.root
            .get("Resources")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(id, r)| (id.as_str(), r))
    }

    /// Every serverless function this workspace builds (an OS-only runtime, `provided.*`, which
    /// runs a bootstrap) that exists for these parameters, `Globals` applied. Others (the
    /// deployment hook, in Python) are not the project's functions to run or configure.
    pub fn functions(&self, resolver: &Resolver<'_>) -> Result<Vec<Function>, TemplateError> {
        let globals = self.root.pointer("/Globals/Function").cloned().unwrap_or(Value::Object(Map::new()));
        let mut functions = Vec::new();
        for id in resolver.existing("AWS::Serverless::Function")? {
            let at = format!("Resources/{id}");
            let resource = &self.root["Resources"][id];
            let mut properties = globals.clone();
            merge(&mut properties, resource.get("Properties").cloned().unwrap_or(Value::Null));
            let properties =
                resolver.resolve(&properties, &format!("{at}/Properties"))?.unwrap_or(Value::Null);
            let metadata = resolver
                .resolve(resource.get("Metadata").unwrap_or(&Value::Null), &format!("{at}/Metadata"))?;
            let metadata = metadata.unwrap_or(Value::Null);
            if properties
                .get("Runtime")
                .and_then(Value::as_str)
                .is_some_and(|r| !r.starts_with(CUSTOM_RUNTIME))
            {
                continue;
            }
            let text = |v: &Value, path: &str| v.pointer(path).map(scalar);
            let mut streams = Vec::new();
            for (name, event) in properties.get("Events").and_then(Value::as_object).into_iter().flatten() {
                if event.get("Type").and_then(Value::as_str) == Some("DynamoDB") {
                    streams.push(stream_source(
                        name,
                        event.get("Properties").unwrap_or(&Value::Null),
                        &format!("{at}/Events/{name}"),
                    )?);
                }
            }
            functions.push(Function {
                logical_id: id.to_owned(),
                build_method: text(&metadata, "/BuildMethod"),
                binary: text(&metadata, "/BuildProperties/Binary"),
                runtime: text(&properties, "/Runtime"),
                handler: text(&properties, "/Handler"),
                architectures: strings(properties.get("Architectures")),
                log_format: text(&properties, "/LoggingConfig/LogFormat"),
                log_group: text(&properties, "/LoggingConfig/LogGroup"),
                timeout: integer(&properties, "Timeout", &at)?,
                memory_size: integer(&properties, "MemorySize", &at)?.unwrap_or(128),
                environment: properties
                    .pointer("/Environment/Variables")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), scalar(v)))
                    .collect(),
                streams,
                role: crate::iam::role_of(self, id),
                access_key: None,
            });
        }
        Ok(functions)
    }
}

fn stream_source(name: &str, properties: &Value, at: &str) -> Result<StreamSource, TemplateError> {
    let integer = |key: &str| -> Result<Option<i64>, TemplateError> {
        match properties.get(key) {
            None => Ok(None),
            Some(v) => scalar(v).parse().map(Some).map_err(|_| {
                TemplateError::invalid(&format!("{at}/{key}"), format!("{v} is not an integer"))
            }),
        }
    };
    let mut filters = Vec::new();
    if let Some(criteria) = properties.get("FilterCriteria") {
        let list = criteria.get("Filters").and_then(Value::as_array).ok_or_else(|| {
            TemplateError::invalid(&format!("{at}/FilterCriteria"), "FilterCriteria needs a Filters list")
        })?;
        for (i, filter) in list.iter().enumerate() {
            let pattern = filter.get("Pattern").and_then(Value::as_str).ok_or_else(|| {
                TemplateError::invalid(
                    &format!("{at}/FilterCriteria/Filters/{i}"),
                    "a filter needs a Pattern string",
                )
            })?;
            filters.push(pattern.to_owned());
        }
    }
    Ok(StreamSource {
        name: name.to_owned(),
        stream: properties.get("Stream").map(scalar).unwrap_or_default(),
        starting_position: properties.get("StartingPosition").map(scalar),
        batch_size: integer("BatchSize")?,
        batching_window: integer("MaximumBatchingWindowInSeconds")?,
        function_response_types: strings(properties.get("FunctionResponseTypes")),
        bisect: properties.get("BisectBatchOnFunctionError").map(|v| scalar(v) == "true"),
        maximum_retry_attempts: integer("MaximumRetryAttempts")?,
        maximum_record_age: integer("MaximumRecordAgeInSeconds")?,
        parallelization_factor: integer("ParallelizationFactor")?,
        on_failure: properties.pointer("/DestinationConfig/OnFailure/Destination").map(scalar),
        filters,
        enabled: properties.get("Enabled").is_none_or(|v| scalar(v) != "false"),
    })
}

/// The integer property `name` of a function at `at`, if set.
fn integer(properties: &Value, name: &str, at: &str) -> Result<Option<i64>, TemplateError> {
    properties
        .get(name)
        .map(|v| {
            scalar(v).parse().map_err(|_| {
                TemplateError::invalid(&format!("{at}/Properties/{name}"), format!("{v} is not an integer"))
            })
        })
        .transpose()
}

/// SAM's `Globals` rule: maps merge, lists append, scalars are replaced.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (Value::Array(base), Value::Array(over)) => base.extend(over),
        // A property left empty (`Properties:` with nothing under it) keeps the global value.
        (_, Value::Null) => {}
        (base, over) => *base = over,
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value.and_then(Value::as_array).into_iter().flatten().map(scalar).collect()
}

#[cfg(test)]
mod tests;
