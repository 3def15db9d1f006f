//! team: a chaos run on a team's own single-table design ([`crate::chaos::Options::team_table`]).
//!
//! The workload's items go into a table the team made, not the stack: keyed `PK`/`SK`, with its
//! own attribute names (`projectId`, `seq`, `title`, `status`, `fields`, `expiresAt`) and its own
//! GSI `byProject`, and the stack is deployed around it by parameters alone
//! (docs/your-table.md). Every item of a kind shares one partition (`ISSUES#issue`,
//! `ISSUES#ttl`) and differs by its sort key alone, so anything that keyed an item by its
//! partition key would mix items up, and the oracles would see it. The workload is generated as
//! ever ([`crate::chaos::workload`]) and renamed on its way to the table ([`item`], [`key`]).

use serde_json::{Map, Value, json};

use crate::chaos::ChaosError;
use crate::template::{GlobalIndex, KeyAttribute, Table};

/// The index definition the stack is given (`MultikeyIndexes`).
pub const INDEXES: &str = r#"{"base_key":["PK","SK"],"indexes":[{"name":"fields","source":"fields","scope":["projectId"],"tiebreakers":["seq"],"include":["title","status"]}]}"#;

/// The workload's attribute names, and the team's.
const RENAMES: [(&str, &str); 6] = [
    ("project", "projectId"),
    ("num", "seq"),
    ("name", "title"),
    ("state", "status"),
    ("custom_fields", "fields"),
    ("expires_at", "expiresAt"),
];

/// The team's table of the stack `stack`: named after it, so that its bill is the run's.
pub fn table(stack: &str) -> String {
    format!("{stack}-team")
}

/// Creates the team's table of `stack` on `client`'s emulator: `PK`/`SK`, a stream with both
/// images, and `byProject` by `projectId` and `seq`. Its stream's ARN.
pub(crate) async fn create(client: &aws_sdk_dynamodb::Client, stack: &str) -> Result<String, ChaosError> {
    let name = table(stack);
    let mut team = Table::keyed(&name, "PK", Some(("SK", "S")), Some("NEW_AND_OLD_IMAGES"));
    let key = |name: &str, key_type: &str, attribute_type: &str| KeyAttribute {
        name: name.into(),
        key_type: key_type.into(),
        attribute_type: attribute_type.into(),
    };
    team.global_indexes.push(GlobalIndex {
        name: "byProject".into(),
        key: vec![key("projectId", "HASH", "S"), key("seq", "RANGE", "N")],
        projection: "ALL".into(),
        non_key_attributes: vec![],
    });
    crate::replayer::resources::create_table(client, &team)
        .await?
        .ok_or_else(|| ChaosError::Check(format!("{name} was made without its stream")))
}

/// The template parameters that deploy the stack around the team's table, whose stream is
/// `stream`.
pub(crate) fn parameters(stream: &str) -> [(&'static str, String); 6] {
    [
        ("IssuesTableStreamArn", stream.to_owned()),
        ("MultikeyIndexes", INDEXES.to_owned()),
        ("BaseKeyAttributes", "PK,SK".to_owned()),
        ("IndexedAttribute", "fields".to_owned()),
        ("GridNullsIndex", "byProject".to_owned()),
        ("TtlAttribute", "expiresAt".to_owned()),
    ]
}

/// The partition of the workload's item `id`: its kind (`issue-…`, `ttl-…`).
fn partition(id: &str) -> String {
    format!("ISSUES#{}", id.split('-').next().unwrap_or(id))
}

/// The key of the workload's item `id` in the team's table.
pub(crate) fn key(id: &str) -> Value {
    json!({"PK": partition(id), "SK": id})
}

/// The workload's item (the article's names, plain JSON) as the team's table holds it.
pub(crate) fn item(article: &Value) -> Value {
    let id = article["id"].as_str().unwrap_or_default();
    let mut team = Map::new();
    team.insert("PK".into(), json!(partition(id)));
    team.insert("SK".into(), json!(id));
    team.insert("type".into(), json!("issue"));
    for (from, to) in RENAMES {
        if let Some(value) = article.get(from) {
            team.insert(to.into(), value.clone());
        }
    }
    Value::Object(team)
}

/// The workload id of an item of the team's table (DynamoDB JSON): its sort key.
pub(crate) fn id_of(item: &Value) -> &str {
    item["SK"]["S"].as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workloads_items_are_renamed_and_keyed_by_kind_and_id() {
        let article = json!({"id": "ttl-0000042", "project": "p03", "num": 7, "name": "n", "state": "open",
            "custom_fields": {"f": 1}, "expires_at": 99});
        let team = item(&article);
        assert_eq!(
            team,
            json!({"PK": "ISSUES#ttl", "SK": "ttl-0000042", "type": "issue", "projectId": "p03", "seq": 7,
                "title": "n", "status": "open", "fields": {"f": 1}, "expiresAt": 99})
        );
        assert_eq!(key("issue-000001"), json!({"PK": "ISSUES#issue", "SK": "issue-000001"}));
        assert_eq!(id_of(&json!({"PK": {"S": "ISSUES#ttl"}, "SK": {"S": "ttl-1"}})), "ttl-1");
        assert!(INDEXES.contains(r#""base_key":["PK","SK"]"#));
    }
}
