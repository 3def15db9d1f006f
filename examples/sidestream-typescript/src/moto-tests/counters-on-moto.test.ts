/**
 * The counters' client against the local stack's emulator (run by `scripts/moto`), whose DynamoDB
 * applies a `TransactWriteItems` repeated with its `ClientRequestToken` once, as DynamoDB
 * documents: an increment whose responses are lost after it was applied, retried by the SDK,
 * counts once; a plain `ADD` through the same losses counts every time it was applied.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";

import { CreateTableCommand, DynamoDBClient, GetItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";

import { Counters, shardKey } from "../counters.js";

const endpoint = process.env["SIDESTREAM_MOTO_ENDPOINT"];
const table = `counters-${randomUUID().slice(0, 8)}`;
/** Every client made, destroyed at the end: their kept-alive sockets would hold the process open. */
const clients: DynamoDBClient[] = [];

/** What a losing client did: requests that reached the emulator, and responses lost after. */
interface Losses {
  sent: number;
  lost: number;
}

/** A client of the emulator whose first `lost` requests are applied there and answered here with a 500, as a response lost after DynamoDB applied the request. */
function losing(lost: number): { client: DynamoDBClient; losses: Losses } {
  if (endpoint === undefined) throw new Error("these tests need the emulator: run them under scripts/moto");
  const client = new DynamoDBClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    maxAttempts: 3,
  });
  clients.push(client);
  const losses: Losses = { sent: 0, lost: 0 };
  client.middlewareStack.add(
    (next) => async (args) => {
      const answer = await next(args);
      losses.sent += 1;
      if (losses.lost < lost) {
        losses.lost += 1;
        throw Object.assign(new Error("lost after it was applied"), {
          name: "InternalServerError",
          $fault: "server",
          $metadata: { httpStatusCode: 500 },
        });
      }
      return answer;
    },
    { step: "deserialize", name: "loseResponses" },
  );
  return { client, losses };
}

async function count(key: string): Promise<bigint> {
  const { client } = losing(0);
  const answer = await client.send(
    new GetItemCommand({ TableName: table, Key: { pk: { S: key } }, ConsistentRead: true }),
  );
  return BigInt(answer.Item?.["count"]?.N ?? "0");
}

before(async () => {
  const { client } = losing(0);
  await client.send(
    new CreateTableCommand({
      TableName: table,
      KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
      BillingMode: "PAY_PER_REQUEST",
    }),
  );
});

after(() => {
  for (const client of clients) client.destroy();
});

test("an increment whose responses are lost after it was applied counts once", async () => {
  const { client, losses } = losing(2);
  const counters = new Counters(client, table, { shards: 1 });
  const increment = await counters.increment("votes", 5n);
  assert.deepEqual(losses, { sent: 3, lost: 2 }, "three attempts, two applied and lost");
  assert.equal(await count(shardKey("votes", increment.shard)), 5n);
  assert.equal(await counters.exact("votes"), 5n);
});

test("a plain ADD through the same losses counts each time it was applied", async () => {
  const { client, losses } = losing(2);
  const key = shardKey("plain", 0);
  await client.send(
    new UpdateItemCommand({
      TableName: table,
      Key: { pk: { S: key } },
      UpdateExpression: "ADD #count :n",
      ExpressionAttributeNames: { "#count": "count" },
      ExpressionAttributeValues: { ":n": { N: "5" } },
    }),
  );
  assert.deepEqual(losses, { sent: 3, lost: 2 });
  assert.equal(await count(key), 15n, "applied three times");
});
