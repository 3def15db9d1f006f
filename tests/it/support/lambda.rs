//! The functions' real binaries under `cargo lambda watch`, Lambda's Runtime API emulator, and
//! what the Lambda tests read back: fixture events, a table's items, a bucket's objects.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_lambda_events::event::dynamodb::Event;
use io_policy::Deadline;
use local_stack::Emulated;
use serde_json::Value;

use crate::support::moto::unique;
use crate::support::process::{binary, root};

fn cargo_lambda() -> Result<PathBuf> {
    let path = root().join(".tools/bin/cargo-lambda");
    ensure!(path.exists(), "{} is missing: run scripts/setup", path.display());
    Ok(path)
}

/// One function binary, warm, behind its own `cargo lambda watch` runtime API (started the way
/// `sidestream-local` starts it).
pub(crate) struct Function(Emulated);

impl Function {
    pub(crate) fn start(name: &str, env: &BTreeMap<String, String>) -> Result<Function> {
        let log = std::env::temp_dir().join(format!("{}.log", unique(&format!("sidestream-{name}"))));
        let emulated = Emulated::start(&cargo_lambda()?, &binary(name)?, env, &log, Duration::from_secs(60))?;
        Ok(Function(emulated))
    }

    /// `cargo lambda invoke` with a fixture; the function's response.
    pub(crate) fn invoke(&self, fixture: &str) -> Result<Value> {
        let output = Command::new(cargo_lambda()?)
            .args(["lambda", "invoke", "_", "--output-format", "json", "-A", "127.0.0.1", "-P"])
            .arg(self.0.port.to_string())
            .arg("--data-file")
            .arg(root().join(fixture))
            .output()?;
        ensure!(output.status.success(), "invoke {fixture}: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout)
            .with_context(|| format!("invoke {fixture}: {}", String::from_utf8_lossy(&output.stdout)))
    }

    /// The function's log lines: every one must be JSON (the tracing logs and the EMF metrics).
    pub(crate) fn log_lines(&self) -> Result<Vec<Value>> {
        let mut text = String::new();
        File::open(&self.0.log)?.read_to_string(&mut text)?;
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).with_context(|| format!("a log line is not JSON: {l}")))
            .collect()
    }
}

pub(crate) fn fixture(path: &str) -> Result<Event> {
    let text = std::fs::read_to_string(root().join(path))?;
    Ok(serde_json::from_str(&text)?)
}

pub(crate) fn deadline() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

/// Every item of a table, as sorted JSON lines. A tombstone's expiry counts from when it was
/// written (`formats::tombstone`), so two runs of the same records a second apart differ there
/// alone: it is shown as `"written"`, so that such runs compare alike (and an entry still
/// differs from a tombstone).
pub(crate) async fn items(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<Vec<String>> {
    let scan = client.scan().table_name(table).send().await?;
    let mut items: Vec<String> = scan
        .items()
        .iter()
        // Through a JSON value, whose object keys are sorted, unlike the item's HashMap.
        .map(|i| {
            let mut item = serde_json::to_value(serde_dynamo::Item::from(i.clone()))?;
            if let Some(expires) = item.get_mut(formats::tombstone::EXPIRES_ATTRIBUTE) {
                *expires = serde_json::Value::from("written");
            }
            Ok::<_, serde_json::Error>(item.to_string())
        })
        .collect::<Result<_, _>>()?;
    items.sort();
    Ok(items)
}

/// Every object of a bucket: key and bytes.
pub(crate) async fn objects(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let listed = s3.list_objects_v2().bucket(bucket).send().await?;
    for object in listed.contents() {
        let key = object.key().context("a listed object has no key")?;
        let body = s3.get_object().bucket(bucket).key(key).send().await?.body.collect().await?;
        out.insert(key.to_owned(), body.to_vec());
    }
    Ok(out)
}
