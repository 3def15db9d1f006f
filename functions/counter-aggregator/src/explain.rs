//! `sidestream plan counter-aggregator`: the plan of a batch as JSON, one object per total.

use serde_json::{Map, Value, json};
use stream_runtime::Vars;
use stream_runtime::wire::WireRecord;
use stream_runtime::{ExplainError, Explainer};

use crate::Plan;
use crate::config::partition_key;

/// One JSON object per counter whose total the batch would update, the shards' partition key
/// attribute being `COUNTER_PARTITION_KEY`: `{"counter":…,"totalKey":…,"shards":{"<k>":
/// {"value":N,"sequenceNumber":…}},"firstRecord":N}`. Each becomes one conditional write of the
/// total item, merged with what the item holds (only shard states newer than the stored ones
/// count). Skipped records and what planning rejected or stopped at are notes.
pub(crate) fn explain(
    vars: &Vars<'_>,
    records: &[WireRecord<'_>],
    out: &mut Explainer<'_>,
) -> Result<(), ExplainError> {
    let plan = Plan::from_wire(&partition_key(vars), records);
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
        let total_key =
            formats::counter::total_key(&u.name).map_err(|e| ExplainError::Write(e.to_string()))?;
        out.write(&json!({
            "counter": u.name, "totalKey": total_key, "shards": shards, "firstRecord": u.first_record,
        }))?;
    }
    for s in &plan.skipped {
        out.note(format_args!("record {} skipped: {}", s.record, s.reason))?;
    }
    out.note_failures(records, &plan.failures)
}
