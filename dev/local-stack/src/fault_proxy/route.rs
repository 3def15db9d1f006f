//! Where a request goes upstream: one emulator, or several, each table (with its stream) kept
//! whole on one of them, so that the emulator's work spreads over more than one core.
//!
//! moto answers one DynamoDB request at a time, on one core. Tables do not share state in
//! DynamoDB except through requests that name several of them (`BatchWriteItem`,
//! `TransactWriteItems` …), and a table's stream is the table's own, so a set of motos, each
//! holding some of the tables, behaves as one DynamoDB as long as every request goes to the moto
//! that holds every table it names. [`Upstreams::pick`] finds those names in the request (its
//! `TableName`, `RequestItems`, `TransactItems`, or the table in a stream ARN or moto's shard
//! iterator); a request that names tables on two motos, or a DynamoDB request that names none
//! (`ListTables`), cannot be answered that way and is refused by name. Requests to other services
//! (S3, SQS …) go to one moto chosen for them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde::de::IgnoredAny;

/// Which upstream holds a table, by the table's name.
type TableRule = dyn Fn(&str) -> usize + Send + Sync;

/// The emulators behind a proxy, and which one holds each table.
#[derive(Clone)]
pub struct Upstreams {
    urls: Vec<String>,
    table: Arc<TableRule>,
    others: usize,
    sent: Arc<[AtomicU64]>,
}

impl fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstreams")
            .field("urls", &self.urls)
            .field("others", &self.others)
            .finish_non_exhaustive()
    }
}

/// A request that cannot be sent to one upstream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unroutable {
    /// It names tables held by different emulators.
    #[error("{operation} names tables held by different emulators ({tables}); split the tables another way")]
    Split {
        /// The operation.
        operation: String,
        /// The tables it names.
        tables: String,
    },
    /// A DynamoDB request that names no table, which only one emulator could answer.
    #[error("{operation} names no table, and each emulator holds only some of them")]
    NoTable {
        /// The operation.
        operation: String,
    },
}

impl Upstreams {
    /// Everything to one emulator at `url` (`http://127.0.0.1:PORT`).
    pub fn one(url: &str) -> Upstreams {
        Upstreams::by_table(vec![url.to_owned()], |_| 0, 0)
    }

    /// The emulators at `urls`: a table's requests go to `urls[table(name)]`, and requests to
    /// other services to `urls[others]` (indices past the end wrap).
    pub(crate) fn by_table(
        urls: Vec<String>,
        table: impl Fn(&str) -> usize + Send + Sync + 'static,
        others: usize,
    ) -> Upstreams {
        let urls: Vec<String> = urls.into_iter().map(|u| u.trim_end_matches('/').to_owned()).collect();
        let sent = (0..urls.len()).map(|_| AtomicU64::new(0)).collect();
        Upstreams { urls, table: Arc::new(table), others, sent }
    }

    /// How many requests have been sent to each emulator, in the order of their URLs.
    pub fn sent(&self) -> Vec<u64> {
        self.sent.iter().map(|n| n.load(Ordering::Relaxed)).collect()
    }

    /// The URL to send a request to, from its `X-Amz-Target` (empty for S3 and the query
    /// protocols) and its body; counts it as sent there.
    pub fn pick(&self, target: &str, body: &[u8]) -> Result<&str, Unroutable> {
        let at = self.index(target, body)?;
        let at = at.checked_rem(self.urls.len()).unwrap_or(0);
        if let Some(sent) = self.sent.get(at) {
            sent.fetch_add(1, Ordering::Relaxed);
        }
        Ok(self.urls.get(at).map_or("", String::as_str))
    }

    fn index(&self, target: &str, body: &[u8]) -> Result<usize, Unroutable> {
        if self.urls.len() < 2 {
            return Ok(0);
        }
        if !target.starts_with("DynamoDB") {
            return Ok(self.others);
        }
        let operation = target.rsplit('.').next().unwrap_or(target);
        let tables = tables_named(body);
        let mut chosen: Option<usize> = None;
        for table in &tables {
            let at = (self.table)(table) % self.urls.len();
            if chosen.is_some_and(|c| c != at) {
                return Err(Unroutable::Split { operation: operation.to_owned(), tables: tables.join(", ") });
            }
            chosen = Some(at);
        }
        chosen.ok_or_else(|| Unroutable::NoTable { operation: operation.to_owned() })
    }
}

/// The tables a DynamoDB or DynamoDB Streams request body names, in order, each once. Stream
/// ARNs and moto's shard iterators (which begin with the stream's ARN) name their table.
#[expect(clippy::zero_sized_map_values, reason = "of `RequestItems` only the keys are read: the tables")]
pub(crate) fn tables_named(body: &[u8]) -> Vec<String> {
    let Ok(request) = serde_json::from_slice::<Named<'_>>(body) else {
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    };
    if let Some(name) = &request.table_name {
        add(name);
    }
    for name in request.request_items.iter().flat_map(BTreeMap::keys) {
        add(name);
    }
    for item in request.transact_items.iter().flatten() {
        for name in item.values().filter_map(|op| op.table_name.as_deref()) {
            add(name);
        }
    }
    for arn in [&request.stream_arn, &request.shard_iterator, &request.resource_arn].into_iter().flatten() {
        if let Some(name) = table_in_arn(arn) {
            add(name);
        }
    }
    names
}

/// The table in `arn:aws:dynamodb:REGION:ACCOUNT:table/NAME[/stream/…]`.
fn table_in_arn(arn: &str) -> Option<&str> {
    let (_, rest) = arn.split_once(":table/")?;
    rest.split('/').next()
}

/// The parts of a request body that name tables; everything else is skipped unread.
#[derive(Deserialize)]
#[expect(clippy::zero_sized_map_values, reason = "of `RequestItems` only the keys are read: the tables")]
struct Named<'a> {
    #[serde(rename = "TableName", borrow, default)]
    table_name: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "RequestItems", default)]
    request_items: Option<BTreeMap<String, IgnoredAny>>,
    #[serde(rename = "TransactItems", default)]
    transact_items: Option<Vec<BTreeMap<String, Operation<'a>>>>,
    #[serde(rename = "StreamArn", borrow, default)]
    stream_arn: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "ShardIterator", borrow, default)]
    shard_iterator: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "ResourceArn", borrow, default)]
    resource_arn: Option<std::borrow::Cow<'a, str>>,
}

/// One of `TransactItems`' `Put`, `Update`, `Delete`, `ConditionCheck` or `Get`.
#[derive(Deserialize)]
struct Operation<'a> {
    #[serde(rename = "TableName", borrow, default)]
    table_name: Option<std::borrow::Cow<'a, str>>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const DDB: &str = "DynamoDB_20120810.";

    fn two() -> Upstreams {
        Upstreams::by_table(
            vec!["http://a".into(), "http://b/".into()],
            |name| usize::from(name != "issues"),
            1,
        )
    }

    #[test]
    fn each_request_shape_names_its_tables() {
        let iterator =
            "arn:aws:dynamodb:us-east-1:123456789012:table/issues/stream/2026-11-25T00:00:00.000|1|AAAA/b+c=";
        for (body, expected) in [
            (json!({"TableName": "issues", "Key": {"id": {"S": "1"}}}), vec!["issues"]),
            (
                json!({"RequestItems": {"index": [{"PutRequest": {"Item": {}}}], "counters": []}}),
                vec!["counters", "index"],
            ),
            (
                json!({"TransactItems": [
                    {"Put": {"TableName": "index", "Item": {}}},
                    {"ConditionCheck": {"TableName": "issues", "Key": {}}},
                    {"Update": {"TableName": "index", "Key": {}}}
                ]}),
                vec!["index", "issues"],
            ),
            (json!({"ShardIterator": iterator, "Limit": 1000}), vec!["issues"]),
            (json!({"StreamArn": "arn:aws:dynamodb:us-east-1:1:table/counters/stream/x"}), vec!["counters"]),
            (json!({"ResourceArn": "arn:aws:dynamodb:us-east-1:1:table/index"}), vec!["index"]),
            (json!({"Limit": 10}), vec![]),
        ] {
            assert_eq!(tables_named(body.to_string().as_bytes()), expected, "{body}");
        }
        assert!(tables_named(b"not json").is_empty());
    }

    #[test]
    fn a_table_goes_to_its_emulator_and_other_services_to_theirs() {
        let up = two();
        let get = |target: &str, body: serde_json::Value| up.pick(target, body.to_string().as_bytes());
        assert_eq!(get(&format!("{DDB}PutItem"), json!({"TableName": "issues"})), Ok("http://a"));
        assert_eq!(get(&format!("{DDB}PutItem"), json!({"TableName": "index"})), Ok("http://b"));
        assert_eq!(
            get(
                "DynamoDBStreams_20120810.GetRecords",
                json!({"ShardIterator": "arn:aws:dynamodb:r:1:table/issues/stream/l|1|x"})
            ),
            Ok("http://a")
        );
        assert_eq!(get("", json!({})), Ok("http://b"), "S3 and the rest: `others`");
        assert_eq!(up.sent(), vec![2, 2]);
    }

    #[test]
    fn a_request_across_emulators_or_naming_no_table_is_refused_by_name() {
        let up = two();
        let split = up.pick(
            &format!("{DDB}BatchWriteItem"),
            json!({"RequestItems": {"issues": [], "index": []}}).to_string().as_bytes(),
        );
        assert!(
            matches!(&split, Err(Unroutable::Split { operation, tables }) if operation == "BatchWriteItem" && tables == "index, issues"),
            "{split:?}"
        );
        let none = up.pick(&format!("{DDB}ListTables"), b"{}");
        assert_eq!(none, Err(Unroutable::NoTable { operation: "ListTables".into() }));
        assert_eq!(up.sent(), vec![0, 0], "nothing refused is counted as sent");
    }

    #[test]
    fn one_emulator_takes_everything_unread() {
        let up = Upstreams::one("http://only/");
        assert_eq!(up.pick(&format!("{DDB}ListTables"), b"not json"), Ok("http://only"));
        assert_eq!(up.sent(), vec![1]);
    }
}
