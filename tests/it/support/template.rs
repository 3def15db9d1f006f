//! `template.yaml` as the tests read it: the template with its nested templates, the parameter
//! sets deployments use, resource names as a stack would give them, and the functions' binaries.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use local_stack::template::{Names, Template};
use serde_json::Value;

pub(crate) const REGION: &str = "us-east-1";
pub(crate) const ACCOUNT: &str = "123456789012";
/// An existing issues table's and counter table's streams.
pub(crate) const ISSUES_STREAM: &str =
    "arn:aws:dynamodb:us-east-1:123456789012:table/issues/stream/2026-01-01T00:00:00.000";
pub(crate) const COUNTER_STREAM: &str =
    "arn:aws:dynamodb:us-east-1:123456789012:table/counters/stream/2026-01-01T00:00:00.000";

/// `template.yaml` with its nested templates, parsed once for all the tests.
pub(crate) fn template() -> Result<&'static Template> {
    static PARSED: OnceLock<Template> = OnceLock::new();
    if let Some(parsed) = PARSED.get() {
        return Ok(parsed);
    }
    let parsed = parse()?;
    Ok(PARSED.get_or_init(|| parsed))
}

fn parse() -> Result<Template> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let folder = path.parent().context("the template's folder")?.to_owned();
    Ok(Template::parse_with(&text, &mut |location| {
        std::fs::read_to_string(folder.join(location)).map_err(|e| e.to_string())
    })?)
}

/// Resource names as a stack named `sidestream` might give them: lowercase, valid for S3.
pub(crate) fn physical(logical_id: &str) -> String {
    format!("sidestream-{}", logical_id.to_lowercase())
}

pub(crate) fn names() -> Names<'static> {
    Names { region: REGION.into(), account: ACCOUNT.into(), stack: "sidestream".into(), resource: &physical }
}

/// A team's single-table design, as docs/your-table.md deploys it (`MultikeyIndexes`): keys
/// `PK` and `SK`, issues scoped by `projectId` and ordered by `seq`, their custom fields in
/// `fields`; the index in the stack's index table (no `table`).
pub(crate) const PK_SK_INDEXES: &str = r#"{"base_key":["PK","SK"],"indexes":[{"name":"fields","source":"fields","scope":["projectId"],"tiebreakers":["seq"],"include":["title","status"]}]}"#;

/// The parameter sets deployments use: defaults (everything created), existing tables and
/// bucket, and a set-typed indexed attribute (which turns the indexer's filter on).
pub(crate) fn deployments() -> Vec<(&'static str, BTreeMap<String, String>)> {
    let mut all = vec![
        ("defaults", set(&[])),
        (
            "existing resources",
            set(&[
                ("IssuesTableStreamArn", ISSUES_STREAM),
                ("IndexTableName", "issue-attrib-index"),
                ("CounterTableStreamArn", COUNTER_STREAM),
                ("ArchiveBucketName", "existing-archive"),
                ("ArchivePrefix", "ttl/"),
            ]),
        ),
        ("set attribute", set(&[("IndexedAttribute", "tags"), ("IndexedAttributeType", "SS")])),
        (
            "backfill and restore on, existing issues table and archive, paced",
            set(&[
                ("EnableBackfill", "true"),
                ("EnableArchiveRestore", "true"),
                ("ArchiveBucketName", "existing-archive"),
                ("ArchivePrefix", "ttl/"),
                ("RestoreWriteUnitsPerPartition", "250"),
                ("RestoreConcurrency", "6"),
                ("GridApi", "true"),
                ("IndexTableName", "issue-attrib-index"),
                ("IssuesTableStreamArn", ISSUES_STREAM),
                ("BackfillWriteUnitsPerSegment", "50"),
                ("BackfillReadUnitsPerSegment", "200"),
                ("BackfillReservedConcurrency", "8"),
            ]),
        ),
        (
            "backfill, restore and grid API on",
            set(&[("EnableBackfill", "true"), ("EnableArchiveRestore", "true"), ("GridApi", "true")]),
        ),
        ("scheduled verify", set(&[("IndexVerifySchedule", "rate(1 day)")])),
        ("combined consumers", set(&[("Consumers", "Combined")])),
        (
            "combined consumers, set attribute, existing resources",
            set(&[
                ("Consumers", "Combined"),
                ("IndexedAttribute", "tags"),
                ("IndexedAttributeType", "SS"),
                ("IssuesTableStreamArn", ISSUES_STREAM),
                ("ArchiveBucketName", "existing-archive"),
            ]),
        ),
        (
            "global table: this Region archives and sums",
            set(&[("ArchiveRegion", REGION), ("AggregatorRegion", REGION)]),
        ),
        (
            "global table: another Region archives and sums",
            set(&[("ArchiveRegion", "eu-west-1"), ("AggregatorRegion", "eu-west-1")]),
        ),
        (
            "global table, combined, set attribute: this Region archives",
            set(&[
                ("ArchiveRegion", REGION),
                ("Consumers", "Combined"),
                ("IndexedAttribute", "tags"),
                ("IndexedAttributeType", "SS"),
            ]),
        ),
        (
            "global table, combined, set attribute: another Region archives",
            set(&[
                ("ArchiveRegion", "eu-west-1"),
                ("Consumers", "Combined"),
                ("IndexedAttribute", "tags"),
                ("IndexedAttributeType", "SS"),
            ]),
        ),
        (
            "global table, combined: another Region archives",
            set(&[("ArchiveRegion", "eu-west-1"), ("Consumers", "Combined")]),
        ),
        (
            "scheduled verify and repair, existing tables",
            set(&[
                ("IndexVerifySchedule", "rate(6 hours)"),
                ("IndexVerifyRepair", "true"),
                ("IndexTableName", "issue-attrib-index"),
                ("IssuesTableStreamArn", ISSUES_STREAM),
            ]),
        ),
    ];
    all.push(single_table_deployment());
    all.extend(kinesis_deployments());
    all
}

/// A team's single-table design: its definition, GSI, entity types and starting position.
fn single_table_deployment() -> (&'static str, BTreeMap<String, String>) {
    (
        "a team's single-table design: its definition, GSI, entity types and starting position",
        set(&[
            ("IssuesTableStreamArn", ISSUES_STREAM),
            ("MultikeyIndexes", PK_SK_INDEXES),
            ("BaseKeyAttributes", "PK,SK"),
            ("IndexedAttribute", "fields"),
            ("GridNullsIndex", "byProject"),
            ("GridApi", "true"),
            ("EnableBackfill", "true"),
            ("IndexVerifySchedule", "rate(1 day)"),
            ("StreamStartingPosition", "LATEST"),
            ("ArchiveEntityAttribute", "type"),
            ("ArchiveEntityTypes", "issue,comment"),
        ]),
    )
}

/// A parameter set.
pub(crate) fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// The stream functions' binaries: the registry's names (`sidestream_combined::FUNCTIONS`), so
/// that a function added there is held to the template here.
pub(crate) fn stream_functions() -> Vec<&'static str> {
    sidestream_combined::FUNCTIONS.iter().map(|f| f.name).collect()
}

/// The scheduled verifier's binary (only when `IndexVerifySchedule` is set).
pub(crate) const VERIFIER: &str = "index-verifier";

/// The indexer and the archiver behind one mapping (only when `Consumers` is `Combined`).
pub(crate) const COMBINED: &str = sidestream_combined::COMBINED_BINARY;

/// The metrics an alarm's resolved properties watch: its own (`Namespace`, `MetricName`,
/// `Dimensions`), or each metric its metric math (`Metrics`) queries.
pub(crate) fn alarm_metrics(p: &Value) -> Vec<&Value> {
    match p["Metrics"].as_array() {
        Some(queries) => queries.iter().filter_map(|q| q.pointer("/MetricStat/Metric")).collect(),
        None => vec![p],
    }
}

/// Deployments reading tables through Kinesis (`IssuesChangeSource`, `CounterChangeSource`).
pub(crate) fn kinesis_deployments() -> Vec<(&'static str, BTreeMap<String, String>)> {
    vec![
        (
            "issues and counters from Kinesis",
            set(&[("IssuesChangeSource", "Kinesis"), ("CounterChangeSource", "Kinesis")]),
        ),
        (
            "combined from Kinesis, set attribute, existing resources",
            set(&[
                ("Consumers", "Combined"),
                ("IssuesChangeSource", "Kinesis"),
                ("IndexedAttribute", "tags"),
                ("IndexedAttributeType", "SS"),
                ("IssuesTableStreamArn", ISSUES_STREAM),
                ("CounterTableStreamArn", COUNTER_STREAM),
                ("CounterChangeSource", "Kinesis"),
            ]),
        ),
        (
            "global table from Kinesis, set attribute: this Region archives",
            set(&[
                ("ArchiveRegion", REGION),
                ("IssuesChangeSource", "Kinesis"),
                ("IndexedAttribute", "tags"),
                ("IndexedAttributeType", "SS"),
            ]),
        ),
    ]
}
