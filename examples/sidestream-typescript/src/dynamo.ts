/** DynamoDB plumbing shared by the index reader and the counters: DynamoDB JSON, canonical JSON text, and `BatchGetItem` until nothing is left unprocessed. */

import {
  BatchGetItemCommand,
  type AttributeValue,
  type BatchGetItemCommandOutput,
  type DynamoDBClient,
  type KeysAndAttributes,
} from "@aws-sdk/client-dynamodb";
import { setTimeout as sleep } from "node:timers/promises";

/** An item as the SDK gives it: attribute name to value. */
export type Item = Record<string, AttributeValue>;

/** A value in DynamoDB JSON, the wire form: binary as standard base64. */
export type DynamoJson =
  | { readonly S: string }
  | { readonly N: string }
  | { readonly B: string }
  | { readonly BOOL: boolean }
  | { readonly NULL: true }
  | { readonly M: JsonItem }
  | { readonly L: readonly DynamoJson[] }
  | { readonly SS: readonly string[] }
  | { readonly NS: readonly string[] }
  | { readonly BS: readonly string[] };

/** An item in DynamoDB JSON. */
export type JsonItem = { readonly [name: string]: DynamoJson };

/** `BatchGetItem` reads at most this many keys per request. */
const BATCH_GET_MAX = 100;
/** Requests per batch of keys before keys DynamoDB keeps leaving unprocessed are an error. */
const MAX_ATTEMPTS = 8;

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

/** A value in DynamoDB JSON. */
export function toJson(value: AttributeValue): DynamoJson {
  if (value.S !== undefined) return { S: value.S };
  if (value.N !== undefined) return { N: value.N };
  if (value.B !== undefined) return { B: base64(value.B) };
  if (value.BOOL !== undefined) return { BOOL: value.BOOL };
  if (value.NULL !== undefined) return { NULL: true };
  if (value.M !== undefined) return { M: itemToJson(value.M) };
  if (value.L !== undefined) return { L: value.L.map(toJson) };
  if (value.SS !== undefined) return { SS: value.SS };
  if (value.NS !== undefined) return { NS: value.NS };
  if (value.BS !== undefined) return { BS: value.BS.map(base64) };
  throw new Error(`an attribute value of a type DynamoDB JSON lacks: ${Object.keys(value).join(", ")}`);
}

/** An item in DynamoDB JSON. */
export function itemToJson(item: Item): JsonItem {
  return Object.fromEntries(Object.entries(item).map(([name, value]) => [name, toJson(value)]));
}

/** Orders object keys by their UTF-8 bytes (code points), as Rust's `BTreeMap<String, _>` does; JavaScript's default sort compares UTF-16 units. */
function byCodePoint(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

/**
 * JSON text with every object's keys in code-point order and no whitespace: what `serde_json`
 * prints for a `serde_json::Value` (Sidestream's row lines), byte for byte.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).sort(([a], [b]) => byCodePoint(a, b));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** Waits before retry `attempt` (1, 2, …): exponential backoff with full jitter, at most 5 s. */
export async function backoff(attempt: number): Promise<void> {
  await sleep(Math.random() * Math.min(5_000, 50 * 2 ** attempt));
}

/** What a `BatchGetItem` asks for besides the keys. */
export interface BatchGetOptions {
  /** Strongly consistent reads. */
  readonly consistent?: boolean;
  /** A projection expression and its attribute names. */
  readonly projection?: { readonly expression: string; readonly names: Record<string, string> };
}

/**
 * The items of `table` with these keys (absent ones left out, in no particular order), 100 keys a
 * request; keys DynamoDB leaves unprocessed are asked again after a backoff.
 */
export async function batchGet(
  client: DynamoDBClient,
  table: string,
  keys: readonly Item[],
  options: BatchGetOptions = {},
): Promise<Item[]> {
  const found: Item[] = [];
  for (let at = 0; at < keys.length; at += BATCH_GET_MAX) {
    let wanted: KeysAndAttributes | undefined = {
      Keys: keys.slice(at, at + BATCH_GET_MAX),
      ...(options.consistent === true && { ConsistentRead: true }),
      ...(options.projection && {
        ProjectionExpression: options.projection.expression,
        ExpressionAttributeNames: options.projection.names,
      }),
    };
    for (let attempt = 1; wanted !== undefined; attempt++) {
      if (attempt > MAX_ATTEMPTS) {
        throw new Error(
          `BatchGetItem on ${table}: ${wanted.Keys?.length} keys still unprocessed after ${MAX_ATTEMPTS} requests`,
        );
      }
      if (attempt > 1) await backoff(attempt - 1);
      const answer: BatchGetItemCommandOutput = await client.send(
        new BatchGetItemCommand({ RequestItems: { [table]: wanted } }),
      );
      found.push(...(answer.Responses?.[table] ?? []));
      const rest: KeysAndAttributes | undefined = answer.UnprocessedKeys?.[table];
      wanted = rest?.Keys?.length ? rest : undefined;
    }
  }
  return found;
}
