/** Whether the indexer writes an entry for an item's member: the indexer's own keying (`formats::has_entry`), which decides what the grid's nulls phase lists. */

import type { AttributeValue } from "@aws-sdk/client-dynamodb";

import type { Item } from "./dynamo.js";
import type { IndexDefinition } from "./definition.js";
import {
  type Component,
  KeyError,
  encodeBinary,
  encodeText,
  formatNumber,
  hierKey,
  truncateForBinary,
  truncateForText,
  utf8,
} from "./keys.js";

/** Largest sort key, in bytes. */
const SORT_KEY_MAX = 1024;

/** A scalar attribute as the indexer keys it (ascending), or null when it cannot be part of a key. */
export function keyComponent(value: AttributeValue): Component | null {
  if (value.S !== undefined) return { type: "string", value: value.S };
  if (value.N !== undefined) return { type: "number", value: value.N };
  if (value.B !== undefined) return { type: "binary", value: value.B };
  if (value.BOOL !== undefined) return { type: "boolean", value: value.BOOL };
  if (value.NULL !== undefined) return { type: "null" };
  return null;
}

/** An element's id: its text, a number's canonical text ("1.50" and "1.5" are one element); null when not keyable. */
function elementId(value: AttributeValue): string | null {
  if (value.S !== undefined) return value.S;
  return value.N === undefined ? null : numberId(value.N);
}

function numberId(n: string): string | null {
  try {
    return formatNumber(n);
  } catch {
    return null;
  }
}

/**
 * The member `member` of a source attribute, if the source has it with a keyable value: a map
 * entry whose value is a scalar (its value, to key), or a list or set element (no value).
 */
function findMember(source: AttributeValue | undefined, member: string): { value?: AttributeValue } | null {
  if (source === undefined) return null;
  if (source.M !== undefined) {
    const value = source.M[member];
    const scalar = value !== undefined && keyComponent(value) !== null;
    return scalar ? { value } : null;
  }
  const ids: readonly (string | null)[] | undefined = source.SS ?? source.NS?.map(numberId) ?? source.L?.map(elementId);
  return ids?.includes(member) ? {} : null;
}

/** The byte length of one ascending component in the index's key format. */
function componentBytes(format: IndexDefinition["keyFormat"], c: Component): number {
  return format === "text" ? utf8(encodeText([c], "none")).length : encodeBinary([c], "none").length;
}

/**
 * Whether `item`, a base-table item whose key attributes are `baseKey`, has an entry for
 * `member` (a map key, or an element's text) in `index`: whether the indexer writes one. An item
 * that lacks the member, or whose value, scope, tiebreakers or key cannot be keyed (or make a
 * key too long), has none.
 */
export function hasEntry(index: IndexDefinition, baseKey: readonly string[], item: Item, member: string): boolean {
  const found = findMember(item[index.source], member);
  if (found === null || !baseKey.every((name) => item[name] !== undefined)) return false;
  try {
    const scope = index.scope.map((name) => {
      const value = item[name];
      const segment = value?.S ?? value?.N;
      if (segment === undefined) throw new KeyError(`scope attribute ${name} is missing, or neither S nor N`);
      return segment;
    });
    hierKey([...scope, member], "partition");
    const suffix = [
      ...index.tiebreakers.map((name) => item[name] ?? { NULL: true }),
      ...baseKey.map((name) => item[name] as AttributeValue),
    ];
    const components = suffix.map((value) => {
      const c = keyComponent(value);
      if (c === null) throw new KeyError("a tiebreaker or key attribute cannot be part of a key");
      return c;
    });
    const suffixBytes = components.reduce((sum, c) => sum + componentBytes(index.keyFormat, c), 0);
    if (suffixBytes > SORT_KEY_MAX) return false;
    const value = found.value === undefined ? null : keyComponent(found.value);
    return (
      suffixBytes + (value === null ? 0 : fittingBytes(index.keyFormat, value, SORT_KEY_MAX - suffixBytes)) <=
      SORT_KEY_MAX
    );
  } catch (e) {
    if (e instanceof KeyError) return false;
    throw e;
  }
}

/** The bytes the value's component takes in a sort key with `budget` bytes left: a string too long is cut to fit; any other value too long cannot be keyed. */
function fittingBytes(format: IndexDefinition["keyFormat"], value: Component, budget: number): number {
  const bytes = componentBytes(format, value);
  if (bytes <= budget) return bytes;
  if (value.type !== "string") {
    throw new KeyError(`its ${bytes}-byte value does not fit in the ${budget} bytes of sort key left`);
  }
  const kept = format === "text" ? truncateForText(value.value, false, budget) : truncateForBinary(value.value, budget);
  return componentBytes(format, { type: "string", value: kept });
}
