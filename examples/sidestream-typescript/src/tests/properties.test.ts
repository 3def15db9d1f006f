/** The ordering guarantee over random tuples: encodings sort as their tuples, prefixes are byte prefixes, and every key decodes to its tuple and re-encodes the same. Seeded, so a failure repeats. */

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  type Component,
  type Value,
  compareBytes,
  compareTuples,
  decodeBinary,
  decodeText,
  encodeBinary,
  encodeText,
  utf8,
} from "../keys.js";

/** A small seeded generator (mulberry32): the same tuples on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SEED = 20261207;
const next = random(SEED);
const below = (n: number) => Math.floor(next() * n);
const pick = <T>(items: readonly T[]): T => items[below(items.length)] as T;

/** A DynamoDB number as a mantissa and an exponent (value = mantissa × 10^exponent): exact, whatever the text. */
interface Exact {
  readonly mantissa: bigint;
  readonly exponent: number;
}

function randomExact(): Exact {
  const length = 1 + below(38);
  let digits = String(1 + below(9));
  while (digits.length < length) digits += String(below(10));
  const mantissa = BigInt(digits) * (next() < 0.5 ? -1n : 1n);
  // The scientific exponent, length - 1 + exponent: at the ends of DynamoDB's range and the text form's classes.
  const scientific = pick([-130, -129, -8, -7, -2, -1, 0, 1, 24, 25, 26, 39, 40, 124, 125]);
  return { mantissa, exponent: scientific - (length - 1) };
}

/** A spelling of an exact number: plain, scientific or with zeros, as a caller might write it. */
function spell({ mantissa, exponent }: Exact): string {
  const sign = mantissa < 0n ? "-" : pick(["", "+"]);
  const digits = (mantissa < 0n ? -mantissa : mantissa).toString();
  const zeros = "0".repeat(below(3));
  return pick([
    `${sign}${digits}${zeros}E${exponent - zeros.length}`,
    `${sign}0${digits}e${exponent >= 0 ? "+" : ""}${exponent}`,
  ]);
}

/** Compares two exact numbers with bigint arithmetic: an oracle independent of the codec. */
function compareExact(a: Exact, b: Exact): number {
  const e = Math.min(a.exponent, b.exponent);
  const scale = (x: Exact) => x.mantissa * 10n ** BigInt(x.exponent - e);
  const d = scale(a) - scale(b);
  return d < 0n ? -1 : d > 0n ? 1 : 0;
}

const NUMBERS = [
  "0",
  "1",
  "-1",
  "0.5",
  "-0.5",
  "10",
  "100",
  "42",
  "42.5",
  "-42.5",
  "1E25",
  "9.99E24",
  "1E-130",
  "-1E-130",
  "9.9999999999999999999999999999999999999E+125",
];
const CHARACTERS = ["a", "b", "\0", " ", "!", '"', "#", "$", "%", "~", "\u007f", "é", "€", "\uFFFF", "😀", "A", "z"];
const BYTES = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff];
const DATES = ["0000-01-01", "0999-12-31", "1969-12-31", "1970-01-01", "2024-02-29", "2024-05-01", "9999-12-31"];

function randomValue(): Value {
  switch (below(9)) {
    case 0:
      return { type: "null" };
    case 1:
      return { type: "boolean", value: next() < 0.5 };
    case 2:
      return { type: "number", value: next() < 0.5 ? pick(NUMBERS) : spell(randomExact()) };
    case 3:
    case 4:
      return { type: "string", value: Array.from({ length: below(5) }, () => pick(CHARACTERS)).join("") };
    case 5:
      return { type: "binary", value: Uint8Array.from({ length: below(4) }, () => pick(BYTES)) };
    case 6:
      return { type: "date", value: pick(DATES) };
    default: {
      const fraction =
        next() < 0.5
          ? ""
          : `.${String(below(1e9))
              .padStart(9, "0")
              .slice(0, 1 + below(9))}`;
      const time = `${String(below(24)).padStart(2, "0")}:${String(below(60)).padStart(2, "0")}:${String(below(60)).padStart(2, "0")}`;
      const zone = pick(["Z", "z", "+05:30", "-08:00"]);
      // Offsets only on days whose UTC instant stays within years 0000–9999.
      const day = zone.length > 1 ? pick(DATES.slice(1, -1)) : pick(DATES);
      return { type: "datetime", value: `${day}T${time}${fraction}${zone}` };
    }
  }
}

/** `count` tuples of up to four components, directions per position as `desc` says. */
function randomTuples(count: number, desc: readonly boolean[]): Component[][] {
  return Array.from({ length: count }, () =>
    Array.from({ length: below(desc.length + 1) }, (_, i) =>
      desc[i] ? { ...randomValue(), desc: true } : randomValue(),
    ),
  );
}

function assertSameTuple(decoded: Component[], tuple: Component[]): void {
  assert.equal(decoded.length, tuple.length);
  decoded.forEach((c, i) => {
    assert.equal(c.desc === true, tuple[i]?.desc === true);
    assert.equal(
      compareTuples([c], [tuple[i] as Component]),
      0,
      `${JSON.stringify(c)} decoded for ${JSON.stringify(tuple[i])}`,
    );
  });
}

const DIRECTIONS: boolean[][] = [
  [false, false, false, false],
  [true, true, true, true],
  [false, true, false, true],
  [true, false, false, true],
];

test(`random tuples round-trip through K1 and B1 (seed ${SEED})`, () => {
  for (const desc of DIRECTIONS) {
    for (const tuple of randomTuples(100, desc)) {
      const text = encodeText(tuple, "none");
      const binary = encodeBinary(tuple, "none");
      assert.ok(!text.includes("\0"), "K1 never holds U+0000");
      assertSameTuple(decodeText(text), tuple);
      assertSameTuple(decodeBinary(binary), tuple);
      assert.equal(encodeText(decodeText(text), "none"), text, "a decoded key re-encodes the same");
      assert.deepEqual(encodeBinary(decodeBinary(binary), "none"), binary, "a decoded key re-encodes the same");
      for (let k = 0; k < tuple.length; k++) {
        assert.ok(text.startsWith(encodeText(tuple.slice(0, k), "none")), "a tuple prefix is a K1 prefix");
        const prefix = encodeBinary(tuple.slice(0, k), "none");
        assert.deepEqual(binary.subarray(0, prefix.length), prefix, "a tuple prefix is a B1 prefix");
      }
    }
  }
});

test(`random tuples sort by their encodings as by their values (seed ${SEED})`, () => {
  for (const desc of DIRECTIONS) {
    const tuples = randomTuples(100, desc).map((tuple) => ({
      tuple,
      text: utf8(encodeText(tuple, "none")),
      binary: encodeBinary(tuple, "none"),
    }));
    for (const a of tuples) {
      for (const b of tuples) {
        const order = compareTuples(a.tuple, b.tuple);
        assert.equal(
          compareBytes(a.text, b.text),
          order,
          `K1 order of ${JSON.stringify(a.tuple)} and ${JSON.stringify(b.tuple)}`,
        );
        assert.equal(
          compareBytes(a.binary, b.binary),
          order,
          `B1 order of ${JSON.stringify(a.tuple)} and ${JSON.stringify(b.tuple)}`,
        );
      }
    }
    const byTuple = [...tuples].sort((a, b) => compareTuples(a.tuple, b.tuple)).map((t) => t.binary);
    const byKey = [...tuples].sort((a, b) => compareBytes(a.binary, b.binary)).map((t) => t.binary);
    assert.deepEqual(byKey, byTuple);
  }
});

test(`numbers sort by exact value, whatever their spelling (seed ${SEED})`, () => {
  const numbers = Array.from({ length: 300 }, randomExact);
  for (let i = 1; i < numbers.length; i++) {
    const [a, b] = [numbers[i - 1] as Exact, numbers[i] as Exact];
    for (const desc of [false, true]) {
      const x: Component = { type: "number", value: spell(a), desc };
      const y: Component = { type: "number", value: spell(b), desc };
      const order = desc ? -compareExact(a, b) : compareExact(a, b);
      assert.equal(compareTuples([x], [y]), order, `${x.value} vs ${y.value}`);
      assert.equal(compareBytes(utf8(encodeText([x])), utf8(encodeText([y]))), order, `K1: ${x.value} vs ${y.value}`);
      assert.equal(compareBytes(encodeBinary([x]), encodeBinary([y])), order, `B1: ${x.value} vs ${y.value}`);
    }
  }
});
