/** Exact DynamoDB numbers as decimals (no floating point): parsing, canonical form, order and text, as `shared/key-codec/src/number.rs`. */

import { KeyError } from "./error.js";

/** Most significant digits a DynamoDB number holds. */
export const MAX_DIGITS = 38;
/** Smallest scientific exponent of a non-zero number (1E-130). */
export const MIN_EXPONENT = -130;
/** Largest scientific exponent (9.99…9E+125). */
export const MAX_EXPONENT = 125;

/** Exponents beyond this are "too large" or "too small" whatever their digits, so parsing saturates here. */
const EXPONENT_SATURATION = 1_000_000_000;

/**
 * A DynamoDB number in canonical form: sign, up to 38 significant digits without leading or
 * trailing zeros (empty for zero), and the scientific exponent `e` of `d.ddd… × 10^e` (0 for zero).
 */
export interface Decimal {
  readonly negative: boolean;
  readonly exponent: number;
  readonly digits: string;
}

/** Zero. */
export const ZERO: Decimal = { negative: false, exponent: 0, digits: "" };

/** Why a number was refused, as the Rust crate words it. */
export type NumberProblem = "not finite" | "syntax" | "too many digits" | "too small" | "too large";

/** The number refused, naming the rule it broke. */
export function numberError(input: string, problem: NumberProblem, digits = MAX_DIGITS + 1): KeyError {
  const reasons: Record<NumberProblem, string> = {
    "not finite": "NaN and Infinity are not DynamoDB numbers (they must be finite decimals)",
    syntax: "not a decimal number (expected digits, an optional '.', and an optional exponent like E-5)",
    "too many digits": `${digits} significant digits; DynamoDB allows at most ${MAX_DIGITS}`,
    "too small": "magnitude below 1E-130, the smallest non-zero DynamoDB number",
    "too large": "magnitude above 9.9999999999999999999999999999999999999E+125, the largest DynamoDB number",
  };
  return new KeyError(`invalid number ${JSON.stringify(input)}: ${reasons[problem]}`);
}

/**
 * Collects significant digits one at a time, for the parser and the key decoders. The first digit
 * pushed must be non-zero. Zeros past the 38th digit are held back: harmless if only zeros follow
 * (they belong to the exponent), an error if a non-zero digit does.
 */
export class Digits {
  #digits = "";
  #zerosPastLimit = 0;

  /** Appends one digit character: null, or when it would be one significant digit too many, how many the number would have. */
  push(digit: string): number | null {
    if (this.#digits.length < MAX_DIGITS) {
      this.#digits += digit;
      return null;
    }
    if (digit === "0") {
      this.#zerosPastLimit += 1;
      return null;
    }
    return MAX_DIGITS + this.#zerosPastLimit + 1;
  }

  /** The number `d.ddd… × 10^exponent`: trailing zeros dropped, sign applied, range checked. */
  finish(negative: boolean, exponent: number): Decimal | NumberProblem {
    const digits = this.#digits.replace(/0+$/, "");
    if (digits === "") return ZERO;
    if (exponent < MIN_EXPONENT) return "too small";
    if (exponent > MAX_EXPONENT) return "too large";
    return { negative, exponent, digits };
  }
}

/** Parses DynamoDB's number syntax: an optional sign, digits with an optional `.`, an optional exponent (`1.5`, `-0.05`, `15E-1`, `1e+125`). */
export function parseDecimal(text: string): Decimal {
  let rest = text;
  let negative = false;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    negative = rest.startsWith("-");
    rest = rest.slice(1);
  }
  if (/^(nan|inf|infinity)$/i.test(rest)) throw numberError(text, "not finite");

  // Leading zeros are skipped; from the first non-zero digit on every digit is significant.
  const digits = new Digits();
  let seenDigit = false;
  let seenPoint = false;
  let beforePoint = 0;
  let firstNonzero: number | null = null;
  let index = 0;
  let i = 0;
  for (; i < rest.length; i++) {
    const c = rest[i] ?? "";
    if (c >= "0" && c <= "9") {
      seenDigit = true;
      if (firstNonzero === null && c !== "0") firstNonzero = index;
      if (firstNonzero !== null) {
        const tooMany = digits.push(c);
        if (tooMany !== null) throw numberError(text, "too many digits", tooMany);
      }
      if (!seenPoint) beforePoint += 1;
      index += 1;
    } else if (c === "." && !seenPoint) {
      seenPoint = true;
    } else if (c === "e" || c === "E") {
      break;
    } else {
      throw numberError(text, "syntax");
    }
  }
  if (!seenDigit) throw numberError(text, "syntax");
  const exponentPart = i < rest.length ? parseExponent(text, rest.slice(i + 1)) : 0;
  if (firstNonzero === null) return ZERO;
  const finished = digits.finish(negative, exponentPart + beforePoint - firstNonzero - 1);
  if (typeof finished === "string") throw numberError(text, finished);
  return finished;
}

/** The digits after `E`, saturating far outside the valid range so that huge exponents report "too large" or "too small". */
function parseExponent(input: string, text: string): number {
  const negative = text.startsWith("-");
  const digits = negative || text.startsWith("+") ? text.slice(1) : text;
  if (!/^[0-9]+$/.test(digits)) throw numberError(input, "syntax");
  let value = 0;
  for (const c of digits) value = Math.min(value * 10 + Number(c), EXPONENT_SATURATION);
  return negative ? -value : value;
}

/** Whether the number is zero. */
export function isZero(n: Decimal): boolean {
  return n.digits === "";
}

/** The same magnitude with the opposite sign (zero stays zero). */
export function negate(n: Decimal): Decimal {
  return { ...n, negative: !n.negative && !isZero(n) };
}

/** Compares by exact decimal value: negative, zero or positive as `a` is below, equal to or above `b`. */
export function compareDecimals(a: Decimal, b: Decimal): number {
  const sign = (n: Decimal) => (isZero(n) ? 0 : n.negative ? -1 : 1);
  const bySign = sign(a) - sign(b);
  if (bySign !== 0 || isZero(a)) return Math.sign(bySign);
  const magnitude = a.exponent - b.exponent || (a.digits < b.digits ? -1 : a.digits > b.digits ? 1 : 0);
  return a.negative ? -Math.sign(magnitude) : Math.sign(magnitude);
}

/**
 * The canonical text, as the Rust crate displays it: plain notation for exponents 0 to 39 and
 * -7 to -1 (`1234.5`, `0.0005`), scientific beyond (`1.5E+40`, `1E-130`).
 */
export function formatDecimal(n: Decimal): string {
  if (isZero(n)) return "0";
  const sign = n.negative ? "-" : "";
  const { digits, exponent: e } = n;
  if (e >= 0 && e < 40) {
    const intLen = e + 1;
    return digits.length <= intLen
      ? `${sign}${digits.padEnd(intLen, "0")}`
      : `${sign}${digits.slice(0, intLen)}.${digits.slice(intLen)}`;
  }
  if (e >= -7 && e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
  const mantissa = digits.length === 1 ? digits : `${digits[0]}.${digits.slice(1)}`;
  return `${sign}${mantissa}E${e < 0 ? "-" : "+"}${Math.abs(e)}`;
}
