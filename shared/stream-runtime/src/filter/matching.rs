//! Matching a parsed [`Pattern`] against a record, the way Lambda's event filtering does.
//!
//! - A field named by the pattern is looked up in the record; a nested pattern applies to the
//!   object found there, and a leaf's matchers to the value (any matcher may match).
//! - A list value (a DynamoDB `SS`, `NS` or `BS`) matches when any of its elements does.
//! - A missing field matches only `{"exists": false}`; an object value (`M`, `L`, a whole
//!   attribute) matches no leaf matcher, `exists` included, as in Lambda.
//! - DynamoDB numbers arrive as strings (`{"N": "42"}`), so `numeric` and a number given as an
//!   exact value compare a string that parses as a number by its value: `[42]` matches `"42.0"`.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::{Comparison, Matcher, Node, Pattern};

impl Pattern {
    /// Whether `record` (JSON, as Lambda would deliver it) matches this pattern.
    pub fn matches(&self, record: &Value) -> bool {
        let empty = Map::new();
        self.matches_object(record.as_object().unwrap_or(&empty))
    }

    fn matches_object(&self, object: &Map<String, Value>) -> bool {
        let fields = self.fields.iter().all(|(name, node)| match node {
            Node::Nested(inner) => inner.matches(object.get(name).unwrap_or(&Value::Null)),
            Node::Leaf(matchers) => leaf(matchers, object.get(name)),
        });
        fields && (self.any_of.is_empty() || self.any_of.iter().any(|p| p.matches_object(object)))
    }
}

fn leaf(matchers: &[Matcher], value: Option<&Value>) -> bool {
    let Some(value) = value else {
        return matchers.contains(&Matcher::Exists(false));
    };
    let elements: &[Value] = match value {
        Value::Array(elements) => elements,
        Value::Object(_) => return false,
        scalar => std::slice::from_ref(scalar),
    };
    matchers.iter().any(|m| elements.iter().any(|e| !e.is_array() && !e.is_object() && scalar(m, e)))
}

fn scalar(matcher: &Matcher, value: &Value) -> bool {
    match matcher {
        Matcher::Exact(expected) => equal(expected, value),
        Matcher::Prefix(prefix) => value.as_str().is_some_and(|s| s.starts_with(prefix.as_str())),
        Matcher::Suffix(suffix) => value.as_str().is_some_and(|s| s.ends_with(suffix.as_str())),
        Matcher::EqualsIgnoreCase(text) => value.as_str().is_some_and(|s| s.eq_ignore_ascii_case(text)),
        Matcher::AnythingBut(excluded) => !excluded.iter().any(|e| equal(e, value)),
        Matcher::AnythingButPrefix(prefix) => value.as_str().is_some_and(|s| !s.starts_with(prefix.as_str())),
        Matcher::Numeric(bounds) => number(value).is_some_and(|n| {
            bounds.iter().all(|&(op, bound)| match op {
                Comparison::Equal => n.partial_cmp(&bound) == Some(Ordering::Equal),
                Comparison::Less => n < bound,
                Comparison::LessOrEqual => n <= bound,
                Comparison::Greater => n > bound,
                Comparison::GreaterOrEqual => n >= bound,
            })
        }),
        Matcher::Exists(present) => *present,
    }
}

/// Pattern values equal record values; a pattern number equals a record number or numeric string
/// of the same value.
fn equal(expected: &Value, value: &Value) -> bool {
    match expected {
        Value::Number(n) => match (n.as_f64(), number(value)) {
            (Some(n), Some(v)) => n.partial_cmp(&v) == Some(Ordering::Equal),
            _ => false,
        },
        other => other == value,
    }
}

fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse::<f64>().ok().filter(|n| n.is_finite()),
        _ => None,
    }
}
