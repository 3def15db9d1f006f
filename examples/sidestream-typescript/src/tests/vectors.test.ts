/** The frozen K1 and B1 vectors, each checked both ways: the "Key vectors" table of docs/formats.md, read from the file, and the Rust crate's golden vectors (`shared/key-codec/src/tests/golden.rs`). */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { type Component, compareTuples, decodeBinary, decodeText, encodeBinary, encodeText } from "../keys.js";

/** docs/formats.md at the repository's root, from `dist/tests/`. */
const FORMATS = new URL("../../../../docs/formats.md", import.meta.url);

/** Space-separated hex, `xN` repeating the previous byte to N in all (as the Rust tests write it). */
function hex(spec: string): Uint8Array {
  const out: number[] = [];
  for (const word of spec.split(/\s+/).filter(Boolean)) {
    if (word.startsWith("x")) {
      const last = out[out.length - 1] ?? 0;
      out.push(...Array<number>(Number(word.slice(1)) - 1).fill(last));
    } else {
      out.push(parseInt(word, 16));
    }
  }
  return Uint8Array.from(out);
}

/** One component as the table writes it: `"text"` (with `\0`), a number, a date, `true`, `false`, `null`, each maybe followed by ` desc`. */
function parseComponent(text: string): Component {
  const desc = text.endsWith(" desc");
  const body = desc ? text.slice(0, -" desc".length) : text;
  const value = ((): Component => {
    if (body.startsWith('"')) {
      return { type: "string", value: body.slice(1, -1).replace(/\\(.)/g, (_, c: string) => (c === "0" ? "\0" : c)) };
    }
    if (body === "true" || body === "false") return { type: "boolean", value: body === "true" };
    if (body === "null") return { type: "null" };
    if (/^\d{4}-\d{2}-\d{2}$/.test(body)) return { type: "date", value: body };
    return { type: "number", value: body };
  })();
  return desc ? { ...value, desc: true } : value;
}

/** `("In progress", -1.5 desc, "SRC#7")`: components split at commas outside quotes. */
function parseTuple(text: string): Component[] {
  const inner = text.replace(/^\(/, "").replace(/\)$/, "");
  return (inner.match(/"(?:\\.|[^"\\])*"(?: desc)?|[^,]+/g) ?? []).map((part) => parseComponent(part.trim()));
}

interface Vector {
  readonly tuple: Component[];
  readonly text: string;
  readonly binary: Uint8Array | null;
}

/** The rows of the "### Key vectors" table. */
function formatVectors(): Vector[] {
  const doc = readFileSync(FORMATS, "utf8");
  const start = doc.indexOf("### Key vectors");
  assert.ok(start >= 0, "docs/formats.md has a Key vectors section");
  const lines = doc.slice(start).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const end = lines.findIndex((l, i) => i > first && !l.startsWith("|"));
  // The header row and the separator row, then one vector a row.
  return lines.slice(first + 2, end).map((line) => {
    const cells = line
      .split("|")
      .slice(1, -1)
      .map((c) => c.trim());
    const [tuple = "", text = "", binary = ""] = cells;
    const unquote = (cell: string) => cell.replace(/^`/, "").replace(/`$/, "");
    return { tuple: parseTuple(tuple), text: unquote(text), binary: binary === "" ? null : hex(unquote(binary)) };
  });
}

/** The decoded tuple is the tuple: the same types and directions, and equal values (numbers by exact value, datetimes as instants). */
function assertSameTuple(decoded: Component[], tuple: Component[], what: string): void {
  assert.equal(decoded.length, tuple.length, what);
  decoded.forEach((c, i) => {
    const want = tuple[i] as Component;
    assert.equal(c.type, want.type, what);
    assert.equal(c.desc === true, want.desc === true, what);
    assert.equal(compareTuples([c], [want]), 0, `${what}: ${JSON.stringify(c)} is ${JSON.stringify(want)}`);
  });
}

function checkVector({ tuple, text, binary }: Vector): void {
  assert.equal(encodeText(tuple), text, `K1 of ${JSON.stringify(tuple)}`);
  assertSameTuple(decodeText(text), tuple, `K1 decoding of ${text}`);
  if (binary !== null) {
    assert.deepEqual(encodeBinary(tuple), binary, `B1 of ${JSON.stringify(tuple)}`);
    assertSameTuple(decodeBinary(binary), tuple, `B1 decoding of ${JSON.stringify(tuple)}`);
  }
}

test("every vector of docs/formats.md's Key vectors table encodes and decodes both ways", () => {
  const vectors = formatVectors();
  assert.ok(vectors.length >= 16, `the table has its ${vectors.length} rows`);
  for (const vector of vectors) checkVector(vector);
});

test("decoding gives the table's tuples back exactly, canonical values and directions", () => {
  const [mixed] = formatVectors().filter((v) => v.text === "sIn$_progress#MA1.5#sSRC$b7#");
  assert.ok(mixed);
  assert.deepEqual(decodeText(mixed.text), [
    { type: "string", value: "In progress" },
    { type: "number", value: "-1.5", desc: true },
    { type: "string", value: "SRC#7" },
  ]);
  assert.deepEqual(decodeText("nZ02610000000000000000000000000#"), [
    { type: "number", value: "10000000000000000000000000" },
  ]);
});

const n = (value: string, desc = false): Component =>
  desc ? { type: "number", value, desc } : { type: "number", value };
const s = (value: string, desc = false): Component =>
  desc ? { type: "string", value, desc } : { type: "string", value };
const dt = (value: string, desc = false): Component =>
  desc ? { type: "datetime", value, desc } : { type: "datetime", value };
const date = (value: string): Component => ({ type: "date", value });
const bytes = (value: number[], desc = false): Component => ({
  type: "binary",
  value: Uint8Array.from(value),
  ...(desc && { desc }),
});
const bool = (value: boolean, desc = false): Component => ({ type: "boolean", value, ...(desc && { desc }) });
const nil = (desc = false): Component => ({ type: "null", ...(desc && { desc }) });

/** golden.rs, vector for vector. */
const GOLDEN: [Component[], string, string][] = [
  [[n("0")], "n0#", "41"],
  [[n("7")], "nA7#", "42 82 8c"],
  [[n("42")], "nB42#", "42 83 54"],
  [[n("42.5")], "nB42.5#", "42 83 55 64"],
  [[n("420")], "nC420#", "42 84 54"],
  [[n("2024")], "nD2024#", "42 85 29 30"],
  [[n("0.5")], "n@.5#", "42 81 64"],
  [[n("0.05")], "n@.05#", "42 80 64"],
  [[n("-1")], "n-Z8~#", "40 7d eb"],
  [[n("-42")], "n-Y57~#", "40 7c ab"],
  [[n("-42.5")], "n-Y57.4~#", "40 7c aa 9b"],
  [[n("-0.5")], "n-[.4~#", "40 7e 9b"],
  [[n("9.99E24")], "nY9990000000000000000000000#", "42 9a c7 b4"],
  [[n("1E25")], "nZ02610000000000000000000000000#", "42 9b 14"],
  [
    [n("12345678901234567890123456789012345678")],
    "nZ03812345678901234567890123456789012345678#",
    "42 a7 19 45 71 9d b5 19 45 71 9d b5 19 45 71 9d b5 19 45 71 9c",
  ],
  [[n("1E-130")], `n@.${"0".repeat(129)}1#`, "42 00 14"],
  [[n("-1E-130")], `n-[.${"9".repeat(129)}8~#`, "40 ff eb"],
  [[n("9.9999999999999999999999999999999999999E+125")], `nZ126${"9".repeat(38)}${"0".repeat(88)}#`, "42 ff c7 x18 c6"],
  [
    [n("-9.9999999999999999999999999999999999999E+125")],
    `n-A873${"0".repeat(38)}${"9".repeat(88)}~#`,
    "40 00 38 x18 39",
  ],
  [[n("42", true)], "M-Y57~#", "bd 7c ab"],
  [[n("-42", true)], "MB42#", "bf 83 54"],
  [[n("0", true)], "M0#", "be"],
  [[s("")], "s#", "50 00 01"],
  [[s("a b")], "sa$_b#", "50 61 20 62 00 01"],
  [[s("a#b")], "sa$bb#", "50 61 23 62 00 01"],
  [[s("a$")], "sa$c#", "50 61 24 00 01"],
  [[s("a%")], "sa%#", "50 61 25 00 01"],
  [[s("\0")], "s$?#", "50 00 ff 00 01"],
  [[s("\uFFFF")], "s\uFFFF#", "50 ef bf bf 00 01"],
  [[s("😀")], "s😀#", "50 f0 9f 98 80 00 01"],
  [[s("Über")], "sÜber#", "50 c3 9c 62 65 72 00 01"],
  [[s("a", true)], "H9e~#", "af 9e ff fe"],
  [[s("ab", true)], "H9e9d~#", "af 9e 9d ff fe"],
  [[s("", true)], "H~#", "af ff fe"],
  [[date("2024-05-01")], "d2024-05-01#", "20 80 00 4d 84 00"],
  [[date("0999-01-02")], "d0999-01-02#", "20 7f fa 96 a7 00"],
  [[date("0000-01-01")], "d0000-01-01#", "20 7f f5 05 58 00"],
  [[dt("2024-05-01T12:34:56Z")], "d2024-05-01T12:34:56#", "20 80 00 4d 84 01 29 32 4b fd 60 00"],
  [[dt("2024-05-01T12:34:56.500Z")], "d2024-05-01T12:34:56.5#", "20 80 00 4d 84 01 29 32 69 ca c5 00"],
  [[dt("2024-05-01T12:34:56Z", true)], "W7975-94-98T87:65:43~#", "df 7f ff b2 7b fe d6 cd b4 02 9f ff"],
  [[bool(true), bool(false), nil()], "t#f#%#", "60 30 01"],
  [[bool(true, true), bool(false, true), nil(true)], "G#U#~#", "9f cf fe"],
  [[bytes([0x00, 0xff])], "b00ff#", "10 00 ff ff 00 01"],
  [[bytes([0x00, 0xff], true)], "Yff00~#", "ef ff 00 00 ff fe"],
  [[s("Open"), n("42"), s("SRC-1")], "sOpen#nB42#sSRC-1#", "50 4f 70 65 6e 00 01 42 83 54 50 53 52 43 2d 31 00 01"],
  [[s("Open"), nil(), s("x")], "sOpen#%#sx#", "50 4f 70 65 6e 00 01 01 50 78 00 01"],
  [[s("Open#1"), n("7", true)], "sOpen$b1#M-Z2~#", "50 4f 70 65 6e 23 31 00 01 bd 7d 73"],
];

test("the Rust crate's golden vectors encode and decode both ways", () => {
  for (const [tuple, text, binary] of GOLDEN) checkVector({ tuple, text, binary: hex(binary) });
});
