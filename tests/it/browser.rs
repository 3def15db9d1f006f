//! The web grid in a real browser: Debian's Chromium, driven through `chromedriver` (the `WebDriver`
//! protocol), against `operations::grid_server` over the local stack on moto. The test clicks like a person
//! and checks the rows against the index table itself.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine as _;
use local_stack::replayer::FailureLog;
use local_stack::{Stack, in_process_invoker, put_json};
use serde_json::{Value, json};

use crate::support::moto::{sdk, unique};

/// A minimal `WebDriver` client over plain HTTP/1.1 (one request per connection).
struct Driver {
    process: Child,
    port: u16,
    session: String,
}

impl Driver {
    fn start() -> Result<Driver> {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            ensure!(
                std::path::Path::new(tool).exists(),
                "{tool} is missing: run `scripts/setup browser`, which installs Debian's chromium and chromium-driver (apt-get; elsewhere, install Chromium and ChromeDriver at that path)"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let process = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start chromedriver")?;
        let mut driver = Driver { process, port, session: String::new() };
        let started = Instant::now();
        while driver.call("GET", "/status", None).is_err() {
            ensure!(started.elapsed() < Duration::from_secs(30), "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let created = driver.call(
            "POST",
            "/session",
            Some(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": "/usr/bin/chromium",
                    "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                             "--disable-gpu", "--window-size=1000,600"]
                }
            }}})),
        )?;
        created["sessionId"].as_str().context("no session id")?.clone_into(&mut driver.session);
        Ok(driver)
    }

    /// One `WebDriver` command; its `value`.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        // Read the head, then exactly Content-Length bytes: chromedriver keeps the connection.
        let mut reader = std::io::BufReader::new(stream);
        let mut head = String::new();
        let mut length = 0_usize;
        loop {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut reader, &mut line)?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse()?;
            }
            head.push_str(&line);
        }
        let mut json_body = vec![0; length];
        reader.read_exact(&mut json_body)?;
        let value: Value =
            serde_json::from_slice(&json_body).with_context(|| format!("{method} {path}: {head}"))?;
        if !head.starts_with("HTTP/1.1 200") {
            bail!("{method} {path}: {head}: {}", value["value"]["message"]);
        }
        Ok(value["value"].clone())
    }

    fn session(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    fn go(&self, url: &str) -> Result<()> {
        self.session("POST", "/url", Some(&json!({"url": url})))?;
        Ok(())
    }

    fn script(&self, script: &str) -> Result<Value> {
        self.session("POST", "/execute/sync", Some(&json!({"script": script, "args": []})))
    }

    fn click(&self, css: &str) -> Result<()> {
        let found =
            self.session("POST", "/element", Some(&json!({"using": "css selector", "value": css})))?;
        let id = found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .with_context(|| format!("no element {css}"))?
            .to_owned();
        self.session("POST", &format!("/element/{id}/click"), Some(&json!({})))?;
        Ok(())
    }

    /// Waits until the grid has rendered a page after `after` (its `data-ready` stamp changed).
    fn rendered(&self, after: &str) -> Result<String> {
        let started = Instant::now();
        loop {
            let ready = self.script("return document.getElementById('grid').dataset.ready || '';")?;
            let ready = ready.as_str().unwrap_or_default().to_owned();
            if !ready.is_empty() && ready != after {
                return Ok(ready);
            }
            let error = self.script("return document.getElementById('error').textContent;")?;
            ensure!(error.as_str().unwrap_or_default().is_empty(), "the page says: {error}");
            ensure!(started.elapsed() < Duration::from_secs(60), "the grid did not render");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The rows shown: (id, phase).
    fn rows(&self) -> Result<Vec<(String, String)>> {
        let rows = self.script(
            "return [...document.querySelectorAll('#rows tr')].map(tr => [tr.dataset.id, tr.dataset.phase]);",
        )?;
        Ok(serde_json::from_value(rows)?)
    }

    fn screenshot(&self, path: &PathBuf) -> Result<()> {
        let png = self.session("GET", "/screenshot", None)?;
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(png.as_str().context("no screenshot")?)?;
        std::fs::write(path, bytes)?;
        Ok(())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Project 35e9's extra issues: numbers for Cost (3fe6) with repeats, some without it, and two
/// whose Cost the indexer cannot key (a list, a map).
fn generated() -> Vec<Value> {
    (100..130)
        .map(|num| {
            let mut fields = serde_json::Map::new();
            match num % 10 {
                0 | 1 => {}
                2 if num == 102 => {
                    fields.insert("3fe6".into(), json!([1, 2]));
                }
                3 if num == 103 => {
                    fields.insert("3fe6".into(), json!({"low": 1}));
                }
                _ => {
                    fields.insert("3fe6".into(), json!((num * 7) % 23));
                }
            }
            json!({"id": format!("w{num}"), "project": "35e9", "num": num, "name": format!("Generated {num}"),
                   "state": if num % 3 == 0 { "closed" } else { "open" }, "custom_fields": fields})
        })
        .collect()
}

/// What the page must show for Cost ascending, read from the tables themselves: the index
/// partition `35e9#3fe6` in key order, then the scope's other issues by num.
async fn expected(client: &aws_sdk_dynamodb::Client, stack: &Stack) -> Result<Vec<(String, String)>> {
    let index = stack.table("IndexTable")?.name.clone();
    let mut indexed = Vec::new();
    let mut start = None;
    loop {
        let page = client
            .query()
            .table_name(&index)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S("35e9#3fe6".into()))
            .set_exclusive_start_key(start.take())
            .send()
            .await?;
        for item in page.items() {
            indexed.push(item["id"].as_s().map_err(|_| anyhow::anyhow!("id"))?.clone());
        }
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    let issues = local_stack::scan(client, &stack.table("IssuesTable")?.name).await?;
    let listed: BTreeSet<&String> = indexed.iter().collect();
    let mut rest: BTreeMap<u64, String> = BTreeMap::new();
    for issue in &issues {
        if issue["project"]["S"] != "35e9" {
            continue;
        }
        let id = issue["id"]["S"].as_str().unwrap_or_default().to_owned();
        let num: u64 = issue["num"]["N"].as_str().unwrap_or_default().parse()?;
        if !listed.contains(&id) {
            rest.insert(num, id);
        }
    }
    Ok(indexed
        .into_iter()
        .map(|id| (id, "index".to_owned()))
        .chain(rest.into_values().map(|id| (id, "nulls".to_owned())))
        .collect())
}

/// What a person does in the browser, on the grid at `addr`: open scope 35e9, sort by Cost, page
/// to the end and back one page, then filter Cost to 0–5. Returns the rows of each page.
fn click_through(addr: std::net::SocketAddr) -> Result<Vec<Vec<(String, String)>>> {
    let driver = Driver::start()?;
    driver.go(&format!("http://{addr}/?scope=35e9"))?;
    let mut stamp = driver.rendered("")?;
    // Sort by Cost: click its header (a button, so the keyboard can too).
    driver.click(r#"th[data-field="3fe6"] button"#)?;
    stamp = driver.rendered(&stamp)?;
    let sort = driver
        .script(r#"return document.querySelector('th[data-field="3fe6"]').getAttribute('aria-sort');"#)?;
    ensure!(sort == "ascending", "aria-sort is {sort}");
    let mut pages = vec![driver.rows()?];
    driver.screenshot(&crate::support::process::root().join("target/grid-screenshot.png"))?;
    loop {
        let more = driver.script("return !document.getElementById('next').disabled;")?;
        if more != true {
            break;
        }
        driver.click("#next")?;
        stamp = driver.rendered(&stamp)?;
        pages.push(driver.rows()?);
    }
    // Back one page: the same rows as before.
    driver.click("#prev")?;
    driver.rendered(&stamp)?;
    let again = driver.rows()?;
    ensure!(pages.len() >= 2, "the grid has several pages");
    ensure!(again == pages[pages.len() - 2], "Previous shows the page before: {again:?}");
    // A range on the sorted column: Cost from 0 to 5, index rows only.
    let stamp = driver.script("return document.getElementById('grid').dataset.ready;")?;
    driver
        .script("document.getElementById('from').value = '0'; document.getElementById('to').value = '5';")?;
    driver.click(r#"#filter button[type="submit"]"#)?;
    driver.rendered(stamp.as_str().unwrap_or_default())?;
    let costs = driver.script(
        "return [...document.querySelectorAll('#rows td.sorted')].map(td => Number(td.textContent));",
    )?;
    let costs: Vec<f64> = serde_json::from_value(costs)?;
    ensure!(
        !costs.is_empty() && costs.iter().all(|c| (0.0..=5.0).contains(c)) && costs.is_sorted(),
        "filtered costs: {costs:?}"
    );
    ensure!(driver.rows()?.iter().all(|(_, p)| p == "index"), "a filtered grid has no nulls");
    // Clear the filter, then a second click on Cost: descending, the largest first.
    let stamp = driver.script("return document.getElementById('grid').dataset.ready;")?;
    driver.click("#clear")?;
    let stamp = driver.rendered(stamp.as_str().unwrap_or_default())?;
    driver.click(r#"th[data-field="3fe6"] button"#)?;
    driver.rendered(&stamp)?;
    let sort = driver
        .script(r#"return document.querySelector('th[data-field="3fe6"]').getAttribute('aria-sort');"#)?;
    ensure!(sort == "descending", "aria-sort is {sort}");
    let costs = driver.script(
        r#"return [...document.querySelectorAll('#rows tr[data-phase="index"] td.sorted')].map(td => Number(td.textContent));"#,
    )?;
    let costs: Vec<f64> = serde_json::from_value(costs)?;
    ensure!(costs.len() == 10 && costs.windows(2).all(|w| w[0] >= w[1]), "descending costs: {costs:?}");
    Ok(pages)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_grid_sorts_and_pages_every_issue_in_a_browser() -> Result<()> {
    let sdk = sdk();
    let stack = Stack::create(
        &sdk,
        &crate::support::process::root().join("template.yaml"),
        &unique("web"),
        &BTreeMap::new(),
    )
    .await?;
    let log = std::env::temp_dir().join(format!("{}.jsonl", unique("web-failures")));
    let mut pipeline = stack.pipeline(&sdk, |f| in_process_invoker(f, &sdk), FailureLog::new(log))?;
    let client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let issues = crate::support::pipeline::issues_table(&stack)?;
    let tracker: Value =
        serde_json::from_str(include_str!("../../dev/sidestream-local/demo/issue-tracker.json"))?;
    for item in tracker["projects"]
        .as_array()
        .into_iter()
        .chain(tracker["issues"].as_array())
        .flatten()
        .chain(&generated())
    {
        put_json(&client, &issues, item).await?;
    }
    pipeline.settle().await?;

    let grid = operations::grid::Grid::new(
        client.clone(),
        stack.grid_schema()?,
        formats::cursor::Signer::new(b"web test", 3_600),
    );
    let (listener, addr) = operations::grid_server::bind(([127, 0, 0, 1], 0).into()).await?;
    let server = tokio::spawn(operations::grid_server::serve(
        listener,
        operations::grid_server::App::new(grid, client.clone()),
    ));
    let want = expected(&client, &stack).await?;
    ensure!(want.iter().any(|(id, _)| id == "w102") && want.iter().any(|(id, _)| id == "w103"));

    let driver = tokio::task::spawn_blocking(move || click_through(addr)).await??;
    server.abort();

    for (i, page) in driver.iter().enumerate() {
        ensure!(
            page.len() == 10 || i == driver.len() - 1,
            "page {i} holds {} rows and is not the last",
            page.len()
        );
    }
    let shown: Vec<(String, String)> = driver.into_iter().flatten().collect();
    ensure!(shown == want, "the rows follow the index, then the rest by num:\n{shown:?}\n{want:?}");
    let first_null = shown.iter().position(|(_, p)| p == "nulls").context("no nulls phase")?;
    ensure!(shown[first_null..].iter().all(|(_, p)| p == "nulls"), "items without a Cost come last");
    for unindexable in ["w102", "w103"] {
        ensure!(
            shown.iter().any(|(id, p)| id == unindexable && p == "nulls"),
            "{unindexable}, whose Cost cannot be indexed, is shown among the last"
        );
    }
    Ok(())
}
