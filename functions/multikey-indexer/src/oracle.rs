//! The index the base table calls for, and how an index table differs from it: what the demo
//! prints and the end-to-end tests assert.
//!
//! The expected entries are computed by planning an INSERT of every base item with [`Plan`], the
//! indexer's own planning code, so a keying bug the plan shares cannot be caught here: this
//! checks that the stream path (delivery, coalescing, retries, deletes of stale entries) ends
//! where a fresh build would. An independent computation replaces it with `index verify`.

use aws_lambda_events::event::dynamodb::EventRecord;
use serde_json::{Value, json};
use stream_kit::Op;

use crate::{Indexes, Plan, PlanError};

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
    let actual = lines(index);
    let (missing, extra) = difference(&expected, &actual);
    Ok(IndexCheck {
        missing,
        extra,
        entries: actual.len(),
    })
}

/// The index items `indexes` calls for, given the base table's items (DynamoDB JSON): what the
/// indexer would write if every item were inserted afresh. One JSON line each, sorted.
pub fn expected_index(indexes: &Indexes, base: &[Value]) -> Result<Vec<String>, OracleError> {
    let records = base
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let keys: serde_json::Map<String, Value> = indexes
                .base_key
                .iter()
                .filter_map(|k| item.get(k).map(|v| (k.clone(), v.clone())))
                .collect();
            serde_json::from_value::<EventRecord>(json!({
                "eventID": i.to_string(), "eventName": "INSERT", "eventVersion": "1.1",
                "eventSource": "aws:dynamodb", "awsRegion": "us-east-1", "eventSourceARN": "check",
                "dynamodb": {
                    "Keys": keys, "NewImage": item, "SequenceNumber": (i + 1).to_string(),
                    "SizeBytes": 1, "StreamViewType": "NEW_AND_OLD_IMAGES"
                }
            }))
            .map_err(|e| OracleError::NotDynamoJson {
                item: i,
                reason: e.to_string(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let plan = Plan::new(indexes, &records);
    if let Some(stopped) = plan.stopped {
        return Err(OracleError::Unindexable {
            item: stopped.record,
            reason: stopped.error.to_string(),
        });
    }
    // An entry over the item size limit is expected to be absent: the indexer deletes its key
    // and parks the record. Any other rejection means the base item itself cannot be indexed.
    if let Some(rejected) = plan
        .rejected
        .iter()
        .find(|r| !matches!(r.error, PlanError::EntryTooLarge { .. }))
    {
        return Err(OracleError::Unindexable {
            item: rejected.record,
            reason: rejected.error.to_string(),
        });
    }
    let mut lines: Vec<String> = plan
        .writes
        .into_iter()
        .filter_map(|w| match w.op {
            Op::Put(item) => Some(serde_json::to_value(item).map(|v| v.to_string()).map_err(|e| {
                OracleError::NotDynamoJson {
                    item: w.origin,
                    reason: e.to_string(),
                }
            })),
            Op::Delete(_) => None,
        })
        .collect::<Result<_, _>>()?;
    lines.sort();
    Ok(lines)
}

/// Items as sorted JSON lines, to compare with [`expected_index`].
pub fn lines(items: &[Value]) -> Vec<String> {
    let mut lines: Vec<String> = items.iter().map(Value::to_string).collect();
    lines.sort();
    lines
}

/// How two sorted line lists differ: lines only in `expected`, and lines only in `actual`.
fn difference(expected: &[String], actual: &[String]) -> (Vec<String>, Vec<String>) {
    let only = |a: &[String], b: &[String]| {
        a.iter()
            .filter(|l| b.binary_search(l).is_err())
            .cloned()
            .collect()
    };
    (only(expected, actual), only(actual, expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indexes() -> Indexes {
        Indexes::from_json(include_str!("../indexes.example.json")).unwrap()
    }

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
        assert!(
            matches!(error, OracleError::Unindexable { item: 0, .. }),
            "{error}"
        );
    }
}
