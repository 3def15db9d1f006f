//! A team's own table, with the stack deployed around it by parameters alone (docs/your-table.md):
//! a single-table design keyed `PK`/`SK` that holds projects, issues and comments, with its own
//! attribute names (`projectId`, `seq`, `fields`, `expiresAt`) and its own GSI (`byProject`).
//! The stack indexes the issues alone; `index verify` finds the index exact, and its repair and a
//! backfill work by the two-part key; every grid ordering pages exactly what the table calls for,
//! read independently from a scan, and the Python and TypeScript readers print what the grid
//! prints; the archiver archives the issues' TTL deletes and is never invoked for another type's;
//! and every call was one the template's roles allow on that table.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use formats::cursor::{Phase, Signer};
use local_stack::replayer::Pipeline;
use local_stack::template::{GlobalIndex, KeyAttribute, Table};
use local_stack::{Stack, put_json};
use operations::grid::{Filter, Grid, Page, Query};
use serde_json::{Value, json};

use crate::support::moto::{sdk, unique};
use crate::support::pipeline::{archived_keys, assert_index_exact, failure_log, pipeline, stack};
use crate::support::template::PK_SK_INDEXES;

/// The readers of the index in other languages, as an app runs them (`examples/`).
const READERS: [(&str, &[&str]); 2] = [
    ("node", &["examples/sidestream-typescript/dist/cli.js"]),
    (".tools/moto/bin/python", &["-m", "sidestream_client"]),
];

/// The projects, and the issues in each.
const PROJECTS: [&str; 2] = ["alpha", "beta"];
const ISSUES: usize = 24;

fn key(attribute: &str, key_type: &str, attribute_type: &str) -> KeyAttribute {
    KeyAttribute { name: attribute.into(), key_type: key_type.into(), attribute_type: attribute_type.into() }
}

/// The team's table as the team made it: `PK`/`SK`, a stream, and `byProject` by `projectId`
/// and `seq`, which only issues have (a sparse index). Its stream ARN.
async fn team_table(client: &aws_sdk_dynamodb::Client, name: &str) -> Result<String> {
    let mut table = Table::keyed(name, "PK", Some(("SK", "S")), Some("NEW_AND_OLD_IMAGES"));
    table.global_indexes.push(GlobalIndex {
        name: "byProject".into(),
        key: vec![key("projectId", "HASH", "S"), key("seq", "RANGE", "N")],
        projection: "ALL".into(),
        non_key_attributes: vec![],
    });
    local_stack::replayer::resources::create_table(client, &table).await?;
    let described = client.describe_table().table_name(name).send().await?;
    Ok(described.table().and_then(|t| t.latest_stream_arn()).context("the table's stream")?.to_owned())
}

/// Issue `n` of `project`: `f1` a number (with repeats), `f2` a string on two in three, and
/// `f3` on none (every issue is listed without a value).
fn issue(project: &str, n: usize) -> Value {
    let mut fields = json!({"f1": (n * 7) % 10});
    if !n.is_multiple_of(3) {
        fields["f2"] = json!(format!("v{}", (n * 5) % 4));
    }
    json!({
        "PK": format!("PROJ#{project}"), "SK": format!("ISSUE#{n:04}"), "type": "issue",
        "projectId": project, "seq": n, "title": format!("Issue {n}"),
        "status": if n.is_multiple_of(2) { "open" } else { "closed" }, "fields": fields,
    })
}

fn comment(project: &str, n: usize) -> Value {
    json!({"PK": format!("PROJ#{project}"), "SK": format!("ISSUE#{n:04}#COMMENT"), "type": "comment", "body": "+1"})
}

/// An independent ordering of a field's values: numbers by value, strings by code point, numbers
/// before strings (docs/formats.md, "Keys: the ordering guarantee").
fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a.as_f64(), b.as_f64(), a.as_str(), b.as_str()) {
        (Some(x), Some(y), ..) => x.total_cmp(&y),
        (Some(_), None, ..) => Ordering::Less,
        (None, Some(_), ..) => Ordering::Greater,
        (_, _, Some(x), Some(y)) => x.cmp(y),
        _ => Ordering::Equal,
    }
}

/// What a grid of `field` in `project` must show, from the table's items as plain JSON: the
/// issues with a value, by (value, seq, PK, SK) in the query's order, then those without one by
/// `seq`. Each as (phase, `PK`/`SK`).
fn expected(items: &[Value], project: &str, field: &str, descending: bool) -> Vec<(Phase, String)> {
    let issues: Vec<&Value> =
        items.iter().filter(|i| i["projectId"] == project && i["type"] == "issue").collect();
    let id = |i: &Value| format!("{}/{}", i["PK"].as_str().unwrap_or(""), i["SK"].as_str().unwrap_or(""));
    let mut valued: Vec<&Value> = issues.iter().copied().filter(|i| !i["fields"][field].is_null()).collect();
    valued.sort_by(|a, b| {
        compare_values(&a["fields"][field], &b["fields"][field])
            .then(a["seq"].as_u64().cmp(&b["seq"].as_u64()))
            .then(id(a).cmp(&id(b)))
    });
    if descending {
        valued.reverse();
    }
    let mut nulls: Vec<&Value> = issues.iter().copied().filter(|i| i["fields"][field].is_null()).collect();
    nulls.sort_by_key(|i| i["seq"].as_u64());
    valued.iter().map(|i| (Phase::Index, id(i))).chain(nulls.iter().map(|i| (Phase::Nulls, id(i)))).collect()
}

/// Every page of `field` in `project`, 5 rows a page, with the query that read them; no page
/// short but the last.
async fn pages(grid: &Grid, project: &str, field: &str, descending: bool) -> Result<(Query, Vec<Page>)> {
    let query = Query {
        scope: project.into(),
        field: field.into(),
        descending,
        limit: 5,
        filter: Filter::None,
        attributes: vec![],
    };
    let (mut pages, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let page = grid.page(&query, cursor.as_deref()).await?;
        ensure!(
            page.next.is_none() || page.rows.len() == query.limit,
            "a short page before the end: {page:?}"
        );
        cursor.clone_from(&page.next);
        pages.push(page);
        if cursor.is_none() {
            return Ok((query, pages));
        }
    }
}

/// The pages' rows as (phase, `PK`/`SK`).
fn rows(pages: &[Page]) -> Vec<(Phase, String)> {
    let part =
        |row: &operations::grid::Row, k: &str| row.item[k]["S"].as_str().unwrap_or_default().to_owned();
    pages
        .iter()
        .flat_map(|page| &page.rows)
        .map(|row| (row.phase, format!("{}/{}", part(row, "PK"), part(row, "SK"))))
        .collect()
}

/// The rows `sidestream grid --output json` prints for the pages: `operations::grid::output`'s
/// lines without each page's closing line.
fn printed(pages: &[Page], grid: &Grid, query: &Query) -> Vec<Value> {
    pages
        .iter()
        .flat_map(|page| {
            let mut lines = operations::grid::output::json_lines(page, grid.schema(), query);
            lines.pop();
            lines
        })
        .collect()
}

/// The rows another language's reader prints for `field` in `project`, run as an app would run
/// it against the emulator: `program` and `args`, then the query's flags (5 rows a page, every
/// page), with the stack's definition and index table in the environment.
fn read_by(
    program: &str,
    args: &[&str],
    stack: &Stack,
    (table, project, field, descending): (&str, &str, &str, bool),
) -> Result<Vec<Value>> {
    let env = stack.environment("multikey-indexer")?;
    let mut command = std::process::Command::new(program);
    command
        .args(args)
        .args(["grid", "--table", table, "--nulls-index", "byProject", "--scope", project, "--field", field])
        .args(["--limit", "5", "--pages", "1000"])
        .args(descending.then_some("--desc"))
        .env("MULTIKEY_INDEXES", &env["MULTIKEY_INDEXES"])
        .env("MULTIKEY_INDEX_TABLE", &env["MULTIKEY_INDEX_TABLE"])
        .env("AWS_ENDPOINT_URL", std::env::var("SIDESTREAM_MOTO_ENDPOINT")?)
        .env("AWS_REGION", "us-east-1")
        .env("PYTHONPATH", crate::support::process::root().join("examples/sidestream-python"))
        .env("AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED", "true")
        .current_dir(crate::support::process::root());
    let output = command.output().with_context(|| format!("running {program}"))?;
    ensure!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("{program} printed {l}")))
        .collect()
}

/// The whole table, as plain JSON.
async fn plain_items(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<Vec<Value>> {
    let typed = local_stack::scan(client, table).await?;
    typed
        .into_iter()
        .map(|typed| {
            let item: serde_dynamo::Item = serde_json::from_value(typed)?;
            Ok(serde_dynamo::from_item(item)?)
        })
        .collect()
}

/// The stack's parameters besides the table's stream: the team's definition and key, its GSI, its
/// TTL attribute and entity types, and the operators' tools (a backfill, scheduled repairs), whose
/// roles touch its items.
const PARAMETERS: [(&str, &str); 10] = [
    ("MultikeyIndexes", PK_SK_INDEXES),
    ("BaseKeyAttributes", "PK,SK"),
    ("IndexedAttribute", "fields"),
    ("GridNullsIndex", "byProject"),
    ("TtlAttribute", "expiresAt"),
    ("EnableBackfill", "true"),
    ("IndexVerifySchedule", "rate(1 day)"),
    ("IndexVerifyRepair", "true"),
    ("ArchiveEntityAttribute", "type"),
    ("ArchiveEntityTypes", "issue"),
];

/// The stack around a team's table, and its pipeline run through writes of every kind.
#[tokio::test]
async fn a_single_table_design_gets_the_stack_around_it_by_parameters_alone() -> Result<()> {
    let sdk = sdk();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let table = unique("team-table");
    let stream = team_table(&client, &table).await?;
    let parameters: Vec<(&str, &str)> =
        std::iter::once(("IssuesTableStreamArn", stream.as_str())).chain(PARAMETERS).collect();
    let stack: Stack = stack(&sdk, &parameters).await?;
    ensure!(stack.issues_table()? == table, "the stack reads the team's table");
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), |_, invoker| invoker)?;

    // Projects, issues and comments; then edits, deletes, and TTL deletes of two types.
    let expired = an_hour_ago();
    for project in PROJECTS {
        put_json(
            &client,
            &table,
            &json!({"PK": format!("PROJ#{project}"), "SK": "META", "type": "project", "name": project}),
        )
        .await?;
        for n in 1..=ISSUES {
            put_json(&client, &table, &issue(project, n)).await?;
            put_json(&client, &table, &comment(project, n)).await?;
        }
    }
    // An issue not yet filed in a project: no scope, so no entry (and not in byProject).
    put_json(
        &client,
        &table,
        &json!({"PK": "DRAFT#1", "SK": "ISSUE#0001", "type": "issue", "seq": 1, "fields": {"f1": 1}}),
    )
    .await?;
    pipeline.settle().await?;
    for n in (2..=ISSUES).step_by(5) {
        let mut moved = issue("alpha", n);
        moved["fields"] = json!({"f1": 100 + n, "f3": "late"});
        moved["seq"] = json!(500 + n);
        put_json(&client, &table, &moved).await?;
    }
    for n in (3..=ISSUES).step_by(7) {
        let gone = issue("beta", n);
        local_stack::delete_json(&client, &table, &json!({"PK": gone["PK"], "SK": gone["SK"]})).await?;
    }
    let mut expiring_issue = issue("beta", 4);
    expiring_issue["expiresAt"] = json!(expired);
    let mut expiring_comment = comment("beta", 4);
    expiring_comment["expiresAt"] = json!(expired);
    put_json(&client, &table, &expiring_issue).await?;
    put_json(&client, &table, &expiring_comment).await?;
    pipeline.settle().await?;

    // Exact, and every call allowed by the roles the template gives on the team's table.
    let entries = assert_index_exact(&sdk, &stack).await?;
    ensure!(entries > 40, "the issues are indexed: {entries} entries");

    repair_and_backfill(&stack, &mut pipeline, &table, entries).await?;
    let items = plain_items(&client, &table).await?;
    ensure!(
        !items.iter().any(|i| i["SK"] == "ISSUE#0004" && i["PK"] == "PROJ#beta"),
        "the expiring issue was deleted by TTL"
    );

    // Every ordering of every field, in each project: exactly the table's issues.
    let grid = Grid::new(client.clone(), stack.grid_schema()?, Signer::new(b"your table", 3_600));
    let mut orderings = 0;
    let mut first_printed = None;
    for project in PROJECTS {
        for field in ["f1", "f2", "f3"] {
            for descending in [false, true] {
                let (query, read) = pages(&grid, project, field, descending).await?;
                let paged = rows(&read);
                let expected = expected(&items, project, field, descending);
                ensure!(
                    paged == expected,
                    "{project} by {field} ({}): paged\n{paged:?}\nexpected\n{expected:?}",
                    if descending { "desc" } else { "asc" }
                );
                // The Python and TypeScript readers print what `sidestream grid` prints.
                let printed = printed(&read, &grid, &query);
                ensure!(printed.len() == expected.len(), "{project} by {field}: {} lines", printed.len());
                first_printed.get_or_insert_with(|| printed.clone());
                for (program, args) in READERS {
                    let read = read_by(program, args, &stack, (&table, project, field, descending))?;
                    ensure!(
                        read == printed,
                        "{program} {project} by {field}:\n{read:?}\nsidestream grid:\n{printed:?}"
                    );
                }
                orderings += 1;
            }
        }
    }
    ensure!(orderings == 12, "{orderings} orderings checked");
    by_the_stacks_name(&stack, &first_printed.unwrap_or_default())?;

    // The issue's TTL delete archived; the comment's never reached the archiver.
    let archived = archived_keys(&sdk, &stack, "SK").await?;
    ensure!(archived == ["ISSUE#0004"], "archived: {archived:?}");
    let mut delivered: BTreeMap<&str, u64> = BTreeMap::new();
    for (function, counts) in pipeline.counts() {
        *delivered.entry(function).or_default() += counts.delivered;
    }
    ensure!(delivered.get("ttl-archiver") == Some(&1), "the archiver was given one record: {delivered:?}");
    Ok(())
}

/// The operator's tools on a two-part key, each under the template's role for it (the verifier's,
/// the backfill function's), whose touch grants name the key `BaseKeyAttributes` gives: an entry
/// lost from the index, found by verify and repaired by a touch of its item; then a backfill
/// touches every item, and the index holds its `entries` as before.
async fn repair_and_backfill(
    stack: &Stack,
    pipeline: &mut Pipeline,
    table: &str,
    entries: usize,
) -> Result<()> {
    let sdk = sdk();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let verifier = as_role(stack, "VerifierRole")?;
    let indexes = crate::support::pipeline::indexes(stack)?;
    let index = operations::verify::choose(&indexes, None)?;
    let (pk, sk) = (index.partition_key.as_str(), index.sort_key.as_str());
    let entries_of_f1 = local_stack::index_entries(&client, &index.table, (pk, "alpha#f1"), true).await?;
    let lost = entries_of_f1.first().context("an entry of alpha's f1")?;
    let lost_key = [pk, sk].into_iter().filter_map(|k| Some((k.to_owned(), lost.get(k)?.clone()))).collect();
    client.delete_item().table_name(index.table.as_ref()).set_key(Some(lost_key)).send().await?;
    let policy = io_policy::Policy::default();
    let drift = operations::verify::verify(&verifier, policy, &indexes, index, table, &mut |_| {}).await?;
    ensure!(drift.counts.missing == 1 && drift.counts.extra == 0, "{drift:?}");
    let mended = operations::verify::Mender::new(verifier, indexes.clone(), table, "repair-your-table")
        .drift(index, &drift)
        .await?;
    ensure!(mended.touched == 1, "{mended:?}");
    let touched = backfill(stack, table, "bf-your-table").await?;
    ensure!(touched > 40, "the backfill touched the issues: {touched}");
    pipeline.settle().await?;
    ensure!(assert_index_exact(&sdk, stack).await? == entries, "the index as it was");
    Ok(())
}

/// `sidestream index verify` and `sidestream grid` given the stack's name alone, with nothing of
/// its configuration in their environment: they read the table, the definition and the GSI from
/// the stack (its outputs and its indexer's configuration, as the emulator's CloudFormation and
/// Lambda hold them). Verify finds the index exact, and the grid prints `alpha`'s rows by `f1`
/// as `printed` has them.
fn by_the_stacks_name(stack: &Stack, printed: &[Value]) -> Result<()> {
    let sidestream = |args: &[&str]| crate::support::process::sidestream(args, "", &[]);
    let verify = sidestream(&["index", "verify", "--stack", &stack.name, "--output", "json"]);
    ensure!(verify.ok, "index verify --stack: {verify:?}");
    let drift: Value = serde_json::from_str(&verify.out)?;
    ensure!(drift["exact"] == true && drift["entries"].as_u64() > Some(40), "{drift}");
    let grid = ["grid", "--stack", &stack.name, "--scope", "alpha", "--field", "f1", "--limit", "100"];
    let grid = sidestream(&[&grid[..], &["--output", "json"]].concat());
    ensure!(grid.ok, "grid --stack: {grid:?}");
    let mut lines: Vec<Value> = grid.out.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    lines.pop();
    ensure!(
        !printed.is_empty() && lines == printed,
        "grid --stack printed\n{lines:?}\nexpected\n{printed:?}"
    );
    Ok(())
}

/// A client of the emulator acting under the template's `role`, as that role's function does.
fn as_role(stack: &Stack, role: &str) -> Result<aws_sdk_dynamodb::Client> {
    let key = &stack.roles.get(role).with_context(|| format!("the template's {role}"))?.key;
    let config = io_policy::without_sdk_retries(&local_stack::iam::as_role(&sdk(), key));
    Ok(aws_sdk_dynamodb::Client::new(&config))
}

/// A backfill of `table` (run `run_id`, two segments) under the backfill function's role; the
/// items it touched.
async fn backfill(stack: &Stack, table: &str, run_id: &str) -> Result<u64> {
    let indexes = crate::support::pipeline::indexes(stack)?;
    let target = operations::backfill::Target::new(table, &indexes, None)?;
    let mut checkpoint = operations::backfill::checkpoint::Checkpoint::new(table, run_id, &target.sources, 2);
    operations::backfill::Backfill::new(
        as_role(stack, "BackfillRole")?,
        target,
        operations::backfill::Settings::default(),
    )
    .run(&mut checkpoint, &mut |_| Ok(()), &mut |_| {})
    .await?;
    Ok(checkpoint.counts().touched)
}

/// On a table with traffic, `StreamStartingPosition=LATEST`: the mappings read only what is
/// written after they were made, never the past (which `TRIM_HORIZON` would deliver at once, up
/// to 24 hours of it); the index then lacks the past alone, and a backfill brings it in, exact.
#[tokio::test]
async fn on_a_table_with_traffic_latest_reads_no_past_and_a_backfill_brings_it_in() -> Result<()> {
    const PAST: usize = 8;
    const NEW: usize = 5;
    let sdk = sdk();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let table = unique("team-latest");
    let stream = team_table(&client, &table).await?;
    for n in 1..=PAST {
        put_json(&client, &table, &issue("alpha", n)).await?;
    }
    let parameters: Vec<(&str, &str)> =
        [("IssuesTableStreamArn", stream.as_str()), ("StreamStartingPosition", "LATEST")]
            .into_iter()
            .chain(PARAMETERS)
            .collect();
    let stack: Stack = stack(&sdk, &parameters).await?;
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), |_, invoker| invoker)?;
    pipeline.settle().await?;
    for n in 1..=NEW {
        put_json(&client, &table, &issue("beta", n)).await?;
    }
    pipeline.settle().await?;
    let indexer = pipeline
        .counts()
        .into_iter()
        .find(|(function, _)| *function == "multikey-indexer")
        .map(|(_, counts)| counts)
        .context("the indexer's mapping")?;
    ensure!(
        indexer.passed_over == PAST as u64 && indexer.read == NEW as u64 && indexer.delivered == NEW as u64,
        "the indexer read the new issues alone: {indexer:?}"
    );
    let drift = local_stack::check_index(&client, &stack).await?;
    ensure!(
        drift.extra.is_empty()
            && drift.missing.len() >= PAST
            && drift.missing.iter().all(|entry| entry.contains("alpha") && !entry.contains("beta")),
        "the index lacks the past's issues alone: {:?}",
        drift.missing
    );
    ensure!(backfill(&stack, &table, "bf-the-past").await? == (PAST + NEW) as u64, "every issue touched");
    pipeline.settle().await?;
    assert_index_exact(&sdk, &stack).await?;
    Ok(())
}

/// An epoch-seconds time an hour ago.
fn an_hour_ago() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    i64::try_from(now).unwrap_or(i64::MAX) - 3_600
}
