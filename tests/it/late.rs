//! Late writes (issue 52): a write request of an invocation that has been superseded lands after
//! newer writes. DynamoDB applies a request it has received even after its sender's invocation
//! timed out and Lambda retried the batch, and `BatchWriteItem` cannot be conditioned, so the
//! old request can land after the retry's writes and after the next record's.
//!
//! The interleaving is forced step by step, as in `mend.rs`: invocation A writes through a fault
//! proxy that holds its write requests ([`local_stack::fault_proxy::Proxy::hold_writes`]), so A's attempts time
//! out and it reports its record failed; B (Lambda's retry of the same batch) and C (the item's
//! next record) write straight to moto; then A's held requests are sent ([`release_held`]).
//!
//! Before the indexer's writes were guarded, the released put re-created the entry C removed,
//! in either order mode. Now every entry write is a put guarded by its record's version
//! (`stream_runtime::writer::Writer::write_versioned`), and a removal a tombstone: A's put finds
//! C's newer entry or tombstone under its key and is refused. The tests count that A's write was
//! really sent late. Taking the guard's condition out of the writer makes them fail.
//!
//! In any order, the records of an entry removed and put back are also delivered in every order,
//! each as a batch of its own ([`an_entry_removed_and_put_back_ends_present_in_every_order`]).
//!
//! [`release_held`]: local_stack::fault_proxy::Proxy::release_held

use std::collections::HashMap;

use anyhow::{Context as _, Result, ensure};
use aws_sdk_dynamodb::types::AttributeValue;
use io_policy::Deadline;
use multikey_indexer::Indexer;
use stream_runtime::{Event, EventRecord};

use crate::support::moto::{
    create_index_table, create_table, runtime, runtime_at, sdk, stream_records, unique,
};

/// The example configuration (custom fields by project, ties by `num`), on `index_table`.
fn indexes(index_table: &str) -> String {
    include_str!("../../functions/multikey-indexer/indexes.example.json")
        .replace("issue-attrib-index", index_table)
}

fn event(records: &[EventRecord]) -> Event {
    let mut event = Event::default();
    event.records = records.to_vec();
    event
}

/// The `value`s of the index entries of issue `id`, sorted, as text (a tombstone holds no `id`).
async fn values_of(client: &aws_sdk_dynamodb::Client, table: &str, id: &str) -> Result<Vec<String>> {
    let scan = client.scan().table_name(table).consistent_read(true).send().await?;
    let mut values: Vec<String> = scan
        .items()
        .iter()
        .filter(|e| e.get("id").and_then(|v| v.as_s().ok()).is_some_and(|v| v == id))
        .map(|e| match e.get("value") {
            Some(AttributeValue::N(n)) => n.clone(),
            other => format!("{other:?}"),
        })
        .collect();
    values.sort();
    Ok(values)
}

/// A base table with a stream and an index table, both new (named from `prefix`); issue `x1`'s
/// field `3fe6` takes `values` in turn (one record each). Returns the client, the index table
/// and the records.
async fn x1_taking(
    values: &[u32],
    prefix: &str,
) -> Result<(aws_sdk_dynamodb::Client, String, Vec<EventRecord>)> {
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    let (base, index) = (unique(&format!("{prefix}-base")), unique(&format!("{prefix}-index")));
    create_table(&client, &base, "id", None, true).await;
    create_index_table(&client, &index).await;
    let item = serde_json::json!({
        "id": "x1", "project": "35e9", "num": 1, "name": "Girder", "state": "open",
        "custom_fields": {"3fe6": values[0]}
    });
    local_stack::put_json(&client, &base, &item).await?;
    for value in &values[1..] {
        client
            .update_item()
            .table_name(&base)
            .key("id", AttributeValue::S("x1".into()))
            .update_expression("SET custom_fields.#f = :v")
            .expression_attribute_names("#f", "3fe6")
            .expression_attribute_values(":v", AttributeValue::N(value.to_string()))
            .send()
            .await?;
    }
    let records = stream_records(&sdk(), &client, &base).await;
    ensure!(records.len() == values.len(), "a record per value: {} records", records.len());
    Ok((client, index, records))
}

/// Issue `x1`'s field `3fe6` takes `values` in turn (one record each); A is the invocation that
/// applies record `late` and is superseded, B its retry, C the records after it. Returns the
/// entries' values after A's held write lands, and how many of A's late requests were applied.
async fn superseded(order: &str, values: &[u32], late: usize) -> Result<(Vec<String>, usize)> {
    let (client, index, records) = x1_taking(values, "late").await?;

    let config = indexes(&index);
    let env = [
        ("MULTIKEY_INDEXES", config.as_str()),
        ("MULTIKEY_ORDER", order),
        ("WRITE_MAX_ATTEMPTS", "1"),
        ("ATTEMPT_TIMEOUT_MS", "300"),
    ];
    let proxy = local_stack::fault_proxy::start(
        sdk().endpoint_url().context("moto's endpoint")?,
        local_stack::fault_proxy::Spec::none(),
    )
    .await?;
    let through_proxy = sdk().to_builder().endpoint_url(format!("http://{}", proxy.addr)).build();
    let first = runtime_at::<Indexer>(&through_proxy, &env).await;
    let now = runtime::<Indexer>(&env).await;

    // A: record `late`, after the records before it were applied; its writes are held and its
    // attempt times out, so it reports the record failed.
    if late > 0 {
        let done = now
            .handle(event(&records[..late]), Deadline::after(std::time::Duration::from_secs(30)))
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        ensure!(done.batch_item_failures.is_empty(), "before A: {done:?}");
    }
    proxy.hold_writes();
    let a = first
        .handle(event(&records[late..=late]), Deadline::after(std::time::Duration::from_secs(5)))
        .await
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    ensure!(
        a.batch_item_failures.len() == 1,
        "A's write never answered: its record is reported failed ({a:?})"
    );
    // B: Lambda's retry of the batch; C: the item's records after it.
    for (step, batch) in [("B", &records[late..=late]), ("C", &records[late + 1..])] {
        let done = now
            .handle(event(batch), Deadline::after(std::time::Duration::from_secs(30)))
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        ensure!(done.batch_item_failures.is_empty(), "{step}: {done:?}");
    }
    let last = values[values.len() - 1].to_string();
    ensure!(values_of(&client, &index, "x1").await? == [last.as_str()], "before A lands");

    // A's held write lands now.
    let landed = proxy.release_held().await;
    let late = proxy.counts.late.load(std::sync::atomic::Ordering::Relaxed);
    ensure!(late >= 1, "A's write was held and sent late: {late} sent");
    Ok((values_of(&client, &index, "x1").await?, landed))
}

/// A's put of an entry lands after B put it again and C deleted it (the value changed 1 → 2).
async fn a_late_put_does_not_restore_a_deleted_entry(order: &str) -> Result<()> {
    let (values, landed) = superseded(order, &[1, 2], 0).await?;
    ensure!(values == ["2"], "the index holds {values:?} for x1; the item calls for [\"2\"] only");
    // The guard refused it: the entry's key held C's tombstone, newer than A's put.
    ensure!(landed == 0, "{landed} of A's late requests were applied");
    Ok(())
}

/// A's delete of an entry (the value changed 1 → 2) lands after C put it back (2 → 1).
async fn a_late_delete_does_not_remove_an_entry_put_back(order: &str) -> Result<()> {
    let (values, landed) = superseded(order, &[1, 2, 1], 1).await?;
    ensure!(values == ["1"], "the index holds {values:?} for x1; the item calls for [\"1\"] only");
    ensure!(landed == 0, "{landed} of A's late requests were applied");
    Ok(())
}

/// Each scenario as two tests: with the indexer in stream order, and in any order.
macro_rules! in_both_orders {
    ($($in_order:ident, $in_any_order:ident => $scenario:ident;)*) => {$(
        #[tokio::test]
        async fn $in_order() -> Result<()> {
            $scenario("stream").await
        }

        #[tokio::test]
        async fn $in_any_order() -> Result<()> {
            $scenario("any").await
        }
    )*};
}

in_both_orders! {
    in_order_a_superseded_invocations_late_put_does_not_restore_a_deleted_entry,
    in_any_order_a_superseded_invocations_late_put_does_not_restore_a_deleted_entry
        => a_late_put_does_not_restore_a_deleted_entry;
    in_order_a_superseded_invocations_late_delete_does_not_remove_an_entry_put_back,
    in_any_order_a_superseded_invocations_late_delete_does_not_remove_an_entry_put_back
        => a_late_delete_does_not_remove_an_entry_put_back;
}

/// In any order (`MULTIKEY_ORDER=any`, as from Kinesis): issue `x1`'s field `3fe6` is put (1),
/// taken out and put back; the three records come in each of their six orders, each a batch of
/// its own, and then each again (a late copy). Whatever the order, the index ends with the
/// entry present, and the copies are refused as superseded.
#[tokio::test]
async fn an_entry_removed_and_put_back_ends_present_in_every_order() -> Result<()> {
    let client = aws_sdk_dynamodb::Client::new(&sdk());
    let base = unique("readd-base");
    create_table(&client, &base, "id", None, true).await;
    let item = serde_json::json!({
        "id": "x1", "project": "35e9", "num": 1, "name": "Girder", "state": "open",
        "custom_fields": {"3fe6": 1}
    });
    local_stack::put_json(&client, &base, &item).await?;
    let set = |value: Option<u32>| {
        let update = client.update_item().table_name(&base).key("id", AttributeValue::S("x1".into()));
        match value {
            Some(v) => update
                .update_expression("SET custom_fields.#f = :v")
                .expression_attribute_values(":v", AttributeValue::N(v.to_string())),
            None => update.update_expression("REMOVE custom_fields.#f"),
        }
        .expression_attribute_names("#f", "3fe6")
        .send()
    };
    set(None).await?;
    set(Some(1)).await?;
    let records = stream_records(&sdk(), &client, &base).await;
    ensure!(records.len() == 3, "insert, removal, put back: {} records", records.len());

    let mut superseded = 0;
    let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    for (n, order) in orders.iter().enumerate() {
        let index = unique(&format!("readd-index{n}"));
        create_index_table(&client, &index).await;
        let config = indexes(&index);
        let indexer =
            runtime::<Indexer>(&[("MULTIKEY_INDEXES", config.as_str()), ("MULTIKEY_ORDER", "any")]).await;
        for pass in 0..2 {
            for &at in order {
                let (done, metrics) = indexer
                    .handle_counted(
                        event(&records[at..=at]),
                        Deadline::after(std::time::Duration::from_secs(30)),
                    )
                    .await;
                let done = done.map_err(|e| anyhow::anyhow!("{e:?}"))?;
                ensure!(done.batch_item_failures.is_empty(), "order {order:?}, pass {pass}: {done:?}");
                superseded += metrics.get(stream_runtime::Metric::SupersededWrites);
            }
        }
        ensure!(values_of(&client, &index, "x1").await? == ["1"], "order {order:?}: the entry is present");
    }
    // Each second pass sends every put again, as old as or older than what is stored: all three
    // refused, in each of the six orders; and in the first pass, any record older than one
    // applied before it.
    ensure!(superseded >= 18, "{superseded} puts refused as superseded");
    Ok(())
}

/// Issue 76, finding 6, forced: in stream order, one batch puts issue `x1`'s entry 1 and then
/// moves it to 2, leaving a tombstone at 1. The batch fails after that (another record's
/// trouble) and Lambda bisects it: with `MaximumRetryAttempts` -1 its older half, the put of 1,
/// can be retried alone until the record age. Here it comes back an hour and a minute later,
/// after the index table's TTL has deleted everything expired by then (done here as TTL does
/// it: each item whose `sidestream_expires` has passed). The tombstone must still be there to
/// refuse that put: in order it lived an hour, and the entry came back.
#[tokio::test]
async fn in_order_a_bisected_batchs_older_half_resent_after_an_hour_does_not_restore_a_removed_entry()
-> Result<()> {
    let (client, index, records) = x1_taking(&[1, 2], "bisect").await?;
    let config = indexes(&index);
    let env = [("MULTIKEY_INDEXES", config.as_str()), ("MULTIKEY_MAX_RECORD_AGE_SECONDS", "43200")];
    let indexer = runtime::<Indexer>(&env).await;
    let deadline = || Deadline::after(std::time::Duration::from_secs(30));
    let whole = indexer.handle(event(&records), deadline()).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    ensure!(whole.batch_item_failures.is_empty(), "the whole batch: {whole:?}");
    ensure!(values_of(&client, &index, "x1").await? == ["2"], "after the batch");

    // An hour and a minute later: TTL has deleted what expired by then.
    let later = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() + 3_660;
    let scan = client.scan().table_name(&index).consistent_read(true).send().await?;
    let (mut tombstones, mut expired) = (0, 0);
    for found in scan.items() {
        let Some(AttributeValue::N(at)) = found.get("sidestream_expires") else { continue };
        tombstones += 1;
        if at.parse::<u64>()? <= later {
            expired += 1;
            let key = [("pk", &found["pk"]), ("sk", &found["sk"])]
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value.clone()))
                .collect();
            client.delete_item().table_name(&index).set_key(Some(key)).send().await?;
        }
    }
    ensure!(tombstones == 1, "the move left one tombstone, at 1: {tombstones}");

    // The older half alone, resent.
    let half =
        indexer.handle(event(&records[..1]), deadline()).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    ensure!(half.batch_item_failures.is_empty(), "the older half: {half:?}");
    let values = values_of(&client, &index, "x1").await?;
    ensure!(
        values == ["2"] && expired == 0,
        "the index holds {values:?} for x1 after the older half came back ({expired} tombstone deleted by TTL \
         within the hour); the item calls for [\"2\"]"
    );
    Ok(())
}

/// Issue 76, finding 1: a stack whose index was written from the DynamoDB stream switches to
/// Kinesis. Issue `x1`'s field goes 1 → 2 through the stream (versions: stream sequence
/// numbers), then 2 → 3 through Kinesis (written as Kinesis Data Streams for DynamoDB writes it,
/// decoded as the functions decode it: versions are change times in microseconds). In the same
/// epoch the tombstone of 2 reads as older than its entry and is refused: the index holds both
/// 2 and 3, and 2 stays for good (its key's writes are all refused). With the epoch raised, as
/// the switch's deploy raises `IndexVersionEpoch`, the same record removes 2.
#[tokio::test]
async fn after_a_switch_from_the_stream_to_kinesis_writes_land_only_in_a_raised_epoch() -> Result<()> {
    let (client, index, records) = x1_taking(&[1, 2, 3], "switch").await?;
    let config = indexes(&index);
    let deadline = || Deadline::after(std::time::Duration::from_secs(30));
    let from_stream = runtime::<Indexer>(&[("MULTIKEY_INDEXES", config.as_str())]).await;
    let done =
        from_stream.handle(event(&records[..2]), deadline()).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    ensure!(done.batch_item_failures.is_empty() && values_of(&client, &index, "x1").await? == ["2"]);

    // 2 → 3, from the table's Kinesis stream.
    let mut writer =
        local_stack::replayer::kinesis::Writer::new("arn:aws:kinesis:us-east-1:123456789012:stream/x", "t");
    let kinesis = serde_json::json!({"Records": [writer.write(&records[2])]});
    let from_kinesis = stream_runtime::kinesis::from_value(&kinesis)?.event.records;
    let version = from_kinesis[0].change.sequence_number.clone().unwrap_or_default();
    ensure!(version.len() == 16, "a change time in microseconds: {version}");
    for (epoch, want) in [("0", &["2", "3"][..]), ("1", &["3"][..])] {
        let env = [
            ("MULTIKEY_INDEXES", config.as_str()),
            ("MULTIKEY_ORDER", "any"),
            ("MULTIKEY_VERSION_EPOCH", epoch),
        ];
        let indexer = runtime::<Indexer>(&env).await;
        let done =
            indexer.handle(event(&from_kinesis), deadline()).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        ensure!(done.batch_item_failures.is_empty(), "epoch {epoch}: {done:?}");
        let values = values_of(&client, &index, "x1").await?;
        ensure!(values == want, "epoch {epoch}: the index holds {values:?} for x1, expected {want:?}");
    }
    Ok(())
}

/// The previous release's transaction for one record, as it wrote it before tombstones
/// (docs/formats.md, "Version heads (retired)"): a put of the item's in-order head on the
/// condition that it is absent or older, and the entry put unconditioned. The head's key is
/// written out here as that release keyed it, `%head#<index name>#<K1 of the base key>`.
fn previous_release_transaction(
    index: &str,
    name: &str,
    id: &str,
    version: &str,
    entry: HashMap<String, AttributeValue>,
) -> Vec<aws_sdk_dynamodb::types::TransactWriteItem> {
    use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
    let s = |v: &str| AttributeValue::S(v.to_owned());
    let head = HashMap::from([
        ("pk".to_owned(), s(&format!("%head#{name}#s{id}%23"))),
        ("sk".to_owned(), s(&format!("s{id}#"))),
        ("sidestream_seq".to_owned(), s(version)),
        ("sidestream_order".to_owned(), s("stream")),
    ]);
    let put = |item, condition: Option<&str>| {
        let mut put = Put::builder().table_name(index).set_item(Some(item));
        if let Some(condition) = condition {
            put = put
                .condition_expression(condition)
                .expression_attribute_names("#v", "sidestream_seq")
                .expression_attribute_values(":v", s(version));
        }
        TransactWriteItem::builder().put(put.build().expect("table and item")).build()
    };
    vec![put(head, Some("attribute_not_exists(#v) OR #v < :v")), put(entry, None)]
}

/// Issue 76, finding 3: an invocation of the previous release (version heads) indexed `x1`'s
/// record 1 and timed out, its transaction held; this release, retrying, applied record 1 and
/// then 1 → 2 (a tombstone at 1). The held transaction lands: its head is absent, since this
/// release writes none, so its unconditioned put of entry 1 brought 1 back for good. With
/// `MULTIKEY_FENCE_HEADS` this release writes each item's head as that release's fence, and the
/// transaction is refused whole.
#[tokio::test]
async fn a_previous_releases_late_transaction_is_refused_by_the_fence() -> Result<()> {
    for (fence, want) in [("false", &["1", "2"][..]), ("true", &["2"][..])] {
        let (client, index, records) = x1_taking(&[1, 2], &format!("fence-{fence}")).await?;
        let config = indexes(&index);
        let env = [("MULTIKEY_INDEXES", config.as_str()), ("MULTIKEY_FENCE_HEADS", fence)];
        let indexer = runtime::<Indexer>(&env).await;
        let deadline = || Deadline::after(std::time::Duration::from_secs(30));
        // Record 1 alone, to take entry 1 as written; then 1 → 2.
        indexer.handle(event(&records[..1]), deadline()).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let scan = client.scan().table_name(&index).consistent_read(true).send().await?;
        let entry = scan.items().iter().find(|i| i.contains_key("id")).cloned().context("entry 1")?;
        indexer.handle(event(&records[1..]), deadline()).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        ensure!(values_of(&client, &index, "x1").await? == ["2"], "fence {fence}: before the late write");

        let version =
            multikey_indexer::version(records[0].change.sequence_number.as_deref().unwrap_or_default())
                .context("a version")?;
        let name = serde_json::from_str::<serde_json::Value>(&config)?["indexes"][0]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let landed = client
            .transact_write_items()
            .set_transact_items(Some(previous_release_transaction(&index, &name, "x1", &version, entry)))
            .send()
            .await
            .is_ok();
        let values = values_of(&client, &index, "x1").await?;
        ensure!(
            values == want && landed == (fence == "false"),
            "fence {fence}: the late transaction {}; the index holds {values:?} for x1, expected {want:?}",
            if landed { "landed" } else { "was refused" }
        );
    }
    Ok(())
}
