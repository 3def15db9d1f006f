//! The grid view's read path against moto: the stack of `template.yaml`, the article's issues
//! plus thousands of generated ones indexed by the replayed indexer, then paged through in both
//! orders, with filters, and while issues are being inserted.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use anyhow::{Result, ensure};
use aws_config::SdkConfig;
use futures_util::StreamExt as _;
use grid_view::{Filter, Grid, GridSchema, Phase, Query, Signer};
use local_stack::{Stack, in_process_invoker, put_json};
use serde_json::{Value, json};
use stream_replayer::{FailureLog, Pipeline};

use crate::moto::{sdk, unique};

const GENERATED: usize = 2_500;

struct World {
    stack: Stack,
    pipeline: Pipeline,
    client: aws_sdk_dynamodb::Client,
    grid: Grid,
}

/// The number generated issue `num` has for `f` (when it has a number): quarters from -25 to 25,
/// in a scrambled order, with repeats.
fn number(num: usize) -> f64 {
    f64::from(i32::try_from(num).unwrap_or(0) * 37 % 201 - 100) / 4.0
}

fn issue(num: usize) -> Value {
    // About one in five has no `f`; one in twenty has a string; the rest numbers with repeats.
    let f = match num % 20 {
        0..=3 => None,
        4 => Some(json!(format!("s{}", num % 7))),
        _ => Some(json!(number(num))),
    };
    let mut fields = serde_json::Map::new();
    if let Some(f) = f {
        fields.insert("f".into(), f);
    }
    fields.insert("other".into(), json!(num));
    json!({"id": format!("g{num:05}"), "project": "gen", "num": num, "name": format!("Issue {num}"),
           "state": "open", "custom_fields": fields})
}

async fn put_all(client: &aws_sdk_dynamodb::Client, table: &str, items: Vec<Value>) -> Result<()> {
    let puts = futures_util::stream::iter(items.iter().map(|item| put_json(client, table, item)))
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    Ok(puts.into_iter().collect::<Result<(), _>>()?)
}

/// The stack with the article's issues and `generated` more in project `gen`, all indexed.
async fn world(sdk: &SdkConfig, generated: usize) -> Result<World> {
    let stack = Stack::create(
        sdk,
        &crate::lambda::root().join("template.yaml"),
        &unique("grid"),
        &BTreeMap::new(),
    )
    .await?;
    let log = std::env::temp_dir().join(format!("{}.jsonl", unique("grid-failures")));
    let mut pipeline = stack.pipeline(sdk, |f| in_process_invoker(f, sdk), FailureLog::new(log))?;
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let issues = stack.table("IssuesTable")?.name.clone();
    let tracker: Value = serde_json::from_str(include_str!("../../sidestream/demo/issue-tracker.json"))?;
    let mut items: Vec<Value> = tracker["issues"].as_array().cloned().unwrap_or_default();
    items.extend((1..=generated).map(issue));
    put_all(&client, &issues, items).await?;
    pipeline.settle().await?;
    let layout = GridSchema {
        table: issues,
        key: "id".into(),
        scope: "project".into(),
        order: "num".into(),
        source: "custom_fields".into(),
        nulls_index: "project-num".into(),
        index_table: stack.table("IndexTable")?.name.clone(),
        projected: vec!["name".into(), "state".into()],
    };
    let grid = Grid::new(client.clone(), layout, Signer::new(b"grid test", 3_600));
    Ok(World {
        stack,
        pipeline,
        client,
        grid,
    })
}

fn text<'a>(item: &'a Value, attribute: &str) -> &'a str {
    item.get(attribute)
        .and_then(|v| v.get("S").or_else(|| v.get("N")))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Every page of `query`: (phase, id, sk or num) per row, and the page count.
async fn all_pages(
    world: &mut World,
    query: &Query,
    mut between: impl FnMut(usize) -> Vec<Value>,
) -> Result<Vec<(Phase, String, String)>> {
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    for page_number in 0.. {
        let page = world.grid.page(query, cursor.as_deref()).await?;
        ensure!(page.rows.len() <= query.limit, "page {page_number} too long");
        ensure!(
            page.requests.queries <= 2 && page.requests.batch_gets <= 1,
            "page {page_number} cost {:?}",
            page.requests
        );
        for row in &page.rows {
            let position = match page.phase {
                Phase::Index => text(&row.item, "sk").to_owned(),
                Phase::Nulls => text(&row.item, "num").to_owned(),
            };
            rows.push((page.phase, text(&row.item, "id").to_owned(), position));
        }
        let inserts = between(page_number);
        if !inserts.is_empty() {
            let issues = world.stack.table("IssuesTable")?.name.clone();
            put_all(&world.client, &issues, inserts).await?;
            world.pipeline.step().await?;
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(rows),
        }
    }
    unreachable!()
}

/// Index rows strictly in sort-key order (either way), then nulls rows in increasing num.
fn assert_ordered(rows: &[(Phase, String, String)], descending: bool) -> Result<()> {
    let first_null = rows
        .iter()
        .position(|(p, _, _)| *p == Phase::Nulls)
        .unwrap_or(rows.len());
    ensure!(
        rows[first_null..].iter().all(|(p, _, _)| *p == Phase::Nulls),
        "nulls come last, all together"
    );
    for pair in rows[..first_null].windows(2) {
        let ordered = if descending {
            pair[0].2 > pair[1].2
        } else {
            pair[0].2 < pair[1].2
        };
        ensure!(
            ordered,
            "index rows out of order: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    for pair in rows[first_null..].windows(2) {
        let (a, b): (f64, f64) = (pair[0].2.parse()?, pair[1].2.parse()?);
        ensure!(a < b, "nulls out of num order: {:?} then {:?}", pair[0], pair[1]);
    }
    Ok(())
}

fn query(limit: usize, descending: bool, filter: Filter) -> Query {
    Query {
        scope: "gen".into(),
        field: "f".into(),
        descending,
        limit,
        filter,
        attributes: vec![],
    }
}

#[tokio::test]
async fn pages_cover_every_issue_once_in_order_with_nulls_last() -> Result<()> {
    let sdk = sdk();
    let mut world = world(&sdk, GENERATED).await?;
    let with_field: BTreeSet<String> = (1..=GENERATED)
        .filter(|n| n % 20 > 3)
        .map(|n| format!("g{n:05}"))
        .collect();
    let without: Vec<String> = (1..=GENERATED)
        .filter(|n| n % 20 <= 3)
        .map(|n| format!("g{n:05}"))
        .collect();
    for (limit, descending) in [(97, false), (100, true)] {
        let rows = all_pages(&mut world, &query(limit, descending, Filter::None), |_| vec![]).await?;
        assert_ordered(&rows, descending)?;
        let indexed: Vec<&String> = rows
            .iter()
            .filter(|r| r.0 == Phase::Index)
            .map(|r| &r.1)
            .collect();
        let nulls: Vec<String> = rows
            .iter()
            .filter(|r| r.0 == Phase::Nulls)
            .map(|r| r.1.clone())
            .collect();
        ensure!(
            indexed.len() == with_field.len(),
            "{} indexed rows, {} issues with f",
            indexed.len(),
            with_field.len()
        );
        ensure!(
            indexed.iter().copied().cloned().collect::<BTreeSet<_>>() == with_field,
            "each issue with f exactly once"
        );
        ensure!(nulls == without, "issues without f, in num order, each once");
    }

    // Filters: numbers from -10 to 10 inclusive; strings with a prefix. No nulls phase.
    let range = Filter::Range(
        Bound::Included(key_codec::Value::Number(key_codec::Number::parse("-10")?)),
        Bound::Included(key_codec::Value::Number(key_codec::Number::parse("10")?)),
    );
    let rows = all_pages(&mut world, &query(50, false, range), |_| vec![]).await?;
    let expected = (1..=GENERATED)
        .filter(|n| n % 20 > 4)
        .filter(|n| (-10.0..=10.0).contains(&number(*n)))
        .count();
    ensure!(
        rows.len() == expected && rows.iter().all(|r| r.0 == Phase::Index),
        "{} rows in range, expected {expected}",
        rows.len()
    );
    assert_ordered(&rows, false)?;
    let rows = all_pages(
        &mut world,
        &query(50, true, Filter::Prefix("s3".into())),
        |_| vec![],
    )
    .await?;
    ensure!(
        rows.len() == (1..=GENERATED).filter(|n| n % 20 == 4 && n % 7 == 3).count(),
        "prefix rows: {}",
        rows.len()
    );
    Ok(())
}

#[tokio::test]
async fn the_article_project_pages_through_the_index_then_the_gsi() -> Result<()> {
    let sdk = sdk();
    let world = world(&sdk, 0).await?;
    let mut q = query(4, false, Filter::None);
    q.scope = "35e9".into();
    q.field = "3fe6".into();
    q.attributes = vec!["custom_fields".into()];
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = world.grid.page(&q, cursor.as_deref()).await?;
        ensure!(
            page.requests.batch_gets == 1,
            "custom_fields is not projected: one BatchGetItem per page"
        );
        ids.extend(page.rows.iter().map(|r| text(&r.item, "id").to_owned()));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    // 3fe6 ascending (-20, -1.5, 0.25, 7, 42, 100), then the rest of 35e9 by num.
    let expected = [
        "b707", "b706", "b708", "b705", "af34", "b709", "020e", "67d1", "b710", "b711", "b712", "b713",
        "b714",
    ];
    ensure!(ids == expected, "{ids:?}");

    // A cursor for another field, or altered, is refused.
    let first = world.grid.page(&q, None).await?;
    let next = first.next.unwrap_or_default();
    let mut other = q.clone();
    other.field = "47e5".into();
    let error = world
        .grid
        .page(&other, Some(&next))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(error.contains("another query"), "{error}");
    // One character of the signature changed (not the last: it carries only two bits, so
    // several characters decode alike there).
    let at = next.len() - 5;
    let swapped = if next.as_bytes()[at] == b'A' { "B" } else { "A" };
    let altered = format!("{}{swapped}{}", &next[..at], &next[at + 1..]);
    ensure!(altered != next);
    let error = world
        .grid
        .page(&q, Some(&altered))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(
        error.contains("altered") || error.contains("malformed"),
        "{error}"
    );
    Ok(())
}

#[tokio::test]
async fn pages_stay_correct_while_issues_are_inserted() -> Result<()> {
    const BEFORE: usize = 800;
    let sdk = sdk();
    let mut world = world(&sdk, BEFORE).await?;
    let before: BTreeSet<String> = (1..=BEFORE).map(|n| format!("g{n:05}")).collect();
    // Between pages, ten new issues (some with f, some without), indexed before the next page.
    let rows = all_pages(&mut world, &query(50, false, Filter::None), |page| {
        (0..10).map(|i| issue(BEFORE + 1 + page * 10 + i)).collect()
    })
    .await?;
    assert_ordered(&rows, false)?;
    let ids: Vec<&String> = rows.iter().map(|r| &r.1).collect();
    let unique: BTreeSet<&String> = ids.iter().copied().collect();
    ensure!(unique.len() == ids.len(), "no issue twice");
    let missing: Vec<&String> = before.iter().filter(|id| !unique.contains(id)).collect();
    ensure!(
        missing.is_empty(),
        "issues there before paging began are all listed: {missing:?}"
    );
    ensure!(
        ids.len() > before.len(),
        "some inserts land ahead of the cursor and show up"
    );
    Ok(())
}
