//! The indexer's configuration: which indexes to keep, read from `MULTIKEY_INDEXES` at cold start.
//!
//! `MULTIKEY_INDEXES` holds one JSON object. The article's issue tracker, where each issue has a
//! `custom_fields` map and the app pages through a project's issues sorted by any custom field:
//!
//! ```json
//! {
//!   "base_key": ["id"],
//!   "indexes": [{
//!     "name": "custom-fields",
//!     "table": "issue-attrib-index",
//!     "source": "custom_fields",
//!     "scope": ["project"],
//!     "tiebreakers": ["num"],
//!     "include": ["name", "state"]
//!   }]
//! }
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `base_key` | the base table's key attributes, partition key first (1 or 2) |
//! | `indexes[].name` | a label for logs and errors; unique |
//! | `indexes[].table` | the index table; one index per table. Left out: `MULTIKEY_INDEX_TABLE`, the stack's index table |
//! | `indexes[].source` | the attribute indexed: a map (one entry per key) or a list, SS or NS (one entry per element) |
//! | `indexes[].partition_key`, `sort_key` | the index table's key attribute names (default `pk`, `sk`) |
//! | `indexes[].scope` | attributes that prefix the partition key, e.g. `project`: `35e9#3812` |
//! | `indexes[].tiebreakers` | attributes that follow the value in the sort key, e.g. `num` |
//! | `indexes[].include` | attributes copied into every entry, like a GSI's INCLUDE projection |
//! | `indexes[].key_format` | `"text"` (S sort key, the default) or `"binary"` (B sort key) |
//!
//! See the crate docs for the index item layout these produce.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Deserialize;
use stream_record::{ConfigError, Vars};

/// The variable that holds the index definitions.
pub(crate) const INDEXES_VAR: &str = "MULTIKEY_INDEXES";

/// The variable that names the index table of an index whose definition leaves `table` out: the
/// stack's own index table, so that a team's definition (the template's `MultikeyIndexes`) need
/// not know the name CloudFormation gives it.
pub(crate) const INDEX_TABLE_VAR: &str = "MULTIKEY_INDEX_TABLE";

/// Attribute names every index entry has besides its keys.
pub(crate) const ENTRY_ATTRIBUTE: &str = "entry";
/// The map value of an entry from a map source.
pub const VALUE_ATTRIBUTE: &str = "value";
/// The entry's version: the stream sequence number of the record whose write put it, as 40
/// digits ([`crate::entries::version`]). It orders writes of one entry, so that a repair or a
/// replay can delete an entry only if no newer record has put it since (`docs/formats.md`).
pub const VERSION_ATTRIBUTE: &str = "sidestream_seq";

/// How the sort key is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyFormat {
    /// A string (S) sort key: the key crate's text form.
    #[default]
    Text,
    /// A binary (B) sort key: the key crate's binary form.
    Binary,
}

/// One index over the base table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// A label for logs and errors.
    pub name: String,
    /// The index table.
    pub table: Arc<str>,
    /// The indexed attribute.
    pub source: String,
    /// The index table's partition key attribute.
    pub partition_key: String,
    /// The index table's sort key attribute.
    pub sort_key: String,
    /// Attributes that scope the partition key.
    pub scope: Vec<String>,
    /// Attributes that follow the value in the sort key.
    pub tiebreakers: Vec<String>,
    /// Attributes copied into each entry.
    pub include: Vec<String>,
    /// The sort key's encoding.
    pub key_format: KeyFormat,
}

/// The indexes to keep, and the base table's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Indexes {
    /// The base table's key attributes, partition key first.
    pub base_key: Vec<String>,
    /// The indexes.
    pub indexes: Vec<Index>,
    /// How long a removed entry's tombstone lasts, in either order, past its writing (or its record's
    /// change, if later; `crate::tombstone`): `MULTIKEY_MAX_RECORD_AGE_SECONDS` (the event source mapping's
    /// `MaximumRecordAgeInSeconds`, Lambda's longest, 7 days, when unset) plus
    /// [`crate::tombstone::MARGIN_SECONDS`].
    pub tombstone_seconds: u64,
    /// The epoch of the versions written (`MULTIKEY_VERSION_EPOCH`, 0 when unset): raised with
    /// every switch of the index's change source, so that every write from the new source is
    /// newer than every write from the old, whose positions do not compare
    /// ([`crate::entries::version_in`]; docs/formats.md, "Versions across a stack's life").
    pub version_epoch: u32,
    /// Whether the indexer writes each item's fence (`MULTIKEY_FENCE_HEADS`, off when unset):
    /// the version head the release before tombstones conditioned its writes on, while that
    /// release may still run beside this one (`crate::head`).
    pub fence_heads: bool,
}

/// The variable that turns fences on ([`Indexes::fence_heads`]).
pub(crate) const FENCE_VAR: &str = "MULTIKEY_FENCE_HEADS";

/// The variable that holds the versions' epoch ([`Indexes::version_epoch`]).
pub(crate) const EPOCH_VAR: &str = "MULTIKEY_VERSION_EPOCH";

/// The variable that holds the event source mapping's `MaximumRecordAgeInSeconds`.
pub(crate) const RECORD_AGE_VAR: &str = "MULTIKEY_MAX_RECORD_AGE_SECONDS";

/// Lambda's longest `MaximumRecordAgeInSeconds`: a tombstone that outlives it is safe under any
/// mapping.
pub const LONGEST_RECORD_AGE_SECONDS: u64 = 604_800;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIndexes {
    base_key: Vec<String>,
    indexes: Vec<RawIndex>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIndex {
    name: String,
    #[serde(default)]
    table: Option<String>,
    source: String,
    #[serde(default = "default_pk")]
    partition_key: String,
    #[serde(default = "default_sk")]
    sort_key: String,
    #[serde(default)]
    scope: Vec<String>,
    #[serde(default)]
    tiebreakers: Vec<String>,
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    key_format: KeyFormat,
}

fn default_pk() -> String {
    "pk".to_owned()
}

fn default_sk() -> String {
    "sk".to_owned()
}

impl Indexes {
    /// The same configuration with `index` alone.
    #[must_use]
    pub fn only(&self, index: &Index) -> Indexes {
        Indexes { indexes: vec![index.clone()], ..self.clone() }
    }

    /// Reads and validates `MULTIKEY_INDEXES` (an index without `table` in `MULTIKEY_INDEX_TABLE`),
    /// `MULTIKEY_MAX_RECORD_AGE_SECONDS` (60 to 604,800, what Lambda accepts),
    /// `MULTIKEY_VERSION_EPOCH` (0 to 99) and `MULTIKEY_FENCE_HEADS`.
    pub fn from_vars(vars: &Vars<'_>) -> Result<Indexes, ConfigError> {
        let json =
            vars.required(INDEXES_VAR, "a JSON object with base_key and indexes (docs/functions.md)")?;
        let table = vars.optional(INDEX_TABLE_VAR);
        let mut indexes = Indexes::from_json_in(&json, table.as_deref())
            .map_err(|reason| ConfigError::Invalid { var: INDEXES_VAR, reason })?;
        let age = vars.integer(RECORD_AGE_VAR, LONGEST_RECORD_AGE_SECONDS, 60, LONGEST_RECORD_AGE_SECONDS)?;
        indexes.tombstone_seconds = age + crate::tombstone::MARGIN_SECONDS;
        let epoch = vars.integer(EPOCH_VAR, 0, 0, u64::from(crate::entries::LAST_EPOCH))?;
        indexes.version_epoch = u32::try_from(epoch).unwrap_or(crate::entries::LAST_EPOCH);
        indexes.fence_heads = vars.flag(FENCE_VAR, false)?;
        Ok(indexes)
    }

    /// Parses and validates index definitions, each naming its table; the error says which field
    /// is wrong.
    pub fn from_json(json: &str) -> Result<Indexes, String> {
        Indexes::from_json_in(json, None)
    }

    /// [`Indexes::from_json`], where an index that leaves out `table` is in `default_table`.
    pub fn from_json_in(json: &str, default_table: Option<&str>) -> Result<Indexes, String> {
        let raw: RawIndexes = serde_json::from_str(json).map_err(|e| format!("not valid index JSON: {e}"))?;
        let base_key = raw.base_key;
        if base_key.is_empty() || base_key.len() > 2 {
            return Err(format!("base_key must name 1 or 2 attributes, found {}", base_key.len()));
        }
        check_names("base_key", &base_key)?;
        if base_key.len() == 2 && base_key[0] == base_key[1] {
            return Err(format!("base_key names {:?} twice", base_key[0]));
        }
        if raw.indexes.is_empty() {
            return Err("indexes is empty: define at least one index".to_owned());
        }
        let mut names = BTreeSet::new();
        let mut tables = BTreeSet::new();
        let mut indexes = Vec::with_capacity(raw.indexes.len());
        for (i, r) in raw.indexes.into_iter().enumerate() {
            let at = format!("indexes[{i}]");
            let table = match (r.table, default_table) {
                (Some(table), _) => table,
                (None, Some(table)) => table.to_owned(),
                (None, None) => {
                    return Err(format!(
                        "{at}.table is missing: name the index table, or set {INDEX_TABLE_VAR} to the one an index without it uses"
                    ));
                }
            };
            for (field, value) in [("name", &r.name), ("table", &table), ("source", &r.source)] {
                if value.trim().is_empty() {
                    return Err(format!("{at}.{field} is empty"));
                }
            }
            if !names.insert(r.name.clone()) {
                return Err(format!("{at}.name {:?} is used by an earlier index", r.name));
            }
            if !tables.insert(table.clone()) {
                return Err(format!(
                    "{at}.table {table:?} is used by an earlier index; give each index its own table so their keys cannot collide"
                ));
            }
            // Every attribute an entry carries must have exactly one role.
            let mut roles: Vec<(&str, &str)> = vec![
                ("partition_key", &r.partition_key),
                ("sort_key", &r.sort_key),
                ("the entry attribute", ENTRY_ATTRIBUTE),
                ("the value attribute", VALUE_ATTRIBUTE),
                ("the version attribute", VERSION_ATTRIBUTE),
                ("the tombstone attribute", crate::tombstone::EXPIRES_ATTRIBUTE),
            ];
            roles.extend(base_key.iter().map(|a| ("base_key", a.as_str())));
            for (field, list) in
                [("scope", &r.scope), ("tiebreakers", &r.tiebreakers), ("include", &r.include)]
            {
                check_names(&format!("{at}.{field}"), list)?;
                roles.extend(list.iter().map(|a| (field, a.as_str())));
            }
            for (j, (role, name)) in roles.iter().enumerate() {
                if name.is_empty() {
                    return Err(format!("{at}.{role} is empty"));
                }
                if let Some((other, _)) = roles[..j].iter().find(|(_, n)| n == name) {
                    return Err(format!(
                        "{at}: attribute {name:?} appears as {other} and as {role}; each entry attribute needs one role"
                    ));
                }
            }
            if base_key.contains(&r.source)
                || r.scope.contains(&r.source)
                || r.tiebreakers.contains(&r.source)
            {
                return Err(format!(
                    "{at}.source {:?} is also a key, scope or tiebreaker attribute",
                    r.source
                ));
            }
            indexes.push(Index {
                name: r.name,
                table: Arc::from(table),
                source: r.source,
                partition_key: r.partition_key,
                sort_key: r.sort_key,
                scope: r.scope,
                tiebreakers: r.tiebreakers,
                include: r.include,
                key_format: r.key_format,
            });
        }
        Ok(Indexes {
            base_key,
            indexes,
            tombstone_seconds: LONGEST_RECORD_AGE_SECONDS + crate::tombstone::MARGIN_SECONDS,
            version_epoch: 0,
            fence_heads: false,
        })
    }
}

fn check_names(field: &str, names: &[String]) -> Result<(), String> {
    match names.iter().position(String::is_empty) {
        Some(i) => Err(format!("{field}[{i}] is an empty attribute name")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
