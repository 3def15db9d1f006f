//! What `sidestream plan` shows of a function's plan, without AWS: its writes as JSON, what
//! planning left out, and the files it would write.
//!
//! Each function says how its plan reads ([`StreamFunction::explain`]); [`explain`] reads the
//! event as the runtime does (in place, [`crate::wire`]) and hands it the records.

use std::fmt::Display;

use crate::outcome::PlanFailures;
use crate::wire::{Batch, WireRecord};
use crate::{ConfigError, Vars};

use crate::StreamFunction;

/// A function's plan of one batch, as a person or a script reads it.
#[derive(Debug, Default)]
pub struct Explained {
    /// One JSON object per planned write, in order.
    pub writes: Vec<serde_json::Value>,
    /// What planning left out or stopped at, one sentence each.
    pub notes: Vec<String>,
    /// The objects the plan would write, by key (the archiver's archive objects).
    pub files: Vec<(String, Vec<u8>)>,
    /// Whether a record was rejected or stopped planning: the Lambda would park it or report it.
    pub failed: bool,
}

/// Why a plan could not be explained.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The event is not text.
    #[error("the event is not UTF-8")]
    NotUtf8,
    /// The event is not Lambda's DynamoDB stream event.
    #[error(transparent)]
    NotAnEvent(#[from] crate::wire::WireError),
    /// The function's configuration is invalid; the error names the variable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A planned write cannot be shown.
    #[error("{0}")]
    Write(String),
}

impl Explained {
    /// Notes the records planning rejected (the Lambda would park them and go on) and the one it
    /// stopped at (the Lambda would report it in `batchItemFailures`).
    pub fn note_failures<E: Display>(&mut self, records: &[WireRecord<'_>], failures: &PlanFailures<E>) {
        for r in &failures.rejected {
            self.note_record(
                records,
                r.record,
                &format!("can never succeed: {}; the Lambda would park it and go on", r.error),
            );
        }
        if let Some(s) = &failures.stopped {
            self.note_record(
                records,
                s.record,
                &format!("stopped planning: {}; the Lambda would report it in batchItemFailures", s.error),
            );
        }
        self.failed |= failures.stopped.is_some() || !failures.rejected.is_empty();
    }

    /// A note about a record, named by its position and sequence number.
    fn note_record(&mut self, records: &[WireRecord<'_>], record: usize, what: &str) {
        let seq = records.get(record).and_then(|r| r.sequence_number.as_deref()).unwrap_or_default();
        self.notes.push(format!("record {record} (SequenceNumber {seq:?}) {what}"));
    }
}

/// Reads `event` (Lambda's DynamoDB stream event, as JSON) as the runtime does and explains `F`'s
/// plan of it, `F` configured from `vars`.
pub fn explain<F: StreamFunction>(vars: &Vars<'_>, event: &[u8]) -> Result<Explained, ExplainError> {
    let text = std::str::from_utf8(event).map_err(|_| ExplainError::NotUtf8)?;
    let batch = Batch::parse(text)?;
    F::explain(vars, &batch.records)
}
