//! A Kinesis event source mapping, emulated over the replayer's DynamoDB stream batches: each
//! batch's records written once into the table's Kinesis data stream ([`Stream`]), filtered by
//! the mapping's patterns (on the change record, as Lambda's on `data`), then handed to the
//! function as Kinesis may deliver them: shuffled within the batch, some twice, and cut in two
//! invocations, so that a newer change of an item can reach the function an invocation before
//! an older one ([`delivering`]).
//!
//! Every record a mapping reads is written before any is filtered: one item's changes are then
//! written in their order whichever mapping reads them first, as a table writes its changes to
//! its Kinesis stream whoever reads them. (Written as each mapping delivered them, a mapping
//! that filters an item's earlier changes out would write its later ones first.) So the
//! replayer gives a Kinesis mapping every record, and this filters.
//!
//! A [`Stream`] is one Kinesis data stream, shared by every mapping on it, as in AWS: a change
//! is written once, with one change time and one sequence number, whoever reads it and however
//! often (a retried batch, a replay). A duplicate, as a producer's retry makes it, is the same
//! data under a new sequence number. Streams are registered by ARN when the local stack creates
//! the table that writes to them ([`Stream::register`]).
//!
//! The function answers with Kinesis sequence numbers; the replayer, which read the DynamoDB
//! stream, needs a DynamoDB one. When an invocation stops at a record, every record of the batch
//! from there on in that invocation, and every record of the invocations after it, is still to
//! do: the answer names the earliest of them in the DynamoDB stream's order, so the replayer
//! redelivers from there (what was done again is a duplicate, which the functions absorb).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::template::Pattern;
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use serde_json::{Value, json};
use stream_runtime::delivery::{Invocation, Invoker, KinesisInvoker};

use super::Writer;

/// Of each batch's records, the share delivered twice.
const DUPLICATE: f64 = 0.1;

/// One Kinesis data stream that a table writes its changes to.
#[derive(Debug)]
pub struct Stream {
    arn: String,
    state: Mutex<State>,
    /// Pairs of one item's records delivered in the opposite order to their changes.
    crossed: AtomicU64,
    /// Records delivered twice within a batch.
    duplicated: AtomicU64,
    /// Invocations made.
    invocations: AtomicU64,
    /// Records the mappings' filters left out.
    filtered: AtomicU64,
}

#[derive(Debug)]
struct State {
    writer: Writer,
    /// Each change written, by its `eventID`: its Kinesis record, and its version (the change
    /// time in microseconds, which the function reads as its sequence number).
    written: HashMap<String, (Value, u64)>,
    rng: fastrand::Rng,
}

/// The Kinesis record `record` was written as, written now if it never was: a change is written
/// once, whoever reads it and however often.
fn written_once(
    writer: &mut Writer,
    written: &mut HashMap<String, (Value, u64)>,
    record: &EventRecord,
) -> Value {
    let (kinesis, _) = written.entry(record.event_id.clone()).or_insert_with(|| {
        let kinesis = writer.write(record);
        (kinesis, writer.last_micros)
    });
    kinesis.clone()
}

/// The streams registered, by ARN.
fn registry() -> &'static Mutex<BTreeMap<String, Arc<Stream>>> {
    static STREAMS: OnceLock<Mutex<BTreeMap<String, Arc<Stream>>>> = OnceLock::new();
    STREAMS.get_or_init(Mutex::default)
}

impl Stream {
    /// The stream `arn`, written by `table`: registered now, or as it was.
    pub(crate) fn register(arn: &str, table: &str) -> Arc<Stream> {
        let mut streams = registry().lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(streams.entry(arn.to_owned()).or_insert_with(|| {
            Arc::new(Stream {
                arn: arn.to_owned(),
                state: Mutex::new(State {
                    writer: Writer::new(arn, table),
                    written: HashMap::new(),
                    rng: fastrand::Rng::with_seed(crate::replayer::faults::hash(arn.as_bytes())),
                }),
                crossed: AtomicU64::new(0),
                duplicated: AtomicU64::new(0),
                invocations: AtomicU64::new(0),
                filtered: AtomicU64::new(0),
            })
        }))
    }

    /// The stream `arn`, if a table writes to it.
    pub fn registered(arn: &str) -> Option<Arc<Stream>> {
        registry().lock().unwrap_or_else(PoisonError::into_inner).get(arn).cloned()
    }

    /// The stream's ARN.
    pub fn arn(&self) -> &str {
        &self.arn
    }

    /// What the deliveries did so far: crossings of one item's records, and duplicates.
    pub fn disorder(&self) -> super::Disorder {
        let n = |a: &AtomicU64| usize::try_from(a.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        super::Disorder { duplicated: n(&self.duplicated), crossed: n(&self.crossed) }
    }

    /// `record` (a change of the table, as its DynamoDB stream holds it) as the functions read
    /// it from this stream: its version, the change time in microseconds, as its sequence
    /// number; `None` if it was never written to the stream.
    pub(crate) fn as_read(&self, record: &EventRecord) -> Option<EventRecord> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (_, micros) = state.written.get(&record.event_id)?;
        let mut read = record.clone();
        read.change.sequence_number = Some(micros.to_string());
        Some(read)
    }

    /// The Kinesis records `records` (changes of the table, in its DynamoDB stream's order) were
    /// written as, each written now if it never was: what a Kinesis mapping gives up for them.
    pub(crate) fn kinesis_records(&self, records: &[EventRecord]) -> Vec<Value> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { writer, written, .. } = &mut *state;
        records.iter().map(|record| written_once(writer, written, record)).collect()
    }

    /// Invocations made through the stream's mappings.
    pub fn invocations(&self) -> u64 {
        self.invocations.load(Ordering::Relaxed)
    }

    /// Records the stream's mappings' filters left out.
    pub fn filtered(&self) -> u64 {
        self.filtered.load(Ordering::Relaxed)
    }

    /// The Kinesis records of `records` (in the DynamoDB stream's order), each written on first
    /// sight; and the delivery of those `filters` pass (all, when there are none): (record,
    /// Kinesis record) pairs shuffled, some twice under a new sequence number, cut in at most
    /// two invocations.
    fn deliver(&self, records: &[EventRecord], filters: &[Pattern]) -> Vec<Vec<(usize, Value)>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { writer, written, rng } = &mut *state;
        let mut delivery: Vec<(usize, Value)> = Vec::with_capacity(records.len() * 11 / 10);
        for (i, record) in records.iter().enumerate() {
            let kinesis = written_once(writer, written, record);
            if !filters.is_empty() {
                let json = stream_runtime::delivery::reader::record_json(record);
                if !filters.iter().any(|p| p.matches(&json)) {
                    self.filtered.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            if rng.f64() < DUPLICATE {
                delivery.push((i, writer.again(&kinesis)));
                self.duplicated.fetch_add(1, Ordering::Relaxed);
            }
            delivery.push((i, kinesis));
        }
        rng.shuffle(&mut delivery);
        let cut = if delivery.len() > 1 { rng.usize(1..delivery.len()) } else { delivery.len() };
        let second = delivery.split_off(cut);
        self.crossed.fetch_add(crossings(records, delivery.iter().chain(&second)), Ordering::Relaxed);
        [delivery, second].into_iter().filter(|p| !p.is_empty()).collect()
    }
}

/// Pairs of one item's records delivered after a later change of it.
fn crossings<'a>(records: &[EventRecord], delivered: impl Iterator<Item = &'a (usize, Value)>) -> u64 {
    let mut by_item: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, _) in delivered {
        let item = serde_json::to_string(&records[*i].change.keys).unwrap_or_default();
        by_item.entry(item).or_default().push(*i);
    }
    let mut crossed = 0;
    for order in by_item.values() {
        for (a, first) in order.iter().enumerate() {
            crossed += order[a + 1..].iter().filter(|later| *later < first).count() as u64;
        }
    }
    crossed
}

/// The invoker a Kinesis mapping on `stream` with `filters` (patterns of change records: the
/// mapping's, without their `data`) makes of `function`: each batch of the table's DynamoDB
/// stream (every record the mapping read: it filters here) delivered through the Kinesis stream
/// as the module says, the answer in the DynamoDB stream's sequence numbers.
pub fn delivering(stream: Arc<Stream>, filters: Vec<Pattern>, function: KinesisInvoker) -> Invoker {
    let filters = Arc::new(filters);
    Arc::new(move |event: Event, deadline| {
        let (stream, function, filters) = (Arc::clone(&stream), Arc::clone(&function), Arc::clone(&filters));
        Box::pin(async move {
            let records = event.records;
            let parts = stream.deliver(&records, &filters);
            for (p, part) in parts.iter().enumerate() {
                stream.invocations.fetch_add(1, Ordering::Relaxed);
                let kinesis = json!({"Records": part.iter().map(|(_, k)| k).collect::<Vec<_>>()});
                let stopped = match function(kinesis, deadline).await {
                    // The first invocation failing is the batch failing: Lambda retries it whole.
                    failed @ Invocation::Failed { .. } if p == 0 => return failed,
                    Invocation::Failed { .. } => 0,
                    Invocation::Returned(answer) => match checkpoint(&answer) {
                        None => continue,
                        Some(sequence) => part
                            .iter()
                            .position(|(_, k)| k["kinesis"]["sequenceNumber"] == sequence)
                            .unwrap_or(0),
                    },
                };
                let earliest = part[stopped..]
                    .iter()
                    .chain(parts[p + 1..].iter().flatten())
                    .map(|(i, _)| *i)
                    .min()
                    .unwrap_or(0);
                return Invocation::Returned(json!({"batchItemFailures": [
                    {"itemIdentifier": records[earliest].change.sequence_number}
                ]}));
            }
            Invocation::Returned(json!({"batchItemFailures": []}))
        })
    })
}

/// The sequence number a response checkpoints at, if any.
fn checkpoint(answer: &Value) -> Option<Value> {
    answer["batchItemFailures"].as_array().and_then(|f| f.first()).map(|f| f["itemIdentifier"].clone())
}

#[cfg(test)]
mod tests;
