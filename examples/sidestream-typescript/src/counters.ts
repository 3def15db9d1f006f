/**
 * Write-sharded counters (`shared/sharded-counter`, docs/functions.md "Write-sharded counters"):
 * increments spread over a counter's shard items `COUNTER#<name>#SHARD#<k>`, a fast read of the
 * total item `COUNTER#<name>#TOTAL` the counter-aggregator keeps, and an exact read that sums
 * the shards. Counts are integers of up to 38 digits, as `bigint`.
 *
 * An increment counts once even when it is sent again: it is a `TransactWriteItems` of one
 * `Update` (`ADD #count :n`) with a `ClientRequestToken`, and DynamoDB treats a repeat of the
 * same token within 10 minutes as done. Its shard and token are chosen once, and every retry
 * (the SDK's, a cancelled transaction's, or yours with `send`) reuses them.
 */

import { randomInt, randomUUID } from "node:crypto";

import {
  type DynamoDBClient,
  GetItemCommand,
  TransactWriteItemsCommand,
  TransactionCanceledException,
} from "@aws-sdk/client-dynamodb";

import { type Item, backoff, batchGet } from "./dynamo.js";
import { hierKey } from "./keys.js";

/** The attribute that holds a shard's count. */
const COUNT = "count";
/** The attribute that holds a total item's total. */
const TOTAL = "total";
/** The most shards a counter may have per Region. */
const MAX_SHARDS = 1_000;
/** The most Regions that may write one global table's counters. */
const MAX_REGIONS = 32;
/** The largest magnitude of an increment: DynamoDB numbers hold 38 digits. */
const MAX_INCREMENT = 10n ** 38n - 1n;
/** Sends of one increment while its transaction is cancelled by a conflicting write of its shard, or throttled. */
const MAX_CANCELLED_ATTEMPTS = 8;
/** Why DynamoDB cancels a transaction of one `ADD` that a later send gets past (developer guide, "Transaction conflict handling"). */
const PASSING = ["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"];

/** How a table's counters are laid out. */
export interface Sharding {
  /** Shards per counter, per Region: 1 to 1000. */
  readonly shards: number;
  /** The table's partition key attribute, a string (`pk` unless given). */
  readonly partitionKey?: string;
  /** The Regions that write a global table's counters, each to its own shards: 1 to 32 (1 unless given). */
  readonly regions?: number;
  /** This writer's Region, numbered from 0 alike in every Region (0 unless given). */
  readonly region?: number;
}

/** One increment, its shard and token chosen: send it again within 10 minutes, as often as needed, and it counts once. */
export interface Increment {
  readonly name: string;
  readonly shard: number;
  /** The shard item's partition key. */
  readonly key: string;
  readonly by: bigint;
  /** The `ClientRequestToken`. */
  readonly token: string;
}

/** The key of counter `name`'s shard `shard`: `COUNTER#<name>#SHARD#<shard>`, `#` and `%` in the name escaped. */
export function shardKey(name: string, shard: number): string {
  return counterKey(name, ["SHARD", String(shard)]);
}

/** The key of counter `name`'s total item: `COUNTER#<name>#TOTAL`. */
export function totalKey(name: string): string {
  return counterKey(name, ["TOTAL"]);
}

function counterKey(name: string, rest: readonly string[]): string {
  if (name === "") throw new Error("a counter's name must not be empty");
  return hierKey(["COUNTER", name, ...rest], "partition");
}

/** An integer attribute as a bigint; null when the item lacks it. */
function integer(item: Item, attribute: string, key: string): bigint | null {
  const value = item[attribute];
  if (value === undefined) return null;
  if (value.N === undefined || !/^[+-]?[0-9]+$/.test(value.N)) {
    throw new Error(`item ${JSON.stringify(key)} has ${attribute} = ${JSON.stringify(value)}, not an integer count`);
  }
  return BigInt(value.N);
}

/** The counters in one table. */
export class Counters {
  readonly #client: DynamoDBClient;
  readonly #table: string;
  readonly #partitionKey: string;
  readonly #shards: number;
  readonly #regions: number;
  readonly #region: number;

  constructor(client: DynamoDBClient, table: string, sharding: Sharding) {
    const { shards, partitionKey = "pk", regions = 1, region = 0 } = sharding;
    if (!Number.isInteger(shards) || shards < 1 || shards > MAX_SHARDS) {
      throw new Error(`a counter needs 1 to ${MAX_SHARDS} shards, not ${shards}`);
    }
    if (
      !Number.isInteger(regions) ||
      regions < 1 ||
      regions > MAX_REGIONS ||
      !Number.isInteger(region) ||
      region < 0 ||
      region >= regions
    ) {
      throw new Error(`Region ${region} of ${regions}: Regions are numbered from 0, and 1 to ${MAX_REGIONS} of them`);
    }
    this.#client = client;
    this.#table = table;
    this.#partitionKey = partitionKey;
    this.#shards = shards;
    this.#regions = regions;
    this.#region = region;
  }

  /** Adds `by` to counter `name` on a random shard of this writer's Region; the increment sent. */
  async increment(name: string, by: bigint = 1n): Promise<Increment> {
    const increment = this.plan(name, by);
    await this.send(increment);
    return increment;
  }

  /** An increment of `name` by `by`, not yet sent: a random shard of this writer's, and a fresh token. */
  plan(name: string, by: bigint): Increment {
    if (by > MAX_INCREMENT || by < -MAX_INCREMENT) throw new Error(`an increment has at most 38 digits, not ${by}`);
    const first = this.#region * this.#shards;
    const shard = randomInt(first, first + this.#shards);
    return { name, shard, key: shardKey(name, shard), by, token: randomUUID() };
  }

  /**
   * Sends `increment`: once applied, sending it again within 10 minutes of its first send changes
   * nothing. A transaction cancelled by a conflicting write of its shard, or throttled, is sent
   * again, the same; the SDK's own retries (5xx, time-outs, `TransactionInProgressException`)
   * send the same request too. It costs a transactional write: 2 write units per KB, not 1.
   */
  async send(increment: Increment): Promise<void> {
    const command = new TransactWriteItemsCommand({
      ClientRequestToken: increment.token,
      TransactItems: [
        {
          Update: {
            TableName: this.#table,
            Key: { [this.#partitionKey]: { S: increment.key } },
            UpdateExpression: "ADD #count :n",
            ExpressionAttributeNames: { "#count": COUNT },
            ExpressionAttributeValues: { ":n": { N: increment.by.toString() } },
          },
        },
      ],
    });
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#client.send(command);
        return;
      } catch (e) {
        const passing =
          e instanceof TransactionCanceledException &&
          e.CancellationReasons?.some((r) => PASSING.includes(r.Code ?? ""));
        if (!passing || attempt === MAX_CANCELLED_ATTEMPTS) throw e;
        await backoff(attempt);
      }
    }
  }

  /** The fast read: counter `name`'s total item as the counter-aggregator last wrote it (one eventually consistent `GetItem`); null before the aggregator has seen the counter. */
  async total(name: string): Promise<bigint | null> {
    const key = totalKey(name);
    const answer = await this.#client.send(
      new GetItemCommand({
        TableName: this.#table,
        Key: { [this.#partitionKey]: { S: key } },
        ProjectionExpression: "#total",
        ExpressionAttributeNames: { "#total": TOTAL },
      }),
    );
    return answer.Item === undefined ? null : integer(answer.Item, TOTAL, key);
  }

  /** The exact read: the sum of all of counter `name`'s shards, every Region's, read with strongly consistent `BatchGetItem`s (100 keys each). Missing shards count as zero. */
  async exact(name: string): Promise<bigint> {
    const keys = Array.from({ length: this.#regions * this.#shards }, (_, shard) => ({
      [this.#partitionKey]: { S: shardKey(name, shard) },
    }));
    const items = await batchGet(this.#client, this.#table, keys, { consistent: true });
    return items.reduce((sum, item) => sum + (integer(item, COUNT, item[this.#partitionKey]?.S ?? "") ?? 0n), 0n);
  }
}
