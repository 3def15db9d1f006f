//! Exact DynamoDB numbers: parsing, canonical form, total order, and display, with no floating point.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, NumberError};

/// Most significant digits a DynamoDB number holds.
pub const MAX_DIGITS: usize = 38;
/// Smallest scientific exponent of a non-zero number (1E-130).
pub const MIN_EXPONENT: i16 = -130;
/// Largest scientific exponent (9.99…9E+125).
pub const MAX_EXPONENT: i16 = 125;

/// A DynamoDB number in canonical form: sign, up to 38 significant digits with no leading or
/// trailing zeros, and a scientific exponent `e` so that the value is `d.ddd… × 10^e`.
///
/// `"1.50"`, `"1.5"` and `"15E-1"` parse to equal values, and `-0` is zero. Ordering is by exact
/// decimal value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Number {
    negative: bool,
    exponent: i16,
    len: u8,
    /// ASCII digits; bytes past `len` are always zero so the derived equality is value equality.
    digits: [u8; MAX_DIGITS],
}

impl Number {
    /// Zero.
    pub const ZERO: Number = Number { negative: false, exponent: 0, len: 0, digits: [0; MAX_DIGITS] };

    /// Parses DynamoDB's number syntax: optional sign, digits with an optional `.`, and an
    /// optional exponent (`1.5`, `-0.05`, `15E-1`, `1e+125`).
    pub fn parse(text: &str) -> Result<Number, Error> {
        parse(text.as_bytes()).map_err(|reason| Error::Number { input: text.to_owned(), reason })
    }

    /// True for zero (including a parsed `-0`).
    pub fn is_zero(&self) -> bool {
        self.len == 0
    }

    /// True for values below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// The scientific exponent `e` (the value is `d.ddd… × 10^e`); 0 for zero.
    pub fn exponent(&self) -> i16 {
        self.exponent
    }

    /// The significant digits as ASCII, without leading or trailing zeros; empty for zero.
    pub fn digits(&self) -> &[u8] {
        &self.digits[..usize::from(self.len)]
    }

    /// A positive integer from its ASCII digits, the first non-zero (not checked here): `None`
    /// beyond 38 significant digits. Trailing zeros go to the exponent.
    #[inline]
    pub(crate) fn from_integer_digits(digits: &[u8]) -> Option<Number> {
        let significant = digits.len() - digits.iter().rev().take_while(|&&d| d == b'0').count();
        let mut n = Number::ZERO;
        n.digits.get_mut(..significant)?.copy_from_slice(digits.get(..significant)?);
        n.len = u8::try_from(significant).ok()?;
        n.exponent = i16::try_from(digits.len()).ok()? - 1;
        Some(n)
    }

    /// The same magnitude with the opposite sign (zero stays zero).
    #[must_use]
    pub fn negated(&self) -> Number {
        Number { negative: !self.negative && !self.is_zero(), ..*self }
    }
}

/// Collects a number's significant digits one at a time, for the parser and the key decoders.
///
/// The first digit pushed must be non-zero. Zeros past the 38th digit are held back: they are
/// harmless if only zeros follow (they belong to the exponent), an error if a non-zero digit does.
#[derive(Clone, Copy)]
pub(crate) struct Digits {
    number: Number,
    zeros_past_limit: usize,
}

impl Digits {
    pub(crate) const fn new() -> Digits {
        Digits { number: Number::ZERO, zeros_past_limit: 0 }
    }

    /// Appends one ASCII digit.
    pub(crate) fn push(&mut self, digit: u8) -> Result<(), NumberError> {
        let n = &mut self.number;
        if let Some(slot) = n.digits.get_mut(usize::from(n.len)) {
            *slot = digit;
            n.len += 1;
            Ok(())
        } else if digit == b'0' {
            self.zeros_past_limit += 1;
            Ok(())
        } else {
            Err(NumberError::TooManyDigits { digits: MAX_DIGITS + self.zeros_past_limit + 1 })
        }
    }

    /// The number `d.ddd… × 10^exponent`: trailing zeros dropped, sign applied, range checked.
    pub(crate) fn finish(self, negative: bool, exponent: i64) -> Result<Number, NumberError> {
        let mut n = self.number;
        while n.len > 0 && n.digits[usize::from(n.len) - 1] == b'0' {
            n.len -= 1;
            n.digits[usize::from(n.len)] = 0;
        }
        if n.len == 0 {
            return Ok(Number::ZERO);
        }
        if exponent < i64::from(MIN_EXPONENT) {
            return Err(NumberError::TooSmall);
        }
        if exponent > i64::from(MAX_EXPONENT) {
            return Err(NumberError::TooLarge);
        }
        n.negative = negative;
        n.exponent = i16::try_from(exponent).map_err(|_| NumberError::TooLarge)?;
        Ok(n)
    }
}

fn parse(s: &[u8]) -> Result<Number, NumberError> {
    let (negative, rest) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest.eq_ignore_ascii_case(b"nan")
        || rest.eq_ignore_ascii_case(b"inf")
        || rest.eq_ignore_ascii_case(b"infinity")
    {
        return Err(NumberError::NotFinite);
    }

    // Mantissa: leading zeros are skipped; from the first non-zero digit on, every digit is
    // significant (trailing zeros are dropped when the number is finished).
    let mut digits = Digits::new();
    let mut seen_digit = false;
    let mut seen_point = false;
    let mut before_point = 0i64; // mantissa digits before the '.'
    let mut first_nonzero: Option<i64> = None; // index of the first non-zero digit among all mantissa digits
    let mut index = 0i64;
    let mut i = 0;
    while let Some(&c) = rest.get(i) {
        match c {
            b'0'..=b'9' => {
                seen_digit = true;
                if first_nonzero.is_none() && c != b'0' {
                    first_nonzero = Some(index);
                }
                if first_nonzero.is_some() {
                    digits.push(c)?;
                }
                if !seen_point {
                    before_point += 1;
                }
                index += 1;
            }
            b'.' if !seen_point => seen_point = true,
            b'e' | b'E' => break,
            _ => return Err(NumberError::Syntax),
        }
        i += 1;
    }
    if !seen_digit {
        return Err(NumberError::Syntax);
    }
    let exponent_part = match rest.get(i) {
        None => 0,
        Some(_) => parse_exponent(&rest[i + 1..])?,
    };
    match first_nonzero {
        None => Ok(Number::ZERO),
        Some(first) => digits.finish(negative, exponent_part + before_point - first - 1),
    }
}

/// Parses the digits after `E`, saturating far outside the valid range so huge exponents report
/// "too large"/"too small" rather than overflowing.
fn parse_exponent(s: &[u8]) -> Result<i64, NumberError> {
    let (negative, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return Err(NumberError::Syntax);
    }
    let mut value = 0i64;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(NumberError::Syntax);
        }
        value = (value * 10 + i64::from(c - b'0')).min(1_000_000_000);
    }
    Ok(if negative { -value } else { value })
}

impl Ord for Number {
    fn cmp(&self, other: &Number) -> Ordering {
        let sign = |n: &Number| {
            if n.is_zero() {
                0
            } else if n.negative {
                -1
            } else {
                1
            }
        };
        match sign(self).cmp(&sign(other)) {
            Ordering::Equal => {}
            unequal => return unequal,
        }
        let magnitude = self.exponent.cmp(&other.exponent).then_with(|| self.digits().cmp(other.digits()));
        if self.negative { magnitude.reverse() } else { magnitude }
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Number) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for Number {
    type Err = Error;
    fn from_str(s: &str) -> Result<Number, Error> {
        Number::parse(s)
    }
}

impl Number {
    /// The number as an `i64`, if it is an integer in its range.
    pub fn to_i64(&self) -> Option<i64> {
        let exponent = usize::try_from(self.exponent).ok()?;
        let digits = self.digits();
        if digits.len() > exponent + 1 {
            return None; // a fraction
        }
        // Accumulated negative, so that i64::MIN fits.
        let mut v: i64 = 0;
        for i in 0..=exponent {
            let d = i64::from(digits.get(i).map_or(0, |d| d - b'0'));
            v = v.checked_mul(10)?.checked_sub(d)?;
        }
        if self.negative { Some(v) } else { v.checked_neg() }
    }
}

impl From<i64> for Number {
    fn from(v: i64) -> Number {
        let mut n = Number::from(v.unsigned_abs());
        n.negative = v < 0;
        n
    }
}

impl From<u64> for Number {
    fn from(v: u64) -> Number {
        if v == 0 {
            return Number::ZERO;
        }
        let mut buf = [0u8; 20];
        let mut start = buf.len();
        let mut rest = v;
        while rest > 0 {
            start -= 1;
            buf[start] = b'0' + u8::try_from(rest % 10).unwrap_or(0);
            rest /= 10;
        }
        // At most 20 digits and exponent 19: always within DynamoDB's limits.
        let mut digits = Digits::new();
        for &d in &buf[start..] {
            let _ = digits.push(d);
        }
        let exponent = i64::try_from(buf.len() - start).unwrap_or(0) - 1;
        digits.finish(false, exponent).unwrap_or(Number::ZERO)
    }
}

impl From<i32> for Number {
    fn from(v: i32) -> Number {
        Number::from(i64::from(v))
    }
}

impl From<u32> for Number {
    fn from(v: u32) -> Number {
        Number::from(u64::from(v))
    }
}

impl TryFrom<f64> for Number {
    type Error = Error;
    /// Converts through the shortest decimal that round-trips to the same `f64` (so `0.1` is
    /// exactly `0.1`), with `-0.0` equal to `0.0`.
    fn try_from(v: f64) -> Result<Number, Error> {
        Number::parse(&format!("{v:e}"))
    }
}

impl fmt::Display for Number {
    /// Plain notation for moderate exponents (`1234.5`, `0.0005`), scientific beyond
    /// (`1.5E+40`, `1E-130`). The output parses back to an equal number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_zero() {
            return f.write_str("0");
        }
        if self.negative {
            f.write_str("-")?;
        }
        let digits = self.digits();
        let (head, tail) = digits.split_at(1);
        let ascii = |d: &[u8]| String::from_utf8_lossy(d).into_owned();
        let e = i64::from(self.exponent);
        let n = i64::try_from(digits.len()).unwrap_or(0);
        if (0..40).contains(&e) {
            let int_len = usize::try_from(e + 1).unwrap_or(0);
            if digits.len() <= int_len {
                write!(f, "{}{}", ascii(digits), "0".repeat(int_len - digits.len()))
            } else {
                let (int, frac) = digits.split_at(int_len);
                write!(f, "{}.{}", ascii(int), ascii(frac))
            }
        } else if (-7..0).contains(&e) {
            let zeros = usize::try_from(-e - 1).unwrap_or(0);
            write!(f, "0.{}{}", "0".repeat(zeros), ascii(digits))
        } else if n == 1 {
            write!(f, "{}E{e:+}", ascii(head))
        } else {
            write!(f, "{}.{}E{e:+}", ascii(head), ascii(tail))
        }
    }
}

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Number({self})")
    }
}
