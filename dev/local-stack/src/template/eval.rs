//! Resolves intrinsic functions (`Ref`, `Fn::Sub`, `Fn::If`, …) and conditions to plain values,
//! for one set of parameter values, the way CloudFormation would at deploy time.
//!
//! Resources resolve to names the caller chooses ([`Names`]), since the real ones exist only in a
//! deployed stack; attributes (`Arn`, `StreamArn`, …) are built from those names.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::template::TemplateError;

/// The stack a template is resolved for: pseudo parameters and resource names.
pub struct Names<'a> {
    /// `AWS::Region`.
    pub region: String,
    /// `AWS::AccountId`.
    pub account: String,
    /// `AWS::StackName`.
    pub stack: String,
    /// The physical name of a resource, from its logical id.
    pub resource: &'a dyn Fn(&str) -> String,
}

/// The `CodeDeploy` application SAM generates for functions with a `DeploymentPreference`.
const DEPLOYMENT_APPLICATION: &str = "ServerlessDeploymentApplication";

/// Resolves values of one template for one set of parameter values.
pub struct Resolver<'a> {
    root: &'a Value,
    parameters: BTreeMap<String, String>,
    /// Parameters given that the template does not declare: refused
    /// ([`Resolver::refused_parameters`]).
    undeclared: Vec<String>,
    names: Names<'a>,
}

impl<'a> Resolver<'a> {
    /// A resolver over `root` (canonical JSON); every parameter takes its value from `overrides`
    /// or else its default. A parameter with neither is an error when it is referenced.
    pub(crate) fn new(
        root: &'a Value,
        overrides: &BTreeMap<String, String>,
        names: Names<'a>,
    ) -> Resolver<'a> {
        let mut parameters = BTreeMap::new();
        if let Some(declared) = root.get("Parameters").and_then(Value::as_object) {
            for (name, declaration) in declared {
                let default = declaration.get("Default").map(scalar_string);
                if let Some(value) = overrides.get(name).cloned().or(default) {
                    parameters.insert(name.clone(), value);
                }
            }
        }
        let declared = root.get("Parameters").and_then(Value::as_object);
        let undeclared = overrides
            .keys()
            .filter(|given| declared.is_none_or(|d| !d.contains_key(*given)))
            .cloned()
            .collect();
        Resolver { root, parameters, undeclared, names }
    }

    /// The value of a parameter.
    pub fn parameter(&self, name: &str) -> Option<&str> {
        self.parameters.get(name).map(String::as_str)
    }

    /// Whether a named condition holds.
    pub fn condition(&self, name: &str) -> Result<bool, TemplateError> {
        let at = format!("Conditions/{name}");
        let body = self
            .root
            .get("Conditions")
            .and_then(|c| c.get(name))
            .ok_or_else(|| TemplateError::invalid(&at, "no such condition"))?;
        self.truth(body, &at)
    }

    /// Whether a resource exists for these parameters (it has no `Condition`, or it holds; an
    /// event source mapping SAM generates exists with its function).
    pub fn resource_exists(&self, logical_id: &str) -> Result<bool, TemplateError> {
        if self.root.pointer(&format!("/Resources/{logical_id}")).is_none()
            && let Some(function) = self.generated_mapping(logical_id)
        {
            return self.resource_exists(function);
        }
        match self.root.pointer(&format!("/Resources/{logical_id}/Condition")) {
            None => Ok(true),
            Some(Value::String(condition)) => self.condition(condition),
            Some(_) => Err(TemplateError::invalid(
                &format!("Resources/{logical_id}/Condition"),
                "not a condition name",
            )),
        }
    }

    /// The logical ids of the resources of type `kind` that exist for these parameters, in
    /// template order.
    pub fn existing(&self, kind: &str) -> Result<Vec<&'a str>, TemplateError> {
        let mut ids = Vec::new();
        let resources = self.root.get("Resources").and_then(Value::as_object).into_iter().flatten();
        for (id, resource) in resources {
            if resource.get("Type").and_then(Value::as_str) == Some(kind) && self.resource_exists(id)? {
                ids.push(id.as_str());
            }
        }
        Ok(ids)
    }

    /// The resources of type `kind` that exist, each with its `Properties` resolved (an empty
    /// value where it has none), in template order.
    pub fn resolved(&self, kind: &str) -> Result<Vec<(&'a str, Value)>, TemplateError> {
        let mut found = Vec::new();
        for id in self.existing(kind)? {
            let at = format!("Resources/{id}/Properties");
            let properties =
                self.resolve(&self.root["Resources"][id]["Properties"], &at)?.unwrap_or_default();
            found.push((id, properties));
        }
        Ok(found)
    }

    /// The parameter values CloudFormation refuses before anything else: each against its
    /// declaration's `AllowedValues`, `AllowedPattern` (the whole value), `MinLength`,
    /// `MaxLength` and, for a `Number`, `MinValue` and `MaxValue`. Empty when every value is
    /// allowed.
    pub fn refused_parameters(&self) -> Vec<String> {
        let mut refused = Vec::new();
        let declared = self.root.get("Parameters").and_then(Value::as_object);
        for (name, declaration) in declared.into_iter().flatten() {
            let Some(value) = self.parameters.get(name) else { continue };
            let number =
                |key: &str| declaration.get(key).map(scalar_string).and_then(|n| n.parse::<f64>().ok());
            if let Some(allowed) = declaration.get("AllowedValues").and_then(Value::as_array)
                && !allowed.iter().any(|a| scalar_string(a) == *value)
            {
                refused.push(format!("{name}: {value:?} is not one of its AllowedValues"));
            }
            if let Some(pattern) = declaration.get("AllowedPattern").and_then(Value::as_str) {
                let problem = match regex_lite::Regex::new(&format!("^(?:{pattern})$")) {
                    Ok(re) if re.is_match(value) => None,
                    Ok(_) => Some(format!("{value:?} does not match its AllowedPattern {pattern}")),
                    Err(e) => Some(format!("its AllowedPattern {pattern} is not a pattern: {e}")),
                };
                refused.extend(problem.map(|problem| format!("{name}: {problem}")));
            }
            let length = |key: &str| declaration.get(key).and_then(Value::as_u64);
            let chars = u64::try_from(value.chars().count()).unwrap_or(u64::MAX);
            if length("MinLength").is_some_and(|min| chars < min) {
                refused.push(format!("{name}: {value:?} is shorter than its MinLength"));
            }
            if length("MaxLength").is_some_and(|max| chars > max) {
                refused.push(format!("{name}: {value:?} is longer than its MaxLength"));
            }
            if declaration.get("Type").and_then(Value::as_str) == Some("Number") {
                match value.parse::<f64>() {
                    Err(_) => refused.push(format!("{name}: {value:?} is not a number")),
                    Ok(n) => {
                        if let Some(min) = number("MinValue").filter(|min| n < *min) {
                            refused.push(format!("{name}: {value} is below its MinValue {min}"));
                        }
                        if let Some(max) = number("MaxValue").filter(|max| n > *max) {
                            refused.push(format!("{name}: {value} is above its MaxValue {max}"));
                        }
                    }
                }
            }
        }
        // CloudFormation refuses a parameter the template does not declare ("Parameters: [X] do
        // not exist in the template"); a misspelt one would otherwise pass for its default.
        let names: Vec<&str> = declared.into_iter().flatten().map(|(name, _)| name.as_str()).collect();
        for given in &self.undeclared {
            refused.push(match closest(given, &names) {
                Some(near) => {
                    format!("{given}: the template declares no such parameter; did you mean {near}?")
                }
                None => format!("{given}: the template declares no such parameter"),
            });
        }
        refused
    }

    /// The `Rules` these parameters break, as CloudFormation checks them before it changes
    /// anything: each failed assertion's rule and `AssertDescription`. Empty when every rule
    /// holds (a rule whose `RuleCondition` is false holds).
    pub fn broken_rules(&self) -> Result<Vec<String>, TemplateError> {
        let mut broken = Vec::new();
        let rules = self.root.get("Rules").and_then(Value::as_object);
        for (name, rule) in rules.into_iter().flatten() {
            let at = format!("Rules/{name}");
            if let Some(condition) = rule.get("RuleCondition")
                && !self.truth(condition, &format!("{at}/RuleCondition"))?
            {
                continue;
            }
            let assertions = rule.get("Assertions").and_then(Value::as_array);
            for (i, assertion) in assertions.into_iter().flatten().enumerate() {
                let at = format!("{at}/Assertions/{i}");
                let assert = assertion
                    .get("Assert")
                    .ok_or_else(|| TemplateError::invalid(&at, "an assertion without Assert"))?;
                if !self.truth(assert, &format!("{at}/Assert"))? {
                    let description = assertion.get("AssertDescription").map(scalar_string);
                    broken.push(format!("{name}: {}", description.unwrap_or_default().trim()));
                }
            }
        }
        Ok(broken)
    }

    /// `value` with every intrinsic function resolved; `None` for `AWS::NoValue`.
    pub fn resolve(&self, value: &Value, at: &str) -> Result<Option<Value>, TemplateError> {
        let Value::Object(object) = value else {
            return match value {
                Value::Array(items) => {
                    let mut out = Vec::with_capacity(items.len());
                    for (i, item) in items.iter().enumerate() {
                        out.extend(self.resolve(item, &format!("{at}/{i}"))?);
                    }
                    Ok(Some(Value::Array(out)))
                }
                other => Ok(Some(other.clone())),
            };
        };
        if let Some((key, arg)) = object.iter().next().filter(|_| object.len() == 1)
            && (key == "Ref" || key.starts_with("Fn::"))
        {
            return self.function(key, arg, &format!("{at}/{key}"));
        }
        let mut out = Map::new();
        for (key, item) in object {
            if let Some(v) = self.resolve(item, &format!("{at}/{key}"))? {
                out.insert(key.clone(), v);
            }
        }
        Ok(Some(Value::Object(out)))
    }

    /// `value` resolved to a string (numbers and booleans as CloudFormation prints them).
    pub fn string(&self, value: &Value, at: &str) -> Result<String, TemplateError> {
        match self.resolve(value, at)? {
            Some(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => Ok(scalar_string(&v)),
            Some(other) => Err(TemplateError::invalid(at, format!("expected a string, found {other}"))),
            None => Err(TemplateError::invalid(at, "expected a string, found AWS::NoValue")),
        }
    }

    fn function(&self, name: &str, arg: &Value, at: &str) -> Result<Option<Value>, TemplateError> {
        let string = |s: String| Ok(Some(Value::String(s)));
        match name {
            "Ref" => {
                let target = arg.as_str().ok_or_else(|| TemplateError::invalid(at, "Ref takes a name"))?;
                match self.reference(target, at)? {
                    Some(s) => string(s),
                    None => Ok(None),
                }
            }
            "Fn::GetAtt" => {
                let parts = self.list(arg, at)?;
                let [resource, attribute] = parts.as_slice() else {
                    return Err(TemplateError::invalid(at, "Fn::GetAtt takes [resource, attribute]"));
                };
                let (resource, attribute) = (scalar_string(resource), scalar_string(attribute));
                string(self.attribute(&resource, &attribute, at)?)
            }
            "Fn::If" => {
                let [condition, then, otherwise] = arg.as_array().map(Vec::as_slice).unwrap_or_default()
                else {
                    return Err(TemplateError::invalid(at, "Fn::If takes [condition, then, else]"));
                };
                let condition = condition
                    .as_str()
                    .ok_or_else(|| TemplateError::invalid(at, "Fn::If needs a condition name"))?;
                let branch = if self.condition(condition)? { then } else { otherwise };
                self.resolve(branch, at)
            }
            "Fn::Sub" => string(self.sub(arg, at)?),
            "Fn::Join" => {
                let parts = self.list(arg, at)?;
                let [Value::String(separator), Value::Array(items)] = parts.as_slice() else {
                    return Err(TemplateError::invalid(at, "Fn::Join takes [separator, [values]]"));
                };
                string(items.iter().map(scalar_string).collect::<Vec<_>>().join(separator))
            }
            "Fn::Split" => {
                let parts = self.list(arg, at)?;
                let [Value::String(separator), Value::String(text)] = parts.as_slice() else {
                    return Err(TemplateError::invalid(at, "Fn::Split takes [separator, string]"));
                };
                Ok(Some(text.split(separator.as_str()).map(Value::from).collect()))
            }
            "Fn::Select" => {
                let parts = self.list(arg, at)?;
                let [index, Value::Array(items)] = parts.as_slice() else {
                    return Err(TemplateError::invalid(at, "Fn::Select takes [index, [values]]"));
                };
                let i: usize = scalar_string(index).parse().map_err(|_| {
                    TemplateError::invalid(at, format!("Fn::Select index {index} is not a number"))
                })?;
                let item = items.get(i).ok_or_else(|| {
                    TemplateError::invalid(
                        at,
                        format!("Fn::Select index {i} is past the {} values", items.len()),
                    )
                })?;
                Ok(Some(item.clone()))
            }
            other => Err(TemplateError::invalid(at, format!("{other} is not supported here"))),
        }
    }

    /// The arguments of a function, each resolved.
    fn list(&self, arg: &Value, at: &str) -> Result<Vec<Value>, TemplateError> {
        match self.resolve(arg, at)? {
            Some(Value::Array(items)) => Ok(items),
            _ => Err(TemplateError::invalid(at, "expected a list of arguments")),
        }
    }

    /// `Ref` of a parameter, a pseudo parameter or a resource; `None` for `AWS::NoValue`.
    fn reference(&self, target: &str, at: &str) -> Result<Option<String>, TemplateError> {
        Ok(Some(match target {
            "AWS::NoValue" => return Ok(None),
            "AWS::Region" => self.names.region.clone(),
            "AWS::AccountId" => self.names.account.clone(),
            "AWS::StackName" => self.names.stack.clone(),
            "AWS::StackId" => stack_id(&self.names),
            "AWS::Partition" => "aws".to_owned(),
            "AWS::URLSuffix" => "amazonaws.com".to_owned(),
            _ => {
                if let Some(value) = self.parameters.get(target) {
                    value.clone()
                } else if self.root.pointer(&format!("/Parameters/{target}")).is_some() {
                    return Err(TemplateError::invalid(
                        at,
                        format!("parameter {target} has no value and no default"),
                    ));
                } else {
                    let kind = self.resource_type(target, at)?;
                    let name = self.physical_name(target, kind)?;
                    let (region, account) = (&self.names.region, &self.names.account);
                    match kind {
                        // A queue's Ref is its URL; a topic's and a state machine's, their ARN.
                        "AWS::SQS::Queue" => format!("https://sqs.{region}.amazonaws.com/{account}/{name}"),
                        "AWS::SNS::Topic" => format!("arn:aws:sns:{region}:{account}:{name}"),
                        "AWS::Serverless::StateMachine" | "AWS::StepFunctions::StateMachine" => {
                            format!("arn:aws:states:{region}:{account}:stateMachine:{name}")
                        }
                        _ => name,
                    }
                }
            }
        }))
    }

    /// A resource's name: the one its properties give (`TableName`, `BucketName`, a Glue
    /// database's, an Athena workgroup's or a state machine's name), or else the caller's.
    fn physical_name(&self, logical_id: &str, kind: &str) -> Result<String, TemplateError> {
        let property = match kind {
            "AWS::DynamoDB::Table" => "TableName",
            "AWS::S3::Bucket" => "BucketName",
            "AWS::Glue::Database" => "DatabaseInput/Name",
            "AWS::Athena::WorkGroup" | "AWS::Serverless::StateMachine" => "Name",
            "AWS::StepFunctions::StateMachine" => "StateMachineName",
            _ => return Ok((self.names.resource)(logical_id)),
        };
        match self.root.pointer(&format!("/Resources/{logical_id}/Properties/{property}")) {
            Some(given) => self.string(given, &format!("Resources/{logical_id}/Properties/{property}")),
            None => Ok((self.names.resource)(logical_id)),
        }
    }

    fn resource_type(&self, logical_id: &str, at: &str) -> Result<&str, TemplateError> {
        if let Some(kind) =
            self.root.pointer(&format!("/Resources/{logical_id}/Type")).and_then(Value::as_str)
        {
            return Ok(kind);
        }
        if self.generated_mapping(logical_id).is_some() {
            return Ok("AWS::Lambda::EventSourceMapping");
        }
        if logical_id == DEPLOYMENT_APPLICATION && self.deploys_through_codedeploy() {
            return Ok("AWS::CodeDeploy::Application");
        }
        Err(TemplateError::invalid(at, format!("{logical_id} is neither a parameter nor a resource")))
    }

    /// Whether a function has a `DeploymentPreference`, for which SAM generates the `CodeDeploy`
    /// application [`DEPLOYMENT_APPLICATION`].
    fn deploys_through_codedeploy(&self) -> bool {
        self.root
            .get("Resources")
            .and_then(Value::as_object)
            .is_some_and(|r| r.values().any(|f| f.pointer("/Properties/DeploymentPreference").is_some()))
    }

    /// The function whose stream event SAM turns into the event source mapping `logical_id`
    /// (SAM names it by the function's logical id and then the event's name).
    pub(crate) fn generated_mapping(&self, logical_id: &str) -> Option<&str> {
        let resources = self.root.get("Resources")?.as_object()?;
        resources.iter().find_map(|(function, resource)| {
            let event = logical_id.strip_prefix(function.as_str())?;
            let kind = resource.pointer(&format!("/Properties/Events/{event}/Type"))?.as_str()?;
            matches!(kind, "DynamoDB" | "Kinesis").then_some(function.as_str())
        })
    }

    /// `Fn::GetAtt` of the attributes this project's templates use.
    fn attribute(&self, resource: &str, attribute: &str, at: &str) -> Result<String, TemplateError> {
        let kind = self.resource_type(resource, at)?;
        let name = self.physical_name(resource, kind)?;
        let (region, account) = (&self.names.region, &self.names.account);
        let arn = |service: &str, rest: &str| format!("arn:aws:{service}:{region}:{account}:{rest}");
        Ok(match (kind, attribute) {
            ("AWS::DynamoDB::Table", "Arn") => arn("dynamodb", &format!("table/{name}")),
            ("AWS::DynamoDB::Table", "StreamArn") => {
                arn("dynamodb", &format!("table/{name}/stream/1970-01-01T00:00:00.000"))
            }
            ("AWS::Kinesis::Stream", "Arn") => arn("kinesis", &format!("stream/{name}")),
            ("AWS::S3::Bucket", "Arn") => format!("arn:aws:s3:::{name}"),
            ("AWS::SQS::Queue", "Arn") => arn("sqs", &name),
            ("AWS::SQS::Queue", "QueueName") => name,
            ("AWS::Logs::LogGroup", "Arn") => arn("logs", &format!("log-group:{name}:*")),
            ("AWS::IAM::Role", "Arn") => format!("arn:aws:iam::{account}:role/{name}"),
            ("AWS::Serverless::Function" | "AWS::Lambda::Function", "Arn") => {
                arn("lambda", &format!("function:{name}"))
            }
            _ => {
                return Err(TemplateError::invalid(
                    at,
                    format!("GetAtt {resource}.{attribute} ({kind}) is not supported"),
                ));
            }
        })
    }

    /// `Fn::Sub`: a string with `${Name}` and `${Resource.Attribute}`, optionally with variables.
    fn sub(&self, arg: &Value, at: &str) -> Result<String, TemplateError> {
        let (text, variables) = match arg {
            Value::String(text) => (text.as_str(), Map::new()),
            Value::Array(parts) => match parts.as_slice() {
                [Value::String(text), Value::Object(vars)] => (text.as_str(), vars.clone()),
                _ => {
                    return Err(TemplateError::invalid(
                        at,
                        "Fn::Sub takes a string or [string, {variables}]",
                    ));
                }
            },
            _ => {
                return Err(TemplateError::invalid(at, "Fn::Sub takes a string or [string, {variables}]"));
            }
        };
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            // `${!Literal}` writes `${Literal}`.
            if let Some(literal) = after.strip_prefix('!') {
                out.push_str("${");
                rest = literal;
                continue;
            }
            let end = after
                .find('}')
                .ok_or_else(|| TemplateError::invalid(at, format!("unclosed ${{ in {text:?}")))?;
            let name = after[..end].trim();
            let value = if let Some(v) = variables.get(name) {
                self.string(v, &format!("{at}/{name}"))?
            } else if let Some((resource, attribute)) = name.split_once('.') {
                self.attribute(resource, attribute, at)?
            } else {
                self.reference(name, at)?
                    .ok_or_else(|| TemplateError::invalid(at, format!("${{{name}}} is AWS::NoValue")))?
            };
            out.push_str(&value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn truth(&self, body: &Value, at: &str) -> Result<bool, TemplateError> {
        let Some((key, arg)) = body.as_object().filter(|o| o.len() == 1).and_then(|o| o.iter().next()) else {
            return Err(TemplateError::invalid(
                at,
                "a condition is one Fn::Equals, Fn::And, Fn::Or, Fn::Not or Condition",
            ));
        };
        let args = || arg.as_array().map(Vec::as_slice).unwrap_or_default();
        match key.as_str() {
            "Fn::Equals" => {
                let [a, b] = args() else {
                    return Err(TemplateError::invalid(at, "Fn::Equals takes two values"));
                };
                Ok(self.string(a, at)? == self.string(b, at)?)
            }
            "Fn::And" => args().iter().try_fold(true, |all, c| Ok(all && self.truth(c, at)?)),
            "Fn::Or" => args().iter().try_fold(false, |any, c| Ok(any || self.truth(c, at)?)),
            "Fn::Not" => match args() {
                [c] => Ok(!self.truth(c, at)?),
                _ => Err(TemplateError::invalid(at, "Fn::Not takes one condition")),
            },
            "Condition" => self.condition(arg.as_str().unwrap_or_default()),
            other => Err(TemplateError::invalid(at, format!("{other} is not a condition function"))),
        }
    }
}

/// A scalar as CloudFormation passes it around: as a string.
fn scalar_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `AWS::StackId` as CloudFormation makes it (`arn:aws:cloudformation:<region>:<account>:stack/
/// <stack>/<UUID>`), with a UUID that depends on the stack's name alone, so that every
/// resolution of one stack agrees.
fn stack_id(names: &Names<'_>) -> String {
    let hash =
        |seed: u64| names.stack.bytes().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let hex = format!("{:016x}{:016x}", hash(0xcbf2_9ce4_8422_2325), hash(0x8422_2325_cbf2_9ce4));
    format!(
        "arn:aws:cloudformation:{}:{}:stack/{}/{}-{}-{}-{}-{}",
        names.region,
        names.account,
        names.stack,
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The name among `names` nearest to `given` (by edits, letter case ignored), if one is near
/// enough to be a misspelling: at most a third of its letters apart.
fn closest<'n>(given: &str, names: &[&'n str]) -> Option<&'n str> {
    let distance = |a: &str, b: &str| {
        let (a, b): (Vec<char>, Vec<char>) =
            (a.to_lowercase().chars().collect(), b.to_lowercase().chars().collect());
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.iter().enumerate() {
            let mut diagonal = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let above = row[j + 1];
                row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
                diagonal = above;
            }
        }
        row[b.len()]
    };
    names
        .iter()
        .map(|name| (distance(given, name), *name))
        .filter(|(d, _)| *d <= given.chars().count().div_ceil(3))
        .min()
        .map(|(_, name)| name)
}

#[cfg(test)]
mod closest_tests {
    #[test]
    fn a_misspelt_parameter_is_matched_to_the_nearest_declared_one() {
        let names = ["BatchSize", "BatchWindow", "MaximumRetryAttempts"];
        assert_eq!(super::closest("Batchsize", &names), Some("BatchSize"));
        assert_eq!(super::closest("BatchSise", &names), Some("BatchSize"));
        assert_eq!(super::closest("MaxRetryAttempts", &names), Some("MaximumRetryAttempts"));
        assert_eq!(super::closest("Colour", &names), None);
    }
}
