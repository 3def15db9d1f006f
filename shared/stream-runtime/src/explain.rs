//! What `sidestream plan` shows of a function's plan, without AWS: its writes as JSON, what
//! planning left out, and the files it would write, each handed on as it is made.
//!
//! Each function says how its plan reads ([`StreamFunction::EXPLAIN`]) to an [`Explainer`], which
//! passes each write, note and file to a [`Sink`] at once: the CLI's sink prints them, so a batch's
//! explanation is never held whole. [`explain_to`] reads the event as the runtime does (in place,
//! [`crate::wire`]) and hands the function its records; [`explain`] collects what it says
//! ([`Explained`]), for tests and small events.

use std::fmt::Display;
use std::io;

use serde::Serialize;

use crate::outcome::PlanFailures;
use crate::wire::{Batch, WireRecord};
use crate::{ConfigError, Vars};

use crate::StreamFunction;

/// Where an explained plan goes, piece by piece, as it is made.
pub trait Sink {
    /// One planned write, as the text of one JSON value (no line break).
    fn write(&mut self, json: &[u8]) -> io::Result<()>;
    /// What planning left out or stopped at, in one sentence.
    fn note(&mut self, note: &str) -> io::Result<()>;
    /// Whether it keeps the objects the plan would write; when not, a function need not hand
    /// them over ([`Explainer::wants_files`]).
    fn wants_files(&self) -> bool {
        false
    }
    /// An object the plan would write, by key. Dropped by default.
    fn file(&mut self, key: &str, body: &[u8]) -> io::Result<()> {
        let _ = (key, body);
        Ok(())
    }
}

/// What a function's [`StreamFunction::EXPLAIN`] says its plan to: it serialises each write once,
/// into a buffer it reuses, and hands it to its [`Sink`].
pub struct Explainer<'s> {
    sink: &'s mut dyn Sink,
    line: Vec<u8>,
    failed: bool,
}

impl<'s> Explainer<'s> {
    /// An explainer handing what it is told to `sink`.
    pub fn new(sink: &'s mut dyn Sink) -> Explainer<'s> {
        Explainer { sink, line: Vec::new(), failed: false }
    }

    /// One planned write, as one JSON object.
    pub fn write<T: Serialize + ?Sized>(&mut self, write: &T) -> Result<(), ExplainError> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, write).map_err(|e| ExplainError::Write(e.to_string()))?;
        Ok(self.sink.write(&self.line)?)
    }

    /// What planning left out or stopped at, in one sentence.
    pub fn note(&mut self, note: impl Display) -> Result<(), ExplainError> {
        Ok(self.sink.note(&note.to_string())?)
    }

    /// Whether the objects the plan would write are wanted ([`Explainer::file`]).
    pub fn wants_files(&self) -> bool {
        self.sink.wants_files()
    }

    /// An object the plan would write, by key.
    pub fn file(&mut self, key: &str, body: &[u8]) -> Result<(), ExplainError> {
        Ok(self.sink.file(key, body)?)
    }

    /// Notes the records planning rejected (the Lambda would park them and go on) and the one it
    /// stopped at (the Lambda would report it in `batchItemFailures`), and marks the plan failed
    /// when there is either.
    pub fn note_failures<E: Display>(
        &mut self,
        records: &[WireRecord<'_>],
        failures: &PlanFailures<E>,
    ) -> Result<(), ExplainError> {
        for r in &failures.rejected {
            let what = format!("can never succeed: {}; the Lambda would park it and go on", r.error);
            self.note_record(records, r.record, &what)?;
        }
        if let Some(s) = &failures.stopped {
            let what =
                format!("stopped planning: {}; the Lambda would report it in batchItemFailures", s.error);
            self.note_record(records, s.record, &what)?;
        }
        self.failed |= failures.stopped.is_some() || !failures.rejected.is_empty();
        Ok(())
    }

    /// Whether a record was rejected or stopped planning: the Lambda would park it or report it.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// A note about a record, named by its position and sequence number.
    fn note_record(
        &mut self,
        records: &[WireRecord<'_>],
        record: usize,
        what: &str,
    ) -> Result<(), ExplainError> {
        let seq = records.get(record).and_then(|r| r.sequence_number.as_deref()).unwrap_or_default();
        self.note(format_args!("record {record} (SequenceNumber {seq:?}) {what}"))
    }
}

/// A function's plan of one batch, collected whole: a [`Sink`] for tests and small events.
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

impl Sink for Explained {
    fn write(&mut self, json: &[u8]) -> io::Result<()> {
        self.writes.push(serde_json::from_slice(json)?);
        Ok(())
    }

    fn note(&mut self, note: &str) -> io::Result<()> {
        self.notes.push(note.to_owned());
        Ok(())
    }

    fn wants_files(&self) -> bool {
        true
    }

    fn file(&mut self, key: &str, body: &[u8]) -> io::Result<()> {
        self.files.push((key.to_owned(), body.to_vec()));
        Ok(())
    }
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
    /// The function does not say how its plan reads ([`StreamFunction::EXPLAIN`]'s default).
    #[error("{0} does not explain its plan")]
    NotExplained(&'static str),
    /// A planned write cannot be shown.
    #[error("{0}")]
    Write(String),
    /// The sink could not take what it was handed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A function's explanation of its plan of `records` with the configuration `vars` gives,
/// without AWS, to `out`: one JSON object per write, a note for what planning left out, the
/// objects it would write ([`crate::StreamFunction::EXPLAIN`]).
pub type Explain =
    for<'v, 'r, 'o> fn(&Vars<'v>, &[WireRecord<'r>], &mut Explainer<'o>) -> Result<(), ExplainError>;

/// Reads `event` (Lambda's DynamoDB stream event, as JSON) as the runtime does and explains `F`'s
/// plan of it to `sink`, `F` configured from `vars`. Returns whether a record was rejected or
/// stopped planning.
pub fn explain_to<F: StreamFunction>(
    vars: &Vars<'_>,
    event: &[u8],
    sink: &mut dyn Sink,
) -> Result<bool, ExplainError> {
    let text = std::str::from_utf8(event).map_err(|_| ExplainError::NotUtf8)?;
    let batch = Batch::parse(text)?;
    let mut explainer = Explainer::new(sink);
    let explain = F::EXPLAIN.ok_or(ExplainError::NotExplained(F::NAME))?;
    explain(vars, &batch.records, &mut explainer)?;
    Ok(explainer.failed())
}

/// [`explain_to`], collected whole.
pub fn explain<F: StreamFunction>(vars: &Vars<'_>, event: &[u8]) -> Result<Explained, ExplainError> {
    let mut explained = Explained::default();
    explained.failed = explain_to::<F>(vars, event, &mut explained)?;
    Ok(explained)
}
