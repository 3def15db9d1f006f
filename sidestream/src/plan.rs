//! `sidestream plan <function>`: a function's planning step on an event file, without AWS.

use std::io::{self, Write};

use anyhow::Context as _;
use multikey_indexer::{Indexes, Plan};
use serde_json::{Map, Value, json};
use stream_kit::{Event, Op};

/// Plans `event` (a DynamoDB stream event's JSON) with the multikey indexer's configuration and
/// writes one JSON object per planned write:
/// `{"op":"put"|"delete","table":…,"key":{…},"item":{…},"record":N}` (deletes have no `item`;
/// `record` is the position of the record the write finishes). What planning left out or stopped
/// at goes to `err`, one line each.
pub fn multikey_indexer(
    indexes: &Indexes,
    event: &[u8],
    mut out: impl Write,
    err: impl Write,
) -> anyhow::Result<Plan> {
    let event: Event = serde_json::from_slice(event).context("not a DynamoDB stream event")?;
    let plan = Plan::new(indexes, &event.records);
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
fn report(plan: &Plan, event: &Event, mut err: impl Write) -> io::Result<()> {
    for s in &plan.skipped {
        writeln!(
            err,
            "sidestream: record {}: index {}: {} left out: {}",
            s.record, s.index, s.member, s.reason
        )?;
    }
    if let Some(stopped) = &plan.stopped {
        let seq = event
            .records
            .get(stopped.record)
            .and_then(|r| r.change.sequence_number.as_deref())
            .unwrap_or_default();
        writeln!(
            err,
            "sidestream: planning stopped at record {} (SequenceNumber {seq:?}): {}; the Lambda would report it in batchItemFailures",
            stopped.record, stopped.error
        )?;
    }
    Ok(())
}
