//! The binary form (B1): compact keys for B attributes, whose unsigned byte order is the tuple order.
//!
//! The layout is specified in the crate documentation; this module implements it.

use crate::error::Error;
use crate::limit::KeyKind;
use crate::number::{Digits, Number};
use crate::time::{Date, DateTime};
use crate::value::{Dir, Value};

/// Ascending type tags. A descending component is the bitwise NOT of its ascending encoding,
/// so descending tags are `!tag` (0x9F–0xFE). 0x00 and 0xFF are never tags.
mod tag {
    pub(super) const NULL: u8 = 0x01;
    pub(super) const BYTES: u8 = 0x10;
    pub(super) const TIME: u8 = 0x20;
    pub(super) const FALSE: u8 = 0x30;
    pub(super) const NEGATIVE: u8 = 0x40;
    pub(super) const ZERO: u8 = 0x41;
    pub(super) const POSITIVE: u8 = 0x42;
    pub(super) const STRING: u8 = 0x50;
    pub(super) const TRUE: u8 = 0x60;
}

/// After the day count: a date ends here; a datetime continues with nanoseconds of the day.
const DATE_END: u8 = 0x00;
const DATETIME_MARK: u8 = 0x01;
/// Added to the scientific exponent so that -130..=125 fits one byte.
const EXPONENT_BIAS: i16 = 130;
const FORMAT: &str = "B1 binary";

/// Builds a binary-form key one component at a time.
///
/// ```
/// use key_codec::{BinaryKey, Dir, Number};
/// let mut key = BinaryKey::new();
/// key.push_number(&Number::from(42), Dir::Asc);
/// assert_eq!(key.as_bytes(), [0x42, 0x83, 0x54]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BinaryKey {
    buf: Vec<u8>,
}

crate::tuple_encoding!(BinaryKey);

impl BinaryKey {
    /// Appends NULL: `01`.
    pub fn push_null(&mut self, dir: Dir) -> &mut BinaryKey {
        self.component(dir, |buf| buf.push(tag::NULL))
    }

    /// Appends a boolean: `30` false, `60` true.
    pub fn push_bool(&mut self, b: bool, dir: Dir) -> &mut BinaryKey {
        self.component(dir, |buf| buf.push(if b { tag::TRUE } else { tag::FALSE }))
    }

    /// Appends a string: `50`, the UTF-8 bytes with `00` escaped as `00 FF`, then `00 01`.
    pub fn push_str(&mut self, s: &str, dir: Dir) -> &mut BinaryKey {
        self.component(dir, |buf| escaped(buf, tag::STRING, s.as_bytes()))
    }

    /// Appends bytes: `10`, the bytes with `00` escaped as `00 FF`, then `00 01`.
    pub fn push_bytes(&mut self, bytes: &[u8], dir: Dir) -> &mut BinaryKey {
        self.component(dir, |buf| escaped(buf, tag::BYTES, bytes))
    }

    /// Appends a number: `41` for zero; `42`, the biased exponent, then base-100 digit pairs
    /// (`2x+1`, the last `2x`) for positives; `40` and the complement of both for negatives.
    pub fn push_number(&mut self, n: &Number, dir: Dir) -> &mut BinaryKey {
        self.component(dir, |buf| {
            if n.is_zero() {
                buf.push(tag::ZERO);
                return;
            }
            let mask = if n.is_negative() { 0xFF } else { 0 };
            buf.push(if n.is_negative() { tag::NEGATIVE } else { tag::POSITIVE });
            let biased = u8::try_from(n.exponent() + EXPONENT_BIAS).unwrap_or(0);
            buf.push(biased ^ mask);
            let mut pairs = n.digits().chunks(2).peekable();
            while let Some(pair) = pairs.next() {
                let hi = pair[0] - b'0';
                let lo = pair.get(1).map_or(0, |d| d - b'0');
                let x = hi * 10 + lo;
                let byte = if pairs.peek().is_some() { 2 * x + 1 } else { 2 * x };
                buf.push(byte ^ mask);
            }
        })
    }

    /// Appends a date: `20`, days since 1970-01-01 as a big-endian `i32` with the sign bit
    /// flipped, then `00`.
    pub fn push_date(&mut self, date: Date, dir: Dir) -> &mut BinaryKey {
        self.component(dir, |buf| {
            days(buf, date);
            buf.push(DATE_END);
        })
    }

    /// Appends a datetime: as a date, but `01` and the nanoseconds of the day as 6 big-endian
    /// bytes instead of the final `00`.
    pub fn push_datetime(&mut self, t: DateTime, dir: Dir) -> &mut BinaryKey {
        self.component(dir, |buf| {
            days(buf, t.date());
            buf.push(DATETIME_MARK);
            buf.extend_from_slice(&t.nanos_of_day().to_be_bytes()[2..]);
        })
    }

    /// Appends an already-encoded binary key (a sequence of whole components).
    pub fn push_encoded(&mut self, key: &BinaryKey) -> &mut BinaryKey {
        self.buf.extend_from_slice(&key.buf);
        self
    }

    /// The key so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The encoded size in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when no component has been pushed.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The key without a size check (for prefixes and bounds).
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// The key, checked against DynamoDB's limit for `kind` and for emptiness.
    pub fn finish(self, kind: KeyKind) -> Result<Vec<u8>, Error> {
        kind.check(self.buf.len())?;
        Ok(self.buf)
    }

    /// Writes one component ascending, then complements it in place when descending.
    fn component(&mut self, dir: Dir, write: impl FnOnce(&mut Vec<u8>)) -> &mut BinaryKey {
        if self.buf.capacity() == 0 {
            self.buf.reserve(crate::TYPICAL_KEY_BYTES);
        }
        let start = self.buf.len();
        write(&mut self.buf);
        if dir == Dir::Desc {
            for b in &mut self.buf[start..] {
                *b = !*b;
            }
        }
        self
    }
}

fn escaped(buf: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    buf.reserve(bytes.len() + 3);
    buf.push(tag);
    let mut rest = bytes;
    while let Some(at) = rest.iter().position(|&b| b == 0) {
        buf.extend_from_slice(&rest[..at]);
        buf.extend_from_slice(&[0x00, 0xFF]);
        rest = &rest[at + 1..];
    }
    buf.extend_from_slice(rest);
    buf.extend_from_slice(&[0x00, 0x01]);
}

fn days(buf: &mut Vec<u8>, date: Date) {
    buf.push(tag::TIME);
    buf.extend_from_slice(&(date.days_since_epoch().cast_unsigned() ^ 0x8000_0000).to_be_bytes());
}

/// Decodes a binary-form key into its components and their directions.
///
/// Only canonical encodings are accepted, so for every key that decodes, re-encoding the result
/// gives the same bytes back. Any other input is an [`Error::Malformed`] naming the byte offset;
/// decoding never panics.
pub fn decode(key: &[u8]) -> Result<Vec<(Value, Dir)>, Error> {
    Decoder::new(key).collect()
}

crate::component_iterator! {
    /// Decodes a binary-form key one component at a time, without collecting them: the iterator
    /// behind [`decode`]. After the first error it yields nothing more.
    &'a [u8] => |key| Cursor { key, at: 0, mask: 0 }
}

#[derive(Debug, Clone)]
struct Cursor<'a> {
    key: &'a [u8],
    at: usize,
    /// 0xFF inside a descending component: every byte is read through it.
    mask: u8,
}

impl Cursor<'_> {
    /// The next byte, through the mask; errors are built by callers only when it is missing.
    #[inline]
    fn byte(&mut self) -> Option<u8> {
        let b = *self.key.get(self.at)?;
        self.at += 1;
        Some(b ^ self.mask)
    }

    fn next(&mut self, reason: &'static str) -> Result<u8, Error> {
        match self.byte() {
            Some(b) => Ok(b),
            None => self.fail(reason),
        }
    }

    fn component(&mut self) -> Result<(Value, Dir), Error> {
        let Some(&raw) = self.key.get(self.at) else {
            return self.fail("expected a component tag");
        };
        let dir = if raw >= 0x80 { Dir::Desc } else { Dir::Asc };
        self.mask = if dir == Dir::Desc { 0xFF } else { 0 };
        let tag_at = self.at;
        let value = match self.next("expected a component tag")? {
            tag::NULL => Value::Null,
            tag::FALSE => Value::Bool(false),
            tag::TRUE => Value::Bool(true),
            tag::ZERO => Value::Number(Number::ZERO),
            tag::POSITIVE => Value::Number(self.number(false)?),
            tag::NEGATIVE => Value::Number(self.number(true)?),
            tag::STRING => {
                let bytes = self.escaped()?;
                Value::String(String::from_utf8(bytes).or_else(|_| self.fail("string is not valid UTF-8"))?)
            }
            tag::BYTES => Value::Binary(self.escaped()?),
            tag::TIME => self.time()?,
            _ => {
                self.at = tag_at;
                return self.fail("unknown component tag");
            }
        };
        Ok((value, dir))
    }

    fn escaped(&mut self) -> Result<Vec<u8>, Error> {
        let mut out: Option<Vec<u8>> = None;
        loop {
            // Copy the run up to the next (masked) 00, which starts an escape or the terminator.
            let rest = self.key.get(self.at..).unwrap_or_default();
            let Some(run) = rest.iter().position(|&b| b == self.mask) else {
                self.at = self.key.len();
                return self.fail("string or bytes are not terminated by 00 01");
            };
            let run = &rest[..run];
            match (&mut out, self.mask) {
                (None, 0) => out = Some(run.to_vec()),
                (None, _) => out = Some(run.iter().map(|b| !b).collect()),
                (Some(out), 0) => out.extend_from_slice(run),
                (Some(out), _) => out.extend(run.iter().map(|b| !b)),
            }
            self.at += run.len() + 1;
            match self.byte() {
                Some(0x01) => return Ok(out.unwrap_or_default()),
                Some(0xFF) => out.get_or_insert_default().push(0),
                None => return self.fail("string or bytes are not terminated by 00 01"),
                Some(_) => {
                    self.at -= 1;
                    return self.fail("00 inside a string must be followed by FF (escape) or 01 (end)");
                }
            }
        }
    }

    fn number(&mut self, negative: bool) -> Result<Number, Error> {
        let inner = if negative { 0xFF } else { 0 };
        let exponent = i16::from(self.next("number is missing its exponent")? ^ inner) - EXPONENT_BIAS;
        let mut number = Digits::new();
        let mut first = true;
        loop {
            let Some(byte) = self.byte() else {
                return self.fail("number is missing its last digit pair");
            };
            let byte = byte ^ inner;
            let last = byte % 2 == 0;
            let x = byte / 2; // 2x+1 and 2x both halve to x
            let (hi, lo) = (b'0' + x / 10, b'0' + x % 10);
            // The first digit is not zero; a final pair "d0" carries one digit plus padding.
            let valid = x <= 99 && !(first && x < 10) && !(last && x == 0);
            let padded = last && lo == b'0';
            let pushed = number.push(hi).is_ok() && (padded || number.push(lo).is_ok());
            if !valid || !pushed {
                self.at -= 1;
                return self.fail("invalid digit pair in a number");
            }
            first = false;
            if last {
                break;
            }
        }
        number.finish(negative, i64::from(exponent)).or_else(|_| {
            self.at -= 1;
            self.fail("number is outside DynamoDB's range")
        })
    }

    fn time(&mut self) -> Result<Value, Error> {
        let mut day_bytes = [0u8; 4];
        for b in &mut day_bytes {
            *b = self.next("date is cut short")?;
        }
        let days = (u32::from_be_bytes(day_bytes) ^ 0x8000_0000).cast_signed();
        let Some(date) = Date::from_days_since_epoch(days) else {
            return self.fail("date is outside years 0000-9999");
        };
        match self.next("date is missing its end marker")? {
            DATE_END => Ok(Value::Date(date)),
            DATETIME_MARK => {
                let mut nanos = [0u8; 8];
                for b in &mut nanos[2..] {
                    *b = self.next("datetime is cut short")?;
                }
                DateTime::from_parts(date, u64::from_be_bytes(nanos))
                    .map(Value::DateTime)
                    .map_or_else(|| self.fail("time of day is 24:00 or later"), Ok)
            }
            _ => {
                self.at -= 1;
                self.fail("expected 00 (date) or 01 (datetime) after the day count")
            }
        }
    }
}
