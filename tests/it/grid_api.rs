//! The grid API (`GridApi=true`) end to end on the local stack: the grid-api function's own
//! handler behind a loopback function URL that checks SigV4 as Lambda does. The Python (botocore)
//! and TypeScript (aws4fetch) clients under examples/ each page a project to the end, in both
//! orders, and show exactly the rows `sidestream grid --output json` shows, in the same order. An
//! unsigned request, and one signed with another secret key, are refused before the function.

use std::io::{Read as _, Write as _};
use std::process::Command;
use std::sync::atomic::Ordering;

use anyhow::{Context as _, Result, ensure};
use futures_util::StreamExt as _;
use operations::grid::{Filter, Grid, GridSchema, Query};
use serde_json::Value;

use crate::support::pipeline::{Local, issues_table, local, pipeline};
use crate::support::process::root;

/// The demo's project and its Cost field, four rows a page (several pages, both phases).
const SCOPE: &str = "35e9";
const FIELD: &str = "3fe6";
const LIMIT: usize = 4;

/// The rows `sidestream grid --output json` prints for every page of the query, in order: the
/// library it prints with, its last line of each page (the cursor) left out.
async fn cli_rows(grid: &Grid, descending: bool) -> Result<(Vec<Value>, usize)> {
    let query = Query {
        scope: SCOPE.to_owned(),
        field: FIELD.to_owned(),
        descending,
        limit: LIMIT,
        filter: Filter::None,
        attributes: Vec::new(),
    };
    let (mut rows, mut pages, mut cursor) = (Vec::new(), 0, None::<String>);
    loop {
        let page = grid.page(&query, cursor.as_deref()).await?;
        pages += 1;
        let mut lines = operations::grid::output::json_lines(&page, grid.schema(), &query);
        let last = lines.pop().context("a page ends with its cursor line")?;
        rows.extend(lines);
        match last["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok((rows, pages)),
        }
    }
}

/// Runs a client (`program`, its arguments before the URL), as a user would, with the test's
/// credentials and Region, plus `env`: its rows, or its error.
async fn client(
    program: Vec<String>,
    url: &str,
    descending: bool,
    env: &[(&str, &str)],
) -> Result<Vec<Value>> {
    let mut command = Command::new(&program[0]);
    command.args(&program[1..]).args([url, SCOPE, FIELD, "--limit", &LIMIT.to_string()]);
    if descending {
        command.arg("--desc");
    }
    command.env("AWS_REGION", "us-east-1").envs(env.iter().copied());
    let output = tokio::task::spawn_blocking(move || command.output()).await??;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "{program:?} failed: {stderr}");
    let stdout = String::from_utf8(output.stdout)?;
    stdout.lines().map(|line| Ok(serde_json::from_str(line)?)).collect()
}

fn python() -> Vec<String> {
    let root = root();
    vec![
        root.join(".tools/moto/bin/python").display().to_string(),
        root.join("examples/grid-api-python/grid_client.py").display().to_string(),
    ]
}

fn typescript() -> Vec<String> {
    vec![
        "node".to_owned(),
        root().join("examples/grid-api-typescript/dist/grid-client.js").display().to_string(),
    ]
}

/// A request with no signature at all, over a plain socket: the status line and the body.
fn unsigned(url: &str) -> Result<(String, String)> {
    let address = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(address)?;
    write!(
        stream,
        "GET /api/page?scope={SCOPE}&field={FIELD} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer.lines().next().unwrap_or_default().to_owned();
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    Ok((status, body))
}

#[tokio::test]
async fn the_examples_page_a_project_through_the_signed_grid_api() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[("GridApi", "true")]).await?;
    let failures = std::env::temp_dir().join(format!("{}.jsonl", crate::support::moto::unique("grid-api")));
    let mut pipeline = pipeline(&sdk, &stack, &failures, |_, invoker| invoker)?;
    let client_dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    let issues = issues_table(&stack)?;
    let tracker: Value =
        serde_json::from_str(include_str!("../../dev/sidestream-local/demo/issue-tracker.json"))?;
    let puts = futures_util::stream::iter(
        tracker["issues"].as_array().cloned().unwrap_or_default().into_iter().map(|item| {
            let (client, issues) = (client_dynamodb.clone(), issues.clone());
            async move { local_stack::put_json(&client, &issues, &item).await }
        }),
    )
    .buffer_unordered(8)
    .collect::<Vec<_>>()
    .await;
    puts.into_iter().collect::<Result<(), _>>()?;
    pipeline.settle().await?;

    let config = operations::grid_api::Config::from_vars(&stream_runtime::Vars::new(&|name: &str| {
        stack.environment("grid-api").ok().and_then(|env| env.get(name).cloned())
    }))?;
    let schema = GridSchema::new(&config.indexes, None, &config.table, &config.nulls_index)?;
    let grid =
        Grid::new(aws_sdk_dynamodb::Client::new(&sdk), schema, formats::cursor::Signer::new(b"test", 3_600));
    let api = local_stack::serve_grid_api(&sdk, &stack).await?;

    let mut pages_served = 0;
    for descending in [false, true] {
        let (expected, pages) = cli_rows(&grid, descending).await?;
        ensure!(pages >= 3 && expected.len() >= 9, "{pages} pages, {} rows: too few to page", expected.len());
        for program in [python(), typescript()] {
            let rows = client(program.clone(), &api.url, descending, &[]).await?;
            ensure!(
                rows == expected,
                "{program:?} (descending: {descending}) showed\n{rows:#?}\nnot\n{expected:#?}"
            );
            pages_served += pages;
        }
    }
    ensure!(api.served.load(Ordering::Relaxed) == u64::try_from(pages_served)?, "one request a page");

    let url = api.url.clone();
    // A blocking socket, off the runtime's thread: the API is served on it.
    let (status, body) = tokio::task::spawn_blocking(move || unsigned(&url)).await??;
    ensure!(status.contains(" 403 ") && body == r#"{"Message":"Forbidden"}"#, "{status}: {body}");
    let wrong = client(python(), &api.url, false, &[("AWS_SECRET_ACCESS_KEY", "not-the-secret")]).await;
    let error = wrong.expect_err("a request signed with another secret key is refused").to_string();
    ensure!(error.contains("HTTP 403"), "{error}");
    ensure!(api.refused.load(Ordering::Relaxed) == 2, "the unsigned and the wrongly signed request");
    ensure!(
        api.served.load(Ordering::Relaxed) == u64::try_from(pages_served)?,
        "neither reached the function"
    );
    // The function read the index, the issues table and its secret under its own role.
    let permitted = stack.ensure_permitted(&sdk).await?;
    let calls = |action: &str| permitted.calls.get("GridApiRole").and_then(|a| a.get(action)).copied();
    ensure!(
        calls("dynamodb:Query").is_some_and(|n| n >= u64::try_from(pages_served).unwrap_or(0))
            && calls("secretsmanager:GetSecretValue").is_some_and(|n| n >= 1),
        "the grid API's calls, checked under its role: {:?}",
        permitted.calls
    );
    Ok(())
}
