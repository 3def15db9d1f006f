//! YAML to CloudFormation's canonical JSON: short-form tags (`!Ref`, `!Sub`, …) become their
//! long forms (`{"Ref": …}`, `{"Fn::Sub": …}`), so everything after works on one shape.

use serde_json::{Map, Value};
use serde_norway::Value as Yaml;

use crate::template::TemplateError;

/// Parses a YAML (or JSON) template into canonical JSON.
pub(crate) fn parse(text: &str) -> Result<Value, TemplateError> {
    let yaml: Yaml = serde_norway::from_str(text).map_err(|e| TemplateError::Yaml(e.to_string()))?;
    convert(yaml, "")
}

fn convert(yaml: Yaml, at: &str) -> Result<Value, TemplateError> {
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => serde_json::to_value(&n).map_err(|e| TemplateError::invalid(at, e.to_string()))?,
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| convert(item, &format!("{at}/{i}")))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(mapping) => {
            let mut object = Map::new();
            for (key, value) in mapping {
                let key = match key {
                    Yaml::String(s) => s,
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    other => {
                        return Err(TemplateError::invalid(
                            at,
                            format!("a mapping key is not a scalar: {other:?}"),
                        ));
                    }
                };
                let value = convert(value, &format!("{at}/{key}"))?;
                object.insert(key, value);
            }
            Value::Object(object)
        }
        Yaml::Tagged(tagged) => {
            let name = tagged.tag.to_string();
            let name = name.trim_start_matches('!');
            let value = convert(tagged.value, at)?;
            let (key, value) = match (name, value) {
                ("Ref", value) => ("Ref".to_owned(), value),
                ("Condition", value) => ("Condition".to_owned(), value),
                // `!GetAtt Resource.Attribute` is the short form of ["Resource", "Attribute"].
                ("GetAtt", Value::String(s)) => {
                    let (resource, attribute) = s.split_once('.').ok_or_else(|| {
                        TemplateError::invalid(at, format!("!GetAtt {s:?} names no attribute"))
                    })?;
                    ("Fn::GetAtt".to_owned(), Value::from(vec![resource, attribute]))
                }
                (name, value) => (format!("Fn::{name}"), value),
            };
            Value::Object(Map::from_iter([(key, value)]))
        }
    })
}
