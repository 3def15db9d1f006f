//! Lambda event-filter patterns (`FilterCriteria.Filters[].Pattern`): parsed into a typed form,
//! with the mistakes Lambda accepts silently reported instead.
//!
//! A pattern is a JSON object that mirrors the record: each key names a field, and each value is
//! either a nested pattern or a list of matchers, any of which may match (OR). Within one object
//! every field must match (AND); `"$or": [pattern, …]` matches when any of its patterns does.
//!
//! | matcher | matches |
//! |---|---|
//! | `"text"`, `12`, `true`, `null` | that exact value |
//! | `{"prefix": "COUNTER#"}`, `{"suffix": ".png"}` | strings beginning or ending so |
//! | `{"equals-ignore-case": "Open"}` | a string, ignoring ASCII case |
//! | `{"anything-but": v}` | anything but `v`: a value, a list of values, or `{"prefix": …}` |
//! | `{"numeric": [">", 0, "<=", 5]}` | numbers in range (one or two comparisons) |
//! | `{"exists": true}` | the field is present (false: absent) — only on a leaf |
//!
//! [`Pattern::matches`] applies a pattern to a record (see the `matching` module for the rules).
//!
//! DynamoDB records nest every attribute under its type, `{"NewImage": {"state": {"S": "open"}}}`,
//! so matchers under `Keys`, `NewImage` and `OldImage` must sit below a scalar type (`S`, `N`,
//! `B`, `BOOL`, `NULL`, `SS`, `NS`, `BS`). A matcher on the attribute itself, or on an `M` or `L`,
//! addresses an object, which Lambda never matches: such a filter drops every record. The
//! [`Pattern::parse_dynamodb`] checks catch that.

use serde_json::Value;

/// Why a pattern cannot be used: what is wrong, and where in the pattern (a `/`-separated path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatternError(String);

mod matching;

/// A parsed filter pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    /// Fields that must all match.
    pub fields: Vec<(String, Node)>,
    /// `$or`: alternatives, one of which must match (besides `fields`).
    pub any_of: Vec<Pattern>,
}

/// What a field of a pattern holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A nested pattern over an object field.
    Nested(Pattern),
    /// Matchers over a leaf; one must match.
    Leaf(Vec<Matcher>),
}

/// One matcher over a leaf value.
#[derive(Debug, Clone, PartialEq)]
pub enum Matcher {
    /// The exact value: a string, number, boolean or null.
    Exact(Value),
    /// A string that begins with this.
    Prefix(String),
    /// A string that ends with this.
    Suffix(String),
    /// A string equal to this, ignoring ASCII case.
    EqualsIgnoreCase(String),
    /// Anything except these exact values.
    AnythingBut(Vec<Value>),
    /// Any string except those beginning with this.
    AnythingButPrefix(String),
    /// A number within every bound.
    Numeric(Vec<(Comparison, f64)>),
    /// The field is present (`true`) or absent (`false`).
    Exists(bool),
}

/// A numeric comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `=`
    Equal,
    /// `<`
    Less,
    /// `<=`
    LessOrEqual,
    /// `>`
    Greater,
    /// `>=`
    GreaterOrEqual,
}

/// The DynamoDB attribute types whose values are leaves (or lists of leaves).
const SCALAR_TYPES: [&str; 8] = ["S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS"];

impl Pattern {
    /// Parses a pattern; the error says what is wrong and where.
    pub fn parse(json: &str) -> Result<Pattern, PatternError> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| PatternError(format!("not valid JSON: {e}")))?;
        pattern(&value, "").map_err(PatternError)
    }

    /// Parses a pattern for a DynamoDB stream, and checks it addresses attributes through their
    /// types (see the module docs).
    pub fn parse_dynamodb(json: &str) -> Result<Pattern, PatternError> {
        let parsed = Pattern::parse(json)?;
        parsed.check_record("").map_err(PatternError)?;
        Ok(parsed)
    }

    fn check_record(&self, at: &str) -> Result<(), String> {
        for (name, node) in &self.fields {
            let here = format!("{at}/{name}");
            match (name.as_str(), node) {
                ("dynamodb", Node::Nested(inner)) => inner.check_change(&here)?,
                ("dynamodb", Node::Leaf(_)) => {
                    return Err(format!("{here}: `dynamodb` is an object; match its fields"));
                }
                _ => {}
            }
        }
        self.any_of.iter().try_for_each(|p| p.check_record(at))
    }

    fn check_change(&self, at: &str) -> Result<(), String> {
        for (name, node) in &self.fields {
            let here = format!("{at}/{name}");
            match (name.as_str(), node) {
                ("Keys" | "NewImage" | "OldImage", Node::Nested(attributes)) => {
                    attributes.check_attributes(&here)?;
                }
                ("Keys" | "NewImage" | "OldImage", Node::Leaf(_)) => {
                    return Err(format!("{here}: an image is an object; match its attributes"));
                }
                _ => {}
            }
        }
        self.any_of.iter().try_for_each(|p| p.check_change(at))
    }

    /// Attribute names, each holding a typed value.
    fn check_attributes(&self, at: &str) -> Result<(), String> {
        for (name, node) in &self.fields {
            let here = format!("{at}/{name}");
            match node {
                Node::Nested(typed) => typed.check_typed(&here)?,
                Node::Leaf(_) => {
                    return Err(format!(
                        "{here}: a DynamoDB attribute is an object like {{\"S\": …}}; put the matchers under its type, e.g. {{\"{name}\": {{\"S\": [...]}}}}"
                    ));
                }
            }
        }
        self.any_of.iter().try_for_each(|p| p.check_attributes(at))
    }

    /// A type key: a scalar type holds matchers; `M` holds attributes; `L` holds typed values.
    fn check_typed(&self, at: &str) -> Result<(), String> {
        for (kind, node) in &self.fields {
            let here = format!("{at}/{kind}");
            match (kind.as_str(), node) {
                (k, Node::Leaf(_)) if SCALAR_TYPES.contains(&k) => {}
                ("M", Node::Nested(inner)) => inner.check_attributes(&here)?,
                ("L", Node::Nested(inner)) => inner.check_typed(&here)?,
                ("M" | "L", Node::Leaf(_)) => {
                    return Err(format!(
                        "{here}: {kind} holds an object, and Lambda matches leaves only (`exists` included), so this never matches"
                    ));
                }
                (k, _) if SCALAR_TYPES.contains(&k) => {
                    return Err(format!("{here}: a {k} value is a leaf; give a list of matchers"));
                }
                (k, _) => {
                    return Err(format!(
                        "{here}: {k:?} is not a DynamoDB type (S, N, B, BOOL, NULL, SS, NS, BS, M, L)"
                    ));
                }
            }
        }
        self.any_of.iter().try_for_each(|p| p.check_typed(at))
    }
}

fn pattern(value: &Value, at: &str) -> Result<Pattern, String> {
    let Value::Object(object) = value else {
        return Err(format!("{}: a pattern is a JSON object, found {value}", display(at)));
    };
    if object.is_empty() {
        return Err(format!("{}: an empty pattern", display(at)));
    }
    let mut parsed = Pattern { fields: Vec::new(), any_of: Vec::new() };
    for (name, value) in object {
        let here = format!("{at}/{name}");
        if name == "$or" {
            let Value::Array(alternatives) = value else {
                return Err(format!("{here}: $or takes a list of patterns"));
            };
            if alternatives.len() < 2 {
                return Err(format!("{here}: $or needs at least two patterns"));
            }
            for (i, alternative) in alternatives.iter().enumerate() {
                parsed.any_of.push(pattern(alternative, &format!("{here}/{i}"))?);
            }
            continue;
        }
        let node = match value {
            Value::Object(_) => Node::Nested(pattern(value, &here)?),
            Value::Array(matchers) if matchers.is_empty() => {
                return Err(format!("{here}: an empty list of matchers never matches"));
            }
            Value::Array(matchers) => Node::Leaf(
                matchers
                    .iter()
                    .enumerate()
                    .map(|(i, m)| matcher(m, &format!("{here}/{i}")))
                    .collect::<Result<_, _>>()?,
            ),
            other => {
                return Err(format!(
                    "{here}: matchers go in a list, e.g. [{other}]; a bare value is not a pattern"
                ));
            }
        };
        parsed.fields.push((name.clone(), node));
    }
    Ok(parsed)
}

fn matcher(value: &Value, at: &str) -> Result<Matcher, String> {
    let Value::Object(object) = value else {
        return match value {
            Value::Array(_) => Err(format!("{at}: a list inside a list of matchers")),
            exact => Ok(Matcher::Exact(exact.clone())),
        };
    };
    let mut entries = object.iter();
    let (Some((operator, argument)), None) = (entries.next(), entries.next()) else {
        return Err(format!("{at}: a matcher object has exactly one operator"));
    };
    let text = |what: &str| {
        argument
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{at}: {what} takes a string, found {argument}"))
    };
    Ok(match operator.as_str() {
        "prefix" => Matcher::Prefix(text("prefix")?),
        "suffix" => Matcher::Suffix(text("suffix")?),
        "equals-ignore-case" => Matcher::EqualsIgnoreCase(text("equals-ignore-case")?),
        "exists" => Matcher::Exists(
            argument
                .as_bool()
                .ok_or_else(|| format!("{at}: exists takes true or false, found {argument}"))?,
        ),
        "numeric" => numeric(argument, at)?,
        "anything-but" => match argument {
            Value::Array(values) if !values.is_empty() && values.iter().all(is_scalar) => {
                Matcher::AnythingBut(values.clone())
            }
            Value::Object(inner) => match inner.get("prefix").and_then(Value::as_str) {
                Some(prefix) if inner.len() == 1 => Matcher::AnythingButPrefix(prefix.to_owned()),
                _ => {
                    return Err(format!(
                        "{at}: anything-but takes a value, a list of values or {{\"prefix\": …}}"
                    ));
                }
            },
            v if is_scalar(v) => Matcher::AnythingBut(vec![v.clone()]),
            _ => {
                return Err(format!(
                    "{at}: anything-but takes a value, a list of values or {{\"prefix\": …}}"
                ));
            }
        },
        other => {
            return Err(format!(
                "{at}: unknown operator {other:?} (prefix, suffix, equals-ignore-case, anything-but, numeric, exists)"
            ));
        }
    })
}

fn numeric(argument: &Value, at: &str) -> Result<Matcher, String> {
    let usage = || {
        format!("{at}: numeric takes [op, number] or [lower op, number, upper op, number], found {argument}")
    };
    let Value::Array(parts) = argument else {
        return Err(usage());
    };
    if parts.len() != 2 && parts.len() != 4 {
        return Err(usage());
    }
    let mut bounds = Vec::new();
    for pair in parts.chunks(2) {
        let (Some(op), Some(n)) = (pair[0].as_str(), pair[1].as_f64()) else {
            return Err(usage());
        };
        let op = match op {
            "=" => Comparison::Equal,
            "<" => Comparison::Less,
            "<=" => Comparison::LessOrEqual,
            ">" => Comparison::Greater,
            ">=" => Comparison::GreaterOrEqual,
            other => {
                return Err(format!("{at}: {other:?} is not a numeric operator (=, <, <=, >, >=)"));
            }
        };
        bounds.push((op, n));
    }
    if let [(lower, low), (upper, high)] = bounds.as_slice() {
        let is_lower = matches!(lower, Comparison::Greater | Comparison::GreaterOrEqual);
        let is_upper = matches!(upper, Comparison::Less | Comparison::LessOrEqual);
        if !is_lower || !is_upper || low > high {
            return Err(format!(
                "{at}: a numeric range is a lower bound (>, >=) then a higher upper bound (<, <=)"
            ));
        }
    }
    Ok(Matcher::Numeric(bounds))
}

fn is_scalar(value: &Value) -> bool {
    matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null)
}

fn display(at: &str) -> &str {
    if at.is_empty() { "the pattern" } else { at }
}

#[cfg(test)]
mod tests;
