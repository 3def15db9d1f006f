/**
 * Typed, order-preserving DynamoDB keys, as `shared/key-codec` writes and reads them: the K1 text
 * form (S keys), the B1 binary form (B keys), and hierarchical keys (`35e9#3fe6`). The format is
 * specified, with vectors, in `docs/formats.md` ("Keys: the ordering guarantee", "K1", "B1").
 *
 * A key is a tuple of components, each ascending or descending. Encodings compare as their
 * tuples do (S values by UTF-8 bytes, B values as unsigned bytes), a tuple prefix is a byte
 * prefix, and the decoders accept only canonical keys, so whatever decodes re-encodes the same.
 */

import { KeyError } from "./error.js";
import {
  type Decimal,
  Digits,
  compareDecimals,
  formatDecimal,
  isZero,
  negate,
  numberError,
  parseDecimal,
} from "./number.js";
import {
  type CivilDate,
  type Instant,
  compareDates,
  compareInstants,
  daysSinceEpoch,
  formatDate,
  formatLocal,
  fromDaysSinceEpoch,
  fromParts,
  parseDate,
  parseDateTime,
  parseKeyTime,
} from "./time.js";

export { KeyError } from "./error.js";

/**
 * One typed value. Numbers are decimal strings, never JS numbers (`"42.5"`, `"-1E-130"`; up to 38
 * significant digits); dates are `YYYY-MM-DD`; datetimes RFC 3339 with a zone (`Z` or `±HH:MM`),
 * converted to UTC. Decoded values are canonical: `"1.5"` for `"1.50"`, `"2024-05-01T10:00:00.5Z"`.
 */
export type Value =
  | { readonly type: "null" }
  | { readonly type: "boolean"; readonly value: boolean }
  | { readonly type: "number"; readonly value: string }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "binary"; readonly value: Uint8Array }
  | { readonly type: "date"; readonly value: string }
  | { readonly type: "datetime"; readonly value: string };

/** A key component: a value, ascending unless `desc` is true. Decoders set `desc` only on descending ones. */
export type Component = Value & { readonly desc?: boolean };

/** Which DynamoDB size limit an encoded key is checked against: a sort key (1 to 1024 bytes), a partition key (1 to 2048), or none (a prefix or bound). */
export type KeyLimit = "sort" | "partition" | "none";

/** A value checked and in the form the encoders work on. */
type Typed =
  | { readonly type: "null" }
  | { readonly type: "boolean"; readonly value: boolean }
  | { readonly type: "number"; readonly value: Decimal }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "binary"; readonly value: Uint8Array }
  | { readonly type: "date"; readonly value: CivilDate }
  | { readonly type: "datetime"; readonly value: Instant };

const utf8Encoder = new TextEncoder();
/** Strict UTF-8, keeping a leading U+FEFF as the character it is. */
const utf8Decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The UTF-8 bytes of a string. */
export function utf8(s: string): Uint8Array {
  return utf8Encoder.encode(s);
}

/** A component's value checked (a number parsed, a date or datetime validated) into the form the encoders work on. */
function checkValue(v: Value): Typed {
  switch (v.type) {
    case "number": {
      // Callers from JavaScript could pass a float, which would have lost digits already.
      const text: unknown = v.value;
      if (typeof text !== "string") {
        throw new KeyError(`a number component's value must be a decimal string, not ${typeof text}`);
      }
      return { type: "number", value: parseDecimal(text) };
    }
    case "string":
      if (/\p{Surrogate}/u.test(v.value)) {
        throw new KeyError(`string ${JSON.stringify(v.value)} has a lone surrogate, which UTF-8 cannot hold`);
      }
      return v;
    case "date":
      return { type: "date", value: parseDate(v.value) };
    case "datetime":
      return { type: "datetime", value: parseDateTime(v.value) };
    case "null":
    case "boolean":
    case "binary":
      return v;
  }
}

/** A decoded value as the component callers see: canonical text, `desc` only when descending. */
function toComponent(t: Typed, desc: boolean): Component {
  const value = ((): Value => {
    switch (t.type) {
      case "number":
        return { type: "number", value: formatDecimal(t.value) };
      case "date":
        return { type: "date", value: formatDate(t.value) };
      case "datetime":
        return { type: "datetime", value: `${formatLocal(t.value)}Z` };
      case "null":
      case "boolean":
      case "string":
      case "binary":
        return t;
    }
  })();
  return desc ? { ...value, desc: true } : value;
}

/** A DynamoDB number's canonical text (`"1.50"` and `"15E-1"` are `"1.5"`), as keys decode it; a `KeyError` for NaN, 39 digits or a magnitude out of range. */
export function formatNumber(text: string): string {
  return formatDecimal(parseDecimal(text));
}

/** Checks an encoded size against a DynamoDB key limit. */
export function checkKeySize(bytes: number, limit: KeyLimit): void {
  if (limit === "none") return;
  const [kind, max] = limit === "sort" ? ["sort key", 1024] : ["partition key", 2048];
  if (bytes === 0) throw new KeyError(`${kind} is empty; DynamoDB key attributes must be at least 1 byte`);
  if (bytes > max) throw new KeyError(`${kind} is ${bytes} bytes; DynamoDB allows at most ${max} bytes`);
}

// ---------------------------------------------------------------------------------------------
// K1: text keys

/** Ends every K1 component; sorts below every character that can continue one. */
const TERMINATOR = "#";
/** Starts an escape pair inside an ascending string. */
const ESCAPE = 0x24;
/** Ends descending strings, bytes, dates and negative numbers; sorts above their body characters. */
const HIGH_END = "~";
const TEXT_FORMAT = "K1 text";

/** Ascending tag characters; the descending tag mirrors each (`a`↔`Z`, `%`↔`~`). */
const TEXT_TAG = { null: "%", binary: "b", time: "d", false: "f", number: "n", string: "s", true: "t" } as const;

function descendingTag(asc: string): string {
  return asc === TEXT_TAG.null ? "~" : String.fromCharCode(0x61 + 0x5a - asc.charCodeAt(0));
}

function hex(bytes: Uint8Array, complement: boolean): string {
  let out = "";
  for (const b of bytes) out += ((complement ? ~b : b) & 0xff).toString(16).padStart(2, "0");
  return out;
}

/** Nines' complement of the digits in `s`; other characters unchanged. */
function nines(s: string): string {
  return s.replace(/[0-9]/g, (d) => String(9 - Number(d)));
}

/** Encodes a tuple as a K1 text key (an S value), checked against `limit` (the sort-key limit unless told). */
export function encodeText(tuple: readonly Component[], limit: KeyLimit = "sort"): string {
  let key = "";
  for (const c of tuple) key += textComponent(checkValue(c), c.desc === true);
  checkKeySize(utf8(key).length, limit);
  return key;
}

function textComponent(t: Typed, desc: boolean): string {
  const [asc, body] = textBody(t, desc);
  return `${desc ? descendingTag(asc) : asc}${body}${TERMINATOR}`;
}

function textBody(t: Typed, desc: boolean): [tag: string, body: string] {
  switch (t.type) {
    case "null":
      return [TEXT_TAG.null, ""];
    case "boolean":
      return [t.value ? TEXT_TAG.true : TEXT_TAG.false, ""];
    case "string":
      return [TEXT_TAG.string, desc ? `${hex(utf8(t.value), true)}${HIGH_END}` : escapeString(t.value)];
    case "binary":
      return [TEXT_TAG.binary, desc ? `${hex(t.value, true)}${HIGH_END}` : hex(t.value, false)];
    case "number":
      return [TEXT_TAG.number, numberBody(desc ? negate(t.value) : t.value)];
    case "date":
    case "datetime": {
      const ascii = t.type === "date" ? formatDate(t.value) : formatLocal(t.value);
      return [TEXT_TAG.time, desc ? `${nines(ascii)}${HIGH_END}` : ascii];
    }
  }
}

/** Characters U+0000–U+0024 become `$` and the character plus 0x3F (space `$_`, `#` `$b`, `$` `$c`). */
function escapeString(s: string): string {
  return s.replace(/[\u0000-\u0024]/g, (c) => `$${String.fromCharCode(c.charCodeAt(0) + 0x3f)}`);
}

/** A number's ascending body: its integer-digit class, its plain decimal, and for negatives the nines' complement and `~`. */
function numberBody(n: Decimal): string {
  if (isZero(n)) return "0";
  const e = n.exponent;
  const intDigits = e >= 0 ? e + 1 : 0;
  const wide = (letter: string, value: number) => `${letter}${String(value).padStart(3, "0")}`;
  let klass: string;
  if (n.negative) {
    klass =
      intDigits === 0 ? "[" : intDigits <= 25 ? String.fromCharCode(0x5a + 1 - intDigits) : wide("A", 999 - intDigits);
  } else {
    klass = intDigits === 0 ? "@" : intDigits <= 25 ? String.fromCharCode(0x41 - 1 + intDigits) : wide("Z", intDigits);
  }
  const plain =
    e >= 0
      ? n.digits.length > intDigits
        ? `${n.digits.slice(0, intDigits)}.${n.digits.slice(intDigits)}`
        : n.digits.padEnd(intDigits, "0")
      : `.${"0".repeat(-e - 1)}${n.digits}`;
  return n.negative ? `-${klass}${nines(plain)}${HIGH_END}` : `${klass}${plain}`;
}

/**
 * Decodes a K1 text key into its components. Only canonical encodings are accepted: anything
 * else is a `KeyError` naming the byte offset. The empty key decodes to the empty tuple.
 */
export function decodeText(key: string): Component[] {
  if (/\p{Surrogate}/u.test(key)) {
    throw new KeyError(`malformed ${TEXT_FORMAT} key: it has a lone surrogate, so it is no UTF-8 string`);
  }
  const cursor = new TextCursor(key, utf8(key));
  const out: Component[] = [];
  while (!cursor.done()) out.push(cursor.component());
  return out;
}

const ch = (c: string) => c.charCodeAt(0);

/** Reads a K1 key's UTF-8 bytes, component by component. */
class TextCursor {
  at = 0;

  constructor(
    private readonly key: string,
    private readonly bytes: Uint8Array,
  ) {}

  done(): boolean {
    return this.at >= this.bytes.length;
  }

  private fail(reason: string): never {
    throw new KeyError(`malformed ${TEXT_FORMAT} key at byte ${this.at}: ${reason}`);
  }

  private peek(): number | undefined {
    return this.bytes[this.at];
  }

  private expect(want: string, reason: string): void {
    if (this.peek() !== ch(want)) this.fail(reason);
    this.at += 1;
  }

  component(): Component {
    const t = this.peek();
    if (t === undefined) this.fail("expected a component tag");
    this.at += 1;
    const desc = t === ch("~") || (t >= ch("A") && t <= ch("Z"));
    const asc = t === ch("~") ? TEXT_TAG.null : desc ? descendingTag(String.fromCharCode(t)) : String.fromCharCode(t);
    let value: Typed;
    switch (asc) {
      case TEXT_TAG.null:
        value = { type: "null" };
        break;
      case TEXT_TAG.false:
      case TEXT_TAG.true:
        value = { type: "boolean", value: asc === TEXT_TAG.true };
        break;
      case TEXT_TAG.string:
        value = { type: "string", value: desc ? this.descendingString() : this.ascendingString() };
        break;
      case TEXT_TAG.binary:
        value = { type: "binary", value: desc ? this.hexUntil(HIGH_END, true) : this.hexUntil(TERMINATOR, false) };
        break;
      case TEXT_TAG.number: {
        const n = this.number();
        value = { type: "number", value: desc ? negate(n) : n };
        break;
      }
      case TEXT_TAG.time:
        value = this.time(desc);
        break;
      default:
        this.at -= 1;
        this.fail("unknown component tag");
    }
    this.expect(TERMINATOR, "expected '#' ending the component");
    return toComponent(value, desc);
  }

  private ascendingString(): string {
    const parts: string[] = [];
    let runStart = this.at;
    const flush = () => parts.push(utf8Decoder.decode(this.bytes.subarray(runStart, this.at)));
    for (;;) {
      const b = this.peek();
      if (b === undefined || b === ch(TERMINATOR)) break;
      if (b > ESCAPE) {
        this.at += 1;
        continue;
      }
      flush();
      if (b !== ESCAPE) this.fail("unescaped character below '$' in a string");
      this.at += 1;
      const c = this.peek();
      if (c === undefined || c < 0x3f || c > 0x63) this.fail("'$' must be followed by a character from '?' to 'c'");
      parts.push(String.fromCharCode(c - 0x3f));
      this.at += 1;
      runStart = this.at;
    }
    flush();
    return parts.join("");
  }

  private descendingString(): string {
    const body = this.at;
    const bytes = this.hexUntil(HIGH_END, true);
    try {
      return utf8Decoder.decode(bytes);
    } catch {
      this.at = body;
      return this.fail("descending string is not valid UTF-8");
    }
  }

  /** Lowercase hex pairs up to `end` (consumed unless it is the terminator), complemented or not. */
  private hexUntil(end: string, complement: boolean): Uint8Array {
    const out: number[] = [];
    for (;;) {
      const c = this.peek();
      if (c === ch(end)) {
        if (end !== TERMINATOR) this.at += 1;
        return Uint8Array.from(out);
      }
      if (c === undefined) this.fail("hex body is not terminated");
      const pair = String.fromCharCode(c, this.bytes[this.at + 1] ?? 0);
      if (!/^[0-9a-f]{2}$/.test(pair)) this.fail("expected a pair of lowercase hex digits");
      const b = parseInt(pair, 16);
      out.push(complement ? ~b & 0xff : b);
      this.at += 2;
    }
  }

  private number(): Decimal {
    const c = this.peek();
    if (c === ch("0")) {
      this.at += 1;
      return { negative: false, exponent: 0, digits: "" };
    }
    if (c === ch("-")) {
      this.at += 1;
      return this.positiveNumber(true);
    }
    return this.positiveNumber(false);
  }

  /** The number after its sign: its integer-digit class, its (complemented, for negatives) plain decimal, and `~` for negatives. */
  private positiveNumber(negative: boolean): Decimal {
    const classAt = this.at;
    const c = this.peek();
    this.at += 1;
    let intDigits: number;
    let wide = false;
    if (c === undefined) {
      intDigits = -1;
    } else if (c === (negative ? ch("[") : ch("@"))) {
      intDigits = 0;
    } else if (!negative && c >= ch("A") && c <= ch("Y")) {
      intDigits = c - ch("A") + 1;
    } else if (negative && c >= ch("B") && c <= ch("Z")) {
      intDigits = ch("Z") - c + 1;
    } else if (c === (negative ? ch("A") : ch("Z"))) {
      const v = this.threeDigits();
      intDigits = negative ? 999 - v : v;
      wide = true;
    } else {
      intDigits = -1;
    }
    if (intDigits < 0 || (wide && (intDigits < 26 || intDigits > 126))) {
      this.at = classAt;
      this.fail(
        intDigits < 0
          ? "expected a number class character"
          : "wide number class must stand for 26 to 126 integer digits",
      );
    }
    const zero = negative ? ch("9") : ch("0");
    const digits = new Digits();
    let seenNonzero = false;
    let leadingFractionZeros = 0;
    const push = (raw: number) => {
      const d = negative ? ch("9") + ch("0") - raw : raw;
      if (d !== ch("0")) seenNonzero = true;
      if (!seenNonzero) {
        leadingFractionZeros += 1;
      } else if (digits.push(String.fromCharCode(d)) !== null) {
        this.fail("number has more than 38 digits");
      }
    };
    const digit = () => {
      const d = this.peek();
      return d !== undefined && d >= ch("0") && d <= ch("9") ? d : undefined;
    };
    for (let i = 0; i < intDigits; i++) {
      const d = digit();
      if (d === undefined) this.fail("fewer integer digits than the number class says");
      if (i === 0 && d === zero) this.fail("integer part starts with a zero");
      push(d);
      this.at += 1;
    }
    if (this.peek() === ch(".")) {
      this.at += 1;
      const start = this.at;
      for (let d = digit(); d !== undefined; d = digit()) {
        push(d);
        this.at += 1;
      }
      if (this.at === start) this.fail("expected digits after '.'");
      if (this.bytes[this.at - 1] === zero) {
        this.at -= 1;
        this.fail("fraction ends in a zero (not canonical)");
      }
    } else if (intDigits === 0) {
      this.fail("expected '.' after a zero-integer-digit class");
    }
    if (negative) this.expect(HIGH_END, "expected '~' ending a negative number");
    const finished = digits.finish(negative, intDigits > 0 ? intDigits - 1 : -leadingFractionZeros - 1);
    if (typeof finished === "string") throw numberError(this.key, finished);
    return finished;
  }

  private threeDigits(): number {
    let v = 0;
    for (let i = 0; i < 3; i++) {
      const d = this.peek();
      if (d === undefined || d < ch("0") || d > ch("9")) this.fail("expected three digits in a wide number class");
      v = v * 10 + d - ch("0");
      this.at += 1;
    }
    return v;
  }

  private time(desc: boolean): Typed {
    const start = this.at;
    const end = ch(desc ? HIGH_END : TERMINATOR);
    let body = "";
    for (let c = this.peek(); c !== undefined && c !== end; c = this.peek()) {
      if (body.length === 29) this.fail("date/time body is too long");
      body += String.fromCharCode(c);
      this.at += 1;
    }
    if (desc) this.expect(HIGH_END, "expected '~' ending a descending date/time");
    const parsed = parseKeyTime(desc ? nines(body) : body);
    if (typeof parsed === "string") {
      this.at = start;
      this.fail(parsed);
    }
    return "date" in parsed ? { type: "date", value: parsed.date } : { type: "datetime", value: parsed.instant };
  }
}

// ---------------------------------------------------------------------------------------------
// B1: binary keys

/** Ascending type tags; a descending component is the bitwise NOT of its ascending encoding. */
const BINARY_TAG = {
  null: 0x01,
  bytes: 0x10,
  time: 0x20,
  false: 0x30,
  negative: 0x40,
  zero: 0x41,
  positive: 0x42,
  string: 0x50,
  true: 0x60,
} as const;
/** After the day count: a date ends; a datetime continues with nanoseconds of the day. */
const DATE_END = 0x00;
const DATETIME_MARK = 0x01;
/** Added to the scientific exponent so that -130..=125 fits one byte. */
const EXPONENT_BIAS = 130;
const BINARY_FORMAT = "B1 binary";

/** Encodes a tuple as a B1 binary key (a B value), checked against `limit` (the sort-key limit unless told). */
export function encodeBinary(tuple: readonly Component[], limit: KeyLimit = "sort"): Uint8Array {
  const out: number[] = [];
  for (const c of tuple) {
    const bytes = binaryComponent(checkValue(c));
    out.push(...(c.desc === true ? bytes.map((b) => ~b & 0xff) : bytes));
  }
  checkKeySize(out.length, limit);
  return Uint8Array.from(out);
}

/** One component, ascending. */
function binaryComponent(t: Typed): number[] {
  switch (t.type) {
    case "null":
      return [BINARY_TAG.null];
    case "boolean":
      return [t.value ? BINARY_TAG.true : BINARY_TAG.false];
    case "string":
      return escaped(BINARY_TAG.string, utf8(t.value));
    case "binary":
      return escaped(BINARY_TAG.bytes, t.value);
    case "number":
      return binaryNumber(t.value);
    case "date":
      return [...days(t.value), DATE_END];
    case "datetime": {
      const nanos = t.value.nanosOfDay;
      const high = Math.floor(nanos / 2 ** 32);
      const low = nanos % 2 ** 32;
      return [...days(t.value.date), DATETIME_MARK, (high >>> 8) & 0xff, high & 0xff, ...bigEndian32(low)];
    }
  }
}

/** `tag`, the bytes with `00` escaped as `00 FF`, then `00 01`. */
function escaped(tag: number, bytes: Uint8Array): number[] {
  const out = [tag];
  for (const b of bytes) out.push(...(b === 0 ? [0x00, 0xff] : [b]));
  out.push(0x00, 0x01);
  return out;
}

/** `41` for zero; `42`, the biased exponent and base-100 digit pairs (`2x+1`, the last `2x`) for positives; `40` and their complement for negatives. */
function binaryNumber(n: Decimal): number[] {
  if (isZero(n)) return [BINARY_TAG.zero];
  const mask = n.negative ? 0xff : 0;
  const out = [n.negative ? BINARY_TAG.negative : BINARY_TAG.positive, (n.exponent + EXPONENT_BIAS) ^ mask];
  for (let i = 0; i < n.digits.length; i += 2) {
    const x = Number(n.digits.slice(i, i + 2).padEnd(2, "0"));
    const last = i + 2 >= n.digits.length;
    out.push((last ? 2 * x : 2 * x + 1) ^ mask);
  }
  return out;
}

function bigEndian32(v: number): number[] {
  return [(v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff];
}

/** `20` and the days since 1970-01-01 as a big-endian `i32` with its sign bit flipped. */
function days(date: CivilDate): number[] {
  return [BINARY_TAG.time, ...bigEndian32((daysSinceEpoch(date) ^ 0x8000_0000) >>> 0)];
}

/**
 * Decodes a B1 binary key into its components. Only canonical encodings are accepted: anything
 * else is a `KeyError` naming the byte offset. The empty key decodes to the empty tuple.
 */
export function decodeBinary(key: Uint8Array): Component[] {
  const cursor = new BinaryCursor(key);
  const out: Component[] = [];
  while (!cursor.done()) out.push(cursor.component());
  return out;
}

/** Reads a B1 key, component by component. */
class BinaryCursor {
  private at = 0;
  /** 0xFF inside a descending component: every byte is read through it. */
  private mask = 0;

  constructor(private readonly key: Uint8Array) {}

  done(): boolean {
    return this.at >= this.key.length;
  }

  private fail(reason: string): never {
    throw new KeyError(`malformed ${BINARY_FORMAT} key at byte ${this.at}: ${reason}`);
  }

  /** The next byte through the mask, or undefined at the end. */
  private byte(): number | undefined {
    const b = this.key[this.at];
    if (b === undefined) return undefined;
    this.at += 1;
    return b ^ this.mask;
  }

  private next(reason: string): number {
    const b = this.byte();
    return b === undefined ? this.fail(reason) : b;
  }

  component(): Component {
    const tagAt = this.at;
    const desc = (this.key[this.at] ?? 0) >= 0x80;
    this.mask = desc ? 0xff : 0;
    let value: Typed;
    switch (this.next("expected a component tag")) {
      case BINARY_TAG.null:
        value = { type: "null" };
        break;
      case BINARY_TAG.false:
        value = { type: "boolean", value: false };
        break;
      case BINARY_TAG.true:
        value = { type: "boolean", value: true };
        break;
      case BINARY_TAG.zero:
        value = { type: "number", value: { negative: false, exponent: 0, digits: "" } };
        break;
      case BINARY_TAG.positive:
        value = { type: "number", value: this.number(false) };
        break;
      case BINARY_TAG.negative:
        value = { type: "number", value: this.number(true) };
        break;
      case BINARY_TAG.string: {
        const bytes = this.escaped();
        try {
          value = { type: "string", value: utf8Decoder.decode(bytes) };
        } catch {
          this.fail("string is not valid UTF-8");
        }
        break;
      }
      case BINARY_TAG.bytes:
        value = { type: "binary", value: this.escaped() };
        break;
      case BINARY_TAG.time:
        value = this.time();
        break;
      default:
        this.at = tagAt;
        this.fail("unknown component tag");
    }
    return toComponent(value, desc);
  }

  private escaped(): Uint8Array {
    const out: number[] = [];
    for (;;) {
      const b = this.byte();
      if (b === undefined) this.fail("string or bytes are not terminated by 00 01");
      if (b !== 0x00) {
        out.push(b);
        continue;
      }
      const after = this.byte();
      if (after === 0x01) return Uint8Array.from(out);
      if (after === 0xff) {
        out.push(0x00);
      } else if (after === undefined) {
        this.fail("string or bytes are not terminated by 00 01");
      } else {
        this.at -= 1;
        this.fail("00 inside a string must be followed by FF (escape) or 01 (end)");
      }
    }
  }

  private number(negative: boolean): Decimal {
    const inner = negative ? 0xff : 0;
    const exponent = (this.next("number is missing its exponent") ^ inner) - EXPONENT_BIAS;
    const digits = new Digits();
    for (let first = true; ; first = false) {
      const raw = this.byte();
      if (raw === undefined) this.fail("number is missing its last digit pair");
      const b = raw ^ inner;
      const last = b % 2 === 0;
      const x = b >> 1;
      const hi = String(Math.floor(x / 10));
      const lo = String(x % 10);
      // The first digit is not zero; a final pair "d0" carries one digit plus padding.
      const valid = x <= 99 && !(first && x < 10) && !(last && x === 0);
      const pushed = digits.push(hi) === null && ((last && lo === "0") || digits.push(lo) === null);
      if (!valid || !pushed) {
        this.at -= 1;
        this.fail("invalid digit pair in a number");
      }
      if (last) break;
    }
    const finished = digits.finish(negative, exponent);
    if (typeof finished === "string") {
      this.at -= 1;
      this.fail("number is outside DynamoDB's range");
    }
    return finished;
  }

  private time(): Typed {
    let days = 0;
    for (let i = 0; i < 4; i++) days = days * 256 + this.next("date is cut short");
    const date = fromDaysSinceEpoch((days ^ 0x8000_0000) | 0);
    if (date === null) this.fail("date is outside years 0000-9999");
    const marker = this.next("date is missing its end marker");
    if (marker === DATE_END) return { type: "date", value: date };
    if (marker !== DATETIME_MARK) {
      this.at -= 1;
      this.fail("expected 00 (date) or 01 (datetime) after the day count");
    }
    let nanos = 0;
    for (let i = 0; i < 6; i++) nanos = nanos * 256 + this.next("datetime is cut short");
    const instant = fromParts(date, nanos);
    return instant === null ? this.fail("time of day is 24:00 or later") : { type: "datetime", value: instant };
  }
}

// ---------------------------------------------------------------------------------------------
// Order

/** The position of a value's type in the cross-type order. */
function rank(t: Typed): number {
  switch (t.type) {
    case "null":
      return 0;
    case "binary":
      return 1;
    case "date":
    case "datetime":
      return 2;
    case "boolean":
      return t.value ? 6 : 3;
    case "number":
      return 4;
    case "string":
      return 5;
  }
}

/** Compares unsigned bytes, a prefix first: DynamoDB's order of B values (and of S values' UTF-8). */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return Math.sign(a.length - b.length);
}

function compareTyped(a: Typed, b: Typed): number {
  if (a.type === "number" && b.type === "number") return compareDecimals(a.value, b.value);
  if (a.type === "string" && b.type === "string") return compareBytes(utf8(a.value), utf8(b.value));
  if (a.type === "binary" && b.type === "binary") return compareBytes(a.value, b.value);
  if (a.type === "date" && b.type === "date") return compareDates(a.value, b.value);
  if (a.type === "datetime" && b.type === "datetime") return compareInstants(a.value, b.value);
  // A date sorts just before midnight of the same day.
  if (a.type === "date" && b.type === "datetime") return compareDates(a.value, b.value.date) || -1;
  if (a.type === "datetime" && b.type === "date") return compareDates(a.value.date, b.value) || 1;
  return Math.sign(rank(a) - rank(b));
}

/**
 * Compares two tuples component by component, each in its direction (`a`'s), a shorter tuple
 * first: the order encoded keys reproduce. Numbers by exact value, strings by code point, binary
 * by unsigned bytes, dates and datetimes chronologically; across types
 * `null < binary < date/datetime < false < number < string < true`.
 */
export function compareTuples(a: readonly Component[], b: readonly Component[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i] as Component;
    const order = compareTyped(checkValue(x), checkValue(b[i] as Component));
    if (order !== 0) return x.desc === true ? -order : order;
  }
  return Math.sign(a.length - b.length);
}

// ---------------------------------------------------------------------------------------------
// Long strings

/** UTF-8 length of one code point. */
function utf8Length(codePoint: number): number {
  return codePoint < 0x80 ? 1 : codePoint < 0x800 ? 2 : codePoint < 0x10000 ? 3 : 4;
}

/** The longest prefix of `s`, cut between characters, whose cost stays within `budget`. */
function prefixWithin(s: string, budget: number, cost: (codePoint: number) => number): string {
  let used = 0;
  let at = 0;
  for (const c of s) {
    const codePoint = c.codePointAt(0) ?? 0;
    used += cost(codePoint);
    if (used > budget) return s.slice(0, at);
    at += c.length;
  }
  return s;
}

/**
 * The longest prefix of `s`, cut at a character boundary, whose K1 string component (tag, body
 * and terminator) takes at most `budget` bytes: how the indexer cuts a long value to fit its
 * sort key. Values sharing the kept prefix become equal in the key, so a tiebreaker follows.
 */
export function truncateForText(s: string, desc: boolean, budget: number): string {
  const overhead = desc ? 3 : 2;
  return prefixWithin(s, Math.max(0, budget - overhead), (c) =>
    desc ? 2 * utf8Length(c) : c <= ESCAPE ? 2 : utf8Length(c),
  );
}

/** The longest prefix of `s`, cut at a character boundary, whose B1 string component takes at most `budget` bytes. */
export function truncateForBinary(s: string, budget: number): string {
  return prefixWithin(s, Math.max(0, budget - 3), (c) => (c === 0 ? 2 : utf8Length(c)));
}

// ---------------------------------------------------------------------------------------------
// Hierarchical keys

/**
 * A hierarchical key: segments joined by `#`, with `#` in a segment written `%23` and `%` written
 * `%25`, so that it splits back into exactly its segments (`hierKey(["35e9", "3fe6"])` is
 * `35e9#3fe6`). Checked against `limit` (the partition-key limit unless told). These keys are
 * for identity and `begins_with` on whole segments, not for order.
 */
export function hierKey(segments: readonly string[], limit: KeyLimit = "partition"): string {
  const key = segments.map((s) => s.replace(/%/g, "%25").replace(/#/g, "%23")).join("#");
  checkKeySize(utf8(key).length, limit);
  return key;
}

/** Splits a hierarchical key into its unescaped segments. */
export function splitHier(key: string): string[] {
  return key.split("#").map((segment) => {
    if (/%(?!23|25)/.test(segment)) {
      throw new KeyError(
        `malformed hierarchical key ${JSON.stringify(key)}: '%' must start %23 (for '#') or %25 (for '%')`,
      );
    }
    return segment.replace(/%2[35]/g, (escape) => (escape === "%23" ? "#" : "%"));
  });
}
