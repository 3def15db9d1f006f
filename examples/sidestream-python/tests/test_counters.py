"""Tests of the counters' client without AWS: the keys, and an increment sent again, by botocore
and by the client, always as the same request with the same token (a real boto3 client whose
requests are answered in process)."""

from __future__ import annotations

import json
import unittest
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError

from sidestream_client.counters import CounterError, Counters, shard_key, total_key


class Body:
    """A canned HTTP body, as botocore reads one."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def answered(*answers: tuple[int, dict[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
    """A DynamoDB client whose requests get these answers in turn, and the requests it sent."""
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"mode": "standard", "max_attempts": 3}),
    )
    sent: list[dict[str, Any]] = []

    def send(request: Any, **_: Any) -> AWSResponse:
        sent.append(json.loads(request.body))
        status, body = answers[len(sent) - 1]
        return AWSResponse(request.url, status, {}, Body(json.dumps(body).encode()))

    client.meta.events.register("before-send.dynamodb", send)
    return client, sent


def cancelled(code: str) -> tuple[int, dict[str, Any]]:
    return 400, {
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": "Transaction cancelled",
        "CancellationReasons": [{"Code": code, "Message": code}],
    }


class Keys(unittest.TestCase):
    def test_keys_are_sidestreams(self) -> None:
        self.assertEqual(shard_key("votes/alice", 7), "COUNTER#votes/alice#SHARD#7")
        self.assertEqual(total_key("a#b%"), "COUNTER#a%23b%25#TOTAL")
        self.assertRaises(CounterError, total_key, "")
        self.assertRaises(CounterError, total_key, "x" * 2048)
        self.assertRaises(CounterError, Counters, "t", shards=0, client=object())
        self.assertRaises(CounterError, Counters, "t", shards=1, region=2, regions=2, client=object())
        self.assertRaises(CounterError, Counters, "t", shards=1, retry_seconds=601, client=object())


class Increments(unittest.TestCase):
    def test_every_attempt_sends_the_same_request_and_token(self) -> None:
        client, sent = answered(
            (500, {"__type": "InternalServerError", "message": "boom"}),  # botocore retries this
            cancelled("TransactionConflict"),  # the client sends it again
            (200, {}),
        )
        counters = Counters("counters", shards=4, region=1, regions=2, client=client)
        shard = counters.increment("votes/alice", 3)
        self.assertIn(shard, range(4, 8), "Region 1 of 2 writes shards 4 to 7")
        self.assertEqual(len(sent), 3)
        self.assertTrue(all(request == sent[0] for request in sent), sent)
        (update,) = [item["Update"] for item in sent[0]["TransactItems"]]
        self.assertEqual(update["Key"], {"pk": {"S": f"COUNTER#votes/alice#SHARD#{shard}"}})
        self.assertEqual(
            (update["UpdateExpression"], update["ExpressionAttributeValues"]),
            ("ADD #count :n", {":n": {"N": "3"}}),
        )
        self.assertEqual(len(sent[0]["ClientRequestToken"]), 36)

    def test_each_increment_has_its_own_token(self) -> None:
        client, sent = answered((200, {}), (200, {}))
        counters = Counters("counters", shards=1, client=client)
        counters.increment("a")
        counters.increment("a")
        self.assertNotEqual(sent[0]["ClientRequestToken"], sent[1]["ClientRequestToken"])

    def test_a_refused_increment_is_not_sent_again(self) -> None:
        client, sent = answered(cancelled("ConditionalCheckFailed"))
        with self.assertRaises(ClientError):
            Counters("counters", shards=1, client=client).increment("a")
        self.assertEqual(len(sent), 1)
        with self.assertRaises(TypeError):
            Counters("counters", shards=1, client=client).increment("a", 1.5)  # type: ignore[arg-type]


class Reads(unittest.TestCase):
    def test_total_and_exact(self) -> None:
        client, sent = answered(
            (200, {"Item": {"total": {"N": "12"}}}),
            (200, {}),
            (
                200,
                {
                    "Responses": {"counters": [{"pk": {"S": "COUNTER#a#SHARD#1"}, "count": {"N": "5"}}]},
                    "UnprocessedKeys": {
                        "counters": {"Keys": [{"pk": {"S": "COUNTER#a#SHARD#99"}}], "ConsistentRead": True}
                    },
                },
            ),
            (200, {"Responses": {"counters": [{"pk": {"S": "COUNTER#a#SHARD#99"}, "count": {"N": "-2"}}]}}),
            (200, {"Responses": {"counters": [{"pk": {"S": "COUNTER#a#SHARD#120"}, "count": {"N": "10"}}]}}),
        )
        counters = Counters("counters", shards=150, client=client)
        self.assertEqual(counters.total("a"), 12)
        self.assertIsNone(counters.total("a"))
        self.assertEqual(counters.exact("a"), 13)
        batches = [request["RequestItems"]["counters"] for request in sent[2:]]
        self.assertEqual([len(b["Keys"]) for b in batches], [100, 1, 50])
        self.assertTrue(all(b["ConsistentRead"] for b in batches))


if __name__ == "__main__":
    unittest.main()
