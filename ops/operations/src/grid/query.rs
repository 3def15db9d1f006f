//! What a page asks for, and the DynamoDB requests that answer it, without I/O: the index
//! table's key condition (with range and prefix filters from the key crate's bounds), and
//! whether the index items' projected attributes cover what the caller wants.

use std::collections::HashMap;
use std::ops::Bound;

use aws_sdk_dynamodb::types::AttributeValue;
use key_codec::{Dir, HierKey, KeyKind, TextKey, Value};

use crate::grid::schema::GridSchema;
use formats::cursor::fingerprint;

/// The largest page: one `BatchGetItem` holds 100 keys.
pub(crate) const MAX_LIMIT: usize = 100;

/// A filter on the sorted value. Items without the field never match one, so a filtered query
/// has no nulls phase.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Every item.
    None,
    /// Values within bounds, in the key crate's value order.
    Range(Bound<Value>, Bound<Value>),
    /// String values beginning with this.
    Prefix(String),
}

/// One page request.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The scope's value (a project id).
    pub scope: String,
    /// The field (the map key, e.g. `3fe6`).
    pub field: String,
    /// Highest values first (items without the field still come last).
    pub descending: bool,
    /// Items per page, 1 to [`MAX_LIMIT`].
    pub limit: usize,
    /// A filter on the value.
    pub filter: Filter,
    /// Base attributes to return besides what the index items hold; empty for the index's.
    pub attributes: Vec<String>,
}

/// A query that cannot be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// `limit` out of range.
    #[error("limit {0} is not between 1 and {MAX_LIMIT} (one BatchGetItem per page)")]
    Limit(usize),
    /// The index partition key cannot be built.
    #[error("scope {scope:?} and field {field:?} make no index key: {reason}")]
    Key {
        /// The scope.
        scope: String,
        /// The field.
        field: String,
        /// Why.
        reason: String,
    },
    /// The range's lower bound is above its upper bound.
    #[error("the range is empty: its lower bound is above its upper bound")]
    EmptyRange,
}

/// The index table's `KeyConditionExpression` with its values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyCondition {
    /// The expression over `#pk` and `#sk`.
    pub expression: String,
    /// `:pk` and, with a filter, `:lo`/`:hi` or `:prefix`.
    pub values: HashMap<String, AttributeValue>,
}

impl Query {
    /// Checks the request.
    pub fn check(&self) -> Result<(), QueryError> {
        if !(1..=MAX_LIMIT).contains(&self.limit) {
            return Err(QueryError::Limit(self.limit));
        }
        Ok(())
    }

    /// What a cursor of this query is bound to.
    pub fn fingerprint(&self) -> String {
        let filter = match &self.filter {
            Filter::None => String::new(),
            other => format!("{other:?}"),
        };
        let order = if self.descending { "desc" } else { "asc" };
        fingerprint(&[&self.scope, &self.field, order, &filter])
    }

    /// The index table's partition key: the scope, then the field, as the indexer builds it.
    pub fn partition_key(&self) -> Result<String, QueryError> {
        HierKey::new(&self.scope).push(&self.field).finish(KeyKind::Partition).map_err(|e| QueryError::Key {
            scope: self.scope.clone(),
            field: self.field.clone(),
            reason: e.to_string(),
        })
    }

    /// The key condition of the index phase.
    pub(crate) fn key_condition(&self) -> Result<KeyCondition, QueryError> {
        let mut values = HashMap::from([(":pk".to_owned(), AttributeValue::S(self.partition_key()?))]);
        let expression = match &self.filter {
            Filter::None => "#pk = :pk",
            Filter::Range(lower, upper) => {
                let range = TextKey::new().range(as_ref(lower), as_ref(upper), Dir::Asc);
                if range.is_empty() {
                    return Err(QueryError::EmptyRange);
                }
                values.insert(":lo".to_owned(), AttributeValue::S(range.start));
                values.insert(":hi".to_owned(), AttributeValue::S(range.end));
                "#pk = :pk AND #sk BETWEEN :lo AND :hi"
            }
            Filter::Prefix(prefix) => {
                values.insert(
                    ":prefix".to_owned(),
                    AttributeValue::S(TextKey::new().string_prefix(prefix, Dir::Asc)),
                );
                "#pk = :pk AND begins_with(#sk, :prefix)"
            }
        };
        Ok(KeyCondition { expression: expression.to_owned(), values })
    }

    /// Whether the index items lack an attribute the caller asked for, so that the page needs
    /// the base items too.
    pub(crate) fn needs_base_items(&self, schema: &GridSchema) -> bool {
        self.attributes.iter().any(|a| {
            !schema.is_key(a) && a != schema.scope() && a != schema.order() && !schema.projected().contains(a)
        })
    }

    /// Whether the nulls phase follows the index phase.
    pub(crate) fn has_nulls_phase(&self) -> bool {
        self.filter == Filter::None
    }
}

fn as_ref(bound: &Bound<Value>) -> Bound<&Value> {
    match bound {
        Bound::Included(v) => Bound::Included(v),
        Bound::Excluded(v) => Bound::Excluded(v),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests;
