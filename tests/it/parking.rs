//! The failure model end to end on moto: a record that can never succeed is parked whole and the
//! batch goes on; a systemic failure checkpoints without parking; a failure to park checkpoints.

use std::time::Duration;

use aws_sdk_dynamodb::types::ScalarAttributeType;
use counter_aggregator::Aggregator;
use io_policy::Deadline;
use multikey_indexer::Indexer;
use serde_json::{Value, json};
use stream_runtime::fixture::Change;
use stream_runtime::{Event, EventRecord, Metric, Metrics};
use stream_runtime::{Runtime, StreamFunction};

use crate::support::moto::{create_table, parked, runtime, sdk, unique};

/// A stream record of the issues table (key `id`), with sequence number `seq`.
fn issue(seq: u64, event_id: &str, name: &str, new: &Value) -> EventRecord {
    let keys = match new.get("id") {
        Some(id) => json!({"id": id}),
        None => json!({"pk": new["pk"]}),
    };
    Change::named(name, keys)
        .new_image(new.clone())
        .event_id(event_id)
        .sequence(format!("{seq:021}"))
        .record()
        .unwrap()
}

/// An INSERT of issue `id`, numbered `seq`, whose only custom field is `f1 = seq`.
fn plain(seq: u64, event_id: &str, id: &str) -> EventRecord {
    let f1 = json!({"M": {"f1": {"N": seq.to_string()}}});
    issue(seq, event_id, "INSERT", &fields(id, seq, &f1))
}

fn fields(id: &str, num: u64, fields: &Value) -> Value {
    json!({"id": {"S": id}, "project": {"S": "p1"}, "num": {"N": num.to_string()},
           "name": {"S": format!("issue {id}")}, "state": {"S": "open"}, "custom_fields": fields})
}

fn event(records: Vec<EventRecord>) -> Event {
    let mut event = Event::default();
    event.records = records;
    event
}

async fn handle<F: StreamFunction>(
    runtime: &Runtime<F>,
    records: Vec<EventRecord>,
) -> (Vec<String>, Metrics) {
    let (response, metrics) =
        runtime.handle_counted(event(records), Deadline::after(Duration::from_secs(60))).await;
    let failures = response
        .unwrap()
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier.unwrap_or_default())
        .collect();
    (failures, metrics)
}

fn counts(metrics: &Metrics, which: &[Metric]) -> Vec<u64> {
    which.iter().map(|m| metrics.get(*m)).collect()
}

const OUTCOME: [Metric; 4] =
    [Metric::RecordsDone, Metric::ParkedRecords, Metric::SystemicFailures, Metric::TransientFailures];

async fn index_table() -> (aws_sdk_dynamodb::Client, String) {
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    let table = unique("parking-index");
    create_table(&client, &table, "pk", Some(("sk", ScalarAttributeType::S)), false).await;
    (client, table)
}

async fn indexer(table: &str, env: &[(&str, &str)]) -> Runtime<Indexer> {
    let json = include_str!("../../functions/multikey-indexer/indexes.example.json")
        .replace("issue-attrib-index", table);
    let mut vars = vec![("MULTIKEY_INDEXES", json.as_str())];
    vars.extend_from_slice(env);
    runtime(&vars).await
}

/// An index entry over 400 KB (the issue's bulk is one map value): caught before anything is
/// sent, its record parked whole, and every other entry, the same issue's included, written.
#[tokio::test]
async fn an_oversize_index_entry_parks_its_record_and_the_batch_goes_on() {
    let (client, table) = index_table().await;
    let id = unique("park-big");
    let indexer = indexer(&table, &[]).await;
    let big = "x".repeat(409_000);
    let records = vec![
        plain(1, "a1", "a"),
        issue(2, &id, "INSERT", &fields("b", 2, &json!({"M": {"f1": {"N": "2"}, "big": {"S": big}}}))),
        plain(3, "c3", "c"),
    ];
    let (failures, metrics) = handle(&indexer, records).await;
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(counts(&metrics, &OUTCOME), [3, 1, 0, 0]);
    assert_eq!(crate::support::moto::index_partitions(&client, &table).await, ["p1#f1", "p1#f1", "p1#f1"]);
    let parked = parked("multikey-indexer", &id).await;
    assert_eq!(parked.len(), 1);
    let error = parked[0]["error"].as_str().unwrap();
    assert!(error.contains("pk=\"p1#big\"") && error.contains("409600"), "{error}");
    assert_eq!(parked[0]["kind"], "record-permanent");
    assert_eq!(
        parked[0]["record"]["dynamodb"]["NewImage"]["custom_fields"]["M"]["big"]["S"].as_str().map(str::len),
        Some(409_000)
    );
}

/// A write DynamoDB itself rejects for the record's content (a number out of its range, copied
/// into the entry): the transaction is cancelled with `ValidationError` on that write, exactly
/// that record is parked, and the rest of the transaction, the records before and after it, is
/// indexed.
#[tokio::test]
async fn a_validation_exception_parks_exactly_the_record_that_causes_it() {
    let (client, table) = index_table().await;
    let id = unique("park-invalid");
    let indexer = indexer(&table, &[]).await;
    let mut bad = fields("b", 2, &json!({"M": {"f1": {"N": "2"}}}));
    bad["state"] = json!({"N": "1E+200"});
    let records = vec![plain(1, "a1", "a"), issue(2, &id, "INSERT", &bad), plain(3, "c3", "c")];
    let (failures, metrics) = handle(&indexer, records).await;
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(counts(&metrics, &OUTCOME), [3, 1, 0, 0]);
    assert_eq!(crate::support::moto::index_partitions(&client, &table).await.len(), 2);
    assert_parked_once("multikey-indexer", &id, "Number overflow").await;
}

/// A base-table key that `MULTIKEY_INDEXES` names but the records lack is the configuration's
/// fault: the batch checkpoints at the first such record, and nothing is parked.
#[tokio::test]
async fn a_configuration_that_does_not_match_the_table_checkpoints_without_parking() {
    let (client, table) = index_table().await;
    let indexer = indexer(&table, &[]).await;
    let mut other = plain(2, "b2", "b");
    other.change.keys = serde_json::from_value(json!({"issue_id": {"S": "b"}})).unwrap();
    let records = vec![plain(1, "a1", "a"), other, plain(3, "c3", "c")];
    let (failures, metrics) = handle(&indexer, records).await;
    assert_eq!(failures, ["000000000000000000002"]);
    assert_eq!(counts(&metrics, &OUTCOME), [1, 0, 1, 0]);
    assert_eq!(crate::support::moto::index_partitions(&client, &table).await, ["p1#f1"]);
    assert!(parked("multikey-indexer", "b2").await.is_empty());
}

/// A missing index table fails every record alike: systemic, a checkpoint at the first record.
#[tokio::test]
async fn a_missing_table_checkpoints_without_parking() {
    let table = unique("no-such-index");
    let indexer = indexer(&table, &[]).await;
    let records = vec![plain(1, "m1", "a"), plain(2, "m2", "b")];
    let (failures, metrics) = handle(&indexer, records).await;
    assert_eq!(failures, ["000000000000000000001"]);
    assert_eq!(counts(&metrics, &OUTCOME), [0, 0, 1, 0]);
}

/// When parking itself fails (here the parking bucket does not exist), the record is not lost:
/// it becomes the checkpoint, and the records before it are done. A missing bucket is systemic
/// (every record would fail to park alike until an operator fixes it), so it is counted and
/// alarmed as one, not retried as a transient failure until Lambda gives the batch up.
#[tokio::test]
async fn a_record_that_cannot_be_parked_becomes_the_checkpoint() {
    let (client, table) = index_table().await;
    let missing = unique("no-such-parking");
    let indexer = indexer(&table, &[("PARKING_BUCKET", &missing)]).await;
    let big = "x".repeat(409_000);
    let records = vec![
        plain(1, "a1", "a"),
        issue(2, "b2", "INSERT", &fields("b", 2, &json!({"M": {"big": {"S": big}}}))),
        plain(3, "c3", "c"),
    ];
    let (failures, metrics) = handle(&indexer, records).await;
    assert_eq!(failures, ["000000000000000000002"]);
    assert_eq!(counts(&metrics, &OUTCOME), [1, 0, 1, 0]);
    // Record 3's entry was written too (writes are idempotent; it is redelivered and rewritten).
    assert_eq!(crate::support::moto::index_partitions(&client, &table).await.len(), 2);
}

/// A counter shard whose `count` is not an integer is parked; the other shards' increments, of
/// the same counter and of another, before and after it, are summed.
#[tokio::test]
async fn a_non_integer_count_is_parked_and_the_other_increments_are_summed() {
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    let table = unique("parking-counters");
    create_table(&client, &table, "pk", None, false).await;
    let aggregator: Runtime<Aggregator> = runtime(&[("COUNTER_TABLE", &table)]).await;
    let id = unique("park-count");
    let shard = |seq: u64, event_id: &str, name: &str, k: u32, count: Value| {
        let key = json!({"pk": {"S": format!("COUNTER#{name}#SHARD#{k}")}});
        let mut image = key.clone();
        image["count"] = count;
        let mut record = issue(seq, event_id, "MODIFY", &image);
        record.change.keys = serde_json::from_value(key).unwrap();
        record
    };
    let records = vec![
        shard(1, "s1", "votes", 0, json!({"N": "5"})),
        shard(2, &id, "votes", 1, json!({"S": "seven"})),
        shard(3, "s3", "votes", 2, json!({"N": "7"})),
        shard(4, "s4", "likes", 0, json!({"N": "2"})),
    ];
    let (failures, metrics) = handle(&aggregator, records).await;
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(counts(&metrics, &OUTCOME), [4, 1, 0, 0]);
    assert_eq!(metrics.get(Metric::Writes), 2);
    let total = |name: &str| {
        let client = client.clone();
        let table = table.clone();
        let key = format!("COUNTER#{name}#TOTAL");
        async move {
            let got = client
                .get_item()
                .table_name(table)
                .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(key))
                .send()
                .await
                .unwrap();
            got.item.unwrap()["total"].as_n().unwrap().clone()
        }
    };
    assert_eq!((total("votes").await, total("likes").await), ("12".to_owned(), "2".to_owned()));
    assert_parked_once("counter-aggregator", &id, "where an integer `count` belongs").await;
}

/// Priming checks the parking bucket like every resource a function writes: a missing one fails
/// init, naming `PARKING_BUCKET`, before any batch.
#[tokio::test]
async fn a_missing_parking_bucket_fails_init() {
    let (_, table) = index_table().await;
    let missing = unique("no-such-parking");
    let unready = indexer(&table, &[("PARKING_BUCKET", &missing)]).await;
    let error = unready.prime().await.unwrap_err().to_string();
    assert!(error.starts_with("PARKING_BUCKET: bucket") && error.contains(&missing), "{error}");
    let ready = indexer(&table, &[]).await;
    let primed = ready.prime().await.unwrap();
    assert!(primed.calls >= 2, "the index table and the parking bucket: {primed:?}");
}

/// Priming checks the source table's stream (`SOURCE_TABLE`): a `KEYS_ONLY` stream would give
/// the indexer no images, so no entries, without a word; init fails naming the variable, the
/// view type found and the one the indexer reads. A `NEW_AND_OLD_IMAGES` stream passes.
#[tokio::test]
async fn a_source_stream_without_the_images_fails_init() {
    use aws_sdk_dynamodb::types::StreamViewType;
    let (client, table) = index_table().await;
    let source = |view: StreamViewType| {
        let client = client.clone();
        async move {
            let name = unique("source-issues");
            crate::support::moto::create_table_viewed(&client, &name, "id", None, Some(view)).await;
            name
        }
    };
    let keys_only = source(StreamViewType::KeysOnly).await;
    let unready = indexer(&table, &[("SOURCE_TABLE", &keys_only)]).await;
    let error = unready.prime().await.unwrap_err().to_string();
    assert!(
        error.starts_with(&format!(
            "SOURCE_TABLE: table {keys_only}'s stream is KEYS_ONLY, but the function reads NEW_AND_OLD_IMAGES"
        )),
        "{error}"
    );
    let both = source(StreamViewType::NewAndOldImages).await;
    let ready = indexer(&table, &[("SOURCE_TABLE", &both)]).await;
    let primed = ready.prime().await.unwrap();
    assert!(primed.calls >= 3, "the index table, the parking bucket and the source table: {primed:?}");
}

/// `function` parked the record `event_id` once, with an error that says `cause`.
async fn assert_parked_once(function: &str, event_id: &str, cause: &str) {
    let parked = parked(function, event_id).await;
    assert_eq!(parked.len(), 1);
    assert!(parked[0]["error"].as_str().unwrap().contains(cause), "{}", parked[0]);
}
