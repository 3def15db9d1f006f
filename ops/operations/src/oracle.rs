//! The multikey index a base table calls for, and how an index table differs from
//! it: what the demo prints, the end-to-end tests and the chaos run assert, and `index verify`
//! reports as drift (`ops/operations/src/verify.rs`; repairs go through the stream, not through this).
//!
//! The expected entries are computed **independently of the indexer**: straight from the rules
//! of `docs/formats.md` ("Index items") over the base items' DynamoDB JSON, with the key crate
//! as the format's encoder. This crate shares no keying code with the indexer: it takes only
//! the index *definitions* from `formats` (`Indexes`), never its `entries`, and never
//! the indexer's `Plan`. So a keying bug in the indexer shows up as a difference here. The unit
//! tests check the two agree on generated data, the 400 KB rule included.

use std::collections::BTreeMap;

use base64::Engine as _;
use key_codec::{BinaryKey, Dir, HierKey, KeyKind, Number, TextKey, Value as Component, truncate_for_text};
use serde_json::{Map, Value, json};

use formats::{Index, Indexes, KeyFormat};

/// The largest item DynamoDB stores: an entry that would be larger has none (the indexer parks
/// the record that calls for it, `docs/formats.md`).
const MAX_ITEM_BYTES: usize = 400 * 1024;

/// What every entry carries beside its content: the version attribute and its 40 digits.
const VERSION_BYTES: usize = formats::VERSION_ATTRIBUTE.len() + 40;

/// Why the expected index cannot be computed.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// A base item is not DynamoDB JSON.
    #[error("base item {item} is not DynamoDB JSON: {reason}")]
    NotDynamoJson {
        /// Its position in the scan.
        item: usize,
        /// Why.
        reason: String,
    },
    /// A base item cannot be indexed under the configuration (it lacks a key attribute, say).
    #[error("base item {item} cannot be indexed: {reason}")]
    Unindexable {
        /// Its position in the scan.
        item: usize,
        /// Why.
        reason: String,
    },
}

/// The index table against what the base table calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexCheck {
    /// Entries the base items call for that the index lacks (JSON lines).
    pub missing: Vec<String>,
    /// Entries in the index that no base item calls for (JSON lines).
    pub extra: Vec<String>,
    /// Entries in the index.
    pub entries: usize,
}

impl IndexCheck {
    /// Whether the index is exact.
    pub fn is_exact(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty()
    }
}

/// Compares `index` (the index table's items) with what `base` (the base table's items) calls
/// for under `indexes`; both as DynamoDB JSON.
pub fn compare(indexes: &Indexes, base: &[Value], index: &[Value]) -> Result<IndexCheck, OracleError> {
    let expected = expected_index(indexes, base)?;
    let entries: Vec<Value> = index.iter().filter(|i| is_entry(indexes, i)).cloned().collect();
    let actual = lines(&entries);
    let (missing, extra) = difference(&expected, &actual);
    Ok(IndexCheck { missing, extra, entries: actual.len() })
}

/// The index items `indexes` calls for, given the base table's items (DynamoDB JSON): one JSON
/// line each, sorted. An item without its base key is an error; a member that cannot be keyed
/// (its value is a map, list or set, or too long for the key) has no entry.
pub(crate) fn expected_index(indexes: &Indexes, base: &[Value]) -> Result<Vec<String>, OracleError> {
    let mut lines = Vec::new();
    for (i, item) in base.iter().enumerate() {
        let Some(item) = item.as_object() else {
            return Err(OracleError::NotDynamoJson { item: i, reason: "not an object".to_owned() });
        };
        let mut key = Vec::with_capacity(indexes.base_key.len());
        for name in &indexes.base_key {
            let value = item.get(name).ok_or_else(|| OracleError::Unindexable {
                item: i,
                reason: format!("it has no {name:?}, which base_key names"),
            })?;
            key.push((name.as_str(), value));
        }
        for index in &indexes.indexes {
            for entry in entries(index, &key, item) {
                lines.push(entry.to_string());
            }
        }
    }
    lines.sort();
    Ok(lines)
}

/// A member of the source attribute: its entry value, and its map value (maps only).
type Members<'a> = BTreeMap<String, (Value, Option<&'a Value>)>;

/// The members of `source`: map entries with a scalar value, or distinct S and N elements
/// (numbers by their canonical text), each id once, the first occurrence kept.
fn members(source: &Value) -> Members<'_> {
    fn add<'a>(members: &mut Members<'a>, id: String, entry: Value, value: Option<&'a Value>) {
        members.entry(id).or_insert((entry, value));
    }
    let mut members = Members::new();
    match typed(source) {
        Some(("M", Value::Object(map))) => {
            for (k, v) in map {
                if matches!(typed(v), Some(("S" | "N" | "B" | "BOOL" | "NULL", _))) {
                    add(&mut members, k.clone(), json!({"S": k}), Some(v));
                }
            }
        }
        Some(("SS", Value::Array(items))) => {
            for s in items.iter().filter_map(Value::as_str) {
                add(&mut members, s.to_owned(), json!({"S": s}), None);
            }
        }
        Some((kind @ ("NS" | "L"), Value::Array(items))) => {
            for element in items {
                let (text, is_number) = match (kind, element) {
                    ("NS", Value::String(n)) => (n.as_str(), true),
                    ("L", element) => match typed(element) {
                        Some(("S", Value::String(s))) => (s.as_str(), false),
                        Some(("N", Value::String(n))) => (n.as_str(), true),
                        _ => continue,
                    },
                    _ => continue,
                };
                if !is_number {
                    add(&mut members, text.to_owned(), json!({"S": text}), None);
                } else if let Ok(n) = Number::parse(text) {
                    add(&mut members, n.to_string(), json!({"N": text}), None);
                }
            }
        }
        _ => {}
    }
    members
}

/// The sort key's tail: the tiebreakers (NULL when missing), then the base key; `None` when one
/// of them is not a scalar.
fn tail(index: &Index, key: &[(&str, &Value)], item: &Map<String, Value>) -> Option<Vec<Component>> {
    let tiebreakers =
        index.tiebreakers.iter().map(|name| item.get(name).map_or(Some(Component::Null), component));
    tiebreakers.chain(key.iter().map(|(_, v)| component(v))).collect()
}

/// The entries of one item for one index, by the rules of `docs/formats.md`.
fn entries(index: &Index, key: &[(&str, &Value)], item: &Map<String, Value>) -> Vec<Value> {
    let Some(source) = item.get(&index.source) else {
        return Vec::new();
    };
    // The partition key's scope segments: S or N values, all present.
    let mut scope = Vec::with_capacity(index.scope.len());
    for name in &index.scope {
        match item.get(name).and_then(typed) {
            Some(("S" | "N", Value::String(s))) => scope.push(s.as_str()),
            _ => return Vec::new(),
        }
    }
    let Some(tail) = tail(index, key, item) else {
        return Vec::new();
    };
    let tail_bytes = encode(index.key_format, &tail).len();
    if tail_bytes > KeyKind::Sort.max_bytes() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (id, (entry, value)) in members(source) {
        let mut pk = None::<HierKey>;
        for segment in scope.iter().copied().chain([id.as_str()]) {
            pk = Some(match pk {
                None => HierKey::new(segment),
                Some(k) => k.push(segment),
            });
        }
        let Some(Ok(pk)) = pk.map(|k| k.finish(KeyKind::Partition)) else {
            continue;
        };
        let mut tuple = Vec::with_capacity(tail.len() + 1);
        if let Some(value) = value {
            // A value whose component does not fit beside the tail: strings are cut at a
            // character boundary to fit; anything else has no entry.
            let Some(mut first) = component(value) else {
                continue;
            };
            let budget = KeyKind::Sort.max_bytes() - tail_bytes;
            if encode(index.key_format, std::slice::from_ref(&first)).len() > budget {
                let Component::String(s) = &first else { continue };
                first = Component::String(match index.key_format {
                    KeyFormat::Text => truncate_for_text(s, Dir::Asc, budget).to_owned(),
                    KeyFormat::Binary => key_codec::truncate_for_binary(s, budget).to_owned(),
                });
            }
            tuple.push(first);
        }
        tuple.extend(tail.iter().cloned());
        let Some(sk) = sort_key(index.key_format, &tuple) else {
            continue;
        };
        let mut entry_item = Map::new();
        for name in index.scope.iter().chain(&index.tiebreakers).chain(&index.include) {
            if let Some(v) = item.get(name) {
                entry_item.insert(name.clone(), v.clone());
            }
        }
        for (name, v) in key {
            entry_item.insert((*name).to_owned(), (*v).clone());
        }
        entry_item.insert(index.partition_key.clone(), json!({"S": pk}));
        entry_item.insert(index.sort_key.clone(), sk);
        entry_item.insert("entry".to_owned(), entry);
        if let Some(value) = value {
            entry_item.insert("value".to_owned(), value.clone());
        }
        if item_size(&entry_item) + VERSION_BYTES > MAX_ITEM_BYTES {
            continue;
        }
        out.push(Value::Object(entry_item));
    }
    out
}

/// The sort key of `tuple` as a DynamoDB JSON value; `None` when it is too long.
fn sort_key(format: KeyFormat, tuple: &[Component]) -> Option<Value> {
    let components = tuple.iter().map(|c| (c, Dir::Asc));
    match format {
        KeyFormat::Text => {
            TextKey::from_tuple(components).finish(KeyKind::Sort).ok().map(|k| json!({"S": k}))
        }
        KeyFormat::Binary => BinaryKey::from_tuple(components)
            .finish(KeyKind::Sort)
            .ok()
            .map(|k| json!({"B": base64::engine::general_purpose::STANDARD.encode(k)})),
    }
}

/// An item's size as DynamoDB counts it, read from its DynamoDB JSON: each attribute's name in
/// UTF-8 bytes plus its value's size.
fn item_size(item: &Map<String, Value>) -> usize {
    item.iter().map(|(name, v)| name.len() + value_size(v)).sum()
}

/// A DynamoDB JSON value's size: strings by their UTF-8 bytes, binaries by their decoded bytes,
/// numbers one byte per two significant digits plus one, booleans and nulls one byte, lists and
/// maps three bytes plus one per element (and their keys), sets their elements.
fn value_size(value: &Value) -> usize {
    let binary = |b: &Value| {
        b.as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .map_or(0, |bytes| bytes.len())
    };
    let number = |n: &Value| {
        let digits = n
            .as_str()
            .unwrap_or("")
            .split(['e', 'E'])
            .next()
            .unwrap_or("")
            .chars()
            .filter(char::is_ascii_digit)
            .collect::<String>();
        digits.trim_start_matches('0').trim_end_matches('0').len().max(1).div_ceil(2) + 1
    };
    match typed(value) {
        Some(("S", s)) => s.as_str().map_or(0, str::len),
        Some(("N", n)) => number(n),
        Some(("B", b)) => binary(b),
        Some(("BOOL" | "NULL", _)) => 1,
        Some(("L", list)) => 3 + elements(list).iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        Some(("M", Value::Object(map))) => {
            3 + map.iter().map(|(k, v)| 1 + k.len() + value_size(v)).sum::<usize>()
        }
        Some(("SS", set)) => elements(set).iter().map(|s| s.as_str().map_or(0, str::len)).sum(),
        Some(("NS", set)) => elements(set).iter().map(number).sum(),
        Some(("BS", set)) => elements(set).iter().map(binary).sum(),
        _ => 0,
    }
}

/// A DynamoDB JSON list's or set's elements (none when it is not an array).
fn elements(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// A DynamoDB JSON value's type and content.
fn typed(value: &Value) -> Option<(&str, &Value)> {
    let object = value.as_object().filter(|o| o.len() == 1)?;
    object.iter().next().map(|(k, v)| (k.as_str(), v))
}

/// A scalar DynamoDB JSON value as a key component; `None` for anything else.
fn component(value: &Value) -> Option<Component> {
    match typed(value)? {
        ("S", Value::String(s)) => Some(Component::String(s.clone())),
        ("N", Value::String(n)) => Number::parse(n).ok().map(Component::Number),
        ("B", Value::String(b)) => {
            base64::engine::general_purpose::STANDARD.decode(b).ok().map(Component::Binary)
        }
        ("BOOL", Value::Bool(b)) => Some(Component::Bool(*b)),
        ("NULL", _) => Some(Component::Null),
        _ => None,
    }
}

/// The encoding of `components`, ascending, in `format`.
fn encode(format: KeyFormat, components: &[Component]) -> Vec<u8> {
    match format {
        KeyFormat::Text => {
            TextKey::from_tuple(components.iter().map(|c| (c, Dir::Asc))).into_string().into_bytes()
        }
        KeyFormat::Binary => BinaryKey::from_tuple(components.iter().map(|c| (c, Dir::Asc))).into_bytes(),
    }
}

/// Whether an index table's item (DynamoDB JSON) is an entry: not a removed entry's tombstone
/// (`docs/formats.md`, "Tombstones": it has `sidestream_expires`, which no entry has), nor a
/// version head an earlier version wrote ("Version heads (retired)": its partition key starts
/// with `%head#`, which no entry's can). Both are the indexer's bookkeeping: the base calls for
/// neither.
pub fn is_entry(indexes: &Indexes, item: &Value) -> bool {
    let tombstone =
        item.as_object().is_some_and(|o| formats::tombstone::is_tombstone(o.keys().map(String::as_str)));
    let head = indexes.indexes.iter().any(|index| {
        item.get(&index.partition_key)
            .and_then(|pk| pk.get("S"))
            .and_then(Value::as_str)
            .is_some_and(formats::head::is_head)
    });
    !tombstone && !head
}

/// Items as sorted JSON lines, to compare with [`expected_index`]: their content, without the
/// version attribute (which record wrote an entry is provenance, not what the base calls for).
pub fn lines(items: &[Value]) -> Vec<String> {
    let mut lines: Vec<String> = items.iter().map(|item| content(item).to_string()).collect();
    lines.sort();
    lines
}

/// An index item without its version attribute (`sidestream_seq`, `docs/formats.md`).
pub fn content(item: &Value) -> Value {
    let mut item = item.clone();
    if let Some(map) = item.as_object_mut() {
        map.remove(formats::VERSION_ATTRIBUTE);
    }
    item
}

/// How two sorted line lists differ: lines only in `expected`, and lines only in `actual`.
fn difference(expected: &[String], actual: &[String]) -> (Vec<String>, Vec<String>) {
    let only =
        |a: &[String], b: &[String]| a.iter().filter(|l| b.binary_search(l).is_err()).cloned().collect();
    (only(expected, actual), only(actual, expected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stream_runtime::fixture::Change;

    use crate::fixtures::example_indexes as indexes;

    fn issue(id: &str, fields: &Value) -> Value {
        json!({"id": {"S": id}, "project": {"S": "p1"}, "num": {"N": "1"}, "name": {"S": "n"},
               "state": {"S": "open"}, "custom_fields": {"M": fields}})
    }

    #[test]
    fn an_index_built_from_the_base_items_is_exact_and_a_changed_one_is_not() {
        let indexes = indexes();
        let base = vec![issue("a", &json!({"f1": {"N": "1"}, "f2": {"S": "x"}}))];
        let exact: Vec<Value> = expected_index(&indexes, &base)
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(exact.len(), 2);
        let check = compare(&indexes, &base, &exact).unwrap();
        assert!(check.is_exact());
        assert_eq!(check.entries, 2);

        let mut stale = exact.clone();
        stale[0]["value"] = json!({"N": "2"});
        let check = compare(&indexes, &base, &stale).unwrap();
        assert_eq!((check.missing.len(), check.extra.len()), (1, 1));
        assert!(check.extra[0].contains(r#""N":"2""#), "{:?}", check.extra);
    }

    #[test]
    fn a_base_item_without_the_key_is_named() {
        let item = json!({"project": {"S": "p1"}, "custom_fields": {"M": {"f1": {"N": "1"}}}});
        let error = expected_index(&indexes(), &[item]).unwrap_err();
        assert!(matches!(error, OracleError::Unindexable { item: 0, .. }), "{error}");
    }

    /// The entries the indexer's own plan writes for INSERTs of `base`: what the oracle must
    /// agree with, computed the other way.
    fn planned(indexes: &Indexes, base: &[Value]) -> Vec<String> {
        let records: Vec<aws_lambda_events::event::dynamodb::EventRecord> = base
            .iter()
            .enumerate()
            .map(|(i, item)| {
                Change::insert(json!({"id": item["id"]}))
                    .new_image(item.clone())
                    .event_id(i)
                    .sequence(i + 1)
                    .record()
                    .unwrap()
            })
            .collect();
        let plan =
            multikey_indexer::Plan::from_wire(indexes, &stream_runtime::WireRecord::view_all(&records));
        let mut lines: Vec<String> = plan
            .writes
            .into_iter()
            .filter_map(|w| match w.op {
                // A tombstone (the removal of an entry that cannot be, or is no longer, called
                // for) is not an entry.
                stream_runtime::Op::Put(item)
                    if formats::tombstone::is_tombstone(item.iter().map(|(name, _)| name)) =>
                {
                    None
                }
                stream_runtime::Op::Put(item) => {
                    Some(content(&serde_json::to_value(item).unwrap()).to_string())
                }
                stream_runtime::Op::Delete(_) => None,
            })
            .collect();
        lines.sort();
        lines
    }

    /// An entry over DynamoDB's 400 KB has none: the indexer parks its record and puts no entry
    /// (only, its record carrying a change time as AWS's do, the tombstone that keeps an older
    /// entry of that key from standing), so the oracle calls for nothing. A base item can hold such a value (its entry adds the
    /// sort key, which repeats the value's first kilobyte).
    #[test]
    fn an_entry_over_400_kb_is_not_called_for_and_the_indexer_puts_none() {
        let indexes = indexes();
        let field = |n: usize| json!({"big": {"S": "v".repeat(n)}});
        let base =
            vec![issue("under", &field(MAX_ITEM_BYTES - 3_000)), issue("over", &field(MAX_ITEM_BYTES - 600))];
        let expected = expected_index(&indexes, &base).unwrap();
        assert_eq!(expected.len(), 1);
        assert!(expected[0].contains(r#""id":{"S":"under"}"#));
        assert_eq!(planned(&indexes, &base), expected);
    }

    #[test]
    fn sizes_are_dynamodbs() {
        let b64 = base64::engine::general_purpose::STANDARD.encode([1_u8, 2, 3]);
        for (value, size) in [
            (json!({"S": "héllo"}), 6),
            (json!({"N": "12345"}), 4),
            (json!({"N": "-0.00100"}), 2),
            (json!({"B": b64}), 3),
            (json!({"BOOL": true}), 1),
            (json!({"NULL": true}), 1),
            (json!({"L": [{"S": "ab"}, {"N": "1"}]}), 3 + 3 + 3),
            (json!({"M": {"k": {"S": "ab"}}}), 3 + 1 + 1 + 2),
            (json!({"SS": ["a", "bc"]}), 3),
            (json!({"NS": ["1", "100"]}), 4),
        ] {
            assert_eq!(value_size(&value), size, "{value}");
        }
        let item = json!({"id": {"S": "abc"}, "n": {"N": "7"}});
        assert_eq!(item_size(item.as_object().unwrap()), 2 + 3 + 1 + 2);
    }

    /// Every kind of value the rules distinguish, as a custom field, a list element and a
    /// tiebreaker, in text and binary indexes: the oracle and the indexer agree entry for entry.
    #[test]
    fn the_oracle_and_the_indexer_agree_on_every_kind_of_value() {
        let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![7_u8; n]);
        let values = [
            json!({"N": "42"}),
            json!({"N": "-1.50"}),
            json!({"N": "1E+125"}),
            json!({"S": ""}),
            json!({"S": "a#b c%"}),
            json!({"S": "é".repeat(700)}),
            json!({"S": "9".repeat(2_048)}),
            json!({"B": b64(10)}),
            json!({"B": b64(2_048)}),
            json!({"BOOL": true}),
            json!({"NULL": true}),
            json!({"M": {"x": {"N": "1"}}}),
            json!({"L": [{"S": "a"}, {"N": "1"}, {"N": "1.0"}, {"BOOL": false}]}),
            json!({"SS": ["b", "a"]}),
            json!({"NS": ["2", "2.0", "10"]}),
        ];
        let mut base = Vec::new();
        for (i, value) in values.iter().enumerate() {
            let mut fields = Map::new();
            fields.insert(format!("f{i}"), value.clone());
            fields.insert("L".repeat(2_100), json!({"N": "1"}));
            let mut item = issue(&format!("m{i}"), &Value::Object(fields));
            // Tiebreakers of every kind too, and one missing.
            if i % 4 == 0 {
                item.as_object_mut().unwrap().remove("num");
            } else if i % 4 == 1 && value.get("N").is_none() {
                item["num"] = value.clone();
            }
            base.push(item);
            for source in [value.clone(), json!({"L": [value.clone(), {"S": "z"}]})] {
                let mut item = issue(&format!("s{i}-{}", base.len()), &json!({}));
                item["custom_fields"] = source;
                base.push(item);
            }
        }
        let text = indexes();
        let binary = Indexes::from_json(
            &crate::fixtures::EXAMPLE_INDEXES.replace(r#""include""#, r#""key_format": "binary", "include""#),
        )
        .unwrap();
        for indexes in [text, binary] {
            let oracle = expected_index(&indexes, &base).unwrap();
            assert!(oracle.len() >= 30, "{} entries", oracle.len());
            assert_eq!(oracle, planned(&indexes, &base));
        }
    }
}
