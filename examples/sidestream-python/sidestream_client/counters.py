"""Write-sharded counters: increment a random shard, read the aggregated total, or sum the shards.

The items are Sidestream's (``shared/formats/src/counter.rs``, ``docs/formats.md`` "Counter total
items"), in a table whose partition key (``pk`` by default) is a string:

- shard ``k`` of counter ``name``: ``COUNTER#<name>#SHARD#<k>``, its running sum in ``count``;
- the total: ``COUNTER#<name>#TOTAL``, its ``total`` kept equal to the shards' sum by the
  counter-aggregator (from the table's stream).

``#`` and ``%`` in a name are escaped as in every hierarchical key. On a global table written from
several Regions, each Region increments its own shards (``region`` of ``regions``), so that two
Regions never add to one item and lose an increment to last writer wins.

**An increment counts once, however often it is sent.** It is a ``TransactWriteItems`` holding
one ``Update`` (``ADD #count :n``) with a ``ClientRequestToken`` made for this increment alone:
DynamoDB applies a request with a token it has seen succeed as a no-op (API reference,
TransactWriteItems). botocore's own retries send the same body, token included; this client sends
it again too, with the same token and the same shard, when a transaction is cancelled by a
conflict on the hot shard item, or when DynamoDB or the connection fails after botocore's
retries. A token is honoured for 10 minutes after the first request that uses it completes, so
the whole increment must finish within them: no attempt starts after ``retry_seconds`` (at most
300), and the default client's timeouts and retries bound each attempt to about two minutes. A
client you pass must bound its calls likewise. A transactional write costs two write units where
a plain ``UpdateItem`` costs one.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from . import _dynamodb
from ._dynamodb import Item
from .keys import PARTITION_KEY_MAX_BYTES, hier_key

COUNT_ATTRIBUTE = "count"
"""A shard's running sum."""
TOTAL_ATTRIBUTE = "total"
"""A total item's sum of the shards."""
MAX_SHARDS = 1000
"""The most shards a counter may have (per Region)."""
MAX_REGIONS = 32
"""The most Regions that may write one table's counters."""
MAX_RETRY_SECONDS = 300.0
"""The longest ``retry_seconds``: every attempt of an increment must land within the token's
10 minutes."""
RETRIED_CODES = frozenset(
    {
        "TransactionInProgressException",
        "InternalServerError",
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
    }
)
"""Errors after which an increment is sent again (a cancelled transaction is, when its reasons are
among ``RETRIED_CANCELLATIONS``)."""
RETRIED_CANCELLATIONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


class CounterError(ValueError):
    """A counter that cannot be keyed, or an item that does not hold an integer count."""


def shard_key(name: str, shard: int) -> str:
    """The partition key of shard ``shard`` of counter ``name``."""
    return _key(name, "SHARD", str(shard))


def total_key(name: str) -> str:
    """The partition key of counter ``name``'s total item."""
    return _key(name, "TOTAL")


def _key(name: str, *rest: str) -> str:
    if not name:
        raise CounterError("a counter's name must not be empty")
    key = hier_key("COUNTER", name, *rest)
    if len(key.encode()) > PARTITION_KEY_MAX_BYTES:
        raise CounterError(f"counter {name!r}: its key is longer than {PARTITION_KEY_MAX_BYTES} bytes")
    return key


def _integer(item: Item, attribute: str) -> int | None:
    """An integer attribute; ``None`` when absent."""
    if attribute not in item:
        return None
    text = item[attribute].get("N")
    try:
        return int(text)
    except (TypeError, ValueError):
        raise CounterError(f"{attribute} = {item[attribute]!r} is not an integer count") from None


def _retried(error: Exception) -> bool:
    """Whether a failed increment is sent again: it did nothing, or may have, and sending it
    again with its token cannot count it twice."""
    if isinstance(error, (BotocoreConnectionError, HTTPClientError)):
        return True
    if not isinstance(error, ClientError):
        return False
    code = error.response.get("Error", {}).get("Code", "")
    if code == "TransactionCanceledException":
        reasons = {r.get("Code") for r in error.response.get("CancellationReasons", [])}
        return bool(reasons) and reasons <= RETRIED_CANCELLATIONS
    return code in RETRIED_CODES


class Counters:
    """The counters of one table, with ``shards`` shards each per Region; this writer is Region
    ``region`` (numbered from 0, alike in every Region) of the ``regions`` that write them.
    ``client`` is a boto3 DynamoDB client; by default one configured from the environment."""

    def __init__(
        self,
        table: str,
        *,
        shards: int,
        partition_key: str = "pk",
        region: int = 0,
        regions: int = 1,
        client: Any = None,
        retry_seconds: float = 60.0,
    ) -> None:
        if not 1 <= shards <= MAX_SHARDS:
            raise CounterError(f"a counter needs 1 to {MAX_SHARDS} shards, not {shards}")
        if not 1 <= regions <= MAX_REGIONS or not 0 <= region < regions:
            raise CounterError(
                f"Region {region} of {regions}: Regions are numbered from 0, and 1 to {MAX_REGIONS}"
            )
        if not 0 <= retry_seconds <= MAX_RETRY_SECONDS:
            raise CounterError(f"retry_seconds must be 0 to {MAX_RETRY_SECONDS:g}: a token lasts 10 minutes")
        self.table = table
        self.shards = shards
        self.partition_key = partition_key
        self.region = region
        self.regions = regions
        self.retry_seconds = retry_seconds
        self.client = client if client is not None else _dynamodb.client()

    def increment(self, name: str, n: int = 1) -> int:
        """Adds ``n`` to counter ``name`` on a random shard of this Region's, exactly once; returns
        the shard. If it raises, the increment may or may not have counted."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"a counter is incremented by an integer, not {n!r}")
        shard = self.region * self.shards + random.randrange(self.shards)
        request = {
            "TransactItems": [
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": {self.partition_key: {"S": shard_key(name, shard)}},
                        "UpdateExpression": "ADD #count :n",
                        "ExpressionAttributeNames": {"#count": COUNT_ATTRIBUTE},
                        "ExpressionAttributeValues": {":n": {"N": str(n)}},
                    }
                }
            ],
            "ClientRequestToken": str(uuid.uuid4()),
        }
        deadline = time.monotonic() + self.retry_seconds
        attempt = 0
        while True:
            try:
                self.client.transact_write_items(**request)
                return shard
            except (ClientError, BotocoreConnectionError, HTTPClientError) as error:
                attempt += 1
                pause = _dynamodb.backoff(attempt)
                if not _retried(error) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)

    def total(self, name: str) -> int | None:
        """The fast read: the total the counter-aggregator last wrote (one eventually consistent
        ``GetItem``); ``None`` before it has seen the counter."""
        answer = self.client.get_item(
            TableName=self.table,
            Key={self.partition_key: {"S": total_key(name)}},
            ProjectionExpression="#total",
            ExpressionAttributeNames={"#total": TOTAL_ATTRIBUTE},
        )
        return _integer(answer.get("Item", {}), TOTAL_ATTRIBUTE)

    def exact(self, name: str) -> int:
        """The exact read: the sum of every Region's shards, read with strongly consistent
        ``BatchGetItem``s of 100 keys; a shard never written counts as zero."""
        keys = [{self.partition_key: {"S": shard_key(name, k)}} for k in range(self.regions * self.shards)]
        shards = _dynamodb.batch_get(self.client, self.table, keys, consistent=True)
        return sum(_integer(item, COUNT_ATTRIBUTE) or 0 for item in shards)
