/** Calendar dates and UTC datetimes (years 0000–9999, nanoseconds) for key components, as `shared/key-codec/src/time.rs`. */

import { KeyError } from "./error.js";

const NANOS_PER_SECOND = 1_000_000_000;
const SECONDS_PER_DAY = 86_400;
/** Nanoseconds in a day: below 2^53, so plain numbers hold them exactly. */
export const NANOS_PER_DAY = SECONDS_PER_DAY * NANOS_PER_SECOND;

/** A calendar date (proleptic Gregorian), year 0000 to 9999. */
export interface CivilDate {
  readonly year: number;
  readonly month: number;
  readonly day: number;
}

/** An instant in UTC from 0000-01-01T00:00:00 to 9999-12-31T23:59:59.999999999; no leap seconds. */
export interface Instant {
  readonly date: CivilDate;
  readonly nanosOfDay: number;
}

function timeError(input: string, reason: string): KeyError {
  return new KeyError(`invalid date/time ${JSON.stringify(input)}: ${reason}`);
}

function isLeap(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeap(year) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** Exactly `n` ASCII digits at `at`, or null. */
function digitsAt(s: string, at: number, n: number): number | null {
  const field = s.slice(at, at + n);
  return field.length === n && /^[0-9]+$/.test(field) ? Number(field) : null;
}

/** Validates a calendar date; the reason when it does not exist. */
function civilDate(year: number, month: number, day: number): CivilDate | string {
  if (year > 9999) return "year must be 0000 to 9999";
  if (month < 1 || month > 12) return "month must be 01 to 12";
  if (day === 0 || day > daysInMonth(year, month)) return "day does not exist in that month";
  return { year, month, day };
}

/** A `YYYY-MM-DD` prefix of `s`, or why not. */
function parseDatePrefix(s: string): CivilDate | string {
  const year = digitsAt(s, 0, 4);
  const month = digitsAt(s, 5, 2);
  const day = digitsAt(s, 8, 2);
  if (year === null || s[4] !== "-" || month === null || s[7] !== "-" || day === null) {
    return "expected YYYY-MM-DD";
  }
  return civilDate(year, month, day);
}

/** Parses `YYYY-MM-DD` exactly. */
export function parseDate(text: string): CivilDate {
  const date = text.length === 10 ? parseDatePrefix(text) : "expected YYYY-MM-DD";
  if (typeof date === "string") throw timeError(text, date);
  return date;
}

/** `YYYY-MM-DDTHH:MM:SS[.f{1,9}]` at the start of `s` and what follows it, or why not. */
function parseLocal(s: string): { instant: Instant; rest: string } | string {
  const date = parseDatePrefix(s);
  if (typeof date === "string") return date;
  const hour = digitsAt(s, 11, 2);
  const minute = digitsAt(s, 14, 2);
  const second = digitsAt(s, 17, 2);
  if (
    (s[10] !== "T" && s[10] !== "t") ||
    hour === null ||
    s[13] !== ":" ||
    minute === null ||
    s[16] !== ":" ||
    second === null
  ) {
    return "expected YYYY-MM-DDTHH:MM:SS";
  }
  let at = 19;
  let nanos = 0;
  if (s[at] === ".") {
    const fraction = /^[0-9]*/.exec(s.slice(at + 1))?.[0] ?? "";
    if (fraction.length > 9) return "fraction of a second has more than 9 digits";
    if (fraction === "") return "expected digits after '.'";
    nanos = Number(fraction.padEnd(9, "0"));
    at += 1 + fraction.length;
  }
  if (hour > 23 || minute > 59) return "hour must be 00-23 and minute 00-59";
  if (second > 59) return "second must be 00-59 (leap seconds are not supported)";
  const nanosOfDay = (hour * 3600 + minute * 60 + second) * NANOS_PER_SECOND + nanos;
  return { instant: { date, nanosOfDay }, rest: s.slice(at) };
}

/** Parses RFC 3339, `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, converting an offset to UTC. */
export function parseDateTime(text: string): Instant {
  const local = parseLocal(text);
  if (typeof local === "string") throw timeError(text, local);
  const { rest } = local;
  let offsetSeconds = 0;
  if (rest !== "Z" && rest !== "z") {
    if (rest.length !== 6 || (rest[0] !== "+" && rest[0] !== "-") || rest[3] !== ":") {
      throw timeError(text, "expected a UTC designator Z or an offset ±HH:MM after the time");
    }
    const h = digitsAt(rest, 1, 2);
    const m = digitsAt(rest, 4, 2);
    if (h === null || m === null || h > 23 || m > 59) throw timeError(text, "offset must be Z or ±HH:MM");
    offsetSeconds = (rest[0] === "-" ? -1 : 1) * (h * 3600 + m * 60);
  }
  const seconds = unixSeconds(local.instant) - offsetSeconds;
  const days = Math.floor(seconds / SECONDS_PER_DAY);
  const date = fromDaysSinceEpoch(days);
  if (date === null) throw timeError(text, "outside years 0000-9999 once converted to UTC");
  const nanosOfDay =
    (seconds - days * SECONDS_PER_DAY) * NANOS_PER_SECOND + (local.instant.nanosOfDay % NANOS_PER_SECOND);
  return { date, nanosOfDay };
}

/** Seconds since the Unix epoch, rounded down. */
function unixSeconds(t: Instant): number {
  return daysSinceEpoch(t.date) * SECONDS_PER_DAY + Math.floor(t.nanosOfDay / NANOS_PER_SECOND);
}

/** Days since 1970-01-01, negative before it (Howard Hinnant's days_from_civil). */
export function daysSinceEpoch(d: CivilDate): number {
  const y = d.year - (d.month <= 2 ? 1 : 0);
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (d.month > 2 ? d.month - 3 : d.month + 9) + 2) / 5) + d.day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

/** The date `days` after 1970-01-01 if it lies in years 0000–9999 (Howard Hinnant's civil_from_days). */
export function fromDaysSinceEpoch(days: number): CivilDate | null {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  if (year < 0) return null;
  const date = civilDate(year, month, day);
  return typeof date === "string" ? null : date;
}

/** `YYYY-MM-DD`. */
export function formatDate(d: CivilDate): string {
  const pad = (v: number, width: number) => String(v).padStart(width, "0");
  return `${pad(d.year, 4)}-${pad(d.month, 2)}-${pad(d.day, 2)}`;
}

/** `YYYY-MM-DDTHH:MM:SS[.fraction]` with trailing fraction zeros dropped and no zone letter: the key's body. */
export function formatLocal(t: Instant): string {
  const seconds = Math.floor(t.nanosOfDay / NANOS_PER_SECOND);
  const pad = (v: number) => String(v).padStart(2, "0");
  const time = `${pad(Math.floor(seconds / 3600))}:${pad(Math.floor(seconds / 60) % 60)}:${pad(seconds % 60)}`;
  const fraction = String(t.nanosOfDay % NANOS_PER_SECOND)
    .padStart(9, "0")
    .replace(/0+$/, "");
  return `${formatDate(t.date)}T${time}${fraction === "" ? "" : `.${fraction}`}`;
}

/** The body of a date or datetime component, read back: canonical only (an upper-case `T`, no trailing fraction zeros). */
export function parseKeyTime(body: string): { date: CivilDate } | { instant: Instant } | string {
  if (body.length === 10) {
    const date = parseDatePrefix(body);
    return typeof date === "string" ? date : { date };
  }
  if (body[10] === "t" || (body.length > 19 && body.endsWith("0"))) return "date/time is not in canonical form";
  const local = parseLocal(body);
  if (typeof local === "string") return local;
  return local.rest === "" ? { instant: local.instant } : "unexpected characters after the time";
}

/** A datetime from a date and nanoseconds since its midnight, if they are less than a day. */
export function fromParts(date: CivilDate, nanosOfDay: number): Instant | null {
  return nanosOfDay < NANOS_PER_DAY ? { date, nanosOfDay } : null;
}

/** Compares two dates chronologically. */
export function compareDates(a: CivilDate, b: CivilDate): number {
  return Math.sign(a.year - b.year || a.month - b.month || a.day - b.day);
}

/** Compares two instants chronologically. */
export function compareInstants(a: Instant, b: Instant): number {
  return compareDates(a.date, b.date) || Math.sign(a.nanosOfDay - b.nanosOfDay);
}
