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
    pub const ZERO: Number = Number {
        negative: false,
        exponent: 0,
        len: 0,
        digits: [0; MAX_DIGITS],
    };

    /// Parses DynamoDB's number syntax: optional sign, digits with an optional `.`, and an
    /// optional exponent (`1.5`, `-0.05`, `15E-1`, `1e+125`).
    pub fn parse(text: &str) -> Result<Number, Error> {
        parse(text.as_bytes()).map_err(|reason| Error::Number {
            input: text.to_owned(),
            reason,
        })
    }

    /// Builds a number from significant ASCII digits and a scientific exponent, enforcing
    /// DynamoDB's limits. The first digit must be non-zero; trailing zeros are dropped.
    pub(crate) fn from_parts(negative: bool, digits: &[u8], exponent: i64) -> Result<Number, NumberError> {
        let digits = match digits.iter().rposition(|&d| d != b'0') {
            Some(last) => &digits[..=last],
            None => return Ok(Number::ZERO),
        };
        if digits.len() > MAX_DIGITS {
            return Err(NumberError::TooManyDigits { digits: digits.len() });
        }
        if exponent < i64::from(MIN_EXPONENT) {
            return Err(NumberError::TooSmall);
        }
        if exponent > i64::from(MAX_EXPONENT) {
            return Err(NumberError::TooLarge);
        }
        let mut n = Number {
            negative,
            exponent: i16::try_from(exponent).map_err(|_| NumberError::TooLarge)?,
            len: u8::try_from(digits.len())
                .map_err(|_| NumberError::TooManyDigits { digits: digits.len() })?,
            digits: [0; MAX_DIGITS],
        };
        n.digits[..digits.len()].copy_from_slice(digits);
        Ok(n)
    }

    /// Appends a significant digit (ASCII) in place, for decoders that build a number digit by
    /// digit without an intermediate buffer. Returns false when 38 digits are already held.
    pub(crate) fn push_digit(&mut self, digit: u8) -> bool {
        let Some(slot) = self.digits.get_mut(usize::from(self.len)) else {
            return false;
        };
        *slot = digit;
        self.len += 1;
        true
    }

    /// Drops trailing zero digits pushed with [`Number::push_digit`]: they belong to the exponent.
    #[must_use]
    pub(crate) fn without_trailing_zeros(mut self) -> Number {
        while self.len > 0 && self.digits[usize::from(self.len) - 1] == b'0' {
            self.len -= 1;
            self.digits[usize::from(self.len)] = 0;
        }
        self
    }

    /// Completes a number built with [`Number::push_digit`], whose last digit is not zero (see
    /// [`Number::without_trailing_zeros`]): applies the sign and checks the exponent range.
    pub(crate) fn finish(mut self, negative: bool, exponent: i64) -> Result<Number, NumberError> {
        debug_assert!(self.len == 0 || self.digits[usize::from(self.len) - 1] != b'0');
        if self.len == 0 {
            return Ok(Number::ZERO);
        }
        if exponent < i64::from(MIN_EXPONENT) {
            return Err(NumberError::TooSmall);
        }
        if exponent > i64::from(MAX_EXPONENT) {
            return Err(NumberError::TooLarge);
        }
        self.negative = negative;
        self.exponent = i16::try_from(exponent).map_err(|_| NumberError::TooLarge)?;
        Ok(self)
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

    /// The same magnitude with the opposite sign (zero stays zero).
    #[must_use]
    pub fn negated(&self) -> Number {
        Number {
            negative: !self.negative && !self.is_zero(),
            ..*self
        }
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

    // Mantissa: stream the digits, keeping only significant ones. Zeros after the first non-zero
    // digit are held back until another non-zero digit shows they are not trailing.
    let mut digits = [0u8; MAX_DIGITS];
    let mut len = 0usize;
    let mut held_zeros = 0usize;
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
                if c == b'0' {
                    if first_nonzero.is_some() {
                        held_zeros += 1;
                    }
                } else {
                    if first_nonzero.is_none() {
                        first_nonzero = Some(index);
                    }
                    let needed = len + held_zeros + 1;
                    if needed > MAX_DIGITS {
                        return Err(NumberError::TooManyDigits { digits: needed });
                    }
                    digits[len..len + held_zeros].fill(b'0');
                    len += held_zeros;
                    held_zeros = 0;
                    digits[len] = c;
                    len += 1;
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
        Some(first) => Number::from_parts(negative, &digits[..len], exponent_part + before_point - first - 1),
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
        let magnitude = self
            .exponent
            .cmp(&other.exponent)
            .then_with(|| self.digits().cmp(other.digits()));
        if self.negative {
            magnitude.reverse()
        } else {
            magnitude
        }
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
        let digits = &buf[start..];
        let exponent = i64::try_from(digits.len()).unwrap_or(0) - 1;
        // At most 20 digits and exponent 19: always within DynamoDB's limits.
        Number::from_parts(false, digits, exponent).unwrap_or(Number::ZERO)
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
