//! The local emulator's DynamoDB stream against what AWS documents: one test per behaviour, each
//! naming the documentation it follows. Every function, test and chaos oracle reads the streams
//! this emulator writes, so a record AWS never writes (or one it writes that the emulator omits)
//! would prove nothing about AWS. The launcher's fixes are in `scripts/moto-server.py`
//! (`streams_write_what_dynamodb_writes`, `streams_turn_off_and_on`).

use anyhow::{Context as _, Result, ensure};
use aws_config::Region;
use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use stream_runtime::delivery::StreamReader;

use crate::support::moto;

/// A new streamed table (`id` its key, `NEW_AND_OLD_IMAGES`) and a client for it.
async fn streamed_table(prefix: &str) -> (aws_sdk_dynamodb::Client, String) {
    let client = aws_sdk_dynamodb::Client::new(&moto::sdk());
    let table = moto::unique(prefix);
    moto::create_table(&client, &table, "id", None, true).await;
    (client, table)
}

fn event_names(records: &[EventRecord]) -> Vec<&str> {
    records.iter().map(|r| r.event_name.as_str()).collect()
}

/// "DynamoDB Streams writes a stream record whenever … A new item is added to the table: the
/// stream captures an image of the entire item" (DynamoDB developer guide, "Change data capture
/// for DynamoDB Streams"): an `UpdateItem` that creates its item is one `INSERT` with the whole
/// image. moto wrote two: the bare key's, then the updated item's.
#[tokio::test]
async fn an_update_that_creates_its_item_is_one_insert_with_the_whole_image() -> Result<()> {
    let (client, table) = streamed_table("parity-upsert").await;
    client
        .update_item()
        .table_name(&table)
        .key("id", AttributeValue::S("a".into()))
        .update_expression("SET title = :t ADD n :one")
        .expression_attribute_values(":t", AttributeValue::S("Girder".into()))
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .send()
        .await?;
    let records = moto::stream_records(&moto::sdk(), &client, &table).await;
    ensure!(event_names(&records) == ["INSERT"], "records: {:?}", event_names(&records));
    let image = &records[0].change.new_image;
    ensure!(image.len() == 3, "the INSERT's image is the whole item: {image:?}");
    Ok(())
}

/// The same rule at the counters' scale: 400 `ADD`s from 8 concurrent writers over 16 items that
/// do not exist yet make exactly 400 records, 16 of them `INSERT`s (moto made 416: each new item's
/// bare key was a record of its own).
#[tokio::test]
async fn concurrent_adds_to_new_items_make_one_record_per_write() -> Result<()> {
    let (client, table) = streamed_table("parity-adds").await;
    let writers = (0..8).map(|w| {
        let client = client.clone();
        let table = table.clone();
        async move {
            for i in 0..50 {
                client
                    .update_item()
                    .table_name(&table)
                    .key("id", AttributeValue::S(format!("shard-{}", (w * 50 + i) % 16)))
                    .update_expression("ADD n :one")
                    .expression_attribute_values(":one", AttributeValue::N("1".into()))
                    .send()
                    .await?;
            }
            anyhow::Ok(())
        }
    });
    for result in futures_util::future::join_all(writers).await {
        result?;
    }
    let records = moto::stream_records(&moto::sdk(), &client, &table).await;
    let inserts = records.iter().filter(|r| r.event_name == "INSERT").count();
    ensure!(
        records.len() == 400 && inserts == 16,
        "{} records, {inserts} INSERTs: DynamoDB writes 400 and 16",
        records.len()
    );
    Ok(())
}

/// "If you perform a `PutItem` or `UpdateItem` operation that does not change any data in an
/// item, DynamoDB Streams does not write a stream record for that operation" (DynamoDB developer
/// guide, "Change data capture for DynamoDB Streams"). moto wrote a `MODIFY` with equal images.
#[tokio::test]
async fn a_write_that_changes_nothing_writes_no_record() -> Result<()> {
    let (client, table) = streamed_table("parity-noop").await;
    for _ in 0..2 {
        client
            .put_item()
            .table_name(&table)
            .item("id", AttributeValue::S("a".into()))
            .item("n", AttributeValue::N("1".into()))
            .send()
            .await?;
    }
    let set_n = |n: &'static str| {
        client
            .update_item()
            .table_name(&table)
            .key("id", AttributeValue::S("a".into()))
            .update_expression("SET n = :n")
            .expression_attribute_values(":n", AttributeValue::N(n.into()))
            .send()
    };
    set_n("1").await?;
    // A real change still writes its record.
    set_n("2").await?;
    let records = moto::stream_records(&moto::sdk(), &client, &table).await;
    ensure!(event_names(&records) == ["INSERT", "MODIFY"], "records: {:?}", event_names(&records));
    Ok(())
}

/// A request DynamoDB rejects writes nothing ("DynamoDB Streams writes a stream record whenever
/// … data items in a table are modified"): an `UpdateItem` of a missing item that fails (here,
/// the item it would create is over 400 KB) leaves neither an item nor a record. moto had put the
/// bare key, and its record, before the update failed.
#[tokio::test]
async fn a_rejected_update_of_a_missing_item_leaves_no_item_and_no_record() -> Result<()> {
    let (client, table) = streamed_table("parity-rejected").await;
    let rejected = client
        .update_item()
        .table_name(&table)
        .key("id", AttributeValue::S("a".into()))
        .update_expression("SET body = :big")
        .expression_attribute_values(":big", AttributeValue::S("x".repeat(410 * 1024)))
        .send()
        .await;
    let error = rejected.err().context("an item over 400 KB is refused")?;
    ensure!(
        error.as_service_error().and_then(aws_sdk_dynamodb::error::ProvideErrorMetadata::code)
            == Some("ValidationException"),
        "{error:?}"
    );
    let got = client
        .get_item()
        .table_name(&table)
        .key("id", AttributeValue::S("a".into()))
        .consistent_read(true)
        .send()
        .await?;
    ensure!(got.item().is_none(), "no item: {:?}", got.item());
    only_the_next_put_is_recorded(&client, &table, "b").await
}

/// Puts the item `id` and checks that the stream holds its `INSERT` and nothing else: what was
/// refused before it left no record.
async fn only_the_next_put_is_recorded(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    id: &str,
) -> Result<()> {
    client.put_item().table_name(table).item("id", AttributeValue::S(id.into())).send().await?;
    let records = moto::stream_records(&moto::sdk(), client, table).await;
    ensure!(event_names(&records) == ["INSERT"], "only the later put's record: {:?}", event_names(&records));
    ensure!(
        records[0].change.keys.get("id") == Some(&serde_dynamo::AttributeValue::S(id.into())),
        "{:?}",
        records[0].change.keys
    );
    Ok(())
}

/// A record's `awsRegion` is "the region in which the `GetRecords` request was received", its
/// table's (Streams API reference, `Record`), and `ApproximateCreationDateTime` is "in UNIX epoch
/// time format and rounded down to the closest second" (`StreamRecord`). moto wrote `us-east-1`
/// for every table, and milliseconds.
#[tokio::test]
async fn records_carry_their_tables_region_and_a_whole_second() -> Result<()> {
    let sdk = moto::sdk().to_builder().region(Region::new("eu-west-1")).build();
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let table = moto::unique("parity-region");
    moto::create_table(&client, &table, "id", None, true).await;
    client.put_item().table_name(&table).item("id", AttributeValue::S("a".into())).send().await?;
    let arn = stream_arn(&client, &table).await?;
    let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
    let records = read_all(&streams, &arn).await?;
    ensure!(records.len() == 1, "{records:?}");
    ensure!(records[0].aws_region() == Some("eu-west-1"), "{:?}", records[0].aws_region());
    let created =
        records[0].dynamodb().and_then(|d| d.approximate_creation_date_time()).context("a creation time")?;
    ensure!(created.subsec_nanos() == 0, "a whole second: {created:?}");
    Ok(())
}

/// Every record of the stream `arn` (one shard), read with the Streams API through empty pages.
async fn read_all(
    streams: &aws_sdk_dynamodbstreams::Client,
    arn: &str,
) -> Result<Vec<aws_sdk_dynamodbstreams::types::Record>> {
    let mut iterator = Some(first_iterator(streams, arn).await?);
    let mut records = Vec::new();
    let mut empty = 0;
    while let Some(at) = iterator.take() {
        let page = streams.get_records().shard_iterator(at).send().await?;
        if page.records().is_empty() {
            empty += 1;
            if empty > 5 {
                break;
            }
        }
        records.extend(page.records().iter().cloned());
        iterator = page.next_shard_iterator;
    }
    Ok(records)
}

async fn first_iterator(streams: &aws_sdk_dynamodbstreams::Client, arn: &str) -> Result<String> {
    let described = streams.describe_stream().stream_arn(arn).send().await?;
    let shard = described
        .stream_description()
        .and_then(|d| d.shards().first())
        .and_then(|s| s.shard_id())
        .context("a shard")?
        .to_owned();
    streams
        .get_shard_iterator()
        .stream_arn(arn)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await?
        .shard_iterator
        .context("an iterator")
}

/// "A shard iterator expires 15 minutes after it is returned to the requester" (Streams API
/// reference, `GetShardIterator`), and `GetRecords` with it then fails with
/// `ExpiredIteratorException` (`GetRecords`, Errors). moto's never expired. The project's stream
/// reader, which keeps an iterator from one poll to the next, takes a new one after the last
/// record it read, and reads on without a gap or a repeat.
#[tokio::test]
async fn an_iterator_expires_fifteen_minutes_after_it_was_handed_out() -> Result<()> {
    let sdk = moto::sdk();
    let (client, table) = streamed_table("parity-expiry").await;
    let put = |id: &'static str| {
        client.put_item().table_name(&table).item("id", AttributeValue::S(id.into())).send()
    };
    put("a").await?;
    let arn = stream_arn(&client, &table).await?;
    let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
    let mut reader = StreamReader::new(streams.clone(), &arn);
    let first = reader.poll().await?;
    ensure!(first.len() == 1, "{first:?}");
    let unused = first_iterator(&streams, &arn).await?;

    // 14 minutes: still good.
    local_stack::age_iterators(&sdk, 14 * 60).await?;
    streams.get_records().shard_iterator(&unused).send().await?;
    // Past 15: expired.
    local_stack::age_iterators(&sdk, 2 * 60).await?;
    let expired = streams.get_records().shard_iterator(&unused).send().await;
    let error = expired.err().context("an iterator past 15 minutes is refused")?;
    ensure!(
        error.as_service_error().is_some_and(
            aws_sdk_dynamodbstreams::operation::get_records::GetRecordsError::is_expired_iterator_exception
        ),
        "{error:?}"
    );

    // The reader's own iterator expired too: it reads on from after its last record.
    put("b").await?;
    put("c").await?;
    let mut read = Vec::new();
    for _ in 0..5 {
        read.extend(reader.poll().await?);
        if read.len() >= 2 {
            break;
        }
    }
    let ids: Vec<_> = read.iter().map(|(_, r)| format!("{:?}", r.change.keys.get("id"))).collect();
    ensure!(read.len() == 2, "b and c once each: {ids:?}");
    ensure!(reader.renewed_iterators() == 1, "renewed {}", reader.renewed_iterators());
    Ok(())
}

/// "If an item … is refused for its content (it exceeds 400 KB, a number overflows …), the
/// transaction is cancelled: `TransactionCanceledException`, with the reason `ValidationError` for
/// that action and `None` for the others", and a cancelled transaction writes nothing (API
/// reference, `TransactWriteItems`): no item, and no stream record. moto named the reason after
/// its exception's class (`ValidationException`).
#[tokio::test]
async fn a_transaction_refused_for_one_items_content_is_cancelled_whole_with_validation_error() -> Result<()>
{
    let (client, table) = streamed_table("parity-transaction").await;
    let put = |id: &str, n: &str| {
        aws_sdk_dynamodb::types::TransactWriteItem::builder()
            .put(
                aws_sdk_dynamodb::types::Put::builder()
                    .table_name(&table)
                    .item("id", AttributeValue::S(id.into()))
                    .item("n", AttributeValue::N(n.into()))
                    .build()
                    .unwrap(),
            )
            .build()
    };
    let cancelled = client
        .transact_write_items()
        .transact_items(put("a", "1"))
        .transact_items(put("b", "1E+200"))
        .send()
        .await;
    let error = cancelled.err().context("a number out of range is refused")?;
    let Some(aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(e)) =
        error.as_service_error()
    else {
        anyhow::bail!("{error:?}");
    };
    let codes: Vec<Option<&str>> = e.cancellation_reasons().iter().map(|r| r.code()).collect();
    ensure!(codes == [Some("None"), Some("ValidationError")], "{codes:?}");
    let scanned = client.scan().table_name(&table).consistent_read(true).send().await?;
    ensure!(scanned.count() == 0, "nothing written: {:?}", scanned.items());
    only_the_next_put_is_recorded(&client, &table, "c").await
}

/// The ARN of `table`'s stream.
async fn stream_arn(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<String> {
    Ok(client
        .describe_table()
        .table_name(table)
        .send()
        .await?
        .table()
        .and_then(|t| t.latest_stream_arn())
        .context("a stream")?
        .to_owned())
}

/// The emulator's meter (scripts/meter.py) bills as DynamoDB's pricing rules say: a write by the
/// larger of the item before and after, a unit a KB; a write refused by its condition by the item
/// it found; a transaction's writes twice; a read a unit per 4 KB, half for an eventually
/// consistent one; a `Query` by the bytes it read before its filter. Each figure is a difference
/// of two readings on a table of this test's own.
#[tokio::test]
async fn the_meter_bills_request_units_by_dynamodbs_rules() -> Result<()> {
    use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
    let client = aws_sdk_dynamodb::Client::new(&moto::sdk());
    let table = moto::unique("meter");
    moto::create_index_table(&client, &table).await;
    let units = || async {
        let metered = local_stack::meter::read(&moto::sdk()).await?;
        Ok::<_, anyhow::Error>(metered.dynamodb.tables.get(&table).copied().unwrap_or_default())
    };
    let s = |v: &str| AttributeValue::S(v.to_owned());
    // pk "p" (2+1), sk (2+…), body: 1,500 bytes of "x" in all with the names: 2 units a put.
    let item = |sk: &str, body: usize| {
        [("pk", s("p")), ("sk", s(sk)), ("body", s(&"x".repeat(body)))]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<std::collections::HashMap<_, _>>()
    };
    let mut billed = Vec::new();
    let before = units().await?;
    // 1. A new item of 1,500 bytes: 2 units.
    client.put_item().table_name(&table).set_item(Some(item("a", 1_490))).send().await?;
    billed.push(units().await?.wru - before.wru);
    // 2. Replaced by a small one: the larger, the old, counts: 2 units.
    client.put_item().table_name(&table).set_item(Some(item("a", 10))).send().await?;
    // 3. A put refused by its condition: the item it found (small): 1 unit, and refused.
    let refused = client
        .put_item()
        .table_name(&table)
        .set_item(Some(item("a", 3_000)))
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await;
    ensure!(refused.is_err(), "the condition holds: the item exists");
    // 4. A transaction's put of a new small item: twice 1 unit.
    let put = Put::builder().table_name(&table).set_item(Some(item("b", 10))).build()?;
    client
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(put).build())
        .send()
        .await?;
    let after = units().await?;
    ensure!(billed == [2.0], "a 1.5 KB put: {billed:?}");
    // Billed 2 + 2 + 1 + 2 × 1; as single writes 2 + 2 + 0 (refused) + 1; one refused. Units are
    // whole (or halves), exact in an f64.
    let spent =
        (after.wru - before.wru, after.wru_single - before.wru_single, after.refused - before.refused);
    ensure!(spent == (7.0, 5.0, 1.0), "{after:?} after {before:?}");

    // Reads: three items of about 2 KB; a strongly consistent GetItem of one is 1 unit, an
    // eventually consistent one 0.5; a Query whose filter keeps none still reads 6 KB: 2 units,
    // halved for an eventually consistent read.
    for sk in ["c1", "c2", "c3"] {
        client.put_item().table_name(&table).set_item(Some(item(sk, 2_000))).send().await?;
    }
    let before = units().await?;
    client
        .get_item()
        .table_name(&table)
        .key("pk", s("p"))
        .key("sk", s("c1"))
        .consistent_read(true)
        .send()
        .await?;
    let strong = units().await?.rru - before.rru;
    client.get_item().table_name(&table).key("pk", s("p")).key("sk", s("c1")).send().await?;
    let eventual = units().await?.rru - before.rru - strong;
    let query = client
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :p AND begins_with(sk, :c)")
        .filter_expression("attribute_not_exists(body)")
        .expression_attribute_values(":p", s("p"))
        .expression_attribute_values(":c", s("c"))
        .send()
        .await?;
    ensure!(query.count() == 0 && query.scanned_count() == 3, "the filter kept none of three");
    let queried = units().await?.rru - before.rru - strong - eventual;
    ensure!((strong, eventual, queried) == (1.0, 0.5, 1.0), "reads billed {strong}, {eventual}, {queried}");
    Ok(())
}

/// A table's stream turned off and on mid-run ("If you disable a stream, any shards that are open
/// will be closed. The data in the stream will continue to be readable for 24 hours", and "If you
/// disable and then re-enable a stream on the table, a new stream is created with a different
/// stream descriptor": developer guide, "Change data capture for DynamoDB Streams"). The project's
/// reader, reading the stream as it is turned off, delivers every record written before, reaches
/// the closed shard's end (its last page has no `NextShardIterator`: `GetRecords`) and reads
/// nothing more, nor fails; the write made while the stream was off is in no stream; the stream
/// turned on again is a new ARN, whose reader gets the writes made after it alone. A Lambda
/// mapping is bound to one stream ARN, as this reader is: on AWS a new mapping (a stack update)
/// reads the new stream.
#[tokio::test]
async fn a_stream_turned_off_mid_run_is_read_to_its_closed_end_and_on_again_is_a_new_stream() -> Result<()> {
    let (client, table) = streamed_table("parity-onoff").await;
    let sdk = moto::sdk();
    let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
    let put = async |id: &str| {
        client.put_item().table_name(&table).item("id", AttributeValue::S(id.into())).send().await
    };
    let latest = async || -> Result<String> {
        let described = client.describe_table().table_name(&table).send().await?;
        described.table.and_then(|t| t.latest_stream_arn).context("the table's stream")
    };
    let ids = |records: &[(String, EventRecord)]| -> Vec<String> {
        records
            .iter()
            .filter_map(|(_, r)| r.change.keys.get("id").and_then(|v| serde_json::to_value(v).ok()))
            .map(|v| v.to_string())
            .collect()
    };
    let old = latest().await?;
    let mut reader = StreamReader::new(streams.clone(), old.clone());
    put("a").await?;
    let mut read = reader.poll().await?;
    put("b").await?;
    let stream_off = aws_sdk_dynamodb::types::StreamSpecification::builder().stream_enabled(false).build()?;
    client.update_table().table_name(&table).stream_specification(stream_off).send().await?;
    put("while-off").await?;
    // Through the emulator's empty pages to the closed shard's end.
    for _ in 0..10 {
        read.extend(reader.poll().await?);
        if reader.ended_shards() == 1 {
            break;
        }
    }
    ensure!(reader.ended_shards() == 1, "the closed shard was read to its end");
    ensure!(
        ids(&read) == [r#"{"S":"a"}"#, r#"{"S":"b"}"#],
        "the records before the stream was off: {:?}",
        ids(&read)
    );
    ensure!(reader.poll().await?.is_empty(), "a closed stream holds nothing more");
    let described = streams.describe_stream().stream_arn(&old).send().await?;
    let status = described.stream_description.and_then(|d| d.stream_status);
    ensure!(status == Some(aws_sdk_dynamodbstreams::types::StreamStatus::Disabled), "{status:?}");

    let stream_on = aws_sdk_dynamodb::types::StreamSpecification::builder()
        .stream_enabled(true)
        .stream_view_type(aws_sdk_dynamodb::types::StreamViewType::NewAndOldImages)
        .build()?;
    client.update_table().table_name(&table).stream_specification(stream_on).send().await?;
    let new = latest().await?;
    ensure!(new != old, "a stream turned on again is a new stream");
    put("c").await?;
    let mut again = StreamReader::new(streams, new);
    let mut after = Vec::new();
    for _ in 0..5 {
        after.extend(again.poll().await?);
    }
    ensure!(ids(&after) == [r#"{"S":"c"}"#], "the new stream holds the writes after it: {:?}", ids(&after));
    ensure!(
        again.ended_shards() == 0 && reader.poll().await?.is_empty(),
        "the new stream is open; the old one ended"
    );
    Ok(())
}
