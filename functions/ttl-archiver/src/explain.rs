//! `sidestream plan ttl-archiver`: the plan of a batch as JSON, one object per archive object pair.

use serde_json::json;
use stream_runtime::Vars;
use stream_runtime::wire::WireRecord;
use stream_runtime::{ExplainError, Explainer};

use crate::{ObjectSettings, Plan};

/// One JSON object per object pair the batch would upload, with the layout `ARCHIVE_PREFIX` and
/// `ARCHIVE_GZIP_LEVEL` give: `{"key":…,"metaKey":…,"records":N,"items":N,"keysOnly":N,
/// "bytes":N,"rawBytes":N,"metaBytes":N,"firstRecord":N,"lastRecord":N,
/// "firstSequenceNumber":…,"lastSequenceNumber":…}` (`key` is null for a run of keys-only
/// records, which has no item object). The objects themselves are its files, at their keys, when
/// the sink wants them.
/// Skipped records, keys-only records and what planning rejected or stopped at are notes.
pub(crate) fn explain(
    vars: &Vars<'_>,
    records: &[WireRecord<'_>],
    out: &mut Explainer<'_>,
) -> Result<(), ExplainError> {
    let layout = ObjectSettings::from_vars(vars)?;
    let Plan { objects, skipped, keys_only, failures } = Plan::from_wire(&layout, records);
    for o in objects {
        let keys_only = keys_only.iter().filter(|&&i| (o.first_record..=o.last_record).contains(&i)).count();
        let key = (o.items > 0).then_some(&o.data_key);
        out.write(&json!({
            "key": key, "metaKey": o.meta_key, "records": o.records, "items": o.items,
            "keysOnly": keys_only, "bytes": o.data.len(), "rawBytes": o.raw_bytes, "metaBytes": o.meta.len(),
            "firstRecord": o.first_record, "lastRecord": o.last_record,
            "firstSequenceNumber": o.first_sequence_number, "lastSequenceNumber": o.last_sequence_number,
        }))?;
        if out.wants_files() {
            if o.items > 0 {
                out.file(&o.data_key, &o.data)?;
            }
            out.file(&o.meta_key, &o.meta)?;
        }
    }
    for s in &skipped {
        out.note(format_args!("record {} not archived: {}", s.record, s.reason))?;
    }
    for i in &keys_only {
        out.note(format_args!(
            "record {i} has no OldImage: only its keys are archived (keysOnly), in the metadata object"
        ))?;
    }
    out.note_failures(records, &failures)
}
