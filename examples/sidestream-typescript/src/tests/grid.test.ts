/** The index reader over an in-memory DynamoDB: the grid's rows in the grid's order, every item once, full pages; the row lines pinned as `ops/operations/src/grid/output.rs` pins them; the definition checked as the indexer checks it. */

import assert from "node:assert/strict";
import { test } from "node:test";

import type { AttributeValue } from "@aws-sdk/client-dynamodb";

import type { Item } from "../dynamo.js";
import { keyComponent } from "../entries.js";
import { IndexReader, type Row, parseIndexes, rowJson } from "../index.js";
import { compareBytes, encodeText, hierKey, truncateForText, utf8 } from "../keys.js";
import { FakeDynamo } from "./fake-dynamo.js";

const INDEXES = parseIndexes(`{
  "base_key": ["id"],
  "indexes": [{
    "name": "custom-fields",
    "table": "issue-attrib-index",
    "source": "custom_fields",
    "scope": ["project"],
    "tiebreakers": ["num"],
    "include": ["name", "state"]
  }]
}`);

const FIELD = "3fe6";

/** The reader of the stand-in tables. */
function readerOf(dynamo: FakeDynamo): IndexReader {
  return new IndexReader({ client: dynamo.client, indexes: INDEXES, table: "issues", nullsIndex: "by-project" });
}

test("the row lines are the ones output.rs pins, keys in code-point order", () => {
  const rows: Row[] = [
    {
      phase: "index",
      value: { N: "42" },
      key: { id: { S: "af34" } },
      attributes: {
        state: { S: "open" },
        num: { N: "3" },
        name: { S: "Girder" },
        custom_fields: { M: { "3fe6": { N: "42" } } },
      },
    },
    { phase: "nulls", value: null, key: { id: { S: "b712" } }, attributes: { num: { N: "12" }, name: { S: "Paint" } } },
  ];
  assert.deepEqual(rows.map(rowJson), [
    `{"attributes":{"custom_fields":{"M":{"3fe6":{"N":"42"}}},"name":{"S":"Girder"},"num":{"N":"3"},"state":{"S":"open"}},"key":{"id":{"S":"af34"}},"phase":"index","value":{"N":"42"}}`,
    `{"attributes":{"name":{"S":"Paint"},"num":{"N":"12"}},"key":{"id":{"S":"b712"}},"phase":"nulls","value":null}`,
  ]);
  // Code-point order, as serde_json's: U+FFFF before U+1F600, which JavaScript's own order puts first.
  const keys = { "😀": { B: "AP8=" }, "\uFFFF": { S: "w" }, é: { S: "x" }, z: { S: "y" } };
  assert.equal(
    rowJson({ phase: "nulls", value: null, key: keys, attributes: {} }),
    `{"attributes":{},"key":{"z":{"S":"y"},"é":{"S":"x"},"\uFFFF":{"S":"w"},"😀":{"B":"AP8="}},"phase":"nulls","value":null}`,
  );
});

test("the definition is checked as the indexer checks it", () => {
  const index = INDEXES.indexes[0];
  assert.equal(index?.partitionKey, "pk");
  assert.equal(index?.sortKey, "sk");
  assert.equal(index?.keyFormat, "text");
  const refused: [json: string, says: string][] = [
    [`{"base_key": [], "indexes": []}`, "base_key must name 1 or 2 attributes"],
    [`{"base_key": ["id"], "indexes": []}`, "indexes is empty"],
    [
      `{"base_key": ["id"], "indexes": [{"name": "i", "table": "t", "source": "f", "colour": "red"}]}`,
      `unknown field "colour"`,
    ],
    [
      `{"base_key": ["id"], "indexes": [{"name": "i", "table": "t", "source": "f", "include": ["value"]}]}`,
      "appears as the value attribute and as include",
    ],
    [
      `{"base_key": ["id"], "indexes": [{"name": "i", "table": "t", "source": "id"}]}`,
      "is also a key, scope or tiebreaker attribute",
    ],
    [
      `{"base_key": ["id"], "indexes": [{"name": "i", "table": "t", "source": "f", "key_format": "hex"}]}`,
      `"text" or "binary"`,
    ],
    [
      `{"base_key": ["id"], "indexes": [{"name": "i", "table": "t", "source": "f"}, {"name": "j", "table": "t", "source": "g"}]}`,
      "used by an earlier index",
    ],
  ];
  for (const [json, says] of refused) {
    assert.throws(
      () => parseIndexes(json),
      (e: Error) => e.message.includes(says),
      says,
    );
  }
  // An index without a table is in MULTIKEY_INDEX_TABLE's, the stack's own index table.
  const tableless = `{"base_key": ["PK", "SK"], "indexes": [{"name": "i", "source": "f", "scope": ["p"], "tiebreakers": ["n"]}]}`;
  assert.throws(
    () => parseIndexes(tableless),
    /indexes\[0\]\.table is missing: name the index table, or set MULTIKEY_INDEX_TABLE/,
  );
  assert.equal(parseIndexes(tableless, "stack-index").indexes[0]?.table, "stack-index");
  const client = new FakeDynamo().client;
  assert.throws(
    () =>
      new IndexReader({
        client,
        indexes: parseIndexes(
          `{"base_key": ["id"], "indexes": [{"name": "i", "table": "t", "source": "f", "scope": ["p"]}]}`,
        ),
        table: "t",
        nullsIndex: "g",
      }),
    /needs a tiebreaker/,
  );
  assert.throws(
    () => new IndexReader({ client, indexes: INDEXES, index: "nope", table: "t", nullsIndex: "g" }),
    /no index named "nope"/,
  );
});

/** A deterministic spread of values for the field: numbers (repeated, to exercise the tiebreaker), strings, every scalar type, and values the indexer cannot key. */
function fieldValue(i: number): AttributeValue | undefined {
  switch (i % 13) {
    case 0:
      return undefined;
    case 1:
      return { N: String((i * 7) % 23) };
    case 2:
      return { N: `-${(i % 5) + 0.5}` };
    case 3:
      return { S: ["open", "Open", "a b", "a#b", "é", "😀", ""][i % 7] as string };
    case 4:
      return { BOOL: i % 2 === 0 };
    case 5:
      return { NULL: true };
    case 6:
      return { B: Uint8Array.of(i % 3, 0, 255) };
    case 7:
      return { L: [{ S: "a list" }] }; // cannot be keyed: listed in the nulls phase
    case 8:
      return { M: { nested: { N: "1" } } }; // nor a map
    case 9:
      return { B: new Uint8Array(1100).fill(i % 256) }; // nor a binary longer than a sort key
    case 10:
      return { S: `${"long ".repeat(300)}${i}` }; // a long string is cut in the key, and indexed
    default:
      return { N: String(1000 - i) };
  }
}


/** The base table and the index the indexer would have written for it, tombstones included. */
function stack(): { dynamo: FakeDynamo; items: Item[] } {
  const dynamo = new FakeDynamo();
  dynamo.createTable("issues", { hash: "id" }, { "by-project": { hash: "project", range: "num" } });
  dynamo.createTable("issue-attrib-index", { hash: "pk", range: "sk" });
  const items: Item[] = [];
  for (let i = 0; i < 260; i++) {
    const num = (i * 37) % 260; // every num once, not in id order
    // One item in 17 has no custom fields at all.
    const fields = i % 17 !== 16;
    const value = fields ? fieldValue(i) : undefined;
    const item: Item = {
      id: { S: `i${i.toString(16).padStart(3, "0")}` },
      project: { S: i % 10 === 9 ? "other" : "35e9" },
      num: { N: String(num) },
      name: { S: `Issue ${i}` },
      state: { S: i % 3 === 0 ? "closed" : "open" },
      ...(fields && { custom_fields: { M: { ...(value && { [FIELD]: value }), other: { S: "x" } } } }),
    };
    items.push(item);
    dynamo.put("issues", item);
    const keyed = value === undefined ? null : keyComponent(value);
    if (value === undefined || keyed === null || (value.B?.length ?? 0) > 1000) continue;
    const suffix = encodeText(
      [
        { type: "number", value: String(num) },
        { type: "string", value: item.id?.S as string },
      ],
      "none",
    );
    const fitted =
      keyed.type === "string"
        ? { ...keyed, value: truncateForText(keyed.value, false, 1024 - utf8(suffix).length) }
        : keyed;
    const pk = hierKey([item.project?.S as string, FIELD]);
    const sk = `${encodeText([fitted], "none")}${suffix}`;
    const { id, project, name, state } = item;
    dynamo.put("issue-attrib-index", {
      pk: { S: pk },
      sk: { S: sk },
      entry: { S: FIELD },
      value,
      id,
      project,
      num: item.num,
      name,
      state,
    } as Item);
    // A run of tombstones of removed entries around some of them.
    if (i % 4 === 0) {
      for (let t = 0; t < 40; t++) {
        dynamo.put("issue-attrib-index", {
          pk: { S: pk },
          sk: { S: `${sk}${t}` },
          sidestream_seq: { S: "0".repeat(40) },
          sidestream_expires: { N: "1800000000" },
        });
      }
    }
  }
  return { dynamo, items };
}

/** What the grid must print for the scope: the entries by sort key, then the items without one by num. */
function expectedRows(dynamo: FakeDynamo, items: Item[], descending: boolean, attributes: readonly string[]): string[] {
  const entries = dynamo
    .items("issue-attrib-index")
    .filter((e) => e.pk?.S === `35e9#${FIELD}` && e.sidestream_expires === undefined)
    .sort((a, b) => compareBytes(utf8(a.sk?.S ?? ""), utf8(b.sk?.S ?? "")));
  if (descending) entries.reverse();
  const indexed = new Set(entries.map((e) => e.id?.S));
  const base = new Map(items.map((item) => [item.id?.S, item]));
  const columns = ["num", "name", "state", ...attributes];
  const row = (from: Item, phase: Row["phase"], value: AttributeValue | undefined): string => {
    const pick = (names: string[]) =>
      Object.fromEntries(names.filter((n) => from[n] !== undefined).map((n) => [n, json(from[n] as AttributeValue)]));
    return rowJson({
      key: pick(["id"]),
      phase,
      value: value === undefined ? null : json(value),
      attributes: pick(columns),
    } as Row);
  };
  const withBase = (e: Item) => (attributes.length > 0 ? (base.get(e.id?.S) as Item) : e);
  return [
    ...entries.map((e) => row(withBase(e), "index", e.value)),
    ...items
      .filter((item) => item.project?.S === "35e9" && !indexed.has(item.id?.S))
      .sort((a, b) => Number(a.num?.N) - Number(b.num?.N))
      .map((item) => row(item, "nulls", undefined)),
  ];
}

/** DynamoDB JSON, written out independently of the package's. */
function json(value: AttributeValue): unknown {
  if (value.B !== undefined) return { B: Buffer.from(value.B).toString("base64") };
  if (value.M !== undefined) return { M: Object.fromEntries(Object.entries(value.M).map(([k, v]) => [k, json(v)])) };
  if (value.L !== undefined) return { L: value.L.map(json) };
  return value;
}

for (const descending of [false, true]) {
  test(`pages hold the grid's rows in its order, ${descending ? "descending" : "ascending"}, every page full but the last`, async () => {
    const { dynamo, items } = stack();
    dynamo.unprocessedOnce = true;
    const reader = new IndexReader({
      client: dynamo.client,
      indexes: INDEXES,
      table: "issues",
      nullsIndex: "by-project",
    });
    const expected = expectedRows(dynamo, items, descending, []);
    assert.ok(
      expected.some((r) => r.includes('"phase":"nulls"')) && expected.some((r) => r.includes('"phase":"index"')),
    );
    for (const limit of [1, 7, 20, 100]) {
      const printed: string[] = [];
      let after = null;
      do {
        const page = await reader.page({ scope: ["35e9"], field: FIELD, descending, limit }, after);
        after = page.next;
        if (after !== null) assert.equal(page.rows.length, limit, "a page is full while rows remain");
        printed.push(...page.rows.map(rowJson));
      } while (after !== null);
      assert.deepEqual(printed, expected, `limit ${limit}`);
    }
    const all: string[] = [];
    for await (const row of reader.rows({ scope: ["35e9"], field: FIELD, descending })) all.push(rowJson(row));
    assert.deepEqual(all, expected);
  });
}

test("attributes the index lacks are read from the base table, and the source shown only when asked for", async () => {
  const { dynamo, items } = stack();
  const reader = readerOf(dynamo);
  const printed: string[] = [];
  for await (const row of reader.rows({ scope: ["35e9"], field: FIELD, limit: 50, attributes: ["custom_fields"] }))
    printed.push(rowJson(row));
  assert.deepEqual(printed, expectedRows(dynamo, items, false, ["custom_fields"]));
  const before = dynamo.sent.length;
  const first = await reader.page({ scope: ["35e9"], field: FIELD, limit: 1 });
  assert.equal(first.rows.length, 1);
  assert.ok(
    dynamo.sent.slice(before).every((s) => s.operation === "Query"),
    "an index page of projected attributes reads no base item",
  );
});

test("a field no item has goes straight to the nulls phase; a scope of the wrong width is refused", async () => {
  const { dynamo, items } = stack();
  const reader = readerOf(dynamo);
  const rows: Row[] = [];
  for await (const row of reader.rows({ scope: ["35e9"], field: "nope", limit: 100 })) rows.push(row);
  assert.equal(rows.length, items.filter((i) => i.project?.S === "35e9").length);
  assert.ok(rows.every((r) => r.phase === "nulls"));
  await assert.rejects(reader.page({ scope: ["35e9", "x"], field: FIELD }), /give 1 scope values, not 2/);
  await assert.rejects(reader.page({ scope: ["35e9"], field: FIELD, limit: 101 }), /not between 1 and 100/);
});

test("a base table keyed by PK and SK: rows keyed by both, matched by both, neither shown as a column", async () => {
  const indexes = parseIndexes(`{"base_key": ["PK", "SK"], "indexes": [{"name": "fields", "table": "index",
    "source": "fields", "scope": ["projectId"], "tiebreakers": ["seq"], "include": ["title"]}]}`);
  const dynamo = new FakeDynamo();
  dynamo.createTable("base", { hash: "PK", range: "SK" }, { byProject: { hash: "projectId", range: "seq" } });
  dynamo.createTable("index", { hash: "pk", range: "sk" });
  for (let i = 0; i < 30; i++) {
    // Two items share each PK: only PK and SK together tell them apart.
    const item: Item = {
      PK: { S: `P#${i % 15}` },
      SK: { S: `ISSUE#${i}` },
      projectId: { S: "p1" },
      seq: { N: String(i) },
      title: { S: `Title ${i}` },
      fields: { M: i % 3 === 0 ? {} : { due: { S: `2026-0${1 + (i % 9)}-01` } } },
    };
    dynamo.put("base", item);
    const due = item.fields?.M?.due;
    if (due === undefined) continue;
    const key = [item.seq, item.PK, item.SK].map((v) =>
      v?.N !== undefined ? { type: "number" as const, value: v.N } : { type: "string" as const, value: v?.S ?? "" },
    );
    const sk = encodeText([{ type: "string", value: due.S as string }, ...key]);
    dynamo.put("index", {
      pk: { S: hierKey(["p1", "due"]) },
      sk: { S: sk },
      entry: { S: "due" },
      value: due,
      PK: item.PK,
      SK: item.SK,
      projectId: item.projectId,
      seq: item.seq,
      title: item.title,
    } as Item);
  }
  const reader = new IndexReader({ client: dynamo.client, indexes, table: "base", nullsIndex: "byProject" });
  const rows: Row[] = [];
  let after = null;
  do {
    const page = await reader.page({ scope: ["p1"], field: "due", limit: 4, attributes: ["fields", "SK"] }, after);
    rows.push(...page.rows);
    after = page.next;
  } while (after !== null);
  assert.equal(rows.length, 30);
  assert.equal(
    new Set(rows.map((r) => `${r.key.PK && JSON.stringify(r.key.PK)}|${JSON.stringify(r.key.SK)}`)).size,
    30,
    "every item once",
  );
  assert.deepEqual(Object.keys(rows[0]?.key ?? {}).sort(), ["PK", "SK"]);
  assert.deepEqual(
    Object.keys(rows[0]?.attributes ?? {}).sort(),
    ["fields", "seq", "title"],
    "SK is a key, not a column",
  );
  assert.deepEqual(
    rows.slice(20).map((r) => r.phase),
    Array(10).fill("nulls"),
  );
  const nullsSeq = rows.filter((r) => r.phase === "nulls").map((r) => Number((r.attributes.seq as { N: string }).N));
  assert.deepEqual(nullsSeq, [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]);
  const dues = rows.filter((r) => r.phase === "index").map((r) => (r.value as { S: string }).S);
  assert.deepEqual(dues, [...dues].sort());
});
