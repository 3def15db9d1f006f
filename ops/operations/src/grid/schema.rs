//! Which tables and attributes a grid reads, derived from the indexer's own configuration
//! (`MULTIKEY_INDEXES`), so that reader and writer cannot disagree.

use formats::{Index, Indexes, KeyFormat};

/// An index the grid cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// No index has this name.
    #[error("MULTIKEY_INDEXES has no index named {0:?}")]
    NoSuchIndex(String),
    /// Several indexes, none named.
    #[error("MULTIKEY_INDEXES defines {0} indexes; name the one to read")]
    Ambiguous(usize),
    /// The index's shape is not one a grid pages through.
    #[error("index {index}: {reason}")]
    Unsupported {
        /// The index's name.
        index: String,
        /// Why.
        reason: &'static str,
    },
}

/// The tables a grid reads and their attribute names: one index of `MULTIKEY_INDEXES`, the base
/// table it indexes, and the base table's index by scope and order for the nulls phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridSchema {
    table: String,
    nulls_index: String,
    index: Index,
    base_key: Vec<String>,
}

impl GridSchema {
    /// The grid over `indexes`' index `name` (the only one when `None`), whose base table is
    /// `table` with the index `nulls_index` by the index's scope (partition key) and first
    /// tiebreaker (sort key), like the article's `project-num`.
    ///
    /// A grid reads base tables keyed by one attribute or two (a single-table design's `PK` and
    /// `SK`), one scope attribute, at least one tiebreaker, and text (K1) sort keys.
    pub fn new(
        indexes: &Indexes,
        name: Option<&str>,
        table: impl Into<String>,
        nulls_index: impl Into<String>,
    ) -> Result<GridSchema, SchemaError> {
        let index = match name {
            Some(name) => indexes
                .indexes
                .iter()
                .find(|i| i.name == name)
                .ok_or_else(|| SchemaError::NoSuchIndex(name.to_owned()))?,
            None => match indexes.indexes.as_slice() {
                [one] => one,
                many => return Err(SchemaError::Ambiguous(many.len())),
            },
        };
        let unsupported = |reason| SchemaError::Unsupported { index: index.name.clone(), reason };
        if index.scope.len() != 1 {
            return Err(unsupported(
                "the grid needs exactly one scope attribute (the nulls index's partition key)",
            ));
        }
        if index.tiebreakers.is_empty() {
            return Err(unsupported("the grid needs a tiebreaker (the nulls index's sort key, like num)"));
        }
        if index.key_format != KeyFormat::Text {
            return Err(unsupported("the grid reads text (K1) sort keys only"));
        }
        Ok(GridSchema {
            table: table.into(),
            nulls_index: nulls_index.into(),
            index: index.clone(),
            base_key: indexes.base_key.clone(),
        })
    }

    /// The base table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The base table's index by scope and order.
    pub fn nulls_index(&self) -> &str {
        &self.nulls_index
    }

    /// The index definition.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The base table's key attributes.
    pub fn base_key(&self) -> &[String] {
        &self.base_key
    }

    /// The index table.
    pub fn index_table(&self) -> &str {
        &self.index.table
    }

    /// The base table's key attribute, when it has one only (`id`), not two (`PK`, `SK`).
    pub fn single_key(&self) -> Option<&str> {
        match self.base_key.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Whether `attribute` is one of the base table's key attributes.
    pub fn is_key(&self, attribute: &str) -> bool {
        self.base_key.iter().any(|k| k == attribute)
    }

    /// The scope attribute (`project`).
    pub fn scope(&self) -> &str {
        &self.index.scope[0]
    }

    /// The order of the nulls phase (`num`): the first tiebreaker.
    pub fn order(&self) -> &str {
        &self.index.tiebreakers[0]
    }

    /// The indexed map attribute (`custom_fields`).
    pub fn source(&self) -> &str {
        &self.index.source
    }

    /// The attributes every index item carries besides its keys: the `include` list.
    pub fn projected(&self) -> &[String] {
        &self.index.include
    }

    /// The index table's partition and sort key attributes.
    pub(crate) fn index_keys(&self) -> (&str, &str) {
        (&self.index.partition_key, &self.index.sort_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indexes(json: &str) -> Indexes {
        Indexes::from_json(json).unwrap()
    }

    use crate::fixtures::EXAMPLE_INDEXES as EXAMPLE;

    #[test]
    fn the_schema_comes_from_the_indexers_configuration() {
        let schema = crate::fixtures::example_grid();
        assert_eq!(
            (schema.single_key(), schema.scope(), schema.order(), schema.source()),
            (Some("id"), "project", "num", "custom_fields")
        );
        assert_eq!(schema.index_table(), "issue-attrib-index");
        assert_eq!(schema.projected(), ["name", "state"]);
        assert_eq!(schema.index_keys(), ("pk", "sk"));
        assert_eq!(
            GridSchema::new(&indexes(EXAMPLE), Some("nope"), "t", "g").unwrap_err(),
            SchemaError::NoSuchIndex("nope".into())
        );
    }

    #[test]
    fn shapes_the_grid_cannot_read_are_named() {
        let binary = EXAMPLE.replace(r#""include""#, r#""key_format": "binary", "include""#);
        let error = GridSchema::new(&indexes(&binary), None, "t", "g").unwrap_err();
        assert!(error.to_string().contains("text (K1) sort keys only"), "{error}");
        let no_tiebreaker = r#"{"base_key": ["id"], "indexes": [{"name": "i", "table": "t", "source": "f",
                                 "scope": ["project"]}]}"#;
        let error = GridSchema::new(&indexes(no_tiebreaker), None, "t", "g").unwrap_err();
        assert!(error.to_string().contains("needs a tiebreaker"), "{error}");
    }

    #[test]
    fn a_two_part_base_key_is_read_whole() {
        let single_table = r#"{"base_key": ["PK", "SK"], "indexes": [{"name": "i", "table": "t", "source": "fields",
                                "scope": ["projectId"], "tiebreakers": ["seq"]}]}"#;
        let schema = GridSchema::new(&indexes(single_table), None, "base", "byProject").unwrap();
        assert_eq!(
            (schema.base_key(), schema.single_key()),
            (["PK".to_owned(), "SK".to_owned()].as_slice(), None)
        );
        assert!(schema.is_key("SK") && !schema.is_key("seq"));
    }
}
