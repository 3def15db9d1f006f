//! Checks that what the functions keep is exact, from first principles: the index against the
//! base table, a counter's total against its shards. The demo prints them and the end-to-end
//! tests assert them.

use std::collections::HashMap;

use anyhow::Context as _;
use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodb::types::AttributeValue;
use multikey_indexer::{Indexes, Plan};
use serde_json::{Value, json};
use stream_kit::Op;

use crate::local::Stack;

/// Every item of `table` (all pages of a Scan), as DynamoDB JSON.
pub async fn scan(client: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<Vec<Value>> {
    let mut items = Vec::new();
    let mut start: Option<HashMap<String, AttributeValue>> = None;
    loop {
        let page = client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .with_context(|| format!("Scan {table}"))?;
        for item in page.items() {
            items.push(serde_json::to_value(serde_dynamo::Item::from(item.clone()))?);
        }
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return Ok(items),
        }
    }
}

/// The index items `indexes` calls for, given the base table's items (DynamoDB JSON): what the
/// indexer would write if every item were inserted afresh. One JSON line each, sorted.
pub fn expected_index(indexes: &Indexes, base: &[Value]) -> anyhow::Result<Vec<String>> {
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
            .context("a base item that is not DynamoDB JSON")
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plan = Plan::new(indexes, &records);
    if let Some(stopped) = plan.stopped {
        anyhow::bail!(
            "base item {} cannot be indexed: {}",
            stopped.record,
            stopped.error
        );
    }
    let mut lines = plan
        .writes
        .into_iter()
        .filter_map(|w| match w.op {
            Op::Put(item) => Some(serde_json::to_value(item).map(|v| v.to_string())),
            Op::Delete(_) => None,
        })
        .collect::<Result<Vec<_>, _>>()?;
    lines.sort();
    Ok(lines)
}

/// Items as sorted JSON lines, to compare with [`expected_index`].
pub fn lines(items: &[Value]) -> Vec<String> {
    let mut lines: Vec<String> = items.iter().map(Value::to_string).collect();
    lines.sort();
    lines
}

/// The index table against what the issues table calls for, both named by `stack`, under the
/// indexer's configuration there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexCheck {
    /// Entries the issues call for that the index lacks (JSON lines).
    pub missing: Vec<String>,
    /// Entries in the index that no issue calls for.
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

/// Compares the index table of `stack` with what its issues table calls for.
pub async fn index(client: &aws_sdk_dynamodb::Client, stack: &Stack) -> anyhow::Result<IndexCheck> {
    let env = stack.environment("multikey-indexer")?;
    let lookup = |name: &str| env.get(name).cloned();
    let indexes = multikey_indexer::Indexes::from_vars(&stream_kit::Vars::new(&lookup))?;
    let base = scan(client, &stack.table("IssuesTable")?.name).await?;
    let expected = expected_index(&indexes, &base)?;
    let actual = lines(&scan(client, &stack.table("IndexTable")?.name).await?);
    let (missing, extra) = difference(&expected, &actual);
    Ok(IndexCheck {
        missing,
        extra,
        entries: actual.len(),
    })
}

/// How two sorted line lists differ: lines only in `expected`, and lines only in `actual`.
pub fn difference(expected: &[String], actual: &[String]) -> (Vec<String>, Vec<String>) {
    let missing = expected
        .iter()
        .filter(|l| actual.binary_search(l).is_err())
        .cloned()
        .collect();
    let extra = actual
        .iter()
        .filter(|l| expected.binary_search(l).is_err())
        .cloned()
        .collect();
    (missing, extra)
}
