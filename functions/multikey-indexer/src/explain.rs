//! `sidestream plan multikey-indexer`: the plan of a batch as JSON, one object per planned write.

use serde_json::{Map, Value, json};
use stream_runtime::wire::WireRecord;
use stream_runtime::{ExplainError, Explained};
use stream_runtime::{Op, Vars};

use crate::{Indexes, Plan};

/// One JSON object per planned write: `{"op":"put"|"delete","table":…,"key":{…},"item":{…},
/// "record":N}` (deletes have no `item`; `record` is the position of the record the write
/// finishes), with the index definitions `MULTIKEY_INDEXES` gives. What planning left out, and
/// what it rejected or stopped at, are notes.
pub(crate) fn explain(vars: &Vars<'_>, records: &[WireRecord<'_>]) -> Result<Explained, ExplainError> {
    let indexes = Indexes::from_vars(vars)?;
    let plan = Plan::from_wire(&indexes, records);
    let mut explained = Explained::default();
    let json = |e: serde_json::Error| ExplainError::Write(e.to_string());
    for write in &plan.writes {
        let index = indexes.indexes.iter().find(|i| *i.table == *write.table).ok_or_else(|| {
            ExplainError::Write(format!("a write for {}, which no index names", write.table))
        })?;
        let (item, key_source) = match &write.op {
            Op::Put(item) => (Some(item), item),
            Op::Delete(key) => (None, key),
        };
        let mut key = Map::new();
        for name in [&index.partition_key, &index.sort_key] {
            if let Some(v) = key_source.get(name) {
                key.insert(name.clone(), serde_json::to_value(v).map_err(json)?);
            }
        }
        let mut line = json!({"op": write.op.name(), "table": &*write.table, "key": key});
        if let Some(item) = item {
            line["item"] = serde_json::to_value(item).map_err(json)?;
        }
        line["record"] = Value::from(write.origin);
        explained.writes.push(line);
    }
    for s in &plan.skipped {
        explained
            .notes
            .push(format!("record {}: index {}: {} left out: {}", s.record, s.index, s.member, s.reason));
    }
    explained.note_failures(records, &plan.failures);
    Ok(explained)
}
