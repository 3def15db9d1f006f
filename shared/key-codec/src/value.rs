//! Typed key components and the order both encodings preserve.

use std::cmp::Ordering;

use crate::number::Number;
use crate::time::{Date, DateTime};

/// The direction one component sorts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dir {
    /// Smallest first.
    #[default]
    Asc,
    /// Largest first: the component's encoding is the mirror of its ascending encoding.
    Desc,
}

/// One typed component of a key.
///
/// # Order
/// Within a type: numbers by exact decimal value, strings by Unicode code point (which is UTF-8
/// byte order, the order DynamoDB compares S values in), binary by unsigned bytes, dates and
/// datetimes chronologically with a date sorting just before midnight of the same day.
///
/// Across types, the order follows the text form's tag letters:
/// `Null < Binary < Date/DateTime < Bool(false) < Number < String < Bool(true)`.
/// The binary form uses the same order, so both forms sort a mixed column identically.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// DynamoDB's NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// An exact DynamoDB number.
    Number(Number),
    /// A string of any content, including `#`, `$`, spaces, control characters and U+0000.
    String(String),
    /// Raw bytes.
    Binary(Vec<u8>),
    /// A calendar date.
    Date(Date),
    /// A UTC instant.
    DateTime(DateTime),
}

impl Value {
    /// The position of the value's type in the cross-type order.
    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Binary(_) => 1,
            Value::Date(_) | Value::DateTime(_) => 2,
            Value::Bool(false) => 3,
            Value::Number(_) => 4,
            Value::String(_) => 5,
            Value::Bool(true) => 6,
        }
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Number(a), Value::Number(b)) => a.cmp(b),
            (Value::String(a), Value::String(b)) => a.cmp(b),
            (Value::Binary(a), Value::Binary(b)) => a.cmp(b),
            (Value::Date(a), Value::Date(b)) => a.cmp(b),
            (Value::DateTime(a), Value::DateTime(b)) => a.cmp(b),
            (Value::Date(a), Value::DateTime(b)) => a.cmp(&b.date()).then(Ordering::Less),
            (Value::DateTime(a), Value::Date(b)) => a.date().cmp(b).then(Ordering::Greater),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}

/// `From<$from> for Value`, each the variant that holds it.
macro_rules! value_from {
    ($($from:ty => $variant:ident),* $(,)?) => {$(
        impl From<$from> for Value {
            fn from(v: $from) -> Value {
                Value::$variant(v)
            }
        }
    )*};
}

value_from!(String => String, Number => Number, bool => Bool, Date => Date, DateTime => DateTime);

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Number(Number::from(n))
    }
}

/// Compares two tuples component by component, applying each component's direction: the order
/// an encoded key must reproduce.
pub fn tuple_cmp(a: &[(Value, Dir)], b: &[(Value, Dir)]) -> Ordering {
    for ((x, dx), (y, _)) in a.iter().zip(b) {
        let ord = x.cmp(y);
        let ord = if *dx == Dir::Desc { ord.reverse() } else { ord };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}
