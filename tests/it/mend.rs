//! Repairs and replays under a live stream (`operations::verify::mend`), with the interleavings that
//! used to corrupt the index forced: the pipeline moves only when a test settles it, so every
//! step below happens in exactly the order written.
//!
//! - old records of the indexer replayed after newer ones (a parked INSERT after its item's
//!   REMOVE; a parked MODIFY 1→2 after 2→3) leave only what the item calls for now;
//! - a verify whose base scan is older than its index scan, repaired: the fresh entry is not
//!   deleted and the stale one is not put back;
//! - an extra entry written again since the verify saw it is not deleted.

use std::sync::{Arc, Mutex};

use anyhow::{Result, ensure};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use stream_runtime::EventRecord;
use stream_runtime::delivery::{Invoker, in_process};

use local_stack::put_json as put;
use multikey_indexer::Index;
use operations::verify::{Mended, Mender};

use crate::support::pipeline::{
    Local, assert_index_exact, failure_log, indexes, issue, local, pipeline, put_issues,
};

/// A record's field `f` in the new image (as text), and its event name.
fn shape(record: &EventRecord) -> (String, String, Option<String>) {
    let value = serde_json::to_value(record).unwrap_or_default();
    let id = value.pointer("/dynamodb/Keys/id/S").and_then(Value::as_str).unwrap_or_default().to_owned();
    let f =
        value.pointer("/dynamodb/NewImage/custom_fields/M/f/N").and_then(Value::as_str).map(str::to_owned);
    (id, record.event_name.clone(), f)
}

/// The indexer as it was when it parked records: those `park` picks never reach it, and are kept.
fn parking(
    inner: Invoker,
    park: fn(&(String, String, Option<String>)) -> bool,
    kept: Arc<Mutex<Vec<EventRecord>>>,
) -> Invoker {
    in_process(move |mut event, deadline| {
        let (inner, kept) = (Arc::clone(&inner), Arc::clone(&kept));
        async move {
            let (parked, rest): (Vec<_>, Vec<_>) = event.records.drain(..).partition(|r| park(&shape(r)));
            kept.lock().unwrap().extend(parked);
            event.records = rest;
            inner(event, deadline).await
        }
    })
}

/// The entries of the index table whose base item is `id`, by their `entry`/`value` (the field's
/// value as text).
async fn values_of(client: &aws_sdk_dynamodb::Client, index: &Index, id: &str) -> Result<Vec<String>> {
    let mut values: Vec<String> = local_stack::scan(client, &index.table)
        .await?
        .into_iter()
        .filter(|e| e["id"]["S"] == id)
        .map(|e| e["value"]["N"].as_str().unwrap_or("?").to_owned())
        .collect();
    values.sort();
    Ok(values)
}

async fn set_f(client: &aws_sdk_dynamodb::Client, table: &str, id: &str, f: u32) -> Result<()> {
    client
        .update_item()
        .table_name(table)
        .key("id", AttributeValue::S(id.into()))
        .update_expression("SET custom_fields.f = :f")
        .expression_attribute_values(":f", AttributeValue::N(f.to_string()))
        .send()
        .await?;
    Ok(())
}

#[tokio::test]
async fn old_records_replayed_through_the_stream_leave_only_what_each_item_calls_for_now() -> Result<()> {
    let Local { sdk, stack, .. } = local(&[]).await?;
    let kept = Arc::new(Mutex::new(Vec::new()));
    let parked = Arc::clone(&kept);
    // i000's INSERT, and i001's MODIFY 1→2, are parked.
    let park: fn(&(String, String, Option<String>)) -> bool = |(id, name, f)| {
        (id == "i000" && name == "INSERT") || (id == "i001" && name == "MODIFY" && f.as_deref() == Some("2"))
    };
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), move |function, inner| {
        if function == "multikey-indexer" { parking(inner, park, Arc::clone(&parked)) } else { inner }
    })?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let issues = crate::support::pipeline::issues_table(&stack)?;
    let indexes = indexes(&stack)?;
    let index = operations::verify::choose(&indexes, None)?.clone();

    // i000: created (parked), then removed (applied). i001: f 1, 2 (parked), 3.
    put(&client, &issues, &issue(0, &json!({"f": 1}))).await?;
    put(&client, &issues, &issue(1, &json!({"f": 1}))).await?;
    pipeline.settle().await?;
    client.delete_item().table_name(&issues).key("id", AttributeValue::S("i000".into())).send().await?;
    set_f(&client, &issues, "i001", 2).await?;
    pipeline.settle().await?;
    set_f(&client, &issues, "i001", 3).await?;
    pipeline.settle().await?;
    let records = kept.lock().unwrap().clone();
    ensure!(
        records.len() == 2,
        "the INSERT of i000 and the MODIFY 1→2 of i001 were parked: {:?}",
        records.iter().map(shape).collect::<Vec<_>>()
    );
    ensure!(
        values_of(&client, &index, "i001").await? == ["1", "3"],
        "the parked MODIFY never deleted i001's entry for 1"
    );

    // Replayed through the stream, oldest first, as `failures replay` does.
    let through_stream = Mender::new(
        aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk)),
        indexes.clone(),
        &issues,
        "replay-test",
    );
    let mended = through_stream.records(&records).await?;
    ensure!(
        mended == Mended { touched: 1, gone: 1, deleted: 1, called_for: 0, newer: 0, paced_ms: 0 },
        "i001 touched, i000 gone, i001's entry for 1 deleted (older than the MODIFY): {mended:?}"
    );
    // The stale entry's key holds the MODIFY's tombstone, lasting the longest lifetime from the
    // replay, and a write older than the MODIFY still on its way (a Kinesis record delivered
    // late) is refused by it, as the indexer's guard refuses it.
    let modify = records[1].change.sequence_number.as_deref().and_then(formats::entries::version);
    // One page: the table holds a few items.
    let scanned = client.scan().table_name(index.table.as_ref()).send().await?;
    let tombstones: Vec<_> = scanned
        .items()
        .iter()
        .filter(|e| e.get(formats::VERSION_ATTRIBUTE).and_then(|v| v.as_s().ok()) == modify.as_ref())
        .collect();
    ensure!(tombstones.len() == 1, "the replayed MODIFY put one tombstone: {tombstones:?}");
    let expires: u64 = tombstones[0]
        .get(formats::tombstone::EXPIRES_ATTRIBUTE)
        .and_then(|v| v.as_n().ok())
        .map_or(Ok(0), |n| n.parse())?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    ensure!(
        expires + 60 >= now + indexes.tombstone_seconds && expires <= now + indexes.tombstone_seconds,
        "the tombstone expires at {expires}, {} s from now",
        expires.saturating_sub(now)
    );
    let key = |name: &str| tombstones[0].get(name).cloned().unwrap_or(AttributeValue::Null(true));
    let late = client
        .put_item()
        .table_name(index.table.as_ref())
        .item(index.partition_key.as_str(), key(&index.partition_key))
        .item(index.sort_key.as_str(), key(&index.sort_key))
        .item("id", AttributeValue::S("i001".into()))
        .item(formats::VERSION_ATTRIBUTE, AttributeValue::S(format!("{:040}", 1)))
        .condition_expression("attribute_not_exists(#v) OR #v < :v")
        .expression_attribute_names("#v", formats::VERSION_ATTRIBUTE)
        .expression_attribute_values(":v", AttributeValue::S(format!("{:040}", 1)))
        .send()
        .await;
    ensure!(
        late.as_ref().err().and_then(aws_sdk_dynamodb::error::SdkError::as_service_error).is_some_and(
            aws_sdk_dynamodb::operation::put_item::PutItemError::is_conditional_check_failed_exception
        ),
        "an older write landing after the replay was refused: {late:?}"
    );
    // Before the stream carries the touch: the stale entry is gone, nothing stale was put.
    ensure!(values_of(&client, &index, "i000").await?.is_empty());
    ensure!(values_of(&client, &index, "i001").await? == ["3"]);
    pipeline.settle().await?;
    ensure!(values_of(&client, &index, "i001").await? == ["3"]);
    assert_index_exact(&sdk, &stack).await?;

    // Replaying again (a retried replay) changes nothing: the tombstone finds the first
    // replay's own (put again, nothing removed), and i001 is touched again.
    let again = Mender::new(
        aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk)),
        indexes,
        &issues,
        "replay-test-2",
    )
    .records(&records)
    .await?;
    ensure!((again.deleted, again.newer, again.touched) == (0, 0, 1), "{again:?}");
    pipeline.settle().await?;
    assert_index_exact(&sdk, &stack).await?;
    Ok(())
}

#[tokio::test]
async fn a_repair_racing_the_stream_neither_deletes_a_fresh_entry_nor_restores_a_stale_one() -> Result<()> {
    let Local { sdk, stack, issues, .. } = local(&[]).await?;
    let mut pipeline = pipeline(&sdk, &stack, &failure_log(), |_, i| i)?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let writer = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let indexes = indexes(&stack)?;
    let index = operations::verify::choose(&indexes, None)?.clone();
    put_issues(&client, &issues, 0..3, |_| json!({"f": 1})).await?;
    pipeline.settle().await?;

    // The verify's base scan reads i000 with f=1; then the app sets f=2 and the indexer
    // deletes entry 1 and puts entry 2; then the verify's index scan runs.
    let base = local_stack::scan(&client, &issues).await?;
    set_f(&client, &issues, "i000", 2).await?;
    pipeline.settle().await?;
    let actual = local_stack::scan(&client, &index.table).await?;
    let drift = operations::verify::compare(&indexes, &index, &base, actual)?;
    ensure!(
        (drift.missing.len(), drift.stale.len(), drift.extra.len()) == (1, 0, 1),
        "the race shows as entry 1 missing and the fresh entry 2 extra: {drift:#?}"
    );

    let mended =
        Mender::new(writer.clone(), indexes.clone(), &issues, "repair-test").drift(&index, &drift).await?;
    ensure!(
        mended == Mended { touched: 1, called_for: 1, ..Mended::default() },
        "i000 touched; the fresh entry kept because i000 calls for it: {mended:?}"
    );
    ensure!(
        values_of(&client, &index, "i000").await? == ["2"],
        "the fresh entry is still there and the stale one was not put back"
    );
    pipeline.settle().await?;
    ensure!(values_of(&client, &index, "i000").await? == ["2"]);
    assert_index_exact(&sdk, &stack).await?;

    // An extra entry the verify saw, written again (a newer version) before the repair runs:
    // i001's entry for 1 is seen; then i001 goes 1→5→1, and the indexer puts entry 1 again.
    let seen = local_stack::scan(&client, &index.table)
        .await?
        .into_iter()
        .find(|e| e["id"]["S"] == "i001")
        .ok_or_else(|| anyhow::anyhow!("i001 has an entry"))?;
    set_f(&client, &issues, "i001", 5).await?;
    set_f(&client, &issues, "i001", 1).await?;
    pipeline.settle().await?;
    // Now i001 leaves 1 again, and the stream has not carried it yet: a consistent read finds
    // i001 no longer calls for entry 1, so only the version condition stands between the repair
    // and the entry the indexer wrote after the verify.
    set_f(&client, &issues, "i001", 7).await?;
    let drift = operations::verify::Drift {
        counts: operations::verify::Counts { extra: 1, ..Default::default() },
        extra: vec![seen],
        ..operations::verify::Drift::none(&index)
    };
    let mended = Mender::new(writer, indexes, &issues, "repair-test-2").drift(&index, &drift).await?;
    ensure!(
        mended == Mended { newer: 1, ..Mended::default() },
        "the entry written since the verify is not deleted: {mended:?}"
    );
    ensure!(values_of(&client, &index, "i001").await? == ["1"]);
    pipeline.settle().await?;
    ensure!(values_of(&client, &index, "i001").await? == ["7"]);
    assert_index_exact(&sdk, &stack).await?;
    Ok(())
}
