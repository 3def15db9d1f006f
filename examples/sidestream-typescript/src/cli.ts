#!/usr/bin/env node
/**
 * `sidestream-client`: the package from the command line. `grid` prints a scope's rows as
 * `sidestream grid --output json` prints them; `counter` increments and reads a sharded counter;
 * `key` encodes and decodes keys line by line as `sidestream key` does. DynamoDB's endpoint,
 * Region and credentials come from the environment, as the AWS SDK reads them.
 */

import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

import { Counters } from "./counters.js";
import { canonicalJson } from "./dynamo.js";
import { IndexReader, type Resume, parseIndexes, rowJson } from "./index.js";
import { type Component, decodeBinary, decodeText, encodeBinary, encodeText } from "./keys.js";

const USAGE = `usage:
  sidestream-client grid --table BASE --nulls-index GSI --scope V [--scope V …] --field F
                         [--indexes JSON] [--index NAME] [--desc] [--limit N] [--pages N] [--attributes A,B]
      (--indexes defaults to $MULTIKEY_INDEXES, --nulls-index to $GRID_NULLS_INDEX; $MULTIKEY_INDEX_TABLE
       names the table of an index whose definition leaves it out)
  sidestream-client counter increment --table T --name N --shards N [--by=N] [--partition-key pk] [--regions R --region r]
  sidestream-client counter total     --table T --name N [--partition-key pk]
  sidestream-client counter exact     --table T --name N --shards N [--partition-key pk] [--regions R]
  sidestream-client key encode [--binary] [--desc 0,2] [--partition]   (one JSON array of typed values a line)
  sidestream-client key decode [--binary] [--desc 0,2]                 (one key a line)`;

/** A mistake in the command line: reported with the usage. */
class UsageError extends Error {}

function required(value: string | undefined, flag: string): string {
  if (value === undefined) throw new UsageError(`${flag} is required`);
  return value;
}

function integer(value: string, flag: string): number {
  if (!/^[0-9]+$/.test(value)) {
    throw new UsageError(`${flag} takes a non-negative integer, not ${JSON.stringify(value)}`);
  }
  return Number(value);
}

/** `grid`: pages of a scope's items sorted by a field, one JSON line per row. */
async function grid(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      table: { type: "string" },
      indexes: { type: "string" },
      index: { type: "string" },
      "nulls-index": { type: "string" },
      scope: { type: "string", multiple: true },
      field: { type: "string" },
      desc: { type: "boolean", default: false },
      limit: { type: "string", default: "20" },
      pages: { type: "string", default: "1" },
      attributes: { type: "string", multiple: true },
    },
  });
  // As the stack's functions are configured: the definition, its default index table, the nulls index.
  const { MULTIKEY_INDEXES, MULTIKEY_INDEX_TABLE, GRID_NULLS_INDEX } = process.env;
  const indexes = required(values.indexes ?? MULTIKEY_INDEXES, "--indexes (or MULTIKEY_INDEXES)");
  const reader = new IndexReader({
    client: new DynamoDBClient({}),
    indexes: parseIndexes(indexes, MULTIKEY_INDEX_TABLE),
    ...(values.index !== undefined && { index: values.index }),
    table: required(values.table, "--table"),
    nullsIndex: required(values["nulls-index"] ?? GRID_NULLS_INDEX, "--nulls-index (or GRID_NULLS_INDEX)"),
  });
  const query = {
    scope: values.scope ?? [],
    field: required(values.field, "--field"),
    descending: values.desc,
    limit: integer(values.limit, "--limit"),
    attributes: (values.attributes ?? []).flatMap((list) => list.split(",")),
  };
  if (query.scope.length === 0) throw new UsageError("--scope is required");
  let after: Resume | null = null;
  for (let pages = integer(values.pages, "--pages"); pages > 0; pages--) {
    const page = await reader.page(query, after);
    for (const row of page.rows) process.stdout.write(`${rowJson(row)}\n`);
    after = page.next;
    if (after === null) break;
  }
  return 0;
}

/** `counter increment|total|exact`. */
async function counter(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      table: { type: "string" },
      name: { type: "string" },
      by: { type: "string", default: "1" },
      shards: { type: "string" },
      "partition-key": { type: "string", default: "pk" },
      regions: { type: "string", default: "1" },
      region: { type: "string", default: "0" },
    },
  });
  const [action, ...extra] = positionals;
  if (extra.length > 0 || (action !== "increment" && action !== "total" && action !== "exact")) {
    throw new UsageError("counter takes one of increment, total, exact");
  }
  const name = required(values.name, "--name");
  const counters = new Counters(new DynamoDBClient({}), required(values.table, "--table"), {
    // The total item's key does not depend on the layout.
    shards: integer(action === "total" ? (values.shards ?? "1") : required(values.shards, "--shards"), "--shards"),
    partitionKey: values["partition-key"],
    regions: integer(values.regions, "--regions"),
    region: integer(values.region, "--region"),
  });
  switch (action) {
    case "increment": {
      if (!/^[+-]?[0-9]+$/.test(values.by)) {
        throw new UsageError(`--by takes an integer, not ${JSON.stringify(values.by)}`);
      }
      const sent = await counters.increment(name, BigInt(values.by));
      console.log(canonicalJson({ ...sent, by: sent.by.toString() }));
      break;
    }
    case "total":
      console.log(String(await counters.total(name)));
      break;
    case "exact":
      console.log(String(await counters.exact(name)));
      break;
  }
  return 0;
}

/** Strict standard base64, as Rust's `base64` STANDARD engine decodes it. */
function fromBase64(text: string): Uint8Array {
  const bytes = Buffer.from(text, "base64");
  if (bytes.toString("base64") !== text) throw new Error(`not valid base64: ${JSON.stringify(text)}`);
  return new Uint8Array(bytes);
}

/** A component from `sidestream key`'s typed JSON: DynamoDB JSON plus `{"DATE":…}` and `{"DATETIME":…}`. */
function fromTypedJson(json: unknown, desc: boolean): Component {
  const entries = json !== null && typeof json === "object" && !Array.isArray(json) ? Object.entries(json) : [];
  const [kind, inner] = entries.length === 1 ? (entries[0] as [string, unknown]) : [];
  if (kind === undefined) {
    throw new Error(`expected an object with one type key like {"S":"text"}, got ${JSON.stringify(json)}`);
  }
  const text = (): string => {
    if (typeof inner !== "string") throw new Error(`${kind} takes a JSON string, got ${JSON.stringify(inner)}`);
    return inner;
  };
  const value = ((): Component => {
    switch (kind) {
      case "S":
        return { type: "string", value: text() };
      case "N":
        return { type: "number", value: text() };
      case "B":
        return { type: "binary", value: fromBase64(text()) };
      case "BOOL":
        if (typeof inner !== "boolean") throw new Error(`BOOL takes true or false, got ${JSON.stringify(inner)}`);
        return { type: "boolean", value: inner };
      case "NULL":
        if (inner !== true) throw new Error(`NULL takes true, got ${JSON.stringify(inner)}`);
        return { type: "null" };
      case "DATE":
        return { type: "date", value: text() };
      case "DATETIME":
        return { type: "datetime", value: text() };
      default:
        throw new Error(`unknown type ${JSON.stringify(kind)}: use S, N, B, BOOL, NULL, DATE or DATETIME`);
    }
  })();
  // Checked here, as `sidestream key` checks it, so that an error names its component.
  encodeText([value], "none");
  return desc ? { ...value, desc: true } : value;
}

/** A decoded component as `sidestream key decode` prints it. */
function toTypedJson(c: Component): unknown {
  switch (c.type) {
    case "null":
      return { NULL: true };
    case "boolean":
      return { BOOL: c.value };
    case "number":
      return { N: c.value };
    case "string":
      return { S: c.value };
    case "binary":
      return { B: Buffer.from(c.value).toString("base64") };
    case "date":
      return { DATE: c.value };
    case "datetime":
      return { DATETIME: c.value };
  }
}

function parseJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch (e) {
    throw new Error(`line is not JSON: ${(e as Error).message}`);
  }
}

/** `key encode|decode`: one line in, one JSON line out; a line that fails gets `{"error":…}` and the exit status is 1. */
async function key(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      binary: { type: "boolean", default: false },
      desc: { type: "string" },
      partition: { type: "boolean", default: false },
    },
  });
  const [action, ...extra] = positionals;
  if (extra.length > 0 || (action !== "encode" && action !== "decode")) {
    throw new UsageError("key takes encode or decode");
  }
  const desc = values.desc === undefined ? null : new Set(values.desc.split(",").map((p) => integer(p, "--desc")));
  const convert = action === "encode" ? encodeLine : decodeLine;
  let failed = false;
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    let answer: unknown;
    try {
      answer = convert(line);
    } catch (e) {
      failed = true;
      answer = { error: (e as Error).message };
    }
    process.stdout.write(`${JSON.stringify(answer)}\n`);
  }
  return failed ? 1 : 0;

  function encodeLine(line: string): unknown {
    const json = parseJson(line);
    if (!Array.isArray(json)) throw new Error('expected a JSON array of typed values, like [{"S":"Open"},{"N":"42"}]');
    const tuple = json.map((item: unknown, position) => {
      try {
        return fromTypedJson(item, desc?.has(position) === true);
      } catch (e) {
        throw new Error(`component ${position}: ${(e as Error).message}`);
      }
    });
    const limit = values.partition ? "partition" : "sort";
    return values.binary
      ? { B: Buffer.from(encodeBinary(tuple, limit)).toString("base64") }
      : { S: encodeText(tuple, limit) };
  }

  function decodeLine(line: string): unknown {
    const field = values.binary ? "B" : "S";
    let text = line;
    if (line.trimStart().startsWith("{")) {
      const held: unknown = (parseJson(line) as Record<string, unknown> | null)?.[field];
      if (typeof held !== "string") {
        throw new Error(`expected {"${field}":…} holding a ${values.binary ? "base64 B value" : "S value"}`);
      }
      text = held;
    }
    const tuple = values.binary ? decodeBinary(fromBase64(text.trim())) : decodeText(text);
    if (desc !== null) {
      tuple.forEach((c, position) => {
        if (c.desc === true && !desc.has(position)) {
          throw new Error(`component ${position} is descending but --desc does not list it`);
        }
        if (c.desc !== true && desc.has(position)) {
          throw new Error(`component ${position} is ascending but --desc lists it`);
        }
      });
    }
    return tuple.map(toTypedJson);
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "grid":
      return grid(rest);
    case "counter":
      return counter(rest);
    case "key":
      return key(rest);
    case "help":
    case "--help":
    case "-h":
      console.log(USAGE);
      return 0;
    default:
      throw new UsageError(
        command === undefined ? "a command is required" : `unknown command ${JSON.stringify(command)}`,
      );
  }
}

// A reader that stops early (`| head`) ends the output quietly.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  process.exit(process.exitCode ?? 0);
});

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    const usage = error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
    console.error(`sidestream-client: ${(error as Error).message}${usage ? `\n${USAGE}` : ""}`);
    process.exitCode = usage ? 2 : 1;
  },
);
