//! Tests of a page's query: key conditions, filters' bounds and the requests that answer it.

use std::ops::Bound::{Excluded, Included, Unbounded};

use aws_sdk_dynamodb::types::AttributeValue;
use key_codec::{Dir, Number, TextKey, Value};

use super::*;

fn query(filter: Filter) -> Query {
    Query {
        scope: "35e9".into(),
        field: "3fe6".into(),
        descending: false,
        limit: 10,
        filter,
        attributes: vec![],
    }
}

fn n(text: &str) -> Value {
    Value::Number(Number::parse(text).unwrap())
}

fn s(text: &str) -> Value {
    Value::String(text.into())
}

/// An index sort key as the indexer writes it: (value, num, id).
fn sort_key(value: &Value, num: &str) -> String {
    let mut key = TextKey::new();
    key.push(value, Dir::Asc).push(&n(num), Dir::Asc).push(&s("af34"), Dir::Asc);
    key.into_string()
}

fn selects(condition: &KeyCondition, sk: &str) -> bool {
    let text = |name: &str| match &condition.values[name] {
        AttributeValue::S(s) => s.clone(),
        other => panic!("{other:?}"),
    };
    if condition.expression.contains("BETWEEN") {
        text(":lo").as_str() <= sk && sk <= text(":hi").as_str()
    } else if condition.expression.contains("begins_with") {
        sk.starts_with(&text(":prefix"))
    } else {
        true
    }
}

#[test]
fn filters_select_exactly_the_values_in_range() {
    let values = ["-20", "-1.5", "0", "0.25", "7", "42", "100", "250"].map(n);
    let cases = [
        (Filter::Range(Included(n("0")), Included(n("42"))), vec!["0", "0.25", "7", "42"]),
        (Filter::Range(Excluded(n("0")), Excluded(n("42"))), vec!["0.25", "7"]),
        (Filter::Range(Unbounded, Excluded(n("0"))), vec!["-20", "-1.5"]),
        (Filter::Range(Included(n("100")), Unbounded), vec!["100", "250"]),
        (Filter::None, vec!["-20", "-1.5", "0", "0.25", "7", "42", "100", "250"]),
    ];
    for (filter, expected) in cases {
        let condition = query(filter.clone()).key_condition().unwrap();
        let selected: Vec<String> = values
            .iter()
            .filter(|v| selects(&condition, &sort_key(v, "3")))
            .map(|v| match v {
                Value::Number(n) => n.to_string(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(selected, expected, "{filter:?}");
    }
}

#[test]
fn dates_and_prefixes_select_strings() {
    let dates = ["2023-04-30", "2023-05-01", "2023-05-02", "2023-05-31", "2023-06-01"];
    let may = query(Filter::Range(Included(s("2023-05-01")), Included(s("2023-05-31"))));
    let condition = may.key_condition().unwrap();
    let selected: Vec<&str> =
        dates.iter().copied().filter(|d| selects(&condition, &sort_key(&s(d), "1"))).collect();
    assert_eq!(selected, ["2023-05-01", "2023-05-02", "2023-05-31"]);

    let approvals = ["Approved", "Approved by QA", "Approved#2", "Rejected", "approved"];
    let condition = query(Filter::Prefix("Approved".into())).key_condition().unwrap();
    assert_eq!(condition.expression, "#pk = :pk AND begins_with(#sk, :prefix)");
    let selected: Vec<&str> =
        approvals.iter().copied().filter(|a| selects(&condition, &sort_key(&s(a), "1"))).collect();
    assert_eq!(selected, ["Approved", "Approved by QA", "Approved#2"]);
}

#[test]
fn requests_are_checked() {
    assert_eq!(
        query(Filter::None).key_condition().unwrap().values[":pk"],
        AttributeValue::S("35e9#3fe6".into())
    );
    for limit in [0, MAX_LIMIT + 1] {
        let q = Query { limit, ..query(Filter::None) };
        assert_eq!(q.check(), Err(QueryError::Limit(limit)));
    }
    let backwards = query(Filter::Range(Included(n("5")), Included(n("1"))));
    assert_eq!(backwards.key_condition(), Err(QueryError::EmptyRange));
    assert!(query(Filter::None).has_nulls_phase());
    assert!(!query(Filter::Prefix("a".into())).has_nulls_phase());
}

#[test]
fn cursors_are_bound_to_scope_field_order_and_filter() {
    let base = query(Filter::None);
    let variants = [
        Query { scope: "7b7e".into(), ..base.clone() },
        Query { field: "47e5".into(), ..base.clone() },
        Query { descending: true, ..base.clone() },
        query(Filter::Prefix("A".into())),
    ];
    for variant in variants {
        assert_ne!(variant.fingerprint(), base.fingerprint(), "{variant:?}");
    }
    let other_page_size = Query { limit: 50, ..base.clone() };
    assert_eq!(other_page_size.fingerprint(), base.fingerprint(), "the page size may change between pages");
}

#[test]
fn base_items_are_fetched_only_for_attributes_the_index_lacks() {
    let layout = crate::fixtures::example_grid();
    let with = |attributes: &[&str]| Query {
        attributes: attributes.iter().map(|a| (*a).to_owned()).collect(),
        ..query(Filter::None)
    };
    assert!(!with(&[]).needs_base_items(&layout));
    assert!(!with(&["id", "num", "name", "state", "project"]).needs_base_items(&layout));
    assert!(with(&["name", "custom_fields"]).needs_base_items(&layout));
}
