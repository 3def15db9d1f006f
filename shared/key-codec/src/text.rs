//! The text form (K1): keys for S attributes, valid UTF-8 whose byte order is the tuple order.
//!
//! The layout is specified in the crate documentation; this module implements it.

use crate::error::Error;
use crate::limit::KeyKind;
use crate::number::{Digits, Number};
use crate::time::{Date, DateTime};
use crate::value::{Dir, Value};

/// Ends every component. It sorts below every character that can continue a component.
pub const TERMINATOR: u8 = b'#';
/// Starts an escape pair inside an ascending string.
pub const ESCAPE: u8 = b'$';
/// Ends descending strings, bytes, dates and negative numbers; sorts above all their body characters.
const HIGH_END: u8 = b'~';

/// Tag characters, ascending; the descending tag mirrors it (`a`↔`Z`, `%`↔`~`).
mod tag {
    pub(super) const NULL: u8 = b'%';
    pub(super) const BYTES: u8 = b'b';
    pub(super) const TIME: u8 = b'd';
    pub(super) const FALSE: u8 = b'f';
    pub(super) const NUMBER: u8 = b'n';
    pub(super) const STRING: u8 = b's';
    pub(super) const TRUE: u8 = b't';
    pub(super) const NULL_DESC: u8 = b'~';

    /// The descending tag for an ascending one.
    pub(super) const fn desc(asc: u8) -> u8 {
        if asc == NULL { NULL_DESC } else { b'a' + b'Z' - asc }
    }
}

const FORMAT: &str = "K1 text";
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Builds a text-form key one component at a time.
///
/// ```
/// use key_codec::{Dir, KeyKind, Number, TextKey};
/// let mut key = TextKey::new();
/// key.push_str("Open", Dir::Asc).push_number(&Number::from(42), Dir::Asc).push_str("SRC-1", Dir::Asc);
/// assert_eq!(key.as_str(), "sOpen#nB42#sSRC-1#");
/// let sort_key: String = key.finish(KeyKind::Sort)?;
/// # Ok::<(), key_codec::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextKey {
    buf: String,
}

crate::tuple_encoding!(TextKey);

impl TextKey {
    /// Appends NULL: `%#`, descending `~#`.
    pub fn push_null(&mut self, dir: Dir) -> &mut TextKey {
        self.tag(tag::NULL, dir).end()
    }

    /// Appends a boolean: `f#`/`t#`, descending `U#`/`G#`.
    pub fn push_bool(&mut self, b: bool, dir: Dir) -> &mut TextKey {
        self.tag(if b { tag::TRUE } else { tag::FALSE }, dir).end()
    }

    /// Appends a string. Ascending, text is kept verbatim except characters U+0000–U+0024,
    /// which become `$` plus the character shifted by 0x3F (space → `$_`, `#` → `$b`, `$` → `$c`).
    /// Descending, the UTF-8 bytes are complemented and written as lowercase hex, then `~`.
    pub fn push_str(&mut self, s: &str, dir: Dir) -> &mut TextKey {
        self.tag(tag::STRING, dir);
        match dir {
            Dir::Asc => {
                let mut rest = s;
                while let Some(at) = rest.bytes().position(|b| b <= ESCAPE) {
                    let (plain, special) = rest.split_at(at);
                    self.buf.push_str(plain);
                    self.buf.push(char::from(ESCAPE));
                    self.buf.push(char::from(special.as_bytes()[0] + 0x3F));
                    rest = &special[1..];
                }
                self.buf.push_str(rest);
            }
            Dir::Desc => self.hex(s.as_bytes(), true),
        }
        self.end()
    }

    /// Appends bytes: lowercase hex; descending, complemented hex then `~`.
    pub fn push_bytes(&mut self, bytes: &[u8], dir: Dir) -> &mut TextKey {
        self.tag(tag::BYTES, dir);
        self.hex(bytes, dir == Dir::Desc);
        self.end()
    }

    /// Appends a number (see the crate docs for the layout). Descending, the body is the
    /// ascending body of the negated number.
    pub fn push_number(&mut self, n: &Number, dir: Dir) -> &mut TextKey {
        self.tag(tag::NUMBER, dir);
        match dir {
            Dir::Asc => self.number_body(n),
            Dir::Desc => self.number_body(&n.negated()),
        }
        self.end()
    }

    /// Appends a date as `YYYY-MM-DD`; descending, with each digit complemented, then `~`.
    pub fn push_date(&mut self, date: Date, dir: Dir) -> &mut TextKey {
        let mut buf = [0u8; 29];
        let len = date.write_ascii(&mut buf);
        self.time(&buf[..len], dir)
    }

    /// Appends a UTC datetime as `YYYY-MM-DDTHH:MM:SS[.fraction]` (no zone letter, trailing
    /// fraction zeros dropped); descending, with each digit complemented, then `~`.
    pub fn push_datetime(&mut self, t: DateTime, dir: Dir) -> &mut TextKey {
        let mut buf = [0u8; 29];
        let len = t.write_ascii(&mut buf);
        self.time(&buf[..len], dir)
    }

    /// Appends an already-encoded text key (a sequence of whole components).
    pub fn push_encoded(&mut self, key: &TextKey) -> &mut TextKey {
        self.buf.push_str(&key.buf);
        self
    }

    /// The key so far.
    pub fn as_str(&self) -> &str {
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
    pub fn into_string(self) -> String {
        self.buf
    }

    /// The key, checked against DynamoDB's limit for `kind` and for emptiness.
    pub fn finish(self, kind: KeyKind) -> Result<String, Error> {
        kind.check(self.buf.len())?;
        Ok(self.buf)
    }

    fn tag(&mut self, asc: u8, dir: Dir) -> &mut TextKey {
        if self.buf.capacity() == 0 {
            self.buf.reserve(crate::TYPICAL_KEY_BYTES);
        }
        let t = match dir {
            Dir::Asc => asc,
            Dir::Desc => tag::desc(asc),
        };
        self.buf.push(char::from(t));
        self
    }

    fn end(&mut self) -> &mut TextKey {
        self.buf.push(char::from(TERMINATOR));
        self
    }

    fn hex(&mut self, bytes: &[u8], complement: bool) {
        let mask = if complement { 0xFF } else { 0 };
        self.buf.reserve(bytes.len() * 2 + 1);
        for &b in bytes {
            let b = b ^ mask;
            self.buf.push(char::from(HEX[usize::from(b >> 4)]));
            self.buf.push(char::from(HEX[usize::from(b & 0xF)]));
        }
        if complement {
            self.buf.push(char::from(HIGH_END));
        }
    }

    fn time(&mut self, ascii: &[u8], dir: Dir) -> &mut TextKey {
        self.tag(tag::TIME, dir);
        match dir {
            Dir::Asc => self.buf.extend(ascii.iter().map(|&c| char::from(c))),
            Dir::Desc => {
                self.buf.extend(ascii.iter().map(|&c| char::from(nines(c))));
                self.buf.push(char::from(HIGH_END));
            }
        }
        self.end()
    }

    fn number_body(&mut self, n: &Number) {
        if n.is_zero() {
            self.buf.push('0');
            return;
        }
        let e = i32::from(n.exponent());
        let int_digits = if e >= 0 { e + 1 } else { 0 }; // 0..=126
        let negative = n.is_negative();
        if negative {
            self.buf.push('-');
            match int_digits {
                0 => self.buf.push('['),
                1..=25 => self.buf.push(char::from(b'Z' + 1 - small(int_digits))),
                _ => self.class_wide(b'A', 999 - int_digits),
            }
        } else {
            match int_digits {
                0 => self.buf.push('@'),
                1..=25 => self.buf.push(char::from(b'A' - 1 + small(int_digits))),
                _ => self.class_wide(b'Z', int_digits),
            }
        }
        let digit = |d: u8| char::from(if negative { nines(d) } else { d });
        let digits = n.digits();
        if e >= 0 {
            let int_len = usize::try_from(int_digits).unwrap_or(0);
            for i in 0..int_len {
                self.buf.push(digit(digits.get(i).copied().unwrap_or(b'0')));
            }
            if digits.len() > int_len {
                self.buf.push('.');
                self.buf.extend(digits[int_len..].iter().map(|&d| digit(d)));
            }
        } else {
            self.buf.push('.');
            for _ in 0..(-e - 1) {
                self.buf.push(digit(b'0'));
            }
            self.buf.extend(digits.iter().map(|&d| digit(d)));
        }
        if negative {
            self.buf.push(char::from(HIGH_END));
        }
    }

    /// A class letter followed by three digits, for integer-digit counts of 26 and more.
    fn class_wide(&mut self, letter: u8, value: i32) {
        self.buf.push(char::from(letter));
        let v = u32::try_from(value).unwrap_or(0);
        for d in [v / 100, v / 10 % 10, v % 10] {
            self.buf.push(char::from_digit(d, 10).unwrap_or('0'));
        }
    }
}

fn small(v: i32) -> u8 {
    u8::try_from(v).unwrap_or(0)
}

/// Nines' complement of an ASCII digit; other characters unchanged.
fn nines(c: u8) -> u8 {
    if c.is_ascii_digit() { b'0' + b'9' - c } else { c }
}

/// Decodes a text-form key into its components and their directions.
///
/// Only canonical encodings are accepted, so for every key that decodes, re-encoding the result
/// gives the same string back. Any other input is an [`Error::Malformed`] naming the byte offset;
/// decoding never panics.
pub fn decode(key: &str) -> Result<Vec<(Value, Dir)>, Error> {
    Decoder::new(key).collect()
}

crate::component_iterator! {
    /// Decodes a text-form key one component at a time, without collecting them: the iterator
    /// behind [`decode`], or, where the caller knows the key's layout, typed reads
    /// ([`Decoder::string`], [`Decoder::integer`]) that build no [`Value`]. After the first error it
    /// yields nothing more.
    ///
    /// ```
    /// use key_codec::{Dir, Value, text::Decoder};
    /// let mut components = Decoder::new("sOpen#nB42#");
    /// assert_eq!(components.next().unwrap()?, (Value::from("Open"), Dir::Asc));
    /// assert_eq!(components.next().unwrap()?, (Value::from(42), Dir::Asc));
    /// assert!(components.next().is_none());
    ///
    /// let mut typed = Decoder::new("sOpen#nB42#");
    /// assert_eq!(typed.string()?, ("Open".to_owned(), Dir::Asc));
    /// assert_eq!(typed.integer()?, (42, Dir::Asc));
    /// # Ok::<(), key_codec::Error>(())
    /// ```
    &'a str => |key| Cursor { key, at: 0 }
}

impl Decoder<'_> {
    /// The next component, which must be a string, with its direction: a typed read, as a
    /// caller that knows its key's layout makes it, without building a [`Value`]. Any other
    /// component, or none, is an [`Error::Malformed`]; after an error the decoder yields nothing
    /// more.
    pub fn string(&mut self) -> Result<(String, Dir), Error> {
        let read = self.typed(|cursor| match cursor.peek() {
            Some(tag::STRING) => {
                cursor.at += 1;
                let s = cursor.ascending_string()?;
                cursor.expect(TERMINATOR, "expected '#' ending the component")?;
                Ok((s, Dir::Asc))
            }
            Some(t) if t == tag::desc(tag::STRING) => match cursor.component()? {
                (Value::String(s), dir) => Ok((s, dir)),
                _ => unreachable_component(cursor),
            },
            _ => cursor.fail("expected a string component"),
        });
        self.failed = read.is_err();
        read
    }

    /// The next component, which must be a number that is an integer within `i64`, with its
    /// direction; a typed read, as [`Decoder::string`].
    pub fn integer(&mut self) -> Result<(i64, Dir), Error> {
        let read = self.typed(|cursor| {
            let start = cursor.at;
            if cursor.peek() == Some(tag::NUMBER)
                && let Some(v) = cursor.plain_i64()
            {
                return Ok((v, Dir::Asc));
            }
            match cursor.peek() {
                Some(t) if t == tag::NUMBER || t == tag::desc(tag::NUMBER) => {}
                _ => return cursor.fail("expected a number component"),
            }
            match cursor.component()? {
                (Value::Number(n), dir) => {
                    if let Some(v) = n.to_i64() {
                        return Ok((v, dir));
                    }
                    cursor.at = start;
                    cursor.fail("number is not an integer within i64")
                }
                _ => unreachable_component(cursor),
            }
        });
        self.failed = read.is_err();
        read
    }

    fn typed<T>(&mut self, read: impl FnOnce(&mut Cursor<'_>) -> Result<T, Error>) -> Result<T, Error> {
        if self.failed {
            return self.cursor.fail("the key failed to decode before this component");
        }
        read(&mut self.cursor)
    }
}

/// A component whose tag promised one type decoded as another: the decoder's tags and values
/// disagree, which would be a bug in this module, reported as malformed input rather than a
/// panic.
fn unreachable_component<T>(cursor: &Cursor<'_>) -> Result<T, Error> {
    cursor.fail("component decoded to another type than its tag")
}

#[derive(Debug, Clone)]
struct Cursor<'a> {
    key: &'a str,
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.key.as_bytes().get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    fn expect(&mut self, want: u8, reason: &'static str) -> Result<(), Error> {
        if self.peek() == Some(want) {
            self.at += 1;
            Ok(())
        } else {
            self.fail(reason)
        }
    }

    fn component(&mut self) -> Result<(Value, Dir), Error> {
        let Some(t) = self.next() else {
            return self.fail("expected a component tag");
        };
        let (asc, dir) = match t {
            tag::NULL_DESC => (tag::NULL, Dir::Desc),
            b'A'..=b'Z' => (tag::desc(t), Dir::Desc),
            _ => (t, Dir::Asc),
        };
        let value = match asc {
            tag::NULL => Value::Null,
            tag::FALSE => Value::Bool(false),
            tag::TRUE => Value::Bool(true),
            tag::STRING => Value::String(match dir {
                Dir::Asc => self.ascending_string()?,
                Dir::Desc => {
                    let body = self.at;
                    let bytes = self.hex_until(HIGH_END, true)?;
                    String::from_utf8(bytes).or_else(|_| {
                        self.at = body;
                        self.fail("descending string is not valid UTF-8")
                    })?
                }
            }),
            tag::BYTES => Value::Binary(match dir {
                Dir::Asc => self.hex_until(TERMINATOR, false)?,
                Dir::Desc => self.hex_until(HIGH_END, true)?,
            }),
            tag::NUMBER => {
                let n = self.number()?;
                Value::Number(if dir == Dir::Desc { n.negated() } else { n })
            }
            tag::TIME => self.time(dir)?,
            _ => {
                self.at -= 1;
                return self.fail("unknown component tag");
            }
        };
        self.expect(TERMINATOR, "expected '#' ending the component")?;
        Ok((value, dir))
    }

    fn ascending_string(&mut self) -> Result<String, Error> {
        let rest = self.key.get(self.at..).unwrap_or_default();
        let run = rest.bytes().position(|b| b <= ESCAPE).unwrap_or(rest.len());
        // The common case: no escapes, so the body is one verbatim run. It ends at an ASCII
        // byte, so every slice taken here is on a char boundary.
        let first = rest.get(..run).unwrap_or_default();
        self.at += run;
        if rest.as_bytes().get(run) == Some(&TERMINATOR) {
            return Ok(first.to_owned());
        }
        // Escapes follow. Decoding only shrinks the body, which ends at the next '#'.
        let body = rest.bytes().position(|b| b == TERMINATOR).unwrap_or(rest.len());
        let mut out = String::with_capacity(body);
        out.push_str(first);
        loop {
            match self.peek() {
                None | Some(TERMINATOR) => return Ok(out),
                Some(ESCAPE) => {
                    self.at += 1;
                    let Some(c @ 0x3F..=0x63) = self.peek() else {
                        return self.fail("'$' must be followed by a character from '?' to 'c'");
                    };
                    out.push(char::from(c - 0x3F));
                    self.at += 1;
                }
                Some(_) => return self.fail("unescaped character below '$' in a string"),
            }
            let rest = self.key.get(self.at..).unwrap_or_default();
            let run = rest.bytes().position(|b| b <= ESCAPE).unwrap_or(rest.len());
            out.push_str(rest.get(..run).unwrap_or_default());
            self.at += run;
        }
    }

    fn hex_until(&mut self, end: u8, complement: bool) -> Result<Vec<u8>, Error> {
        let mask = if complement { 0xFF } else { 0 };
        let mut out = Vec::new();
        loop {
            match self.peek() {
                Some(c) if c == end => {
                    if end != TERMINATOR {
                        self.at += 1;
                    }
                    return Ok(out);
                }
                None => return self.fail("hex body is not terminated"),
                Some(_) => {
                    let (Some(hi), Some(lo)) = (self.hex_digit(0), self.hex_digit(1)) else {
                        return self.fail("expected a pair of lowercase hex digits");
                    };
                    out.push(((hi << 4) | lo) ^ mask);
                    self.at += 2;
                }
            }
        }
    }

    fn hex_digit(&self, ahead: usize) -> Option<u8> {
        match self.key.as_bytes().get(self.at + ahead)? {
            c @ b'0'..=b'9' => Some(c - b'0'),
            c @ b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }

    fn number(&mut self) -> Result<Number, Error> {
        match self.peek() {
            Some(b'0') => {
                self.at += 1;
                return Ok(Number::ZERO);
            }
            Some(b'-') => self.at += 1,
            _ => return self.positive_number(false),
        }
        self.positive_number(true)
    }

    /// The number after its sign: the integer-digit class, then the (complemented, for
    /// negatives) plain decimal, then `~` for negatives.
    fn positive_number(&mut self, negative: bool) -> Result<Number, Error> {
        let class_at = self.at;
        let (int_digits, wide): (i64, bool) = match (negative, self.next()) {
            (false, Some(b'@')) | (true, Some(b'[')) => (0, false),
            (false, Some(c @ b'A'..=b'Y')) => (i64::from(c - b'A') + 1, false),
            (true, Some(c @ b'B'..=b'Z')) => (i64::from(b'Z' - c) + 1, false),
            (false, Some(b'Z')) => (self.three_digits()?, true),
            (true, Some(b'A')) => (999 - self.three_digits()?, true),
            _ => {
                self.at = class_at;
                return self.fail("expected a number class character");
            }
        };
        if wide && !(26..=126).contains(&int_digits) {
            self.at = class_at;
            return self.fail("wide number class must stand for 26 to 126 integer digits");
        }
        if !negative
            && !wide
            && let Some(n) = self.plain_integer(int_digits)
        {
            return Ok(n);
        }
        let mut number = Digits::new();
        let mut seen_nonzero = false;
        let mut leading_fraction_zeros = 0i64;
        let mut push = |cursor: &Cursor<'_>, d: u8| -> Result<(), Error> {
            let d = if negative { nines(d) } else { d };
            if d != b'0' {
                seen_nonzero = true;
            }
            if !seen_nonzero {
                leading_fraction_zeros += 1;
                return Ok(());
            }
            // Past 38 digits only zeros may follow: integer digits that stand for the exponent.
            number.push(d).or_else(|_| cursor.fail("number has more than 38 digits"))
        };
        for i in 0..int_digits {
            match self.peek() {
                Some(d @ b'0'..=b'9') => {
                    if i == 0 && (if negative { nines(d) } else { d }) == b'0' {
                        return self.fail("integer part starts with a zero");
                    }
                    push(self, d)?;
                    self.at += 1;
                }
                _ => return self.fail("fewer integer digits than the number class says"),
            }
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            let start = self.at;
            while let Some(d @ b'0'..=b'9') = self.peek() {
                push(self, d)?;
                self.at += 1;
            }
            if self.at == start {
                return self.fail("expected digits after '.'");
            }
            let zero = if negative { b'9' } else { b'0' };
            if self.key.as_bytes().get(self.at - 1) == Some(&zero) {
                self.at -= 1;
                return self.fail("fraction ends in a zero (not canonical)");
            }
        } else if int_digits == 0 {
            return self.fail("expected '.' after a zero-integer-digit class");
        }
        if negative {
            self.expect(HIGH_END, "expected '~' ending a negative number")?;
        }
        let exponent = if int_digits > 0 { int_digits - 1 } else { -leading_fraction_zeros - 1 };
        number
            .finish(negative, exponent)
            .map_err(|reason| Error::Number { input: self.key.to_owned(), reason })
    }

    /// The common case in one step: a positive integer of a narrow class (`B42`), its digits one
    /// run with no fraction after it. `None` sends anything else to the general path.
    fn plain_integer(&mut self, int_digits: i64) -> Option<Number> {
        let end = self.at + usize::try_from(int_digits).ok()?;
        let run = self.key.as_bytes().get(self.at..end)?;
        let plain = run.first().is_some_and(|&d| d != b'0')
            && run.iter().all(u8::is_ascii_digit)
            && self.key.as_bytes().get(end) != Some(&b'.');
        let n = Number::from_integer_digits(run).filter(|_| plain)?;
        self.at = end;
        Some(n)
    }

    /// The typed integer read's one step: `n0#`, or a positive integer of a narrow class
    /// (`nB42#`) that fits `i64`, with its terminator. `None`, with the cursor unmoved, sends
    /// anything else (negative, descending, wide, fractional, non-canonical) to the general path.
    fn plain_i64(&mut self) -> Option<i64> {
        let bytes = self.key.as_bytes();
        let at = self.at;
        let (value, end) = match *bytes.get(at + 1)? {
            b'0' => (0, at + 2),
            c @ b'A'..=b'S' => {
                let start = at + 2;
                let end = start + usize::from(c - b'A' + 1);
                let run = bytes.get(start..end)?;
                if run[0] == b'0' {
                    return None;
                }
                let mut v: i64 = 0;
                for &d in run {
                    if !d.is_ascii_digit() {
                        return None;
                    }
                    v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
                }
                (v, end)
            }
            _ => return None,
        };
        if bytes.get(end) != Some(&TERMINATOR) {
            return None;
        }
        self.at = end + 1;
        Some(value)
    }

    fn three_digits(&mut self) -> Result<i64, Error> {
        let mut v = 0;
        for _ in 0..3 {
            let Some(d @ b'0'..=b'9') = self.peek() else {
                return self.fail("expected three digits in a wide number class");
            };
            v = v * 10 + i64::from(d - b'0');
            self.at += 1;
        }
        Ok(v)
    }

    fn time(&mut self, dir: Dir) -> Result<Value, Error> {
        let start = self.at;
        let end = if dir == Dir::Asc { TERMINATOR } else { HIGH_END };
        let mut body = [0u8; 29];
        let mut len = 0;
        while let Some(c) = self.peek().filter(|&c| c != end) {
            if len == body.len() {
                return self.fail("date/time body is too long");
            }
            body[len] = if dir == Dir::Desc { nines(c) } else { c };
            len += 1;
            self.at += 1;
        }
        if dir == Dir::Desc {
            self.expect(HIGH_END, "expected '~' ending a descending date/time")?;
        }
        let body = &body[..len];
        let value = if len == 10 {
            Date::parse_prefix(body).map(Value::Date)
        } else {
            match DateTime::parse_local(body) {
                Ok((t, [])) => Ok(Value::DateTime(t)),
                Ok(_) => Err("unexpected characters after the time"),
                Err(e) => Err(e),
            }
        };
        // Canonical form only: an upper-case 'T', and no trailing zeros in the fraction.
        let canonical = body.get(10) != Some(&b't') && (len <= 19 || body[len - 1] != b'0');
        if !canonical {
            self.at = start;
            return self.fail("date/time is not in canonical form");
        }
        value.or_else(|reason| {
            self.at = start;
            self.fail(reason)
        })
    }
}
