//! The grid view's read path against moto: the stack of `template.yaml`, the article's issues
//! plus a thousand or more generated ones indexed by the replayed indexer, then paged through in both
//! orders, with filters, and while issues are being inserted.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use anyhow::{Result, ensure};
use aws_config::SdkConfig;
use formats::cursor::{Phase, Signer};
use futures_util::StreamExt as _;
use local_stack::replayer::{FailureLog, Pipeline};
use local_stack::{Stack, in_process_invoker, put_json};
use multikey_indexer::Indexes;
use operations::grid::{Filter, Grid, GridSchema, Query};
use serde_json::{Value, json};

use crate::support::moto::{sdk, unique};

/// Generated issues: 1,000, or 2,500 at full scale ([`crate::support::scale`]). CI runs 1,000:
/// pages of 97 and 100 then make about ten full pages for each field and order, and cross from the
/// indexed issues to those without an entry inside a page; 2,500 adds pages of the same kinds.
fn generated() -> usize {
    crate::support::scale::size(1_000, 2_500)
}

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

/// A field name too long for the index's partition key (2,048 bytes): no issue has an entry
/// for it.
fn long_field() -> String {
    "L".repeat(2_100)
}

/// What generated issue `num` has for `f`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum F {
    /// No `f` (one in five).
    Missing,
    /// A short string (one in twenty).
    Text,
    /// A 2 KB string of digits: truncated in the sort key, still indexed.
    LongText,
    /// A value the indexer cannot key (one in ten): a list, a map, a string set, a 2 KB binary.
    Unindexable,
    /// A number, with repeats.
    Number,
}

fn f_of(num: usize) -> F {
    match num % 40 {
        0..=7 => F::Missing,
        8 | 9 => F::Text,
        10..=13 => F::Unindexable,
        14 => F::LongText,
        _ => F::Number,
    }
}

fn issue(num: usize) -> Value {
    let id = format!("g{num:05}");
    let f = match f_of(num) {
        F::Missing => None,
        F::Text => Some(json!({"S": format!("s{}", num % 7)})),
        F::LongText => Some(json!({"S": "7".repeat(2_048)})),
        F::Unindexable => Some(match num % 4 {
            0 => json!({"L": [{"N": "1"}, {"S": "two"}]}),
            1 => json!({"M": {"a": {"N": "1"}}}),
            2 => json!({"SS": ["x", "y"]}),
            _ => json!({"B": base64_2k()}),
        }),
        F::Number => Some(json!({"N": number(num).to_string()})),
    };
    let mut fields = serde_json::Map::new();
    if let Some(f) = f {
        fields.insert("f".into(), f);
    }
    fields.insert("other".into(), json!({"N": num.to_string()}));
    if num % 40 == 15 {
        fields.insert(long_field(), json!({"N": "1"}));
    }
    json!({"id": {"S": id}, "project": {"S": "gen"}, "num": {"N": num.to_string()},
           "name": {"S": format!("Issue {num}")}, "state": {"S": "open"}, "custom_fields": {"M": fields}})
}

/// 2,048 bytes, base64: a binary longer than any sort key.
fn base64_2k() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([0xA5_u8; 2_048])
}

/// Whether generated issue `num` has an index entry for `field`.
fn indexed(num: usize, field: &str) -> bool {
    match field {
        "f" => !matches!(f_of(num), F::Missing | F::Unindexable),
        "other" => true,
        _ => false,
    }
}

/// Puts items given in DynamoDB JSON, 8 at a time.
async fn put_typed(client: &aws_sdk_dynamodb::Client, table: &str, items: Vec<Value>) -> Result<()> {
    let puts = futures_util::stream::iter(items.into_iter().map(|item| async move {
        let item: serde_dynamo::Item = serde_json::from_value(item)?;
        client.put_item().table_name(table).set_item(Some(item.into())).send().await?;
        anyhow::Ok(())
    }))
    .buffer_unordered(8)
    .collect::<Vec<_>>()
    .await;
    puts.into_iter().collect::<Result<(), _>>()
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
        &crate::support::process::root().join("template.yaml"),
        &unique("grid"),
        &BTreeMap::new(),
    )
    .await?;
    let log = std::env::temp_dir().join(format!("{}.jsonl", unique("grid-failures")));
    let mut pipeline = stack.pipeline(sdk, |f| in_process_invoker(f, sdk), FailureLog::new(log))?;
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let issues = crate::support::pipeline::issues_table(&stack)?;
    let tracker: Value =
        serde_json::from_str(include_str!("../../dev/sidestream-local/demo/issue-tracker.json"))?;
    let items: Vec<Value> = tracker["issues"].as_array().cloned().unwrap_or_default();
    put_all(&client, &issues, items).await?;
    let typed: Vec<Value> = (1..=generated).map(issue).collect();
    put_typed(&client, &issues, typed).await?;
    pipeline.settle().await?;
    let indexes = Indexes::from_json(&stack.environment("multikey-indexer")?["MULTIKEY_INDEXES"])
        .map_err(anyhow::Error::msg)?;
    let schema = GridSchema::new(&indexes, None, issues, "project-num")?;
    // moto, one request at a time, is slower than DynamoDB: give a page the time its
    // nulls rounds take here (the page that ends the index phase of a field every issue has
    // reads the whole scope, 100 items a round).
    let grid = Grid::new(client.clone(), schema, Signer::new(b"grid test", 3_600)).with_policy(
        io_policy::Bounded::new(io_policy::Policy::default(), std::time::Duration::from_secs(120)),
    );
    Ok(World { stack, pipeline, client, grid })
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
            page.next.is_none() || page.rows.len() == query.limit,
            "page {page_number} holds {} rows of {} and is not the last",
            page.rows.len(),
            query.limit
        );
        ensure!(
            page.next.is_some() || !page.rows.is_empty() || page_number == 0,
            "page {page_number} is an empty last page"
        );
        if page.rows.iter().all(|r| r.phase == Phase::Index) && page.phase == Phase::Index {
            ensure!(
                page.requests.queries == 1 && page.requests.batch_gets <= 1,
                "index page {page_number} cost {:?}",
                page.requests
            );
        }
        for row in &page.rows {
            let position = match row.phase {
                Phase::Index => text(&row.item, "sk").to_owned(),
                Phase::Nulls => text(&row.item, "num").to_owned(),
            };
            rows.push((row.phase, text(&row.item, "id").to_owned(), position));
        }
        let inserts = between(page_number);
        if !inserts.is_empty() {
            let issues = crate::support::pipeline::issues_table(&world.stack)?;
            put_typed(&world.client, &issues, inserts).await?;
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
    let first_null = rows.iter().position(|(p, _, _)| *p == Phase::Nulls).unwrap_or(rows.len());
    ensure!(rows[first_null..].iter().all(|(p, _, _)| *p == Phase::Nulls), "nulls come last, all together");
    for pair in rows[..first_null].windows(2) {
        let ordered = if descending { pair[0].2 > pair[1].2 } else { pair[0].2 < pair[1].2 };
        ensure!(ordered, "index rows out of order: {:?} then {:?}", pair[0], pair[1]);
    }
    for pair in rows[first_null..].windows(2) {
        let (a, b): (f64, f64) = (pair[0].2.parse()?, pair[1].2.parse()?);
        ensure!(a < b, "nulls out of num order: {:?} then {:?}", pair[0], pair[1]);
    }
    Ok(())
}

fn query(limit: usize, descending: bool, filter: Filter) -> Query {
    Query { scope: "gen".into(), field: "f".into(), descending, limit, filter, attributes: vec![] }
}

/// 1,000 generated issues (2,500 at full scale), a tenth of them with a value for `f` the indexer cannot key, one in
/// forty with a field name too long for a partition key: every field, both orders, every issue
/// exactly once, indexed ones in key order, then the rest by num; every page full but the last.
#[tokio::test]
async fn pages_cover_every_issue_once_in_order_with_nulls_last() -> Result<()> {
    let generated = generated();
    let sdk = sdk();
    let mut world = world(&sdk, generated).await?;
    let long = long_field();
    for field in ["f", "other", long.as_str()] {
        let with_entry: BTreeSet<String> =
            (1..=generated).filter(|n| indexed(*n, field)).map(|n| format!("g{n:05}")).collect();
        let without: Vec<String> =
            (1..=generated).filter(|n| !indexed(*n, field)).map(|n| format!("g{n:05}")).collect();
        for (limit, descending) in [(97, false), (100, true)] {
            let mut q = query(limit, descending, Filter::None);
            q.field = field.to_owned();
            let rows = all_pages(&mut world, &q, |_| vec![]).await?;
            assert_ordered(&rows, descending)?;
            let indexed: Vec<&String> = rows.iter().filter(|r| r.0 == Phase::Index).map(|r| &r.1).collect();
            let nulls: Vec<String> =
                rows.iter().filter(|r| r.0 == Phase::Nulls).map(|r| r.1.clone()).collect();
            let name = &field[..field.len().min(8)];
            ensure!(
                indexed.len() == with_entry.len(),
                "{name}: {} indexed rows, {} issues with an entry",
                indexed.len(),
                with_entry.len()
            );
            ensure!(
                indexed.iter().copied().cloned().collect::<BTreeSet<_>>() == with_entry,
                "{name}: each issue with an entry exactly once"
            );
            ensure!(
                nulls == without,
                "{name}: the issues without an entry, in num order, each once ({} of {})",
                nulls.len(),
                without.len()
            );
        }
    }
    ensure!(
        (1..=generated).filter(|n| f_of(*n) == F::Unindexable).count() * 10 >= generated,
        "a tenth of the issues have an unindexable f"
    );

    // Filters: numbers from -10 to 10 inclusive; strings with a prefix. No nulls phase.
    let range = Filter::Range(
        Bound::Included(key_codec::Value::Number(key_codec::Number::parse("-10")?)),
        Bound::Included(key_codec::Value::Number(key_codec::Number::parse("10")?)),
    );
    let rows = all_pages(&mut world, &query(50, false, range), |_| vec![]).await?;
    let expected = (1..=generated)
        .filter(|n| f_of(*n) == F::Number)
        .filter(|n| (-10.0..=10.0).contains(&number(*n)))
        .count();
    ensure!(
        rows.len() == expected && rows.iter().all(|r| r.0 == Phase::Index),
        "{} rows in range, expected {expected}",
        rows.len()
    );
    assert_ordered(&rows, false)?;
    let rows = all_pages(&mut world, &query(50, true, Filter::Prefix("s3".into())), |_| vec![]).await?;
    ensure!(
        rows.len() == (1..=generated).filter(|n| f_of(*n) == F::Text && n % 7 == 3).count(),
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
        ensure!(page.requests.batch_gets >= 1, "custom_fields is not projected: a BatchGetItem per page");
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
    let error = world.grid.page(&other, Some(&next)).await.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(error.contains("another query"), "{error}");
    // One character of the signature changed (not the last: it carries only two bits, so
    // several characters decode alike there).
    let at = next.len() - 5;
    let swapped = if next.as_bytes()[at] == b'A' { "B" } else { "A" };
    let altered = format!("{}{swapped}{}", &next[..at], &next[at + 1..]);
    ensure!(altered != next);
    let error = world.grid.page(&q, Some(&altered)).await.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(error.contains("altered") || error.contains("malformed"), "{error}");
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
    ensure!(missing.is_empty(), "issues there before paging began are all listed: {missing:?}");
    ensure!(ids.len() > before.len(), "some inserts land ahead of the cursor and show up");
    Ok(())
}

/// An issue of project `tomb` whose `f` is the number `f`.
fn tomb_issue(num: usize, f: usize) -> Value {
    json!({"id": {"S": format!("t{num:05}")}, "project": {"S": "tomb"}, "num": {"N": num.to_string()},
           "name": {"S": format!("Issue {num}")}, "state": {"S": "open"},
           "custom_fields": {"M": {"f": {"N": f.to_string()}}}})
}

/// The index as the indexer leaves it after `inserted` (typed items) were put and then `moved`
/// (the same keys, changed): their stream records planned by `multikey_indexer::Plan` in one
/// batch (one write per index key, the last), and the writes put into the index table in
/// batches of 25.
async fn planned(
    client: &aws_sdk_dynamodb::Client,
    indexes: &Indexes,
    inserted: &[Value],
    moved: &[Value],
) -> Result<()> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let record = |n: usize, name: &str, old: Option<&Value>, new: &Value| {
        let mut change = json!({"ApproximateCreationDateTime": now, "Keys": {"id": new["id"]},
            "NewImage": new, "SequenceNumber": format!("{}", 100_000_000_000_u64 + n as u64),
            "SizeBytes": 100, "StreamViewType": "NEW_AND_OLD_IMAGES"});
        if let Some(old) = old {
            change["OldImage"] = old.clone();
        }
        json!({"eventID": format!("e{n}"), "eventName": name, "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": "us-east-1", "dynamodb": change})
    };
    let mut records: Vec<Value> =
        inserted.iter().enumerate().map(|(n, item)| record(n, "INSERT", None, item)).collect();
    records.extend(
        moved
            .iter()
            .enumerate()
            .map(|(n, item)| record(inserted.len() + n, "MODIFY", Some(&inserted[n]), item)),
    );
    let event = json!({"Records": records}).to_string();
    let batch = stream_runtime::wire::Batch::parse(&event)?;
    let plan = multikey_indexer::Plan::from_wire(indexes, &batch.records);
    ensure!(
        plan.failures.rejected.is_empty() && plan.failures.stopped.is_none() && plan.skipped.is_empty(),
        "the plan: {:?}",
        plan.failures
    );
    let mut by_table: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for write in plan.writes {
        let stream_runtime::Op::Put(item) = write.op else { anyhow::bail!("only puts are planned here") };
        by_table.entry(write.table.to_string()).or_default().push(serde_json::to_value(item)?);
    }
    for (table, items) in by_table {
        batch_put(client, &table, items).await?;
    }
    Ok(())
}

/// Puts `items` (typed) into `table`, 25 to a `BatchWriteItem`, until none is unprocessed.
async fn batch_put(client: &aws_sdk_dynamodb::Client, table: &str, items: Vec<Value>) -> Result<()> {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    for chunk in items.chunks(25) {
        let mut requests = chunk
            .iter()
            .map(|item| {
                let item: serde_dynamo::Item = serde_json::from_value(item.clone())?;
                Ok(WriteRequest::builder()
                    .put_request(PutRequest::builder().set_item(Some(item.into())).build()?)
                    .build())
            })
            .collect::<Result<Vec<_>>>()?;
        while !requests.is_empty() {
            let answer = client.batch_write_item().request_items(table, requests).send().await?;
            requests = answer.unprocessed_items.and_then(|mut u| u.remove(table)).unwrap_or_default();
        }
    }
    Ok(())
}

/// Index items of a partition, counted without the readers' code: (entries, tombstones), a
/// tombstone being an item with the TTL attribute docs/formats.md gives it.
async fn partition_items(client: &aws_sdk_dynamodb::Client, index: &str, pk: &str) -> Result<(usize, usize)> {
    let mut pages = client
        .query()
        .table_name(index)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(pk.to_owned()))
        .into_paginator()
        .items()
        .send();
    let (mut entries, mut tombstones) = (0, 0);
    while let Some(item) = pages.next().await {
        if item?.contains_key("sidestream_expires") {
            tombstones += 1;
        } else {
            entries += 1;
        }
    }
    Ok((entries, tombstones))
}

/// A bulk edit moves 3,000 issues' `f` past every other, leaving 3,000 tombstones at the front
/// of the field's entries until TTL deletes them (docs/grid-view.md, "What a page costs"): the
/// first page, 50 entries behind them, is full and takes 3 queries. Each `Query` used to ask for
/// what the page still needed, 51 items, so this page took 60 queries, and about 4,000
/// tombstones ran a page out of its 20 s on AWS.
///
/// What is read here is the grid, not the indexer: the index partition is written as the
/// indexer plans it ([`planned`]: the items' inserts and moves as stream records, through
/// `multikey_indexer::Plan`, its final writes put in batches), not through the stream, which
/// took a minute of the suite for 9,060 guarded puts. The partition is then counted
/// independently of both.
#[tokio::test]
async fn a_page_behind_three_thousand_tombstones_takes_three_queries() -> Result<()> {
    const MOVED: usize = 3_000;
    const STAYED: usize = 60;
    let sdk = sdk();
    let world = world(&sdk, 0).await?;
    let issues = crate::support::pipeline::issues_table(&world.stack)?;
    let index = world.stack.table("IndexTable")?.name.clone();
    let indexes = Indexes::from_json(&world.stack.environment("multikey-indexer")?["MULTIKEY_INDEXES"])
        .map_err(anyhow::Error::msg)?;
    let inserted: Vec<Value> = (1..=MOVED + STAYED).map(|n| tomb_issue(n, n)).collect();
    let moved: Vec<Value> = (1..=MOVED).map(|n| tomb_issue(n, 1_000_000 + n)).collect();
    planned(&world.client, &indexes, &inserted, &moved).await?;
    let now: Vec<Value> = moved.into_iter().chain(inserted.into_iter().skip(MOVED)).collect();
    batch_put(&world.client, &issues, now).await?;
    let (entries, tombstones) = partition_items(&world.client, &index, "tomb#f").await?;
    ensure!(
        entries == MOVED + STAYED && tombstones == MOVED,
        "{entries} entries and {tombstones} tombstones"
    );

    let before = local_stack::meter::read(&sdk).await?;
    let mut q = query(50, false, Filter::None);
    q.scope = "tomb".into();
    let page = world.grid.page(&q, None).await?;
    let read = local_stack::meter::read(&sdk).await?.since(&before);
    let ids: Vec<&str> = page.rows.iter().map(|r| text(&r.item, "id")).collect();
    let expected: Vec<String> = (MOVED + 1..=MOVED + 50).map(|n| format!("t{n:05}")).collect();
    ensure!(ids == expected, "the first page: {ids:?}");
    ensure!(page.next.is_some(), "more follow");
    ensure!(page.requests.queries == 3 && page.requests.batch_gets == 0, "the page cost {:?}", page.requests);
    let units = read.dynamodb.tables.get(&index).map_or(0.0, |u| u.rru);
    println!("a page of 50 behind {MOVED} tombstones: {:?}, {units} read units billed", page.requests);
    ensure!(units > 0.0, "the meter billed the page's reads");

    // The index pages after it, behind no tombstone, are one Query each; every entry once, in
    // order.
    let mut ids: Vec<String> = ids.into_iter().map(str::to_owned).collect();
    let mut cursor = page.next;
    while let Some(at) = cursor {
        let next = world.grid.page(&q, Some(&at)).await?;
        // The last reads the scope for items without `f` (the nulls phase): none here.
        ensure!(
            next.requests.queries == 1 || next.phase == Phase::Nulls,
            "an index page past the tombstones cost {:?}",
            next.requests
        );
        ids.extend(next.rows.iter().map(|r| text(&r.item, "id").to_owned()));
        cursor = next.next;
    }
    let expected: Vec<String> =
        (MOVED + 1..=MOVED + STAYED).chain(1..=MOVED).map(|n| format!("t{n:05}")).collect();
    ensure!(ids == expected, "every entry once, by f: {} rows", ids.len());
    Ok(())
}

/// The demo reads the index as docs/grid-view.md tells an app to ("Reading the index
/// yourself"): a value moved leaves a tombstone at its old key, which the unfiltered `Query`
/// returns (the demo printed it as a blank first row under "sorted by Cost") and
/// `local_stack::index_entries` leaves out.
#[tokio::test]
async fn reading_the_index_directly_leaves_the_tombstones_out() -> Result<()> {
    let sdk = sdk();
    let mut world = world(&sdk, 0).await?;
    let issues = crate::support::pipeline::issues_table(&world.stack)?;
    let index = world.stack.table("IndexTable")?.name.clone();
    // b707's Cost -20 -> 250, as the demo changes it.
    world
        .client
        .update_item()
        .table_name(&issues)
        .key("id", aws_sdk_dynamodb::types::AttributeValue::S("b707".into()))
        .update_expression("SET custom_fields.#f = :v")
        .expression_attribute_names("#f", "3fe6")
        .expression_attribute_values(":v", aws_sdk_dynamodb::types::AttributeValue::N("250".into()))
        .send()
        .await?;
    world.pipeline.settle().await?;
    let (entries, tombstones) = partition_items(&world.client, &index, "35e9#3fe6").await?;
    ensure!(tombstones == 1, "-20's tombstone is there: {entries} entries, {tombstones} tombstones");
    let read = local_stack::index_entries(&world.client, &index, ("pk", "35e9#3fe6"), true).await?;
    let ids: Vec<String> = read
        .iter()
        .map(|item| match item.get("id") {
            Some(aws_sdk_dynamodb::types::AttributeValue::S(id)) => id.clone(),
            _ => String::new(),
        })
        .collect();
    ensure!(ids == ["b706", "b708", "b705", "af34", "b709", "b707"], "{ids:?}");
    ensure!(read.len() == entries, "every entry, nothing else");
    Ok(())
}
