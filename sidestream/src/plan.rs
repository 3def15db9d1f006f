//! `sidestream plan <function>`: a function's planning step on an event file, without AWS.

use std::io::{self, Write};
use std::path::Path;

use anyhow::Context as _;
use multikey_indexer::{Indexes, Plan};
use serde_json::{Map, Value, json};
use stream_kit::Op;
use stream_kit::wire::Batch;
use ttl_archiver::ObjectSettings;

/// Plans `event` (a DynamoDB stream event's JSON, read in place as the runtime reads it) with the multikey indexer's configuration and
/// writes one JSON object per planned write:
/// `{"op":"put"|"delete","table":…,"key":{…},"item":{…},"record":N}` (deletes have no `item`;
/// `record` is the position of the record the write finishes). What planning left out or stopped
/// at goes to `err`, one line each.
pub(crate) fn multikey_indexer(
    indexes: &Indexes,
    event: &[u8],
    mut out: impl Write,
    err: impl Write,
) -> anyhow::Result<Plan> {
    let text = std::str::from_utf8(event).context("the event is not UTF-8")?;
    let event = Batch::parse(text).context("not a DynamoDB stream event")?;
    let plan = Plan::from_wire(indexes, &event.records);
    for write in &plan.writes {
        let index = indexes
            .indexes
            .iter()
            .find(|i| *i.table == *write.table)
            .context("a write for a table no index names")?;
        let (item, key_source) = match &write.op {
            Op::Put(item) => (Some(item), item),
            Op::Delete(key) => (None, key),
        };
        let mut key = Map::new();
        for name in [&index.partition_key, &index.sort_key] {
            if let Some(v) = key_source.get(name) {
                key.insert(name.clone(), serde_json::to_value(v)?);
            }
        }
        let mut line = json!({"op": write.op.name(), "table": &*write.table, "key": key});
        if let Some(item) = item {
            line["item"] = serde_json::to_value(item)?;
        }
        line["record"] = Value::from(write.origin);
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    report(&plan, &event, err)?;
    Ok(plan)
}

/// Describes what planning left out or stopped at, one line each.
fn report(plan: &Plan, event: &Batch<'_>, mut err: impl Write) -> io::Result<()> {
    for s in &plan.skipped {
        writeln!(
            err,
            "sidestream: record {}: index {}: {} left out: {}",
            s.record, s.index, s.member, s.reason
        )?;
    }
    report_rejections(event, &plan.failures, err)?;
    Ok(())
}

/// Describes the records planning rejected (the Lambda would park them and go on) and the one
/// it stopped at (the Lambda would report it in `batchItemFailures`), one line each.
fn report_rejections<E: std::fmt::Display>(
    event: &Batch<'_>,
    failures: &stream_kit::PlanFailures<E>,
    mut err: impl Write,
) -> io::Result<()> {
    for r in &failures.rejected {
        let what = format!(
            "can never succeed: {}; the Lambda would park it and go on",
            r.error
        );
        describe(event, r.record, &what, &mut err)?;
    }
    if let Some(s) = &failures.stopped {
        let what = format!(
            "stopped planning: {}; the Lambda would report it in batchItemFailures",
            s.error
        );
        describe(event, s.record, &what, &mut err)?;
    }
    Ok(())
}

/// One line about a record, named by its position and sequence number.
fn describe(event: &Batch<'_>, record: usize, what: &str, mut err: impl Write) -> io::Result<()> {
    let seq = event
        .records
        .get(record)
        .and_then(|r| r.sequence_number.as_deref())
        .unwrap_or_default();
    writeln!(err, "sidestream: record {record} (SequenceNumber {seq:?}) {what}")
}

/// Plans `event` with the ttl-archiver's layout and writes one JSON object per object pair it
/// would upload: `{"key":…,"metaKey":…,"records":N,"items":N,"keysOnly":N,"bytes":N,
/// "rawBytes":N,"metaBytes":N,"firstRecord":N,"lastRecord":N,"firstSequenceNumber":…,
/// "lastSequenceNumber":…}` (`key` is null for a run of keys-only records, which has no item
/// object). With `out_dir`, also writes each object to `out_dir/<key>`, for
/// `sidestream archive cat`. Skipped records, keys-only records and the record planning stopped
/// at go to `err`, one line each.
pub(crate) fn ttl_archiver(
    layout: &ObjectSettings,
    event: &[u8],
    out_dir: Option<&Path>,
    mut out: impl Write,
    mut err: impl Write,
) -> anyhow::Result<ttl_archiver::Plan> {
    let text = std::str::from_utf8(event).context("the event is not UTF-8")?;
    let event = Batch::parse(text).context("not a DynamoDB stream event")?;
    let plan = ttl_archiver::Plan::from_wire(layout, &event.records);
    for o in &plan.objects {
        let keys_only = plan
            .keys_only
            .iter()
            .filter(|&&i| (o.first_record..=o.last_record).contains(&i))
            .count();
        let key = (o.items > 0).then_some(&o.data_key);
        let line = json!({
            "key": key, "metaKey": o.meta_key, "records": o.records, "items": o.items,
            "keysOnly": keys_only, "bytes": o.data.len(), "rawBytes": o.raw_bytes, "metaBytes": o.meta.len(),
            "firstRecord": o.first_record, "lastRecord": o.last_record,
            "firstSequenceNumber": o.first_sequence_number, "lastSequenceNumber": o.last_sequence_number,
        });
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
        if let Some(dir) = out_dir {
            let data = (o.items > 0).then_some((&o.data_key, &o.data));
            for (key, body) in data.into_iter().chain([(&o.meta_key, &o.meta)]) {
                let path = dir.join(key);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("cannot create {}", parent.display()))?;
                }
                std::fs::write(&path, body).with_context(|| format!("cannot write {}", path.display()))?;
            }
        }
    }
    out.flush()?;
    for s in &plan.skipped {
        writeln!(err, "sidestream: record {} not archived: {}", s.record, s.reason)?;
    }
    for i in &plan.keys_only {
        writeln!(
            err,
            "sidestream: record {i} has no OldImage: only its keys are archived (keysOnly), in the metadata object"
        )?;
    }
    report_rejections(&event, &plan.failures, err)?;
    Ok(plan)
}

/// Plans `event` with the counter-aggregator's plan and writes one JSON object per counter whose
/// total the batch would update: `{"counter":…,"totalKey":…,"shards":{"<k>":{"value":N,
/// "sequenceNumber":…}},"firstRecord":N}`. Each becomes one conditional write of the total item,
/// merged with what the item holds (only shard states newer than the stored ones count).
/// Skipped records and the record planning stopped at go to `err`.
pub(crate) fn counter_aggregator(
    partition_key: &str,
    event: &[u8],
    mut out: impl Write,
    mut err: impl Write,
) -> anyhow::Result<counter_aggregator::Plan> {
    let text = std::str::from_utf8(event).context("the event is not UTF-8")?;
    let event = Batch::parse(text).context("not a DynamoDB stream event")?;
    let plan = counter_aggregator::Plan::from_wire(partition_key, &event.records);
    for u in &plan.updates {
        let shards: Map<String, Value> = u
            .shards
            .iter()
            .map(|(k, s)| {
                let state =
                    json!({"value": s.value.to_string(), "sequenceNumber": s.sequence_number.as_str()});
                (k.to_string(), state)
            })
            .collect();
        let line = json!({
            "counter": u.name, "totalKey": sharded_counter::layout::total_key(&u.name)?,
            "shards": shards, "firstRecord": u.first_record,
        });
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    for s in &plan.skipped {
        writeln!(err, "sidestream: record {} skipped: {}", s.record, s.reason)?;
    }
    report_rejections(&event, &plan.failures, err)?;
    Ok(plan)
}
