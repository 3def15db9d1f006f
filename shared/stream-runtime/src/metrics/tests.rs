//! Tests for EMF rendering.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::*;

#[test]
fn render_is_one_emf_document_with_every_metric() {
    let mut m = Metrics::new("Sidestream", "multikey-indexer");
    m.add(Metric::RecordsIn, 3);
    m.add(Metric::Writes, 5);
    m.add(Metric::Writes, 2);
    let line = m.render(1_700_000_000_000);
    assert!(!line.contains('\n'));
    let doc: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(doc["_aws"]["Timestamp"], json!(1_700_000_000_000_u64));
    // A level no ApplicationLogLevel filters out, and the timestamp Lambda needs to honour it.
    assert_eq!(doc["level"], "FATAL");
    assert_eq!(doc["timestamp"], "2023-11-14T22:13:20.000Z");
    let directive = &doc["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], "Sidestream");
    assert_eq!(directive["Dimensions"], json!([["Function"]]));
    assert_eq!(directive["Metrics"].as_array().unwrap().len(), Metric::ALL.len());
    assert_eq!(doc["Function"], "multikey-indexer");
    assert_eq!(doc["RecordsIn"], 3);
    assert_eq!(doc["Writes"], 7);
    assert_eq!(doc["Retries"], 0);
    // Every declared metric has a value member, as EMF requires.
    for def in directive["Metrics"].as_array().unwrap() {
        assert!(doc[def["Name"].as_str().unwrap()].is_u64(), "{def}");
    }
}

#[test]
fn namespace_and_function_come_from_the_environment() {
    let env: HashMap<&str, &str> =
        [("METRICS_NAMESPACE", "Acme/Issues"), ("AWS_LAMBDA_FUNCTION_NAME", "idx-prod")].into();
    let lookup = |k: &str| env.get(k).map(|v| (*v).to_owned());
    let m = Metrics::from_vars(&Vars::new(&lookup), "multikey-indexer", "Fallback").unwrap();
    let doc: Value = serde_json::from_str(&m.render(0)).unwrap();
    assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], "Acme/Issues");
    assert_eq!(doc["Function"], "idx-prod");

    let bad = |k: &str| (k == "METRICS_NAMESPACE").then(|| ":oops".to_owned());
    let err = Metrics::from_vars(&Vars::new(&bad), "f", "f").unwrap_err();
    assert!(err.to_string().starts_with("environment variable METRICS_NAMESPACE is invalid"), "{err}");

    // Unset, the namespace is the one the function gives, and the dimension its name.
    let unset = |_: &str| None;
    let m = Metrics::from_vars(&Vars::new(&unset), "sqs-fifo-mirror", "Mirror").unwrap();
    let doc: Value = serde_json::from_str(&m.render(0)).unwrap();
    assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], "Mirror");
    assert_eq!(doc["Function"], "sqs-fifo-mirror");
}

#[test]
fn a_functions_own_metrics_are_emitted_after_the_runtimes_declared_ones_always() {
    let mut m = Metrics::new("Acme", "mirror").declare(&["MessagesSent", "BytesSent", "MessagesSent"]);
    m.add(Metric::Own("BytesSent"), 40);
    m.add(Metric::Own("BytesSent"), 2);
    m.add(Metric::Own("Undeclared"), 1);
    m.add(Metric::Writes, 3);
    assert_eq!(m.get(Metric::Own("BytesSent")), 42);
    assert_eq!(m.get(Metric::Own("Nothing")), 0);
    let doc: Value = serde_json::from_str(&m.render(0)).unwrap();
    let names: Vec<&str> = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["Name"].as_str().unwrap())
        .collect();
    let runtime: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(names[..runtime.len()], runtime[..]);
    assert_eq!(names[runtime.len()..], ["MessagesSent", "BytesSent", "Undeclared"]);
    assert_eq!((doc["MessagesSent"].as_u64(), doc["BytesSent"].as_u64()), (Some(0), Some(42)));
    assert_eq!(doc["Writes"], 3);

    // A new invocation's counters, and another function's in a combined mapping, keep the
    // declared metrics at zero.
    let next = m.for_batch(5);
    assert_eq!((next.get(Metric::RecordsIn), next.get(Metric::Own("BytesSent"))), (5, 0));
    let doc: Value = serde_json::from_str(&m.for_function("other").render(0)).unwrap();
    assert_eq!(doc["MessagesSent"], 0);
    assert!(doc.get("Undeclared").is_some(), "a metric counted once stays in the series");
    m.flush();
    assert_eq!(m.get(Metric::Own("BytesSent")), 0);
    assert_eq!(m.counts().count(), Metric::ALL.len() + 3);
}
