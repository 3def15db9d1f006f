/**
 * A direct reader of the multikey index: a scope's items sorted by one field, page by page, row
 * for row what `sidestream grid --output json` prints (`ops/operations/src/grid/`).
 *
 * The order: first every item with an index entry for the field, by the entry's sort key (value,
 * tiebreakers, base key), ascending or descending, tombstones left out. Then, in both orders,
 * every other item of the scope by its first tiebreaker ascending, read from the base table's
 * index by scope and tiebreaker (the "nulls index", `project-num` in the article): items that
 * lack the field, and items whose value the indexer cannot key. Each item appears exactly once.
 */

import { type DynamoDBClient, QueryCommand, type QueryCommandOutput } from "@aws-sdk/client-dynamodb";

import { EXPIRES_ATTRIBUTE, type IndexDefinition, type Indexes, VALUE_ATTRIBUTE } from "./definition.js";
import { type DynamoJson, type Item, type JsonItem, batchGet, canonicalJson, itemToJson, toJson } from "./dynamo.js";
import { hasEntry } from "./entries.js";
import { KeyError, hierKey } from "./keys.js";

export { type IndexDefinition, type Indexes, parseIndexes } from "./definition.js";
export type { DynamoJson, Item, JsonItem } from "./dynamo.js";

/** The largest page: one `BatchGetItem` holds 100 keys. */
export const MAX_LIMIT = 100;
/** Items per page unless asked otherwise, as `sidestream grid`'s. */
export const DEFAULT_LIMIT = 20;
/** How much further than all the page's earlier queries an index query reads once tombstones were met (`index_limit`, docs/grid-view.md). */
const TOMBSTONE_GROWTH = 16;

/** What the reader reads: one index of the definition, its base table, and the base table's index by scope and first tiebreaker. */
export interface ReaderOptions {
  readonly client: DynamoDBClient;
  /** The indexer's own definition (`parseIndexes(process.env.MULTIKEY_INDEXES)`). */
  readonly indexes: Indexes;
  /** Which index to read; needed when the definition has several. */
  readonly index?: string;
  /** The base table. */
  readonly table: string;
  /** The base table's global secondary index keyed by the scope attribute (a multi-attribute key for several) and the first tiebreaker. */
  readonly nullsIndex: string;
}

/** One page request. */
export interface GridQuery {
  /** The scope's values, one per scope attribute of the index (a project id). */
  readonly scope: readonly string[];
  /** The field: a key of the indexed map, or an element of the indexed list or set. */
  readonly field: string;
  /** Highest values first; items without an indexed value still come last. */
  readonly descending?: boolean;
  /** Items per page, 1 to 100 (20 unless given). */
  readonly limit?: number;
  /** Base attributes to show besides the index's (read from the base table with `BatchGetItem`). */
  readonly attributes?: readonly string[];
}

/** One item of a page: the JSON object `sidestream grid --output json` prints for it. */
export interface Row {
  /** The item's key in the base table. */
  readonly key: JsonItem;
  /** `index` (sorted by the field's value) or `nulls` (no indexed value, by the first tiebreaker). */
  readonly phase: "index" | "nulls";
  /** The field's value as the entry holds it; null in the nulls phase. */
  readonly value: DynamoJson | null;
  /** The first tiebreaker, the index's `include` attributes and those asked for, as the item has them. */
  readonly attributes: JsonItem;
}

/** Where the next page starts: a phase and the key to continue after (null: the phase's start). Unsigned: keep it server-side, or sign it yourself. */
export interface Resume {
  readonly phase: "index" | "nulls";
  readonly key: Item | null;
}

/** One page. */
export interface Page {
  readonly rows: readonly Row[];
  /** Where the next page starts; null after the last page. */
  readonly next: Resume | null;
}

/** `row` as `sidestream grid --output json` prints it: one line, keys in code-point order. */
export function rowJson(row: Row): string {
  return canonicalJson(row);
}

/** A query with its defaults filled in and checked. */
interface Asked {
  readonly scope: readonly string[];
  readonly field: string;
  readonly descending: boolean;
  readonly limit: number;
  readonly attributes: readonly string[];
}

/** How a phase ended: read to its end, or with more to read after `after` (null: from the phase's start). */
type PhaseEnd = { readonly more: false } | { readonly more: true; readonly after: Item | null };

/** Pages through one index's items, the way the grid does. */
export class IndexReader {
  readonly #client: DynamoDBClient;
  readonly #index: IndexDefinition;
  readonly #baseKey: readonly string[];
  readonly #table: string;
  readonly #nullsIndex: string;

  /** A reader of one index of `options.indexes`. The index needs a scope and a tiebreaker: the nulls index's keys. */
  constructor(options: ReaderOptions) {
    const { indexes } = options;
    const index =
      options.index === undefined
        ? indexes.indexes.length === 1
          ? indexes.indexes[0]
          : undefined
        : indexes.indexes.find((i) => i.name === options.index);
    if (index === undefined) {
      throw new Error(
        options.index === undefined
          ? `MULTIKEY_INDEXES defines ${indexes.indexes.length} indexes; name the one to read`
          : `MULTIKEY_INDEXES has no index named ${JSON.stringify(options.index)}`,
      );
    }
    if (index.scope.length === 0) {
      throw new Error(`index ${index.name}: the grid needs a scope attribute (the nulls index's partition key)`);
    }
    if (index.tiebreakers.length === 0) {
      throw new Error(`index ${index.name}: the grid needs a tiebreaker (the nulls index's sort key)`);
    }
    this.#client = options.client;
    this.#index = index;
    this.#baseKey = indexes.baseKey;
    this.#table = options.table;
    this.#nullsIndex = options.nullsIndex;
  }

  /** The order of the nulls phase: the first tiebreaker. */
  get #order(): string {
    return this.#index.tiebreakers[0] as string;
  }

  /** Every row of `query`, page after page, to the end. */
  async *rows(query: GridQuery): AsyncGenerator<Row> {
    let after: Resume | null = null;
    do {
      const page: Page = await this.page(query, after);
      yield* page.rows;
      after = page.next;
    } while (after !== null);
  }

  /**
   * The page of `query` that starts at `after` (the first page without it). A page holds `limit`
   * rows whenever that many remain, and `next` is null exactly when nothing does.
   */
  async page(query: GridQuery, after: Resume | null = null): Promise<Page> {
    const asked = this.#check(query);
    const rows: Row[] = [];
    let phase = after?.phase ?? "index";
    let start = after?.key ?? null;
    let end: PhaseEnd = { more: false };
    if (phase === "index") {
      end = await this.#indexRows(asked, start, rows);
      start = null;
      if (!end.more) phase = "nulls";
    }
    if (phase === "nulls") end = await this.#nullsRows(asked, start, rows);
    return { rows, next: end.more ? { phase, key: end.after } : null };
  }

  #check(query: GridQuery): Asked {
    const limit = query.limit ?? DEFAULT_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
      throw new Error(`limit ${limit} is not between 1 and ${MAX_LIMIT} (one BatchGetItem per page)`);
    }
    if (query.scope.length !== this.#index.scope.length) {
      throw new Error(
        `index ${this.#index.name} is scoped by ${this.#index.scope.join(", ")}: give ${this.#index.scope.length} scope values, not ${query.scope.length}`,
      );
    }
    return {
      scope: query.scope,
      field: query.field,
      descending: query.descending === true,
      limit,
      attributes: query.attributes ?? [],
    };
  }

  /** Index rows after `start` until the page holds `limit` rows; reads one entry past the page to know whether more follow. */
  async #indexRows(q: Asked, start: Item | null, rows: Row[]): Promise<PhaseEnd> {
    const index = this.#index;
    let pk: string;
    try {
      pk = hierKey([...q.scope, q.field], "partition");
    } catch (e) {
      // No partition key fits the field's name: the indexer wrote no entry for it.
      if (e instanceof KeyError) return { more: false };
      throw e;
    }
    const want = q.limit;
    const entries: Item[] = [];
    let tombstones = 0;
    let exclusiveStart = start ?? undefined;
    for (;;) {
      const answer: QueryCommandOutput = await this.#client.send(
        new QueryCommand({
          TableName: index.table,
          KeyConditionExpression: "#pk = :pk",
          ExpressionAttributeNames: { "#pk": index.partitionKey },
          ExpressionAttributeValues: { ":pk": { S: pk } },
          ScanIndexForward: !q.descending,
          // Behind tombstones, each query reads about 17 times as far as all the ones before it.
          Limit: want + 1 - entries.length + tombstones * TOMBSTONE_GROWTH,
          ExclusiveStartKey: exclusiveStart,
        }),
      );
      for (const found of answer.Items ?? []) {
        // A removed entry's tombstone keeps its key until the table's TTL deletes it: read, never shown.
        if (EXPIRES_ATTRIBUTE in found) tombstones += 1;
        else entries.push(found);
      }
      const last = answer.LastEvaluatedKey;
      if (last === undefined || Object.keys(last).length === 0 || entries.length > want) break;
      exclusiveStart = last;
    }
    let end: PhaseEnd = { more: false };
    if (entries.length > want) {
      entries.length = want;
      end = { more: true, after: pick(entries[want - 1] as Item, [index.partitionKey, index.sortKey]) };
    }
    const base = this.#needsBaseItems(q)
      ? await this.#baseItems(entries, this.#projection(q, false))
      : new Map<string, Item>();
    for (const entry of entries) {
      const value = entry[VALUE_ATTRIBUTE];
      // An item deleted since the index was read is shown as its entry.
      const item = base.get(this.#keyText(entry)) ?? entry;
      rows.push(this.#row(q, item, "index", value === undefined ? null : toJson(value)));
    }
    return end;
  }

  /** Rows of the nulls phase after `start` until the page holds `limit` rows; reads one qualifying item past the page to know whether more follow. */
  async #nullsRows(q: Asked, start: Item | null, rows: Row[]): Promise<PhaseEnd> {
    const index = this.#index;
    const projection = this.#projection(q, true);
    const names = Object.fromEntries(index.scope.map((name, i) => [`#s${i}`, name]));
    const values = Object.fromEntries(q.scope.map((value, i) => [`:s${i}`, { S: value }]));
    let resume = start;
    let exclusiveStart = start ?? undefined;
    for (;;) {
      // Full rounds whatever is left to fill: items with an entry are passed over.
      const answer: QueryCommandOutput = await this.#client.send(
        new QueryCommand({
          TableName: this.#table,
          IndexName: this.#nullsIndex,
          KeyConditionExpression: index.scope.map((_, i) => `#s${i} = :s${i}`).join(" AND "),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          Limit: MAX_LIMIT,
          ExclusiveStartKey: exclusiveStart,
        }),
      );
      const listed = answer.Items ?? [];
      const base = await this.#baseItems(listed, projection);
      for (const entry of listed) {
        const found = base.get(this.#keyText(entry));
        if (found === undefined) continue; // deleted meanwhile
        if (hasEntry(index, this.#baseKey, found, q.field)) continue; // listed in the index phase
        if (rows.length === q.limit) return { more: true, after: resume };
        const item = { ...found };
        if (!q.attributes.includes(index.source)) delete item[index.source];
        rows.push(this.#row(q, item, "nulls", null));
        // The nulls index's ExclusiveStartKey: the table's key and the index's.
        resume = pick(entry, [...this.#baseKey, ...index.scope, this.#order]);
      }
      const last = answer.LastEvaluatedKey;
      if (last === undefined || Object.keys(last).length === 0) return { more: false };
      exclusiveStart = last;
    }
  }

  /** Whether the caller asked for attributes the index items lack (anything but the key, scope, order and `include` attributes). */
  #needsBaseItems(q: Asked): boolean {
    const index = this.#index;
    return q.attributes.some(
      (a) => !this.#baseKey.includes(a) && !index.scope.includes(a) && a !== this.#order && !index.include.includes(a),
    );
  }

  /**
   * The base items' projection: key, scope, tiebreakers, the index's attributes, what was asked
   * for, and (in the nulls phase) the field, to tell whether the item has an entry for it.
   */
  #projection(q: Asked, withField: boolean): { expression: string; names: Record<string, string> } {
    const index = this.#index;
    const attributes = [...this.#baseKey, ...index.scope, ...index.tiebreakers, ...index.include, ...q.attributes];
    const names: Record<string, string> = {};
    const parts: string[] = [];
    attributes.forEach((attribute, i) => {
      if (Object.values(names).includes(attribute)) return;
      names[`#a${i}`] = attribute;
      parts.push(`#a${i}`);
    });
    if (withField && !q.attributes.includes(index.source)) {
      names["#src"] = index.source;
      names["#field"] = q.field;
      parts.push("#src.#field");
    }
    return { expression: parts.join(", "), names };
  }

  /** The base items of these items' keys, by key text. */
  async #baseItems(
    of: readonly Item[],
    projection: { expression: string; names: Record<string, string> },
  ): Promise<Map<string, Item>> {
    const keys = of
      .filter((item) => this.#baseKey.every((name) => item[name] !== undefined))
      .map((item) => pick(item, this.#baseKey));
    if (keys.length === 0) return new Map();
    const found = await batchGet(this.#client, this.#table, keys, { projection });
    return new Map(found.map((item) => [this.#keyText(item), item]));
  }

  /** An item's base key as text, to match items read from different tables. */
  #keyText(item: Item): string {
    return canonicalJson(this.#baseKey.map((name) => (item[name] === undefined ? null : toJson(item[name]))));
  }

  /** A row as it is printed: the base key, the phase, the value, and the columns the item has. */
  #row(q: Asked, item: Item, phase: Row["phase"], value: DynamoJson | null): Row {
    const columns = [this.#order];
    for (const attribute of [...this.#index.include, ...q.attributes]) {
      if (!columns.includes(attribute) && !this.#baseKey.includes(attribute)) columns.push(attribute);
    }
    return {
      key: itemToJson(pick(item, this.#baseKey)),
      phase,
      value,
      attributes: itemToJson(pick(item, columns)),
    };
  }
}

/** The attributes of `item` named in `names` that it has. */
function pick(item: Item, names: readonly string[]): Item {
  return Object.fromEntries(names.flatMap((name) => (item[name] === undefined ? [] : [[name, item[name]]])));
}
