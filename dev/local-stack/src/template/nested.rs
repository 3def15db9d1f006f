//! Nested stacks inlined: a template's `AWS::Serverless::Application` (or
//! `AWS::CloudFormation::Stack`) whose template is a local file becomes, in the parent, the
//! resources CloudFormation would create for it, so that everything after sees one template.
//!
//! A child resource `ErrorsAlarm` of the nested stack `Indexer` becomes `IndexerErrorsAlarm`;
//! the child's parameters become the parent's expressions passed to them (resolved later in the
//! parent's scope), its conditions are renamed likewise, and each child resource exists where
//! the nested stack's condition and its own both hold.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::template::TemplateError;

/// The nested stacks of `root` whose template is a local file: (logical id, location).
pub(crate) fn locations(root: &Value) -> Vec<(String, String)> {
    let resources = root.get("Resources").and_then(Value::as_object);
    resources
        .into_iter()
        .flatten()
        .filter_map(|(id, resource)| {
            let property = match resource.get("Type").and_then(Value::as_str)? {
                "AWS::Serverless::Application" => "Location",
                "AWS::CloudFormation::Stack" => "TemplateURL",
                _ => return None,
            };
            let location = resource.pointer(&format!("/Properties/{property}"))?.as_str()?;
            (!location.contains("://")).then(|| (id.clone(), location.to_owned()))
        })
        .collect()
}

/// The child template's names, and what each becomes in the parent.
struct Renames<'a> {
    prefix: &'a str,
    /// The child's parameters, each the parent's expression for it.
    parameters: BTreeMap<String, Value>,
    resources: BTreeSet<String>,
    conditions: BTreeSet<String>,
}

/// Inlines `child` (canonical JSON) as the nested stack `id` of `root`.
pub(crate) fn inline(root: &mut Value, id: &str, child: &Value) -> Result<(), TemplateError> {
    let at = format!("Resources/{id}");
    let nested = root
        .pointer(&format!("/Resources/{id}"))
        .cloned()
        .ok_or_else(|| TemplateError::invalid(&at, "no such nested stack"))?;
    let given =
        nested.pointer("/Properties/Parameters").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut parameters = BTreeMap::new();
    let declared = child.get("Parameters").and_then(Value::as_object);
    for (name, declaration) in declared.into_iter().flatten() {
        let value = given.get(name).or_else(|| declaration.get("Default")).cloned().ok_or_else(|| {
            TemplateError::invalid(&at, format!("the nested stack's parameter {name} has no value"))
        })?;
        parameters.insert(name.clone(), value);
    }
    if let Some(unknown) = given.keys().find(|k| !parameters.contains_key(*k)) {
        return Err(TemplateError::invalid(&at, format!("the nested template has no parameter {unknown}")));
    }
    let names = |section: &str| -> BTreeSet<String> {
        child.get(section).and_then(Value::as_object).map(|o| o.keys().cloned().collect()).unwrap_or_default()
    };
    let renames =
        Renames { prefix: id, parameters, resources: names("Resources"), conditions: names("Conditions") };
    let parent_condition = nested.get("Condition").and_then(Value::as_str);
    let mut conditions = Map::new();
    for (name, body) in child.get("Conditions").and_then(Value::as_object).into_iter().flatten() {
        conditions.insert(format!("{id}{name}"), renames.rewrite(body));
    }
    let mut resources = Map::new();
    for (name, resource) in child.get("Resources").and_then(Value::as_object).into_iter().flatten() {
        let mut resource = renames.rewrite(resource);
        let own = resource.get("Condition").and_then(Value::as_str).map(|c| format!("{id}{c}"));
        let condition = match (parent_condition, own) {
            (None, own) => own,
            (Some(parent), None) => Some(parent.to_owned()),
            (Some(parent), Some(own)) => {
                let both = format!("{id}{name}Exists");
                conditions.insert(
                    both.clone(),
                    serde_json::json!({"Fn::And": [{"Condition": parent}, {"Condition": own}]}),
                );
                Some(both)
            }
        };
        if let (Value::Object(fields), Some(condition)) = (&mut resource, condition) {
            fields.insert("Condition".to_owned(), Value::String(condition));
        }
        resources.insert(format!("{id}{name}"), resource);
    }
    for (section, entries) in [("Conditions", conditions), ("Resources", resources)] {
        let target = root
            .as_object_mut()
            .ok_or_else(|| TemplateError::invalid("", "the template is not an object"))?
            .entry(section)
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(|| TemplateError::invalid(section, "not an object"))?;
        for (name, value) in entries {
            if target.contains_key(&name) {
                return Err(TemplateError::invalid(
                    &at,
                    format!("the nested stack's {name} is already in the parent's {section}"),
                ));
            }
            target.insert(name, value);
        }
    }
    Ok(())
}

impl Renames<'_> {
    /// `value` with the child's names made the parent's.
    fn rewrite(&self, value: &Value) -> Value {
        match value {
            Value::Array(items) => Value::Array(items.iter().map(|v| self.rewrite(v)).collect()),
            Value::Object(object) if object.len() == 1 => {
                let (key, arg) = object.iter().next().expect("one entry");
                match (key.as_str(), arg) {
                    ("Ref", Value::String(name)) => self.reference(name),
                    ("Condition", Value::String(name)) if self.conditions.contains(name) => {
                        serde_json::json!({"Condition": format!("{}{name}", self.prefix)})
                    }
                    ("Fn::GetAtt", Value::Array(parts)) => {
                        let mut parts = parts.clone();
                        if let Some(Value::String(resource)) = parts.first_mut()
                            && self.resources.contains(resource.as_str())
                        {
                            *resource = format!("{}{resource}", self.prefix);
                        }
                        serde_json::json!({"Fn::GetAtt": parts})
                    }
                    ("Fn::If", Value::Array(parts)) => {
                        let mut parts: Vec<Value> = parts.iter().map(|v| self.rewrite(v)).collect();
                        if let Some(Value::String(condition)) = parts.first_mut()
                            && self.conditions.contains(condition.as_str())
                        {
                            *condition = format!("{}{condition}", self.prefix);
                        }
                        serde_json::json!({"Fn::If": parts})
                    }
                    ("Fn::Sub", _) => self.sub(arg),
                    _ => Value::Object(Map::from_iter([(key.clone(), self.rewrite(arg))])),
                }
            }
            Value::Object(object) => Value::Object(
                object
                    .iter()
                    .map(|(k, v)| {
                        let v = match (k.as_str(), v) {
                            ("DependsOn", Value::String(d)) => Value::String(self.resource(d)),
                            ("DependsOn", Value::Array(ds)) => Value::Array(
                                ds.iter()
                                    .map(|d| {
                                        d.as_str()
                                            .map_or_else(|| d.clone(), |d| Value::String(self.resource(d)))
                                    })
                                    .collect(),
                            ),
                            _ => self.rewrite(v),
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn resource(&self, name: &str) -> String {
        if self.resources.contains(name) { format!("{}{name}", self.prefix) } else { name.to_owned() }
    }

    /// `Ref` of a child name: a parameter becomes the parent's expression for it.
    fn reference(&self, name: &str) -> Value {
        match self.parameters.get(name) {
            Some(value) => value.clone(),
            None => serde_json::json!({"Ref": self.resource(name)}),
        }
    }

    /// `Fn::Sub` with the child's parameters passed as variables (the parent's expressions), and
    /// its resources renamed in the string.
    fn sub(&self, arg: &Value) -> Value {
        let (text, vars) = match arg {
            Value::String(text) => (text.clone(), Map::new()),
            Value::Array(parts) => (
                parts.first().and_then(Value::as_str).unwrap_or_default().to_owned(),
                parts
                    .get(1)
                    .and_then(Value::as_object)
                    .map(|vars| vars.iter().map(|(k, v)| (k.clone(), self.rewrite(v))).collect())
                    .unwrap_or_default(),
            ),
            other => return other.clone(),
        };
        let mut vars = vars;
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                rest = "";
                break;
            };
            let name = &after[..end];
            let (base, attribute) = name.split_once('.').map_or((name, None), |(b, a)| (b, Some(a)));
            if name.starts_with('!') || vars.contains_key(name) {
                out.push_str(&rest[start..start + 3 + end]);
            } else if let (Some(value), None) = (self.parameters.get(base), attribute) {
                vars.insert(base.to_owned(), value.clone());
                out.push_str(&rest[start..start + 3 + end]);
            } else {
                let renamed = self.resource(base);
                out.push_str("${");
                out.push_str(&renamed);
                if let Some(attribute) = attribute {
                    out.push('.');
                    out.push_str(attribute);
                }
                out.push('}');
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        if vars.is_empty() {
            serde_json::json!({"Fn::Sub": out})
        } else {
            serde_json::json!({"Fn::Sub": [out, vars]})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent() -> Value {
        serde_json::json!({
            "Conditions": {"Separate": {"Fn::Equals": ["a", "a"]}},
            "Resources": {
                "Fn": {"Type": "AWS::Serverless::Function"},
                "Indexer": {
                    "Type": "AWS::Serverless::Application",
                    "Condition": "Separate",
                    "Properties": {
                        "Location": "deploy/child.yaml",
                        "Parameters": {"FunctionName": {"Ref": "Fn"}, "Title": "indexer"}
                    }
                }
            }
        })
    }

    fn child() -> Value {
        serde_json::json!({
            "Parameters": {"FunctionName": {"Type": "String"}, "Title": {"Type": "String"},
                           "Second": {"Type": "String", "Default": ""}},
            "Conditions": {"HasSecond": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Second"}, ""]}]}},
            "Resources": {
                "ErrorsAlarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
                    "AlarmDescription": {"Fn::Sub": "${Title} failed in ${AWS::Region}; see ${Other}"},
                    "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": "FunctionName"}}],
                    "OKActions": [{"Fn::If": ["HasSecond", {"Ref": "Other"}, {"Ref": "AWS::NoValue"}]}]
                }},
                "Other": {"Type": "AWS::SNS::Topic", "Condition": "HasSecond", "DependsOn": "ErrorsAlarm"}
            }
        })
    }

    #[test]
    fn a_nested_stack_becomes_the_parents_resources() -> Result<(), TemplateError> {
        let mut root = parent();
        assert_eq!(locations(&root), [("Indexer".to_owned(), "deploy/child.yaml".to_owned())]);
        inline(&mut root, "Indexer", &child())?;
        let alarm = &root["Resources"]["IndexerErrorsAlarm"];
        assert_eq!(alarm["Condition"], "Separate", "the nested stack's condition");
        assert_eq!(
            alarm["Properties"]["AlarmDescription"],
            serde_json::json!({"Fn::Sub": ["${Title} failed in ${AWS::Region}; see ${IndexerOther}", {"Title": "indexer"}]})
        );
        assert_eq!(alarm["Properties"]["Dimensions"][0]["Value"], serde_json::json!({"Ref": "Fn"}));
        assert_eq!(
            alarm["Properties"]["OKActions"][0],
            serde_json::json!({"Fn::If": ["IndexerHasSecond", {"Ref": "IndexerOther"}, {"Ref": "AWS::NoValue"}]})
        );
        let other = &root["Resources"]["IndexerOther"];
        assert_eq!(other["DependsOn"], "IndexerErrorsAlarm");
        assert_eq!(other["Condition"], "IndexerOtherExists");
        assert_eq!(
            root["Conditions"]["IndexerOtherExists"],
            serde_json::json!({"Fn::And": [{"Condition": "Separate"}, {"Condition": "IndexerHasSecond"}]})
        );
        assert_eq!(
            root["Conditions"]["IndexerHasSecond"],
            serde_json::json!({"Fn::Not": [{"Fn::Equals": ["", ""]}]}),
            "a parameter left out takes its default"
        );
        Ok(())
    }

    #[test]
    fn a_parameter_the_child_lacks_or_a_value_missing_is_refused() {
        let mut root = parent();
        root["Resources"]["Indexer"]["Properties"]["Parameters"]["Typo"] = Value::from("x");
        let error = inline(&mut root, "Indexer", &child()).unwrap_err();
        assert!(error.to_string().contains("no parameter Typo"), "{error}");
        let mut root = parent();
        root["Resources"]["Indexer"]["Properties"]["Parameters"].as_object_mut().unwrap().remove("Title");
        let error = inline(&mut root, "Indexer", &child()).unwrap_err();
        assert!(error.to_string().contains("Title has no value"), "{error}");
    }
}
