"""What the index reader and the counters share: a DynamoDB client configured from the environment,
and ``BatchGetItem`` with its unprocessed keys asked again."""

from __future__ import annotations

import os
import random
import time
from typing import Any

import boto3
from botocore.config import Config

Item = dict[str, Any]
"""An item or key in the low-level client's DynamoDB JSON (``{"S": "…"}``; B values as bytes)."""

BATCH_GET_MAX = 100
"""The most keys one ``BatchGetItem`` reads."""
UNPROCESSED_ROUNDS = 8
"""How many times one batch is sent while DynamoDB leaves keys unprocessed."""


class UnprocessedKeys(RuntimeError):
    """DynamoDB kept leaving keys of a ``BatchGetItem`` unprocessed."""


def client() -> Any:
    """A DynamoDB client as the AWS SDKs configure one: the Region from ``AWS_REGION`` (which
    botocore alone does not read) or ``AWS_DEFAULT_REGION``, the endpoint from
    ``AWS_ENDPOINT_URL_DYNAMODB`` or ``AWS_ENDPOINT_URL``, credentials from the usual chain;
    botocore's standard retries (which send a request again unchanged) and timeouts that bound
    every call."""
    config = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=10)
    return boto3.client("dynamodb", region_name=os.environ.get("AWS_REGION") or None, config=config)


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (from 1): full jitter, doubling from 50 ms to 2 s."""
    return random.uniform(0, min(2.0, 0.05 * 2**attempt))


def batch_get(
    dynamodb: Any,
    table: str,
    keys: list[Item],
    *,
    consistent: bool = False,
    projection: tuple[str, dict[str, str]] | None = None,
) -> list[Item]:
    """The items of ``table`` with these keys (those that exist, in no particular order), 100 keys
    a request; keys DynamoDB leaves unprocessed are asked again after a backoff."""
    items: list[Item] = []
    for first in range(0, len(keys), BATCH_GET_MAX):
        request: dict[str, Any] = {"Keys": keys[first : first + BATCH_GET_MAX], "ConsistentRead": consistent}
        if projection is not None:
            request["ProjectionExpression"], request["ExpressionAttributeNames"] = projection
        pending = {table: request}
        for attempt in range(UNPROCESSED_ROUNDS):
            if attempt:
                time.sleep(backoff(attempt))
            answer = dynamodb.batch_get_item(RequestItems=pending)
            items.extend(answer.get("Responses", {}).get(table, []))
            pending = answer.get("UnprocessedKeys") or {}
            if not pending:
                break
        else:
            raise UnprocessedKeys(
                f"BatchGetItem on {table}: keys still unprocessed after {UNPROCESSED_ROUNDS} requests"
            )
    return items
