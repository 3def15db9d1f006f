/** Edge cases, after the Rust crate's (`shared/key-codec/src/tests/edges.rs`): numbers refused with the reason, canonical spellings, malformed keys naming the offset, limits, truncation, and hierarchical keys. */

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  type Component,
  KeyError,
  compareTuples,
  decodeBinary,
  decodeText,
  encodeBinary,
  encodeText,
  formatNumber,
  hierKey,
  splitHier,
  truncateForBinary,
  truncateForText,
  utf8,
} from "../keys.js";

const n = (value: string): Component => ({ type: "number", value });
const s = (value: string, desc = false): Component =>
  desc ? { type: "string", value, desc } : { type: "string", value };

/** Asserts that `run` throws a `KeyError` whose message contains every one of `says`. */
function refuses(run: () => unknown, ...says: string[]): void {
  assert.throws(run, (e: unknown) => {
    assert.ok(e instanceof KeyError, `a KeyError, not ${String(e)}`);
    for (const part of says) {
      assert.ok(e.message.includes(part), `${JSON.stringify(e.message)} says ${JSON.stringify(part)}`);
    }
    return true;
  });
}

test("numbers outside DynamoDB's are refused with the reason: NaN, 39 digits, 1E-131, 1E126 and the like", () => {
  const cases: [input: string, says: string][] = [
    ["NaN", "NaN and Infinity are not DynamoDB numbers"],
    ["-Infinity", "NaN and Infinity"],
    ["inf", "NaN and Infinity"],
    ["123456789012345678901234567890123456789", "39 significant digits; DynamoDB allows at most 38"],
    ["1E-131", "below 1E-130"],
    ["0.99E-130", "below 1E-130"],
    ["1E126", "above 9.9999999999999999999999999999999999999E+125"],
    ["-1E126", "above"],
    ["1E99999999999999999999", "above"],
    ["", "not a decimal number"],
    ["1.2.3", "not a decimal number"],
    ["1e", "not a decimal number"],
    [" 1", "not a decimal number"],
    ["0x10", "not a decimal number"],
  ];
  for (const [input, says] of cases) {
    refuses(() => formatNumber(input), says, JSON.stringify(input));
    refuses(() => encodeText([n(input)]), says);
    refuses(() => encodeBinary([n(input)]), says);
  }
  // JavaScript numbers are refused: they may have lost digits already.
  refuses(() => encodeText([{ type: "number", value: 0.1 as unknown as string }]), "decimal string");
  // The largest and smallest values sit right at the limits.
  for (const ok of [
    "9.9999999999999999999999999999999999999E+125",
    "1E-130",
    "1.0000000000000000000000000000000000001E-130",
    "12345678901234567890123456789012345678000000",
  ]) {
    assert.doesNotThrow(() => encodeText([n(ok)]), ok);
  }
});

test("equal numbers encode identically, and display as the Rust crate displays them", () => {
  for (const spelling of ["1.5", "1.50", "15E-1", "0.15e1", "+1.5", "001.500", "150e-2"]) {
    assert.equal(encodeText([n(spelling)]), "nA1.5#", spelling);
    assert.equal(formatNumber(spelling), "1.5");
  }
  for (const zero of ["0", "-0", "0.000", "-0E5", "+0e-999", ".0", "0."]) {
    assert.equal(encodeText([n(zero)]), "n0#", zero);
    assert.deepEqual(encodeBinary([{ ...n(zero), desc: true }]), Uint8Array.of(0xbe), zero);
  }
  const shown: [string, string][] = [
    ["1E+125", "1E+125"],
    ["1.5E40", "1.5E+40"],
    ["0.0000001", "0.0000001"],
    ["0.00000001", "1E-8"],
    ["123456789012345678901234567890123456.78", "123456789012345678901234567890123456.78"],
    ["1E39", `1${"0".repeat(39)}`],
    ["-42.50", "-42.5"],
  ];
  for (const [input, display] of shown) {
    assert.equal(formatNumber(input), display, input);
    assert.equal(formatNumber(display), display, "the display parses back to itself");
  }
});

test("numbers that are integers decode whatever path the Rust decoder takes", () => {
  const cases: [key: string, value: string][] = [
    ["nA7#", "7"],
    ["nB10#", "10"],
    ["nC120#", "120"],
    ["nE10203#", "10203"],
    ["nY1000000000000000000000000#", "1000000000000000000000000"],
    ["nY1234567890123456789012345#", "1234567890123456789012345"],
    ["nB12.5#", "12.5"],
  ];
  for (const [key, value] of cases) assert.deepEqual(decodeText(key), [n(value)], key);
});

test("every escaped character round-trips and sorts by code point, in both directions", () => {
  const strings = Array.from({ length: 0x26 }, (_, c) => `a${String.fromCharCode(c)}b`);
  for (const desc of [false, true]) {
    let previous: { text: Uint8Array; binary: Uint8Array } | null = null;
    for (const string of strings) {
      const tuple = [s(string, desc), s("tail")];
      const text = encodeText(tuple);
      const binary = encodeBinary(tuple);
      assert.ok(!text.includes("\0"));
      assert.deepEqual(decodeText(text), tuple);
      assert.deepEqual(decodeBinary(binary), tuple);
      const shorter = [s("a", desc), s("tail")];
      assert.equal(compareTuples(shorter, tuple), desc ? 1 : -1);
      assert.equal(
        Math.sign(Buffer.compare(utf8(encodeText(shorter)), utf8(text))),
        desc ? 1 : -1,
        JSON.stringify(string),
      );
      if (previous !== null) {
        assert.equal(Math.sign(Buffer.compare(previous.text, utf8(text))), desc ? 1 : -1, JSON.stringify(string));
        assert.equal(Math.sign(Buffer.compare(previous.binary, binary)), desc ? 1 : -1, JSON.stringify(string));
      }
      previous = { text: utf8(text), binary };
    }
  }
});

test("strings sort in UTF-8 order, not JavaScript's UTF-16 order", () => {
  for (const desc of [false, true]) {
    const high = [s("\uFFFF", desc)];
    const emoji = [s("😀", desc)];
    assert.equal(compareTuples(high, emoji), desc ? 1 : -1);
    assert.equal(Math.sign(Buffer.compare(utf8(encodeText(high)), utf8(encodeText(emoji)))), desc ? 1 : -1);
    assert.equal(Math.sign(Buffer.compare(encodeBinary(high), encodeBinary(emoji))), desc ? 1 : -1);
  }
});

test("across types, null < binary < date < datetime < false < number < string < true", () => {
  const ordered: Component[] = [
    { type: "null" },
    { type: "binary", value: Uint8Array.of(0xff) },
    { type: "date", value: "2024-01-01" },
    { type: "datetime", value: "2024-01-01T00:00:00Z" },
    { type: "boolean", value: false },
    n("-5"),
    n("5"),
    s(""),
    { type: "boolean", value: true },
  ];
  for (let i = 1; i < ordered.length; i++) {
    const [a, b] = [[ordered[i - 1] as Component], [ordered[i] as Component]];
    assert.equal(compareTuples(a, b), -1);
    assert.equal(Buffer.compare(utf8(encodeText(a)), utf8(encodeText(b))), -1);
    assert.equal(Buffer.compare(encodeBinary(a), encodeBinary(b)), -1);
  }
});

test("dates and datetimes: RFC 3339 in, UTC out; the impossible ones refused", () => {
  assert.deepEqual(decodeText(encodeText([{ type: "datetime", value: "2024-05-01T12:00:00.250+02:00" }])), [
    { type: "datetime", value: "2024-05-01T10:00:00.25Z" },
  ]);
  refuses(() => encodeText([{ type: "date", value: "2023-02-29" }]), "day does not exist");
  refuses(() => encodeText([{ type: "datetime", value: "2024-05-01T23:59:60Z" }]), "leap seconds");
  refuses(() => encodeText([{ type: "datetime", value: "2024-05-01T12:00:00" }]), "expected a UTC designator");
  refuses(() => encodeText([{ type: "datetime", value: "0000-01-01T00:30:00+01:00" }]), "outside years 0000-9999");
  refuses(() => encodeText([{ type: "datetime", value: "2024-05-01T12:00:00.1234567890Z" }]), "more than 9 digits");
});

test("malformed K1 keys are refused, naming the byte offset", () => {
  const cases: [key: string, offset: number][] = [
    ["sOpen", 5],
    ["x#", 0],
    ["sa b#", 2],
    ["s$z#", 2],
    ["nB4#", 3],
    ["nB042#", 2],
    ["nA1.50#", 5],
    ["nZ010#", 1],
    ["n-Z8#", 4],
    ["d2024-02-30#", 1],
    ["d2024-05-01T12:34:56.50#", 1],
    ["d2024-05-01t12:34:56#", 1],
    ["H9e#", 3],
    ["H00~#", 1],
    ["b0#", 1],
    ["bAB#", 1],
    ["n@.0#", 3],
    ["n@5#", 2],
    ["sé$_x", 6],
  ];
  for (const [key, offset] of cases) refuses(() => decodeText(key), "malformed K1 text key", `at byte ${offset}:`);
  // Past 38 digits and past 1E-130: the number's own reason.
  refuses(() => decodeText(`n@.${"0".repeat(130)}1#`), "below 1E-130");
  refuses(() => decodeText(`nZ039${"1".repeat(39)}#`), "more than 38 digits");
  assert.deepEqual(decodeText(""), []);
});

test("malformed B1 keys are refused", () => {
  const cases = [
    [0x50, 0x61],
    [0x50, 0x00, 0x02],
    [0x42, 0x83],
    [0x42, 0x83, 0x55],
    [0x42, 0x83, 0x00],
    [0x42, 0x83, 0xff],
    [0x42, 0x83, 0x13],
    [0x20, 0x80, 0x00, 0x4d],
    [0x20, 0x80, 0x00, 0x4d, 0x84, 0x07],
    [0x20, 0x80, 0x00, 0x4d, 0x84, 0x01, 0x4e, 0x94, 0x91, 0x4f, 0x00, 0x00],
    [0x50, 0xff, 0x00, 0x01],
    [0x77],
    [0x00],
  ];
  for (const key of cases) refuses(() => decodeBinary(Uint8Array.from(key)), "malformed B1 binary key");
});

test("keys are checked against DynamoDB's limits, a multi-byte character counted in bytes", () => {
  const fits = `${"x".repeat(1019)}€`;
  assert.equal(utf8(encodeText([s(fits)])).length, 1024);
  const over = `${"x".repeat(1020)}€`;
  refuses(() => encodeText([s(over)]), "sort key is 1025 bytes; DynamoDB allows at most 1024 bytes");
  assert.doesNotThrow(() => encodeText([s(over)], "partition"));
  refuses(
    () => encodeBinary([s("y".repeat(2046))], "partition"),
    "partition key is 2049 bytes; DynamoDB allows at most 2048 bytes",
  );
  refuses(() => encodeText([]), "sort key is empty");
  assert.equal(encodeText([], "none"), "");
});

test("truncation cuts at a character boundary, never inside an escape", () => {
  assert.equal(truncateForText(`${"x".repeat(1020)}€`, false, 1024), "x".repeat(1020));
  assert.equal(truncateForText(`${"x".repeat(1019)}€`, false, 1023), "x".repeat(1019));
  const spaces = " ".repeat(100);
  for (let budget = 0; budget < 40; budget++) {
    const kept = truncateForText(spaces, false, budget);
    const key = encodeText([s(kept)]);
    assert.ok(key.length <= Math.max(budget, 2), `budget ${budget}: ${key}`);
    assert.ok(key.length + 2 > budget, `budget ${budget} left room`);
    assert.deepEqual(decodeText(key), [s(kept)]);
  }
  assert.equal(truncateForText("ab€", true, 13), "ab€");
  assert.equal(truncateForText("ab€", true, 12), "ab");
  assert.equal(truncateForText("a😀", false, 5), "a", "a surrogate pair is one character");
  assert.equal(truncateForBinary("a\0b", 6), "a\0");
  assert.equal(truncateForBinary("a\0b", 5), "a");
});

test("hierarchical keys escape # and % in a segment and split back", () => {
  assert.equal(hierKey(["35e9", "3fe6"]), "35e9#3fe6");
  const tricky = hierKey(["TAG", "C#", "100%", ""]);
  assert.equal(tricky, "TAG#C%23#100%25#");
  assert.deepEqual(splitHier(tricky), ["TAG", "C#", "100%", ""]);
  assert.deepEqual(splitHier(hierKey(["%23", "#%", "%2523"])), ["%23", "#%", "%2523"]);
  assert.deepEqual(splitHier("ACCOUNT#12345#ON"), ["ACCOUNT", "12345", "ON"]);
  refuses(() => splitHier("A#50%off"), "'%' must start %23");
  refuses(() => hierKey(["k".repeat(2049)]), "partition key is 2049 bytes");
  refuses(() => hierKey([""]), "partition key is empty");
});
