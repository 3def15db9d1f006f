//! The multikey indexer end to end against moto: base-table writes, their stream records, the
//! handler, and the index table's exact contents and order.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, ScalarAttributeType};
use io_policy::Deadline;
use io_policy::Policy;
use multikey_indexer::Indexer;
use serde_json::{Value, json};
use stream_runtime::Runtime;
use stream_runtime::writer::Writer;
use stream_runtime::{Event, EventRecord, ItemWrite, Op};

use crate::support::moto::{create_table, runtime, sdk, stream_records, unique};
use crate::support::pipeline::{Local, local};

/// The smallest origin among a write report's failures.
fn first_failed_origin(report: &stream_runtime::writer::Report) -> Option<usize> {
    report.failures.iter().map(|(origin, _)| *origin).min()
}

async fn indexer(index_table: &str) -> Runtime<Indexer> {
    let json = include_str!("../../functions/multikey-indexer/indexes.example.json")
        .replace("issue-attrib-index", index_table);
    runtime(&[("MULTIKEY_INDEXES", &json)]).await
}

fn event(records: &[EventRecord]) -> Event {
    let mut event = Event::default();
    event.records = records.to_vec();
    event
}

fn sdk_item(v: &Value) -> HashMap<String, AttributeValue> {
    serde_json::from_value::<serde_dynamo::Item>(v.clone()).unwrap().into()
}

/// The index table's entries (its tombstones left out), partition by partition in `Query`
/// (sort key) order, as `pk | value | id | num` rows.
async fn index_rows(client: &aws_sdk_dynamodb::Client, table: &str) -> Vec<String> {
    let mut pks = crate::support::moto::index_partitions(client, table).await;
    pks.dedup();
    let mut rows = Vec::new();
    for pk in pks {
        let page = client
            .query()
            .table_name(table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
            .send()
            .await
            .unwrap();
        for item in
            page.items().iter().filter(|i| !formats::tombstone::is_tombstone(i.keys().map(String::as_str)))
        {
            let value = match &item["value"] {
                AttributeValue::S(s) => s.clone(),
                AttributeValue::N(n) => n.clone(),
                other => format!("{other:?}"),
            };
            rows.push(format!(
                "{pk} | {value} | {} | {}",
                item["id"].as_s().unwrap(),
                item["num"].as_n().unwrap()
            ));
        }
    }
    rows
}

async fn base_table_changes(client: &aws_sdk_dynamodb::Client, table: &str) {
    let insert: Event =
        serde_json::from_str(include_str!("../../events/multikey-indexer/insert.json")).unwrap();
    for r in &insert.records {
        let item: HashMap<String, AttributeValue> = r.change.new_image.clone().into();
        client.put_item().table_name(table).set_item(Some(item)).send().await.unwrap();
    }
    let update = |id: &str, expression: &str, values: Value| {
        client
            .update_item()
            .table_name(table)
            .key("id", AttributeValue::S(id.to_owned()))
            .update_expression(expression)
            .set_expression_attribute_values(Some(sdk_item(&values)))
    };
    // A custom field's value changes: re-key.
    update("020e", "SET custom_fields.#f = :v", json!({":v": {"S": "2023-05-15"}}))
        .expression_attribute_names("#f", "3812")
        .send()
        .await
        .unwrap();
    // The tiebreaker changes: every entry re-keyed.
    update("67d1", "SET num = :n", json!({":n": {"N": "7"}})).send().await.unwrap();
    // A field dropped and another added.
    update("af34", "REMOVE custom_fields.#d SET custom_fields.#a = :v", json!({":v": {"S": "2023-06-30"}}))
        .expression_attribute_names("#d", "3fe6")
        .expression_attribute_names("#a", "882a")
        .send()
        .await
        .unwrap();
    // An issue without custom fields gains one; another is deleted.
    update("3544", "SET custom_fields = :m", json!({":m": {"M": {"3812": {"S": "2023-04-30"}}}}))
        .send()
        .await
        .unwrap();
    client.delete_item().table_name(table).key("id", AttributeValue::S("83a4".into())).send().await.unwrap();
}

/// An issues table with a stream, an empty index table, and the stream records of
/// [`base_table_changes`].
struct Scenario {
    client: aws_sdk_dynamodb::Client,
    /// The index table's name.
    index: String,
    records: Vec<EventRecord>,
}

impl Scenario {
    async fn new() -> Scenario {
        let sdk = sdk();
        let client = aws_sdk_dynamodb::Client::new(&sdk);
        let (issues, index) = (unique("issues"), unique("issue-attrib-index"));
        create_table(&client, &issues, "id", None, true).await;
        create_table(&client, &index, "pk", Some(("sk", ScalarAttributeType::S)), false).await;
        base_table_changes(&client, &issues).await;
        let records = stream_records(&sdk, &client, &issues).await;
        Scenario { client, index, records }
    }
}

#[tokio::test]
async fn the_index_follows_the_base_table_through_duplicate_delivery() {
    let s = Scenario::new().await;
    assert_eq!(s.records.len(), 10, "5 inserts, 4 updates, 1 delete");

    let indexer = indexer(&s.index).await;
    let (first, rest) = s.records.split_at(6);
    // The first batch is delivered twice, as Lambda may.
    for batch in [first, first, rest] {
        let response = indexer.handle(event(batch), Deadline::after(Duration::from_secs(60))).await.unwrap();
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    assert_eq!(
        index_rows(&s.client, &s.index).await,
        [
            "35e9#3812 | 2023-05-02 | 67d1 | 7",
            "35e9#3812 | 2023-05-15 | 020e | 1",
            "35e9#47e5 | Approved | af34 | 3",
            "35e9#882a | 2023-06-01 | 020e | 1",
            "35e9#882a | 2023-06-02 | 67d1 | 7",
            "35e9#882a | 2023-06-30 | af34 | 3",
            "7b7e#3812 | 2023-04-30 | 3544 | 1",
        ]
    );

    // Each entry carries what a grid row needs.
    let page = s
        .client
        .query()
        .table_name(&s.index)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S("35e9#47e5".into()))
        .send()
        .await
        .unwrap();
    let item = serde_json::to_value(serde_dynamo::Item::from(page.items()[0].clone())).unwrap();
    assert_eq!(item["name"], json!({"S": "Girder needs replacing"}));
    assert_eq!(item["state"], json!({"S": "open"}));
    assert_eq!(item["entry"], json!({"S": "47e5"}));
}

#[tokio::test]
async fn a_poison_record_becomes_the_checkpoint_and_the_retry_finishes_the_batch() {
    let s = Scenario::new().await;
    let indexer = indexer(&s.index).await;

    // Record 6 (020e's update) arrives without its old image, as from a NEW_IMAGE stream.
    let mut poisoned = s.records.clone();
    poisoned[5].change.old_image = serde_dynamo::Item::default();
    let response = indexer.handle(event(&poisoned), Deadline::after(Duration::from_secs(60))).await.unwrap();
    let reported: Vec<_> =
        response.batch_item_failures.iter().map(|f| f.item_identifier.clone().unwrap()).collect();
    assert_eq!(reported, [s.records[5].change.sequence_number.clone().unwrap()]);
    // Records before it are indexed; none after it.
    assert_eq!(index_rows(&s.client, &s.index).await.len(), 6);

    // Lambda redelivers from the checkpoint (this time intact).
    let response =
        indexer.handle(event(&s.records[5..]), Deadline::after(Duration::from_secs(60))).await.unwrap();
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(index_rows(&s.client, &s.index).await.len(), 7);
}

fn put(table: &str, pk: usize, origin: usize) -> ItemWrite {
    let item: serde_dynamo::Item =
        serde_json::from_value(json!({"pk": {"S": format!("k{pk:03}")}, "sk": {"S": "s"}})).unwrap();
    ItemWrite { table: table.into(), op: Op::Put(item.into()), origin }
}

fn writer(sdk: &aws_config::SdkConfig) -> Writer {
    Writer::new(aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(sdk)))
}

#[tokio::test]
async fn the_writer_chunks_by_25_and_reports_failures_by_origin() {
    let sdk = sdk();
    let (client, table) = keyed_table(&sdk, "writer").await;
    let writer = writer(&sdk);
    let later = || Policy::default().budget(Deadline::after(Duration::from_secs(60)));

    let budget = later();
    let report = writer.write((0..60).map(|i| put(&table, i, i)).collect(), &budget).await;
    assert_eq!(
        (report.writes, budget.tally.requests(), budget.tally.retries(), report.failed),
        (60, 3, 0, 0)
    );
    assert_eq!(client.scan().table_name(&table).send().await.unwrap().count(), 60);

    // A missing table is systemic: no retries, no narrowing, and every write is reported.
    let mixed = vec![put(&table, 100, 7), put("no-such-table", 1, 5), put(&table, 101, 2)];
    let budget = later();
    let report = writer.write(mixed, &budget).await;
    assert_eq!((budget.tally.requests(), budget.tally.retries(), report.failed), (1, 0, 3));
    assert_eq!(first_failed_origin(&report), Some(2));
    let (_, failure) = &report.failures[0];
    assert_eq!(failure.kind, io_policy::FailureKind::Systemic);
    assert!(failure.message.contains("ResourceNotFoundException"), "{failure}");

    // Inside the margin before the deadline nothing is sent.
    let budget = Policy::default().budget(Deadline::after(Duration::from_millis(500)));
    let report = writer.write(vec![put(&table, 102, 4)], &budget).await;
    assert_eq!((budget.tally.requests(), report.failed, first_failed_origin(&report)), (0, 1, Some(4)));
}

/// A write DynamoDB rejects for its content (a number out of DynamoDB's range) fails its request
/// of 25 writes, none of which is written (`BatchWriteItem`: "DynamoDB rejects the entire batch
/// write operation"; the emulator too, where moto wrote the writes before it); the writer narrows
/// it down by halves, so only that write fails, as record-permanent, and the other 29 are
/// applied.
#[tokio::test]
async fn a_rejected_request_is_narrowed_down_to_the_write_that_causes_it() {
    let sdk = sdk();
    let (client, table) = keyed_table(&sdk, "narrow").await;
    let mut writes: Vec<ItemWrite> = (0..30).map(|i| put(&table, i, i)).collect();
    writes[17].op = Op::Put(
        serde_json::from_value::<serde_dynamo::Item>(
            json!({"pk": {"S": "k017"}, "sk": {"S": "s"}, "n": {"N": "1E+200"}}),
        )
        .unwrap()
        .into(),
    );
    let budget = Policy::default().budget(Deadline::after(Duration::from_secs(60)));
    let report = writer(&sdk).write(writes, &budget).await;
    assert_eq!((report.writes, report.failed), (29, 1));
    let [(origin, failure)] = report.failures.as_slice() else { panic!("{:?}", report.failures) };
    assert_eq!((*origin, failure.kind), (17, io_policy::FailureKind::RecordPermanent));
    assert!(failure.message.contains("ValidationException"), "{failure}");
    // 2 chunks; the rejected one of 25 is halved down to write 17: 25 → 12 (ok) + 13 → 6 + 7 (ok)
    // → 3 (ok) + 3 → 1 (ok) + 2 → 1 (ok) + 1 (rejected): 10 requests, plus 1 for the other chunk
    // and the first of this one; none of them a retry.
    assert_eq!((budget.tally.requests(), budget.tally.retries()), (12, 0));
    assert_eq!(client.scan().table_name(&table).send().await.unwrap().count(), 29);
}

/// A batch of more than a step's records (`STEP_RECORDS`) in one invocation, as a DynamoDB stream
/// delivers it: the indexer plans it in steps cut by item, sending each step's writes while the
/// next is planned. The index is exactly what the issues' final state calls for (the independent
/// oracle), and the writes took exactly as many requests as the whole batch's plan makes
/// (`stream_runtime::writer::requests_for_versioned`): no entry was written twice.
#[tokio::test]
async fn a_batch_planned_in_steps_indexes_exactly_in_as_many_requests_as_planned_whole() -> anyhow::Result<()>
{
    use multikey_indexer::plan::{Plan, steps};
    use stream_runtime::Metric;
    use stream_runtime::wire::WireRecord;

    let Local { sdk, stack, .. } = local(&[]).await?;
    let indexer = crate::support::pipeline::runtime_with::<Indexer>(&stack, "multikey-indexer", &[])?;
    let mut changes = multikey_indexer::synthetic::batch(2_600, 300, 21).records;
    for (n, change) in changes.iter_mut().enumerate() {
        change.change.sequence_number = Some((10_u128.pow(20) + n as u128).to_string());
    }
    let config = multikey_indexer::Indexes::from_json(multikey_indexer::synthetic::INDEXES_JSON)
        .map_err(anyhow::Error::msg)?;
    let wire = WireRecord::view_all(&changes);
    let cut = steps::by_item(&config, &wire, steps::STEP_RECORDS);
    anyhow::ensure!(cut.len() == 6, "the batch is cut in {} steps", cut.len());
    let (versioned, plain) = multikey_indexer::handler::split(Plan::from_wire(&config, &wire).writes);
    anyhow::ensure!(plain.is_empty(), "every record has a version and a change time");
    // Each entry and tombstone put once, in a request of its own.
    let whole_writes = versioned.len();
    let whole_requests = stream_runtime::writer::requests_for_versioned(versioned.len());

    let (response, metrics) =
        indexer.handle_counted(event(&changes), Deadline::after(Duration::from_secs(120))).await;
    anyhow::ensure!(response.is_ok_and(|r| r.batch_item_failures.is_empty()), "the batch finished");
    let (writes, requests) = (metrics.get(Metric::Writes), metrics.get(Metric::Requests));
    anyhow::ensure!(
        writes == whole_writes as u64 && requests == whole_requests as u64,
        "{writes} writes in {requests} requests; the whole plan makes {whole_writes} writes in {whole_requests}"
    );
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let check = crate::support::pipeline::index_check(&client, &stack, &changes).await?;
    anyhow::ensure!(
        check.is_exact() && check.entries > 500,
        "{} entries; missing {:?}; extra {:?}",
        check.entries,
        check.missing,
        check.extra
    );
    Ok(())
}

/// A fresh table named `prefix…` keyed by `pk` and `sk`, as the index is, and a client of it.
async fn keyed_table(sdk: &aws_config::SdkConfig, prefix: &str) -> (aws_sdk_dynamodb::Client, String) {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let table = unique(prefix);
    create_table(&client, &table, "pk", Some(("sk", ScalarAttributeType::S)), false).await;
    (client, table)
}
