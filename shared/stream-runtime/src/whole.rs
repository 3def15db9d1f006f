//! The way back from a batch's records, read in place ([`crate::wire`]), to each record
//! whole, as Lambda delivered it: for the edges that keep or match a record whole (parking, a
//! combined function's filters), which are rare or optional. The plans never need it.

use crate::EventRecord;
use serde_json::Value;
use serde_json::value::RawValue;

/// Where the records a function handles come whole from.
#[derive(Debug, Clone, Copy)]
pub struct Whole<'r> {
    from: Origin<'r>,
    /// The positions, in `from`, of the records handled, when they are a part of it (a combined
    /// function's member's records).
    part: Option<&'r [usize]>,
}

#[derive(Debug, Clone, Copy)]
enum Origin<'r> {
    /// Records decoded already: in process, and a Kinesis batch's change records.
    Events(&'r [EventRecord]),
    /// Lambda's invocation, as its JSON text: read again only when a record is wanted whole.
    Text(&'r str),
}

impl<'r> Whole<'r> {
    /// Records decoded already.
    pub fn events(records: &'r [EventRecord]) -> Whole<'r> {
        Whole { from: Origin::Events(records), part: None }
    }

    /// Records in an event's JSON text, which [`crate::wire::Batch::parse`] has read.
    pub fn text(json: &'r str) -> Whole<'r> {
        Whole { from: Origin::Text(json), part: None }
    }

    /// The records at `positions` of these (which must be all of a batch's, not a part).
    #[must_use]
    pub fn part(self, positions: &'r [usize]) -> Whole<'r> {
        debug_assert!(self.part.is_none(), "a part of a part");
        Whole { part: Some(positions), ..self }
    }

    /// Opens the records for reading whole: an event's text is scanned once, here, so that
    /// reading many records costs one scan.
    pub fn open(&self) -> Opened<'r> {
        let texts = match self.from {
            Origin::Events(_) => Vec::new(),
            Origin::Text(json) => {
                #[derive(serde::Deserialize)]
                struct Records<'a> {
                    #[serde(rename = "Records", borrow)]
                    records: Vec<&'a RawValue>,
                }
                // The wire reader has read this text, so it has a list of records.
                serde_json::from_str::<Records<'r>>(json).map_or_else(|_| Vec::new(), |r| r.records)
            }
        };
        Opened { whole: *self, texts }
    }
}

/// Records opened for reading whole ([`Whole::open`]).
#[derive(Debug)]
pub struct Opened<'r> {
    whole: Whole<'r>,
    texts: Vec<&'r RawValue>,
}

impl Opened<'_> {
    /// The `i`th record handled, whole, as JSON: as Lambda delivered it when it came as text,
    /// as `aws_lambda_events` writes it when it came decoded. `None` only when it cannot be
    /// shown at all.
    pub fn json(&self, i: usize) -> Option<Value> {
        let at = match self.whole.part {
            Some(positions) => *positions.get(i)?,
            None => i,
        };
        match self.whole.from {
            Origin::Events(records) => serde_json::to_value(records.get(at)?).ok(),
            Origin::Text(_) => serde_json::from_str(self.texts.get(at)?.get()).ok(),
        }
    }
}

#[cfg(test)]
mod tests;
