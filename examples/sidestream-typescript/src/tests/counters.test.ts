/** The counters' client over an in-memory DynamoDB: keys as `formats::counter` builds them, an increment that counts once however often it is sent, the totals read back as bigints. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Counters, shardKey, totalKey } from "../counters.js";
import { FakeDynamo } from "./fake-dynamo.js";

function table(): FakeDynamo {
  const dynamo = new FakeDynamo();
  dynamo.createTable("counters", { hash: "pk" });
  return dynamo;
}

test("counter keys are hierarchical keys, the name escaped", () => {
  assert.equal(shardKey("votes/alice", 7), "COUNTER#votes/alice#SHARD#7");
  assert.equal(totalKey("votes/alice"), "COUNTER#votes/alice#TOTAL");
  assert.equal(shardKey("a#b%", 0), "COUNTER#a%23b%25#SHARD#0");
  assert.throws(() => totalKey(""), /must not be empty/);
  assert.throws(() => totalKey("n".repeat(2040)), /partition key is 2054 bytes/);
});

test("the layout is checked: 1 to 1000 shards, Regions numbered from 0", () => {
  const { client } = table();
  assert.throws(() => new Counters(client, "counters", { shards: 0 }), /1 to 1000 shards, not 0/);
  assert.throws(() => new Counters(client, "counters", { shards: 1001 }), /not 1001/);
  assert.throws(() => new Counters(client, "counters", { shards: 4, region: 3, regions: 3 }), /Region 3 of 3/);
  assert.throws(() => new Counters(client, "counters", { shards: 4, regions: 33 }), /1 to 32 of them/);
});

test("an increment goes to one of this Region's shards, as a transaction with a token", async () => {
  const dynamo = table();
  const counters = new Counters(dynamo.client, "counters", { shards: 4, region: 1, regions: 3 });
  const first = await counters.increment("hits");
  const shards = new Set([first.shard]);
  for (let i = 1; i < 200; i++) shards.add((await counters.increment("hits")).shard);
  assert.deepEqual([...shards].sort(), [4, 5, 6, 7]);
  const sent = dynamo.sent.filter((s) => s.operation === "TransactWriteItems");
  assert.equal(sent.length, 200);
  assert.equal(new Set(sent.map((s) => s.input.ClientRequestToken)).size, 200, "a fresh token per increment");
  assert.deepEqual(sent[0]?.input, {
    ClientRequestToken: first.token,
    TransactItems: [
      {
        Update: {
          TableName: "counters",
          Key: { pk: { S: shardKey("hits", first.shard) } },
          UpdateExpression: "ADD #count :n",
          ExpressionAttributeNames: { "#count": "count" },
          ExpressionAttributeValues: { ":n": { N: "1" } },
        },
      },
    ],
  });
  assert.equal(await counters.exact("hits"), 200n);
});

test("an increment sent again counts once, and a conflict's retry reuses its token", async () => {
  const dynamo = table();
  const counters = new Counters(dynamo.client, "counters", { shards: 8 });
  const increment = counters.plan("votes", 5n);
  await counters.send(increment);
  await counters.send(increment);
  dynamo.conflicts = 2;
  await counters.send(increment);
  assert.equal(await counters.exact("votes"), 5n);
  const tokens = dynamo.sent.filter((s) => s.operation === "TransactWriteItems").map((s) => s.input.ClientRequestToken);
  assert.deepEqual(
    tokens,
    Array(5).fill(increment.token),
    "two sends, and a third sent three times through its conflicts",
  );
  const next = await counters.increment("votes", -2n);
  assert.notEqual(next.token, increment.token);
  assert.equal(await counters.exact("votes"), 3n);
});

test("exact sums every Region's shards, 100 keys a request, unprocessed keys asked again; counts past 64 bits stay exact", async () => {
  const dynamo = table();
  dynamo.unprocessedOnce = true;
  const big = 10n ** 37n + 7n;
  for (let shard = 0; shard < 250; shard += 3) {
    dynamo.put("counters", { pk: { S: shardKey("huge", shard) }, count: { N: big.toString() } });
  }
  const counters = new Counters(dynamo.client, "counters", { shards: 125, regions: 2 });
  assert.equal(await counters.exact("huge"), 84n * big);
  const gets = dynamo.sent.filter((s) => s.operation === "BatchGetItem");
  assert.ok(
    gets.length >= 3 + 3,
    `three batches of keys, each asked again for its unprocessed keys (${gets.length} requests)`,
  );
  for (const get of gets) {
    const wanted = (get.input.RequestItems as Record<string, { ConsistentRead?: boolean }>).counters;
    assert.equal(wanted?.ConsistentRead, true, "the exact read is strongly consistent");
  }
  assert.equal(await counters.exact("nothing"), 0n);
});

test("total reads the total item, null before the aggregator has written it, and refuses a count that is no integer", async () => {
  const dynamo = table();
  const counters = new Counters(dynamo.client, "counters", { shards: 1 });
  assert.equal(await counters.total("visits/home"), null);
  dynamo.put("counters", {
    pk: { S: totalKey("visits/home") },
    total: { N: "12345678901234567890123456789012345678" },
    version: { N: "3" },
  });
  assert.equal(await counters.total("visits/home"), 12345678901234567890123456789012345678n);
  dynamo.put("counters", { pk: { S: shardKey("bad", 0) }, count: { S: "seven" } });
  await assert.rejects(counters.exact("bad"), /has count = \{"S":"seven"\}, not an integer count/);
});
