//! DynamoDB Streams sequence numbers as fixed-width strings that sort like the numbers.
//!
//! Sequence numbers are decimal strings of up to 40 digits, longer than DynamoDB's 38-digit
//! Number holds, and as plain strings `"9"` sorts after `"10"`. Stored zero-padded to 40 digits
//! in an S attribute, they compare correctly in condition expressions (`watermark < :seq`).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// Digits in the fixed-width form.
pub const WIDTH: usize = 40;

/// A stream sequence number.
///
/// ```
/// use key_codec::SequenceNumber;
/// let a: SequenceNumber = "9".parse()?;
/// let b: SequenceNumber = "10".parse()?;
/// assert!(a < b);
/// assert!(a.to_fixed_width() < b.to_fixed_width());
/// assert_eq!(SequenceNumber::from_fixed_width(&b.to_fixed_width())?, b);
/// # Ok::<(), key_codec::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SequenceNumber {
    /// Digits without leading zeros ("0" for zero).
    digits: String,
}

impl SequenceNumber {
    /// Parses 1 to 40 decimal digits (leading zeros allowed).
    pub fn parse(text: &str) -> Result<SequenceNumber, Error> {
        let fail = |reason| Err(Error::SequenceNumber { input: text.to_owned(), reason });
        if text.is_empty() {
            return fail("empty");
        }
        if !text.bytes().all(|b| b.is_ascii_digit()) {
            return fail("only decimal digits are allowed");
        }
        if text.len() > WIDTH {
            return fail("more than 40 digits");
        }
        let trimmed = text.trim_start_matches('0');
        Ok(SequenceNumber { digits: if trimmed.is_empty() { "0".to_owned() } else { trimmed.to_owned() } })
    }

    /// Parses the fixed-width form: exactly 40 digits.
    pub fn from_fixed_width(text: &str) -> Result<SequenceNumber, Error> {
        if text.len() != WIDTH {
            return Err(Error::SequenceNumber {
                input: text.to_owned(),
                reason: "the fixed-width form has exactly 40 digits",
            });
        }
        SequenceNumber::parse(text)
    }

    /// The number zero-padded to 40 digits: byte order equals numeric order.
    pub fn to_fixed_width(&self) -> String {
        // Not `format!("{:0>40}")`: its padding writes one character at a time (a plan's hot path).
        let mut out = String::with_capacity(WIDTH.max(self.digits.len()));
        out.push_str(&"0000000000000000000000000000000000000000"[..WIDTH.saturating_sub(self.digits.len())]);
        out.push_str(&self.digits);
        out
    }

    /// The digits without leading zeros, as streams present them.
    pub fn as_str(&self) -> &str {
        &self.digits
    }
}

impl Ord for SequenceNumber {
    fn cmp(&self, other: &SequenceNumber) -> Ordering {
        self.digits.len().cmp(&other.digits.len()).then_with(|| self.digits.cmp(&other.digits))
    }
}

impl PartialOrd for SequenceNumber {
    fn partial_cmp(&self, other: &SequenceNumber) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for SequenceNumber {
    type Err = Error;
    fn from_str(s: &str) -> Result<SequenceNumber, Error> {
        SequenceNumber::parse(s)
    }
}

impl fmt::Display for SequenceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.digits)
    }
}

impl fmt::Debug for SequenceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SequenceNumber({})", self.digits)
    }
}
