/**
 * An in-memory stand-in for DynamoDB, for tests without a network: `Query` on a table or a
 * global secondary index (equality key conditions, order, `Limit`, `ExclusiveStartKey`,
 * `LastEvaluatedKey` whenever `Limit` stops it), `BatchGetItem` (projections, a share of keys left
 * unprocessed the first time), `GetItem`, and `TransactWriteItems` of `ADD` updates with
 * idempotency tokens. Only what the package sends is modelled.
 */

import { type AttributeValue, type DynamoDBClient, TransactionCanceledException } from "@aws-sdk/client-dynamodb";

import type { Item } from "../dynamo.js";
import { compareBytes, utf8 } from "../keys.js";

/** A table's or an index's key attributes. */
interface KeySchema {
  readonly hash: string;
  readonly range?: string;
}

interface Table extends KeySchema {
  /** By primary key, as `keyOf` writes it. */
  readonly items: Map<string, Item>;
  readonly indexes: Record<string, KeySchema>;
}

/** An item's primary key in `table` as text. */
function keyOf(table: KeySchema, item: Item): string {
  return JSON.stringify([item[table.hash], table.range === undefined ? null : item[table.range]]);
}

/** Any command the SDK would send: its class names the operation. */
interface Command {
  readonly input: Record<string, unknown>;
}

function same(a: AttributeValue | undefined, b: AttributeValue | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** A key value in a form that sorts as DynamoDB sorts it: S by UTF-8 bytes, B by bytes, N by value (the fake's numbers are small integers). */
function sortable(value: AttributeValue | undefined): Uint8Array | number {
  if (value?.N !== undefined) return Number(value.N);
  return value?.B ?? utf8(value?.S ?? "");
}

function compareSortable(a: Uint8Array | number, b: Uint8Array | number): number {
  return typeof a === "number" || typeof b === "number" ? Math.sign(Number(a) - Number(b)) : compareBytes(a, b);
}

/** Resolves a projection expression's names: top-level attributes and `map.key` paths. */
function project(item: Item, expression: string | undefined, names: Record<string, string> | undefined): Item {
  if (expression === undefined) return { ...item };
  const out: Item = {};
  for (const part of expression.split(",").map((p) => p.trim())) {
    const [top, key] = part.split(".").map((n) => names?.[n] ?? n) as [string, string | undefined];
    const value = item[top];
    if (value === undefined) continue;
    if (key === undefined) {
      out[top] = value;
    } else if (value.M?.[key] !== undefined) {
      out[top] = { M: { ...(out[top]?.M ?? {}), [key]: value.M[key] as AttributeValue } };
    }
  }
  return out;
}

export class FakeDynamo {
  readonly #tables = new Map<string, Table>();
  readonly #tokens = new Set<string>();
  /** Each table's and index's items in key order, made again after a put. */
  readonly #sorted = new Map<string, Item[]>();
  /** Every command sent, by operation, in order. */
  readonly sent: { readonly operation: string; readonly input: Record<string, unknown> }[] = [];
  /** Whether each `BatchGetItem` leaves its last third of keys unprocessed the first time it sees them. */
  unprocessedOnce = false;
  /** How many `TransactWriteItems` to cancel with a `TransactionConflict` before applying one. */
  conflicts = 0;
  readonly #seenKeys = new Set<string>();

  /** This stand-in where the package wants a client. */
  get client(): DynamoDBClient {
    return this as unknown as DynamoDBClient;
  }

  createTable(name: string, key: KeySchema, indexes: Record<string, KeySchema> = {}): void {
    this.#tables.set(name, { ...key, items: new Map(), indexes });
  }

  put(table: string, item: Item): void {
    const t = this.#table(table);
    t.items.set(keyOf(t, item), item);
    this.#sorted.clear();
  }

  items(table: string): Item[] {
    return [...this.#table(table).items.values()];
  }

  #table(name: string): Table {
    const table = this.#tables.get(name);
    if (table === undefined) throw new Error(`no table ${name}`);
    return table;
  }

  async send(command: Command): Promise<unknown> {
    const operation = command.constructor.name.replace(/Command$/, "");
    this.sent.push({ operation, input: command.input });
    switch (operation) {
      case "Query":
        return this.#query(command.input);
      case "BatchGetItem":
        return this.#batchGet(command.input);
      case "GetItem":
        return this.#getItem(command.input);
      case "TransactWriteItems":
        return this.#transactWrite(command.input);
      default:
        throw new Error(`the fake does not do ${operation}`);
    }
  }

  #query(input: Record<string, unknown>): unknown {
    const table = this.#table(input.TableName as string);
    const schema = input.IndexName === undefined ? table : table.indexes[input.IndexName as string];
    if (schema === undefined) throw new Error(`no index ${String(input.IndexName)}`);
    const names = input.ExpressionAttributeNames as Record<string, string>;
    const values = input.ExpressionAttributeValues as Record<string, AttributeValue>;
    const conditions = (input.KeyConditionExpression as string).split(" AND ").map((c) => {
      const [name = "", value = ""] = c.split(" = ");
      return [names[name] as string, values[value]] as const;
    });
    const range = schema.range;
    const sortedKey = `${String(input.TableName)}/${String(input.IndexName)}`;
    const sorted =
      this.#sorted.get(sortedKey) ??
      [...table.items.values()]
        .map((item) => ({ item, order: sortable(range === undefined ? undefined : item[range]) }))
        .sort((a, b) => compareSortable(a.order, b.order))
        .map(({ item }) => item);
    this.#sorted.set(sortedKey, sorted);
    let found = sorted.filter((item) => conditions.every(([name, value]) => same(item[name], value)));
    if (input.ScanIndexForward === false) found.reverse();
    const keyNames = [
      ...new Set([
        table.hash,
        ...(table.range === undefined ? [] : [table.range]),
        schema.hash,
        ...(range === undefined ? [] : [range]),
      ]),
    ];
    const start = input.ExclusiveStartKey as Item | undefined;
    if (start !== undefined) {
      found = found.slice(found.findIndex((item) => keyNames.every((n) => same(item[n], start[n]))) + 1);
    }
    const limit = (input.Limit as number | undefined) ?? Infinity;
    const page = found.slice(0, limit);
    const last = page[page.length - 1];
    // Projected KEYS_ONLY for an index, as a lean nulls index is.
    const items =
      input.IndexName === undefined ? page : page.map((item) => project(item, keyNames.join(", "), undefined));
    return {
      Items: items,
      ...(page.length === limit &&
        last !== undefined && { LastEvaluatedKey: project(last, keyNames.join(", "), undefined) }),
    };
  }

  #batchGet(input: Record<string, unknown>): unknown {
    const responses: Record<string, Item[]> = {};
    const unprocessed: Record<string, unknown> = {};
    for (const [name, wanted] of Object.entries(input.RequestItems as Record<string, Record<string, unknown>>)) {
      const table = this.#table(name);
      const keys = wanted.Keys as Item[];
      if (keys.length > 100) throw new Error("BatchGetItem takes at most 100 keys");
      const fresh = keys.filter((k) => !this.#seenKeys.has(JSON.stringify(k)));
      keys.forEach((k) => this.#seenKeys.add(JSON.stringify(k)));
      const leave =
        this.unprocessedOnce && fresh.length === keys.length ? keys.slice(Math.ceil((keys.length * 2) / 3)) : [];
      const answer = keys.slice(0, keys.length - leave.length);
      responses[name] = answer
        .flatMap((key): Item[] => {
          const item = table.items.get(keyOf(table, key));
          return item === undefined ? [] : [item];
        })
        .map((item) =>
          project(
            item,
            wanted.ProjectionExpression as string | undefined,
            wanted.ExpressionAttributeNames as Record<string, string> | undefined,
          ),
        )
        .reverse();
      if (leave.length > 0) unprocessed[name] = { ...wanted, Keys: leave };
    }
    return { Responses: responses, UnprocessedKeys: unprocessed };
  }

  #getItem(input: Record<string, unknown>): unknown {
    const table = this.#table(input.TableName as string);
    const key = input.Key as Item;
    const item = table.items.get(keyOf(table, key));
    return item === undefined
      ? {}
      : {
          Item: project(
            item,
            input.ProjectionExpression as string,
            input.ExpressionAttributeNames as Record<string, string>,
          ),
        };
  }

  #transactWrite(input: Record<string, unknown>): unknown {
    if (this.conflicts > 0) {
      this.conflicts -= 1;
      throw new TransactionCanceledException({
        message: "Transaction cancelled",
        $metadata: {},
        CancellationReasons: [{ Code: "TransactionConflict", Message: "Transaction is ongoing for the item" }],
      });
    }
    const token = input.ClientRequestToken as string;
    if (this.#tokens.has(token)) return {};
    this.#tokens.add(token);
    for (const action of input.TransactItems as { Update: Record<string, unknown> }[]) {
      const update = action.Update;
      if (update.UpdateExpression !== "ADD #count :n") {
        throw new Error(`the fake adds only: ${String(update.UpdateExpression)}`);
      }
      const table = this.#table(update.TableName as string);
      const key = update.Key as Item;
      const attribute = (update.ExpressionAttributeNames as Record<string, string>)["#count"] as string;
      const by = BigInt((update.ExpressionAttributeValues as Record<string, AttributeValue>)[":n"]?.N ?? "0");
      const item = table.items.get(keyOf(table, key));
      const count = BigInt(item?.[attribute]?.N ?? "0") + by;
      this.put(update.TableName as string, { ...item, ...key, [attribute]: { N: count.toString() } });
    }
    return {};
  }
}
