"""The counters' client against the local stack's emulator (run by ``scripts/moto``), whose
DynamoDB applies a ``TransactWriteItems`` repeated with its ``ClientRequestToken`` once, as
DynamoDB documents: an increment whose responses are lost after it was applied, retried by
botocore and then by the client, counts once; a plain ``ADD`` through the same losses counts
every time it was applied."""

from __future__ import annotations

import os
import unittest
import uuid
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.httpsession import URLLib3Session

from sidestream_client.counters import Counters, shard_key

ENDPOINT = os.environ.get("SIDESTREAM_MOTO_ENDPOINT")


class Body:
    """A canned HTTP body, as botocore reads one."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def losing(lost: int) -> tuple[Any, dict[str, int]]:
    """A client of the emulator whose first ``lost`` requests are applied there and answered with
    a 500 here, as a response lost after DynamoDB applied the request; the requests the emulator
    got and the responses lost, counted."""
    client = boto3.client(
        "dynamodb",
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "max_attempts": 3}),
    )
    http = URLLib3Session()
    counts = {"sent": 0, "lost": 0}

    def send(request: Any, **_: Any) -> AWSResponse | None:
        counts["sent"] += 1
        if counts["lost"] >= lost:
            return None  # botocore sends it
        answer = http.send(request)
        assert answer.status_code == 200, answer.content
        counts["lost"] += 1
        body = b'{"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "lost after it was applied"}'
        return AWSResponse(request.url, 500, {}, Body(body))

    client.meta.events.register("before-send.dynamodb", send)
    return client, counts


class OnTheEmulator(unittest.TestCase):
    table = ""

    @classmethod
    def setUpClass(cls) -> None:
        if not ENDPOINT:
            raise RuntimeError("these tests need the emulator: run them under scripts/moto")
        cls.table = f"counters-{uuid.uuid4().hex[:8]}"
        client, _ = losing(0)
        client.create_table(
            TableName=cls.table,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )

    def count(self, key: str) -> int:
        client, _ = losing(0)
        item = client.get_item(TableName=self.table, Key={"pk": {"S": key}}, ConsistentRead=True).get("Item")
        return int(item["count"]["N"]) if item else 0

    def test_an_increment_whose_responses_are_lost_counts_once(self) -> None:
        # Three lost to botocore's three attempts, then the client sends it again: lost once
        # more, then answered.
        client, counts = losing(4)
        counters = Counters(self.table, shards=1, client=client, retry_seconds=30)
        shard = counters.increment("votes", 5)
        self.assertEqual(counts, {"sent": 5, "lost": 4}, "five attempts, four applied and lost")
        self.assertEqual(self.count(shard_key("votes", shard)), 5)
        self.assertEqual(counters.exact("votes"), 5)

    def test_a_plain_add_through_the_same_losses_counts_each_time(self) -> None:
        client, counts = losing(2)
        key = shard_key("plain", 0)
        client.update_item(
            TableName=self.table,
            Key={"pk": {"S": key}},
            UpdateExpression="ADD #count :n",
            ExpressionAttributeNames={"#count": "count"},
            ExpressionAttributeValues={":n": {"N": "5"}},
        )
        self.assertEqual(counts, {"sent": 3, "lost": 2})
        self.assertEqual(self.count(key), 15, "applied three times")


if __name__ == "__main__":
    unittest.main()
