//! Planned item writes: what a function's pure plan hands to its I/O shell.

use std::sync::Arc;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_dynamo::{AttributeValue, Item};

/// One item write to a DynamoDB table.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemWrite {
    /// The table written to.
    pub table: Arc<str>,
    /// A put of a whole item, or a delete by key.
    pub op: Op,
    /// The position, in the delivered batch, of the record this write finishes. When the write
    /// fails, the batch resumes from the earliest such record.
    pub origin: usize,
}

/// The two idempotent item operations.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Write the whole item, replacing any item with the same key.
    Put(Attributes),
    /// Delete the item with this key, if there is one.
    Delete(Attributes),
}

impl Op {
    /// `"put"` or `"delete"`.
    pub const fn name(&self) -> &'static str {
        match self {
            Op::Put(_) => "put",
            Op::Delete(_) => "delete",
        }
    }
}

/// An item, or a key, as its attributes: (name, value) pairs with distinct names, in the order
/// they were added.
///
/// A plan builds thousands of these a batch and the writer converts each once into the SDK's
/// request, so they are a vector, not a map: no hashing of names, one allocation. Equality
/// ignores the order, as for an item.
#[derive(Debug, Clone, Default)]
pub struct Attributes(Vec<(String, AttributeValue)>);

impl Attributes {
    /// No attributes, with room for `n`.
    pub fn with_capacity(n: usize) -> Attributes {
        Attributes(Vec::with_capacity(n))
    }

    /// Adds an attribute. The caller keeps names distinct (a plan's names come from a
    /// configuration that gives each attribute one role); debug builds check it.
    pub fn push(&mut self, name: impl Into<String>, value: AttributeValue) {
        let name = name.into();
        debug_assert!(self.get(&name).is_none(), "attribute {name:?} added twice to one item");
        self.0.push((name, value));
    }

    /// The value of `name`, if the item has it.
    pub fn get(&self, name: &str) -> Option<&AttributeValue> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// How many attributes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The attributes, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &AttributeValue)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// The item's size as DynamoDB counts it ([`crate::limits::item_size`]).
    pub fn size(&self) -> usize {
        crate::limits::size(self.iter())
    }

    /// The item as `serde_dynamo`'s map.
    pub fn into_item(self) -> Item {
        Item::from(self.0.into_iter().collect::<std::collections::HashMap<_, _>>())
    }
}

impl From<Item> for Attributes {
    fn from(item: Item) -> Attributes {
        let map: std::collections::HashMap<String, AttributeValue> = item.into();
        Attributes(map.into_iter().collect())
    }
}

impl IntoIterator for Attributes {
    type Item = (String, AttributeValue);
    type IntoIter = std::vec::IntoIter<(String, AttributeValue)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl FromIterator<(String, AttributeValue)> for Attributes {
    /// Collects pairs; a name seen again replaces its earlier value, as in a map.
    fn from_iter<I: IntoIterator<Item = (String, AttributeValue)>>(pairs: I) -> Attributes {
        let mut out = Attributes::default();
        for (name, value) in pairs {
            match out.0.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = value,
                None => out.0.push((name, value)),
            }
        }
        out
    }
}

impl std::ops::Index<&str> for Attributes {
    type Output = AttributeValue;

    /// The value of `name`; panics when the item has none, as a map's index does.
    fn index(&self, name: &str) -> &AttributeValue {
        self.get(name).unwrap_or_else(|| panic!("the item has no attribute {name:?}"))
    }
}

impl PartialEq for Attributes {
    fn eq(&self, other: &Attributes) -> bool {
        self.len() == other.len() && self.iter().all(|(n, v)| other.get(n) == Some(v))
    }
}

impl Serialize for Attributes {
    /// As a map, the form `serde_dynamo::Item` takes.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_owned())
    }

    #[test]
    fn equality_ignores_order_and_sees_every_difference() {
        let mut a = Attributes::default();
        a.push("pk", s("1"));
        a.push("sk", s("2"));
        let b: Attributes = [("sk".to_owned(), s("2")), ("pk".to_owned(), s("1"))].into_iter().collect();
        assert_eq!(a, b);
        let other_value: Attributes =
            [("sk".to_owned(), s("3")), ("pk".to_owned(), s("1"))].into_iter().collect();
        assert_ne!(a, other_value);
        let fewer: Attributes = [("pk".to_owned(), s("1"))].into_iter().collect();
        assert_ne!(a, fewer);
        assert_ne!(fewer, a);
    }

    #[test]
    fn collecting_keeps_the_last_value_of_a_name_as_a_map_would() {
        let a: Attributes = [("pk".to_owned(), s("1")), ("pk".to_owned(), s("2"))].into_iter().collect();
        assert_eq!(a.len(), 1);
        assert_eq!(a.get("pk"), Some(&s("2")));
    }

    #[test]
    fn an_item_goes_through_and_back_and_serializes_as_it() {
        let mut a = Attributes::default();
        a.push("pk", s("1"));
        a.push("n", AttributeValue::N("7".to_owned()));
        let item = a.clone().into_item();
        assert_eq!(Attributes::from(item.clone()), a);
        assert_eq!(
            serde_json::to_value(&a).expect("serializes"),
            serde_json::to_value(&item).expect("serializes")
        );
    }
}
