//! A page as JSON lines, for programs (`sidestream grid --output json`, the web grid): one object
//! per item, then one object with the next cursor and the page's cost. The format is pinned by
//! the golden test below; a change to it is a new version of the output.
//!
//! ```text
//! {"key":{"id":{"S":"af34"}},"phase":"index","value":{"N":"42"},"attributes":{"name":{"S":"Girder"},"num":{"N":"3"},"state":{"S":"open"}}}
//! {"key":{"id":{"S":"b712"}},"phase":"nulls","value":null,"attributes":{"name":{"S":"Paint"},"num":{"N":"12"},"state":{"S":"open"}}}
//! {"next":"g1.….…","requests":{"batchGets":1,"queries":2,"retries":0}}
//! ```
//!
//! - `key`: the item's key in the base table, DynamoDB JSON.
//! - `phase`: `index` (sorted by the field's value) or `nulls` (no indexed value, by order).
//! - `value`: the field's value as typed DynamoDB JSON, `null` in the nulls phase.
//! - `attributes`: the order attribute, the index's projected attributes and those asked for,
//!   as the item has them (DynamoDB JSON); an attribute the item lacks is left out.
//! - The last line: `next`, the cursor of the next page or `null` after the last, and the
//!   requests the page cost.

use serde_json::{Map, Value, json};

use crate::grid::query::Query;
use crate::grid::read::Page;
use crate::grid::schema::GridSchema;
use formats::cursor::Phase;

/// The attributes shown for each item: the order attribute, the projected ones, then those the
/// query asks for, each once.
pub fn columns<'a>(schema: &'a GridSchema, query: &'a Query) -> Vec<&'a str> {
    let mut columns: Vec<&str> = vec![schema.order()];
    for attribute in schema.projected().iter().chain(&query.attributes) {
        if !columns.contains(&attribute.as_str()) && !schema.is_key(attribute) {
            columns.push(attribute);
        }
    }
    columns
}

/// `page` as JSON lines: one value per item, then the closing one.
pub fn json_lines(page: &Page, schema: &GridSchema, query: &Query) -> Vec<Value> {
    let columns = columns(schema, query);
    let mut lines: Vec<Value> = page
        .rows
        .iter()
        .map(|row| {
            let key: Map<String, Value> = schema
                .base_key()
                .iter()
                .filter_map(|k| Some((k.clone(), row.item.get(k)?.clone())))
                .collect();
            let attributes: Map<String, Value> =
                columns.iter().filter_map(|c| Some(((*c).to_owned(), row.item.get(*c)?.clone()))).collect();
            json!({
                "key": key,
                "phase": phase(row.phase),
                "value": row.value.clone().unwrap_or(Value::Null),
                "attributes": attributes,
            })
        })
        .collect();
    lines.push(json!({
        "next": page.next,
        "requests": {
            "queries": page.requests.queries,
            "batchGets": page.requests.batch_gets,
            "retries": page.requests.retries,
        },
    }));
    lines
}

fn phase(phase: Phase) -> &'static str {
    match phase {
        Phase::Index => "index",
        Phase::Nulls => "nulls",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::query::Filter;
    use crate::grid::read::{Requests, Row};

    #[test]
    fn the_json_lines_are_pinned() {
        let schema = crate::fixtures::example_grid();
        let query = Query {
            scope: "35e9".into(),
            field: "3fe6".into(),
            descending: false,
            limit: 2,
            filter: Filter::None,
            attributes: vec!["custom_fields".into()],
        };
        let page = Page {
            rows: vec![
                Row {
                    item: json!({"id": {"S": "af34"}, "num": {"N": "3"}, "name": {"S": "Girder"},
                                 "state": {"S": "open"}, "custom_fields": {"M": {"3fe6": {"N": "42"}}}}),
                    value: Some(json!({"N": "42"})),
                    phase: Phase::Index,
                },
                Row {
                    item: json!({"id": {"S": "b712"}, "num": {"N": "12"}, "name": {"S": "Paint"}}),
                    value: None,
                    phase: Phase::Nulls,
                },
            ],
            next: Some("g1.x.y".into()),
            phase: Phase::Nulls,
            requests: Requests { queries: 2, batch_gets: 1, retries: 0, cut_at_1mb: 0 },
        };
        let text: Vec<String> = json_lines(&page, &schema, &query).iter().map(Value::to_string).collect();
        assert_eq!(
            text,
            [
                r#"{"attributes":{"custom_fields":{"M":{"3fe6":{"N":"42"}}},"name":{"S":"Girder"},"num":{"N":"3"},"state":{"S":"open"}},"key":{"id":{"S":"af34"}},"phase":"index","value":{"N":"42"}}"#,
                r#"{"attributes":{"name":{"S":"Paint"},"num":{"N":"12"}},"key":{"id":{"S":"b712"}},"phase":"nulls","value":null}"#,
                r#"{"next":"g1.x.y","requests":{"batchGets":1,"queries":2,"retries":0}}"#,
            ]
        );
    }
}
