//! Calendar dates and UTC datetimes (years 0000–9999, nanosecond precision) for key components.
//!
//! Kept dependency-free: keys need only validation, ISO 8601 text, and days since the Unix epoch.

use std::fmt;

use crate::error::Error;

const NANOS_PER_SECOND: u64 = 1_000_000_000;
const NANOS_PER_DAY: u64 = 86_400 * NANOS_PER_SECOND;

/// A calendar date (proleptic Gregorian), year 0000 to 9999.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    year: u16,
    month: u8,
    day: u8,
}

/// An instant in UTC, from 0000-01-01T00:00:00 to 9999-12-31T23:59:59.999999999.
///
/// Leap seconds (`:60`) are rejected: DynamoDB and Unix time do not represent them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    date: Date,
    nanos_of_day: u64,
}

fn time_error(input: &str, reason: &'static str) -> Error {
    Error::Time { input: input.to_owned(), reason }
}

fn is_leap(year: u16) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Reads exactly `N` ASCII digits at `at`.
fn digits<const N: usize>(s: &[u8], at: usize) -> Option<u32> {
    let field = s.get(at..at + N)?;
    field.iter().try_fold(0u32, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0')))
}

impl Date {
    /// Validates a calendar date.
    pub fn new(year: u16, month: u8, day: u8) -> Result<Date, &'static str> {
        if year > 9999 {
            return Err("year must be 0000 to 9999");
        }
        if !(1..=12).contains(&month) {
            return Err("month must be 01 to 12");
        }
        if day == 0 || day > days_in_month(year, month) {
            return Err("day does not exist in that month");
        }
        Ok(Date { year, month, day })
    }

    /// Parses `YYYY-MM-DD` exactly.
    pub fn parse(text: &str) -> Result<Date, Error> {
        let s = text.as_bytes();
        if s.len() != 10 {
            return Err(time_error(text, "expected YYYY-MM-DD"));
        }
        Date::parse_prefix(s).map_err(|reason| time_error(text, reason))
    }

    /// Parses a `YYYY-MM-DD` prefix of `s`.
    pub(crate) fn parse_prefix(s: &[u8]) -> Result<Date, &'static str> {
        let (Some(y), Some(b'-'), Some(m), Some(b'-'), Some(d)) =
            (digits::<4>(s, 0), s.get(4), digits::<2>(s, 5), s.get(7), digits::<2>(s, 8))
        else {
            return Err("expected YYYY-MM-DD");
        };
        let narrow = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
        Date::new(u16::try_from(y).unwrap_or(u16::MAX), narrow(m), narrow(d))
    }

    /// The year, 0 to 9999.
    pub fn year(self) -> u16 {
        self.year
    }

    /// The month, 1 to 12.
    pub fn month(self) -> u8 {
        self.month
    }

    /// The day of the month, 1 to 31.
    pub fn day(self) -> u8 {
        self.day
    }

    /// Days since 1970-01-01 (negative before it).
    pub fn days_since_epoch(self) -> i32 {
        // Howard Hinnant's days_from_civil, on a year that starts in March.
        let y = i32::from(self.year) - i32::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y.rem_euclid(400);
        let m = i32::from(self.month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i32::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    /// The date `days` after 1970-01-01, if it lies in years 0000–9999.
    pub fn from_days_since_epoch(days: i32) -> Option<Date> {
        // Howard Hinnant's civil_from_days.
        let z = i64::from(days) + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        Date::new(u16::try_from(year).ok()?, u8::try_from(month).ok()?, u8::try_from(day).ok()?).ok()
    }

    /// Writes `YYYY-MM-DD` into `out`, returning the length (10).
    pub(crate) fn write_ascii(self, out: &mut [u8; 29]) -> usize {
        put(out, 0, u32::from(self.year), 4);
        out[4] = b'-';
        put(out, 5, u32::from(self.month), 2);
        out[7] = b'-';
        put(out, 8, u32::from(self.day), 2);
        10
    }
}

/// Writes `value` as `width` zero-padded digits at `at`.
fn put(out: &mut [u8], at: usize, mut value: u32, width: usize) {
    for slot in out[at..at + width].iter_mut().rev() {
        *slot = b'0' + u8::try_from(value % 10).unwrap_or(0);
        value /= 10;
    }
}

impl DateTime {
    /// Midnight at the start of `date`.
    pub fn midnight(date: Date) -> DateTime {
        DateTime { date, nanos_of_day: 0 }
    }

    /// Validates a time of day on `date`.
    pub fn new(date: Date, hour: u8, minute: u8, second: u8, nanos: u32) -> Result<DateTime, &'static str> {
        if hour > 23 || minute > 59 {
            return Err("hour must be 00-23 and minute 00-59");
        }
        if second > 59 {
            return Err("second must be 00-59 (leap seconds are not supported)");
        }
        if u64::from(nanos) >= NANOS_PER_SECOND {
            return Err("fraction must be below one second");
        }
        let seconds = u64::from(hour) * 3600 + u64::from(minute) * 60 + u64::from(second);
        Ok(DateTime { date, nanos_of_day: seconds * NANOS_PER_SECOND + u64::from(nanos) })
    }

    /// The instant `seconds` (plus `nanos`) after the Unix epoch, if it lies in years 0000–9999.
    pub fn from_unix(seconds: i64, nanos: u32) -> Option<DateTime> {
        if u64::from(nanos) >= NANOS_PER_SECOND {
            return None;
        }
        let days = i32::try_from(seconds.div_euclid(86_400)).ok()?;
        let second_of_day = u64::try_from(seconds.rem_euclid(86_400)).ok()?;
        let date = Date::from_days_since_epoch(days)?;
        Some(DateTime { date, nanos_of_day: second_of_day * NANOS_PER_SECOND + u64::from(nanos) })
    }

    /// Seconds since the Unix epoch (negative before it), rounded down.
    pub fn unix_seconds(self) -> i64 {
        i64::from(self.date.days_since_epoch()) * 86_400
            + i64::try_from(self.nanos_of_day / NANOS_PER_SECOND).unwrap_or(0)
    }

    /// The fraction of the second, in nanoseconds.
    pub fn subsec_nanos(self) -> u32 {
        u32::try_from(self.nanos_of_day % NANOS_PER_SECOND).unwrap_or(0)
    }

    /// The calendar date.
    pub fn date(self) -> Date {
        self.date
    }

    /// Nanoseconds since midnight.
    pub fn nanos_of_day(self) -> u64 {
        self.nanos_of_day
    }

    pub(crate) fn from_parts(date: Date, nanos_of_day: u64) -> Option<DateTime> {
        (nanos_of_day < NANOS_PER_DAY).then_some(DateTime { date, nanos_of_day })
    }

    /// Parses RFC 3339: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`. An offset is converted to
    /// UTC; the fraction has at most 9 digits.
    pub fn parse(text: &str) -> Result<DateTime, Error> {
        let s = text.as_bytes();
        let (local, rest) = DateTime::parse_local(s).map_err(|reason| time_error(text, reason))?;
        let offset_seconds: i64 = match rest {
            b"Z" | b"z" => 0,
            [sign @ (b'+' | b'-'), ..] if rest.len() == 6 && rest[3] == b':' => {
                let (Some(h), Some(m)) = (digits::<2>(rest, 1), digits::<2>(rest, 4)) else {
                    return Err(time_error(text, "offset must be Z or ±HH:MM"));
                };
                if h > 23 || m > 59 {
                    return Err(time_error(text, "offset must be Z or ±HH:MM"));
                }
                let magnitude = i64::from(h * 3600 + m * 60);
                if *sign == b'-' { -magnitude } else { magnitude }
            }
            _ => {
                return Err(time_error(
                    text,
                    "expected a UTC designator Z or an offset ±HH:MM after the time",
                ));
            }
        };
        DateTime::from_unix(local.unix_seconds() - offset_seconds, local.subsec_nanos())
            .ok_or_else(|| time_error(text, "outside years 0000-9999 once converted to UTC"))
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.f{1,9}]` at the start of `s`, returning what follows.
    pub(crate) fn parse_local(s: &[u8]) -> Result<(DateTime, &[u8]), &'static str> {
        let date = Date::parse_prefix(s)?;
        let (Some(b'T' | b't'), Some(h), Some(b':'), Some(mi), Some(b':'), Some(se)) =
            (s.get(10), digits::<2>(s, 11), s.get(13), digits::<2>(s, 14), s.get(16), digits::<2>(s, 17))
        else {
            return Err("expected YYYY-MM-DDTHH:MM:SS");
        };
        let mut at = 19;
        let mut nanos = 0u32;
        if s.get(at) == Some(&b'.') {
            at += 1;
            let start = at;
            while let Some(&c) = s.get(at).filter(|c| c.is_ascii_digit()) {
                if at - start == 9 {
                    return Err("fraction of a second has more than 9 digits");
                }
                nanos = nanos * 10 + u32::from(c - b'0');
                at += 1;
            }
            if at == start {
                return Err("expected digits after '.'");
            }
            for _ in at - start..9 {
                nanos *= 10;
            }
        }
        let narrow = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
        let dt = DateTime::new(date, narrow(h), narrow(mi), narrow(se), nanos)?;
        Ok((dt, &s[at..]))
    }

    /// Writes `YYYY-MM-DDTHH:MM:SS[.fraction]` (trailing fraction zeros dropped, no zone) into
    /// `out`, returning the length.
    pub(crate) fn write_ascii(self, out: &mut [u8; 29]) -> usize {
        self.date.write_ascii(out);
        let seconds = self.nanos_of_day / NANOS_PER_SECOND;
        let narrow = |v: u64| u32::try_from(v).unwrap_or(0);
        out[10] = b'T';
        put(out, 11, narrow(seconds / 3600), 2);
        out[13] = b':';
        put(out, 14, narrow(seconds / 60 % 60), 2);
        out[16] = b':';
        put(out, 17, narrow(seconds % 60), 2);
        let mut fraction = narrow(self.nanos_of_day % NANOS_PER_SECOND);
        if fraction == 0 {
            return 19;
        }
        let mut width = 9;
        while fraction % 10 == 0 {
            fraction /= 10;
            width -= 1;
        }
        out[19] = b'.';
        put(out, 20, fraction, width);
        20 + width
    }
}

impl fmt::Display for Date {
    /// `YYYY-MM-DD`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 29];
        let n = self.write_ascii(&mut buf);
        f.write_str(std::str::from_utf8(&buf[..n]).unwrap_or_default())
    }
}

impl fmt::Debug for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Date({self})")
    }
}

impl fmt::Display for DateTime {
    /// RFC 3339 in UTC: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 29];
        let n = self.write_ascii(&mut buf);
        f.write_str(std::str::from_utf8(&buf[..n]).unwrap_or_default())?;
        f.write_str("Z")
    }
}

impl fmt::Debug for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DateTime({self})")
    }
}
