//! The template's archive queries (`ArchiveQueries`: a Glue table over the TTL archive with
//! partition projection, and two Athena named queries) run as written, with DuckDB
//! (`tests/it/archive_query.py`), over an archive the functions wrote on the local stack. They
//! return exactly the deletions the test made: each once, although an object is repeated as a
//! redelivered run would repeat it, and an item deleted twice shows both deletions in its history.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};

use crate::support::moto::unique;
use crate::support::pipeline::{Local, failure_log, local, now, pipeline};

/// DuckDB's Python, as `scripts/setup query` installs it.
fn duckdb_python() -> Result<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/query/bin/python");
    ensure!(python.exists(), "DuckDB is missing: run scripts/setup query");
    Ok(python)
}

/// Runs `queries` (SQL, parameters) over the archive copied to `root`, as the Glue table
/// `table` (its resolved properties) in `database` reads it: each query's rows, as strings.
fn run_queries(
    root: &Path,
    database: &str,
    table: &Value,
    queries: &[(String, Value)],
) -> Result<Vec<Vec<Vec<Value>>>> {
    let input = &table["TableInput"];
    let location = input["StorageDescriptor"]["Location"].as_str().context("a location")?;
    let template =
        input["Parameters"]["storage.location.template"].as_str().context("a location template")?;
    let relative =
        template.strip_prefix(location).context("the location template is under the table's location")?;
    // Each projected partition (`${name}`) matches any value; then any object in it.
    let mut glob = String::new();
    let mut rest = relative;
    while let Some(start) = rest.find("${") {
        glob.push_str(&rest[..start]);
        glob.push('*');
        let end = rest[start..].find('}').context("a closed ${…}")?;
        rest = &rest[start + end + 1..];
    }
    glob.push_str(rest);
    glob.push('*');
    let spec = json!({
        "root": root, "glob": glob, "database": database,
        "table": input["Name"], "columns": input["StorageDescriptor"]["Columns"],
        "partitions": input["PartitionKeys"],
        "queries": queries.iter().map(|(sql, params)| json!({"sql": sql, "params": params})).collect::<Vec<_>>(),
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("it/archive_query.py");
    let mut child = Command::new(duckdb_python()?)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().context("stdin")?.write_all(spec.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    ensure!(out.status.success(), "archive_query.py: {}", String::from_utf8_lossy(&out.stderr));
    let rows: Value = serde_json::from_slice(&out.stdout)?;
    Ok(serde_json::from_value(rows["rows"].clone())?)
}

/// Copies every object under `prefix` in `bucket` to `root`, at its key less the prefix.
async fn copy_archive(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    root: &Path,
) -> Result<Vec<String>> {
    let mut keys = Vec::new();
    for (key, body) in crate::support::lambda::objects(s3, bucket).await? {
        let Some(relative) = key.strip_prefix(prefix) else {
            continue;
        };
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().context("a folder")?)?;
        std::fs::write(&path, body)?;
        keys.push(key);
    }
    Ok(keys)
}

/// The partitions (table, year, month, day) the item objects among `keys` are in: the days the
/// deletions fell on (one, unless the test ran across midnight UTC).
fn days(keys: &[String], prefix: &str) -> Result<Vec<(String, i64, i64, i64)>> {
    let mut days = Vec::new();
    for key in keys.iter().filter(|k| !k.starts_with(&format!("{prefix}_meta/"))) {
        let part = |name: &str| -> Result<String> {
            let at = key.find(&format!("{name}=")).context("a partition")? + name.len() + 1;
            Ok(key[at..].split('/').next().unwrap_or_default().to_owned())
        };
        let day = (part("table")?, part("year")?.parse()?, part("month")?.parse()?, part("day")?.parse()?);
        if !days.contains(&day) {
            days.push(day);
        }
    }
    Ok(days)
}

/// A string of a JSON value (rows compare as strings).
fn s(v: &impl ToString) -> Value {
    Value::String(v.to_string())
}

#[tokio::test]
async fn the_named_queries_return_exactly_the_archived_deletions() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[("ArchiveQueries", "true")]).await?;
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), |_, i| i)?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let table = crate::support::pipeline::issues_table(&stack)?;
    let t = now();
    let item = |id: &str, num: i64, name: &str, expires: i64| {
        json!({"id": id, "project": "p1", "num": num, "name": name, "state": "open",
               "expires_at": expires, "custom_fields": {"f1": "x", "f2": num}})
    };
    // (id, project, num, name, state, expired at): what each deletion must show.
    let mut expected = Vec::new();
    for i in 0..8 {
        let (id, name) = (format!("q{i}"), format!("Issue {i}"));
        local_stack::put_json(&client, &table, &item(&id, i, &name, t - 100 - i)).await?;
        expected.push(vec![s(&id), s(&"p1"), s(&i), s(&name), s(&"open"), s(&(t - 100 - i))]);
    }
    for (id, expires) in [("live", t + 3600), ("unset", 0)] {
        let mut live = item(id, 99, "Kept", expires);
        if expires == 0 {
            live.as_object_mut().context("an object")?.remove("expires_at");
        }
        local_stack::put_json(&client, &table, &live).await?;
    }
    pipeline.settle().await?;
    // q0 comes back and expires again: its history has two deletions.
    local_stack::put_json(&client, &table, &item("q0", 0, "Issue 0, again", t - 50)).await?;
    expected.push(vec![s(&"q0"), s(&"p1"), s(&0), s(&"Issue 0, again"), s(&"open"), s(&(t - 50))]);
    pipeline.settle().await?;

    let (bucket, prefix) = stack.archive_location()?;
    let root = std::env::temp_dir().join(unique("archive-copy"));
    let s3 = local_stack::s3_client(&sdk);
    let keys = copy_archive(&s3, &bucket, &prefix, &root).await?;
    // A redelivered run's object, repeated under another name, as the archiver may leave it.
    let first = keys
        .iter()
        .find(|k| !k.contains("/_meta/") && !k.starts_with(&format!("{prefix}_meta/")))
        .context("an item object")?;
    let copy = root.join(first.strip_prefix(&prefix).context("under the prefix")?);
    std::fs::copy(&copy, copy.with_file_name("zz-redelivered.json.gz"))?;

    let days = days(&keys, &prefix)?;
    let glue = &stack.catalog["ArchiveTable"];
    ensure!(
        days.iter().all(|d| d.0 == table)
            && glue["TableInput"]["Parameters"]["projection.table.values"] == json!(table),
        "the projection's table is the archive's: {days:?}"
    );
    let database =
        stack.catalog["ArchiveDatabase"]["DatabaseInput"]["Name"].as_str().context("a database name")?;
    let query = |id: &str| -> Result<String> {
        Ok(stack.catalog[id]["QueryString"].as_str().context("a query")?.to_owned())
    };
    let mut queries: Vec<(String, Value)> = days
        .iter()
        .map(|(table, y, m, d)| Ok((query("ArchiveDayQuery")?, json!([table, y, m, d]))))
        .collect::<Result<_>>()?;
    queries.push((query("ArchiveItemQuery")?, json!(["q0"])));
    let lines = format!(r#"SELECT count(*) FROM "{database}"."ttl_archive""#);
    queries.push((lines, json!([])));
    let mut results = run_queries(&root, database, glue, &queries)?;
    std::fs::remove_dir_all(&root)?;

    let lines = results.pop().context("the count")?;
    let history = results.pop().context("the history")?;
    let mut deletions: Vec<Vec<Value>> = results.into_iter().flatten().collect();
    deletions.sort_by_key(|row| row.iter().map(ToString::to_string).collect::<Vec<_>>());
    expected.sort_by_key(|row| row.iter().map(ToString::to_string).collect::<Vec<_>>());
    ensure!(deletions == expected, "the days' deletions: {deletions:#?}");
    let repeated = lines[0][0].as_str().unwrap_or_default().parse::<usize>()? - expected.len();
    ensure!(repeated > 0, "the repeated object's lines were there to be read once");
    let names: Vec<&Value> = history.iter().map(|row| &row[4]).collect();
    ensure!(
        names == [&s(&"Issue 0"), &s(&"Issue 0, again")] && history.iter().all(|row| row[0] == s(&table)),
        "q0's history, oldest first: {history:#?}"
    );
    Ok(())
}
