/** The indexes' definition, `MULTIKEY_INDEXES`, parsed and checked as the indexer checks it (`shared/formats/src/config.rs`). */

/** The attribute a tombstone has and an entry never has (docs/formats.md, "Tombstones"). */
export const EXPIRES_ATTRIBUTE = "sidestream_expires";
/** The map value of an entry from a map source. */
export const VALUE_ATTRIBUTE = "value";
/** The map key or element of an entry. */
const ENTRY_ATTRIBUTE = "entry";
/** The entry's version. */
const VERSION_ATTRIBUTE = "sidestream_seq";

/** One index over the base table. */
export interface IndexDefinition {
  /** A label; unique. */
  readonly name: string;
  /** The index table (the default table when the definition leaves it out). */
  readonly table: string;
  /** The attribute indexed: a map (one entry per key) or a list, SS or NS (one entry per element). */
  readonly source: string;
  /** The index table's partition key attribute (`pk` unless defined). */
  readonly partitionKey: string;
  /** The index table's sort key attribute (`sk` unless defined). */
  readonly sortKey: string;
  /** Attributes whose values, then the member, make the partition key. */
  readonly scope: readonly string[];
  /** Attributes that follow the value in the sort key. */
  readonly tiebreakers: readonly string[];
  /** Attributes copied into every entry. */
  readonly include: readonly string[];
  /** K1 text (S) or B1 binary (B) sort keys. */
  readonly keyFormat: "text" | "binary";
}

/** The indexes, and the base table's key. */
export interface Indexes {
  /** The base table's key attributes, partition key first (1 or 2). */
  readonly baseKey: readonly string[];
  readonly indexes: readonly IndexDefinition[];
}

const INDEX_FIELDS = [
  "name",
  "table",
  "source",
  "partition_key",
  "sort_key",
  "scope",
  "tiebreakers",
  "include",
  "key_format",
];

function invalid(reason: string): Error {
  return new Error(`MULTIKEY_INDEXES: ${reason}`);
}

function object(value: unknown, at: string, fields: readonly string[]): Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw invalid(`not valid index JSON: ${at} is not an object`);
  }
  const unknown = Object.keys(value).find((k) => !fields.includes(k));
  if (unknown !== undefined) {
    throw invalid(
      `not valid index JSON: unknown field ${JSON.stringify(unknown)} in ${at}, expected one of ${fields.join(", ")}`,
    );
  }
  return value as Record<string, unknown>;
}

function text(value: unknown, at: string, fallback?: string): string {
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== "string") throw invalid(`not valid index JSON: ${at} must be a string`);
  return value;
}

function names(value: unknown, at: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) {
    throw invalid(`not valid index JSON: ${at} must be a list of strings`);
  }
  const empty = value.indexOf("");
  if (empty >= 0) throw invalid(`${at}[${empty}] is an empty attribute name`);
  return value;
}

/**
 * Parses and checks the `MULTIKEY_INDEXES` JSON document; the error names the field that is
 * wrong. An index that leaves out `table` is in `defaultTable`, as the indexer takes it from
 * `MULTIKEY_INDEX_TABLE` (the stack's own index table).
 */
export function parseIndexes(json: string, defaultTable?: string): Indexes {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (e) {
    throw invalid(`not valid index JSON: ${(e as Error).message}`);
  }
  const top = object(raw, "the document", ["base_key", "indexes"]);
  if (top.base_key === undefined || top.indexes === undefined) {
    throw invalid("not valid index JSON: base_key and indexes are required");
  }
  const baseKey = names(top.base_key, "base_key");
  if (baseKey.length < 1 || baseKey.length > 2) {
    throw invalid(`base_key must name 1 or 2 attributes, found ${baseKey.length}`);
  }
  if (baseKey.length === 2 && baseKey[0] === baseKey[1]) {
    throw invalid(`base_key names ${JSON.stringify(baseKey[0])} twice`);
  }
  if (!Array.isArray(top.indexes)) throw invalid("not valid index JSON: indexes must be a list");
  if (top.indexes.length === 0) throw invalid("indexes is empty: define at least one index");
  const seenNames = new Set<string>();
  const seenTables = new Set<string>();
  const indexes = top.indexes.map((value: unknown, i): IndexDefinition => {
    const at = `indexes[${i}]`;
    const r = object(value, at, INDEX_FIELDS);
    if (r.table === undefined && defaultTable === undefined) {
      throw invalid(
        `${at}.table is missing: name the index table, or set MULTIKEY_INDEX_TABLE to the one an index without it uses`,
      );
    }
    const index: IndexDefinition = {
      name: text(r.name, `${at}.name`),
      table: text(r.table ?? defaultTable, `${at}.table`),
      source: text(r.source, `${at}.source`),
      partitionKey: text(r.partition_key, `${at}.partition_key`, "pk"),
      sortKey: text(r.sort_key, `${at}.sort_key`, "sk"),
      scope: names(r.scope, `${at}.scope`),
      tiebreakers: names(r.tiebreakers, `${at}.tiebreakers`),
      include: names(r.include, `${at}.include`),
      keyFormat: keyFormat(r.key_format, `${at}.key_format`),
    };
    for (const field of ["name", "table", "source"] as const) {
      if (index[field].trim() === "") throw invalid(`${at}.${field} is empty`);
    }
    if (seenNames.has(index.name)) {
      throw invalid(`${at}.name ${JSON.stringify(index.name)} is used by an earlier index`);
    }
    if (seenTables.has(index.table)) {
      throw invalid(
        `${at}.table ${JSON.stringify(index.table)} is used by an earlier index; give each index its own table so their keys cannot collide`,
      );
    }
    seenNames.add(index.name);
    seenTables.add(index.table);
    checkRoles(index, baseKey, at);
    if (
      baseKey.includes(index.source) ||
      index.scope.includes(index.source) ||
      index.tiebreakers.includes(index.source)
    ) {
      throw invalid(`${at}.source ${JSON.stringify(index.source)} is also a key, scope or tiebreaker attribute`);
    }
    return index;
  });
  return { baseKey, indexes };
}

function keyFormat(value: unknown, at: string): "text" | "binary" {
  if (value === undefined || value === "text" || value === "binary") return value ?? "text";
  throw invalid(`not valid index JSON: ${at} must be "text" or "binary"`);
}

/** Every attribute an entry carries must have exactly one role. */
function checkRoles(index: IndexDefinition, baseKey: readonly string[], at: string): void {
  const roles: [role: string, name: string][] = [
    ["partition_key", index.partitionKey],
    ["sort_key", index.sortKey],
    ["the entry attribute", ENTRY_ATTRIBUTE],
    ["the value attribute", VALUE_ATTRIBUTE],
    ["the version attribute", VERSION_ATTRIBUTE],
    ["the tombstone attribute", EXPIRES_ATTRIBUTE],
    ...baseKey.map((name): [string, string] => ["base_key", name]),
    ...(["scope", "tiebreakers", "include"] as const).flatMap((field) =>
      index[field].map((name): [string, string] => [field, name]),
    ),
  ];
  roles.forEach(([role, name], j) => {
    if (name === "") throw invalid(`${at}.${role} is empty`);
    const other = roles.slice(0, j).find(([, n]) => n === name);
    if (other) {
      throw invalid(
        `${at}: attribute ${JSON.stringify(name)} appears as ${other[0]} and as ${role}; each entry attribute needs one role`,
      );
    }
  });
}
