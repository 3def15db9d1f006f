//! The fixture events in `events/`: each is a DynamoDB stream event as Lambda delivers it, and
//! each is used by a test of its function (unit tests in `functions/<name>`, or this package).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use aws_lambda_events::event::dynamodb::Event;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn files(dir: &Path, ext: &str) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        if path.is_dir() {
            out.extend(files(&path, ext)?);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

#[test]
fn every_fixture_is_a_valid_event_used_by_a_test() -> Result<()> {
    let events = root().join("events");
    let fixtures = files(&events, "json")?;
    ensure!(fixtures.len() >= 15, "found only {} fixtures", fixtures.len());
    for path in files(&events, "")?.iter().chain(&fixtures) {
        let name = path.strip_prefix(&events)?.display().to_string();
        let text = std::fs::read_to_string(path)?;
        let event: Event =
            serde_json::from_str(&text).with_context(|| format!("{name} is not a DynamoDB stream event"))?;
        ensure!(!event.records.is_empty(), "{name} has no records");
        // What the Lambda runtime needs to deliver the event at all (a record without one of these
        // fails the whole invocation). Poison fixtures break other fields on purpose.
        let raw: Value = serde_json::from_str(&text)?;
        for (i, record) in raw["Records"].as_array().into_iter().flatten().enumerate() {
            for field in ["eventID", "eventName", "eventSource", "awsRegion"] {
                ensure!(record.get(field).is_some(), "{name} record {i} has no {field}");
            }
            ensure!(
                record["dynamodb"].get("SizeBytes").is_some(),
                "{name} record {i} has no dynamodb.SizeBytes"
            );
        }

        // Used: named by a test of its function (`fixture!("x.json")`) or here by its path.
        let (function, file) =
            name.split_once('/').with_context(|| format!("{name}: fixtures live in events/<function>/"))?;
        let mut tests = files(&root().join("functions").join(function).join("src"), "rs")?;
        tests.retain(|p| p.ends_with("tests.rs"));
        tests.extend(files(&root().join("tests/it"), "rs")?);
        let used = tests.iter().any(|t| {
            let source = std::fs::read_to_string(t).unwrap_or_default();
            let here = t.starts_with(root().join("functions"));
            (here && source.contains(&format!("\"{file}\""))) || source.contains(&format!("events/{name}"))
        });
        ensure!(used, "{name} is not used by any test");
    }
    Ok(())
}
