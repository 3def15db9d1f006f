"""The emulator's DynamoDB validation and capacity, against what DynamoDB documents
(scripts/dynamodb_rules.py, scripts/meter.py, scripts/moto-server.py), each beside moto's own
answer to the same request: the rule is what makes the emulator answer as AWS does.

    .tools/moto/bin/python scripts/moto-server-tests/test_dynamodb_rules.py

starts one emulator under SIDESTREAM_MOTO_CHECK=1 on a free loopback port for the whole file (so
that every answer is also checked against moto's serializer, and moto's own `ConsumedCapacity` is
kept beside the emulator's), and runs moto alone in this process (`mock_aws`) for comparison.
"""

import json
import unittest
import uuid

import boto3
from botocore.exceptions import ClientError
from moto import mock_aws

from emulator import REGION, Emulator, client

MOTO_CONSUMED_CAPACITY = "x-sidestream-moto-consumed-capacity"


def issues_table(dynamodb, name):
    """A table keyed `id`, with a global index `project-num` projecting `name`, and a stream."""
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": "project", "AttributeType": "S"},
            {"AttributeName": "num", "AttributeType": "N"},
        ],
        GlobalSecondaryIndexes=[{
            "IndexName": "project-num",
            "KeySchema": [{"AttributeName": "project", "KeyType": "HASH"}, {"AttributeName": "num", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["name"]},
        }],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )


def item(key, size, **more):
    """An item keyed `key` whose size is `size` bytes by DynamoDB's rules (developer guide, "Item
    sizes and formats": the names' and the strings' UTF-8 bytes)."""
    attributes = {"id": {"S": key}, **more}
    used = sum(len(n) + len(v.get("S", "")) for n, v in attributes.items()) + len("body")
    return {**attributes, "body": {"S": "x" * (size - used)}}


class Both:
    """The same requests to the emulator and to moto alone, for comparison."""

    def __init__(self, emulator):
        self.emulator = client(emulator.endpoint)
        self.mock = mock_aws()
        self.mock.start()
        self.moto = boto3.client("dynamodb", region_name=REGION)

    def each(self):
        return (("emulator", self.emulator), ("moto", self.moto))

    def stop(self):
        self.mock.stop()


class DynamoDBRules(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.emulator = Emulator(env={"SIDESTREAM_MOTO_CHECK": "1"})
        cls.addClassCleanup(cls.emulator.stop)
        cls.both = Both(cls.emulator)
        cls.addClassCleanup(cls.both.stop)
        cls.table = f"rules-{uuid.uuid4().hex[:8]}"
        for _, dynamodb in cls.both.each():
            issues_table(dynamodb, cls.table)
        cls.client = cls.both.emulator

    def rules(self):
        return self.emulator.control("SidestreamControl.Rules", {})

    def refusal(self, call):
        """The error code and message of `call`, or None when it succeeded."""
        try:
            call()
        except ClientError as error:
            return error.response["Error"]["Code"], error.response["Error"]["Message"]
        return None

    def stream_records(self):
        """How many records the table's stream holds in the emulator."""
        streams = client(self.emulator.endpoint, "dynamodbstreams")
        arn = self.client.describe_table(TableName=self.table)["Table"]["LatestStreamArn"]
        total = 0
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            # Through the emulator's empty pages (at most two in a row), to the end.
            empty = 0
            while iterator and empty < 3:
                page = streams.get_records(ShardIterator=iterator)
                total += len(page["Records"])
                empty = 0 if page["Records"] else empty + 1
                iterator = page.get("NextShardIterator")
        return total

    # ------------------------------------------------------------------ capacity
    # Developer guide, "DynamoDB read and write operations" (read-write-operations.html): a write
    # costs one unit per KB of the larger of the item before and after; a strongly consistent read
    # one unit per 4 KB (the minimum for a missing item), an eventually consistent one half; a
    # Query or Scan the total size of the items it read, rounded up to 4 KB once; a BatchWriteItem
    # each item's units, summed. "Global secondary indexes" (GSI.html): an index read is billed by
    # its entries' projected size, and an update that changes an index key writes the index twice.

    def consumed(self, call, **request):
        """What the emulator answers as `ConsumedCapacity`, and what moto alone would have."""
        answer = call(**request)
        moto = answer["ResponseMetadata"]["HTTPHeaders"].get(MOTO_CONSUMED_CAPACITY)
        return answer["ConsumedCapacity"], json.loads(moto) if moto else None

    def test_writes_are_billed_by_the_larger_item_per_kb(self):
        key = uuid.uuid4().hex
        ours, theirs = self.consumed(self.client.put_item, TableName=self.table, Item=item(key, 1500), ReturnConsumedCapacity="TOTAL")
        self.assertEqual(ours, {"TableName": self.table, "CapacityUnits": 2.0})
        self.assertEqual(theirs["CapacityUnits"], 1.0, "moto answers 1 whatever the size")
        # A smaller item over a larger: the larger, 2.1 KB, is 3 units.
        self.client.put_item(TableName=self.table, Item=item(key, 2100))
        ours, _ = self.consumed(self.client.put_item, TableName=self.table, Item=item(key, 100), ReturnConsumedCapacity="TOTAL")
        self.assertEqual(ours["CapacityUnits"], 3.0)
        self.client.put_item(TableName=self.table, Item=item(key, 2100))
        ours, theirs = self.consumed(self.client.delete_item, TableName=self.table, Key={"id": {"S": key}}, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(ours["CapacityUnits"], 3.0, "a 2 KB+ delete")
        self.assertEqual(theirs["CapacityUnits"], 1.0)
        ours, theirs = self.consumed(
            self.client.update_item, TableName=self.table, Key={"id": {"S": key}},
            UpdateExpression="SET body = :b", ExpressionAttributeValues={":b": {"S": "y" * 3000}},
            ReturnConsumedCapacity="TOTAL",
        )
        self.assertEqual(ours["CapacityUnits"], 3.0)
        self.assertEqual(theirs["CapacityUnits"], 0.5)

    def test_reads_are_billed_per_4_kb_and_a_missing_item_the_minimum(self):
        key = uuid.uuid4().hex
        self.client.put_item(TableName=self.table, Item=item(key, 5000))
        for consistent, units in ((True, 2.0), (False, 1.0)):
            ours, theirs = self.consumed(self.client.get_item, TableName=self.table, Key={"id": {"S": key}}, ConsistentRead=consistent, ReturnConsumedCapacity="TOTAL")
            self.assertEqual(ours["CapacityUnits"], units)
            self.assertEqual(theirs["CapacityUnits"], 0.5)
        missing = {"id": {"S": uuid.uuid4().hex}}
        for consistent, units in ((True, 1.0), (False, 0.5)):
            ours, _ = self.consumed(self.client.get_item, TableName=self.table, Key=missing, ConsistentRead=consistent, ReturnConsumedCapacity="TOTAL")
            self.assertEqual(ours["CapacityUnits"], units)

    def test_a_batch_write_sums_each_items_units(self):
        writes = [{"PutRequest": {"Item": item(uuid.uuid4().hex, 500)}}, {"PutRequest": {"Item": item(uuid.uuid4().hex, 3500)}}]
        answer = self.client.batch_write_item(RequestItems={self.table: writes}, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(answer["ConsumedCapacity"], [{"TableName": self.table, "CapacityUnits": 5.0}])
        theirs = json.loads(answer["ResponseMetadata"]["HTTPHeaders"][MOTO_CONSUMED_CAPACITY])
        self.assertEqual(theirs[0]["CapacityUnits"], 1.0)

    def test_a_query_of_an_index_bills_the_index_by_its_entries(self):
        project = uuid.uuid4().hex
        for n in range(3):
            self.client.put_item(TableName=self.table, Item=item(uuid.uuid4().hex, 3000, project={"S": project}, num={"N": str(n)}, name={"S": "n"}))
        ours, theirs = self.consumed(
            self.client.query, TableName=self.table, IndexName="project-num",
            KeyConditionExpression="project = :p", ExpressionAttributeValues={":p": {"S": project}},
            ReturnConsumedCapacity="INDEXES",
        )
        # Three entries of id, project, num and name: well under 4 KB, eventually consistent.
        self.assertEqual(ours, {
            "TableName": self.table, "CapacityUnits": 0.5, "Table": {"CapacityUnits": 0.0},
            "GlobalSecondaryIndexes": {"project-num": {"CapacityUnits": 0.5}},
        })
        self.assertNotIn("GlobalSecondaryIndexes", theirs, "moto breaks down no global index")

    def test_a_scan_bills_the_items_it_read_rounded_up_once(self):
        table = f"scan-{uuid.uuid4().hex[:8]}"
        self.client.create_table(
            TableName=table, KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
        )
        for _ in range(10):
            self.client.put_item(TableName=table, Item=item(uuid.uuid4().hex, 1024))
        # 10 KB read, filtered to nothing: 3 units of 4 KB, halved.
        ours, theirs = self.consumed(
            self.client.scan, TableName=table, FilterExpression="attribute_exists(nothing)", ReturnConsumedCapacity="TOTAL",
        )
        self.assertEqual(ours["CapacityUnits"], 1.5)
        self.assertEqual(theirs["CapacityUnits"], 1.0)
        ours, _ = self.consumed(self.client.scan, TableName=table, Limit=2, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
        self.assertEqual(ours["CapacityUnits"], 1.0)

    def test_an_update_of_an_index_key_writes_the_index_twice(self):
        key = {"id": {"S": uuid.uuid4().hex}}
        first = self.client.put_item(
            TableName=self.table, Item={**key, "project": {"S": "p"}, "num": {"N": "1"}}, ReturnConsumedCapacity="INDEXES",
        )["ConsumedCapacity"]
        self.assertEqual(first["GlobalSecondaryIndexes"], {"project-num": {"CapacityUnits": 1.0}})
        self.assertEqual(first["CapacityUnits"], 2.0)
        moved, _ = self.consumed(
            self.client.update_item, TableName=self.table, Key=key, UpdateExpression="SET num = :n",
            ExpressionAttributeValues={":n": {"N": "2"}}, ReturnConsumedCapacity="INDEXES",
        )
        self.assertEqual(moved["GlobalSecondaryIndexes"], {"project-num": {"CapacityUnits": 2.0}})
        # An attribute the index does not project: no index write, and no entry for it.
        untouched, _ = self.consumed(
            self.client.update_item, TableName=self.table, Key=key, UpdateExpression="SET unprojected = :o",
            ExpressionAttributeValues={":o": {"S": "o"}}, ReturnConsumedCapacity="INDEXES",
        )
        self.assertNotIn("GlobalSecondaryIndexes", untouched)
        self.assertEqual(untouched["CapacityUnits"], 1.0)

    def test_the_meter_bills_what_the_answers_say(self):
        before = self.emulator.control("SidestreamControl.Meter", {})["dynamodb"]["tables"].get(self.table, {})
        key = uuid.uuid4().hex
        # An item in the index too: its entry is billed with the table's writes.
        indexed = item(key, 2500, project={"S": "p"}, num={"N": "7"})
        said = self.client.put_item(TableName=self.table, Item=indexed, ReturnConsumedCapacity="TOTAL")["ConsumedCapacity"]["CapacityUnits"]
        said += self.client.get_item(TableName=self.table, Key={"id": {"S": key}}, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")["ConsumedCapacity"]["CapacityUnits"]
        after = self.emulator.control("SidestreamControl.Meter", {})["dynamodb"]["tables"][self.table]
        billed = (after.get("wru", 0) - before.get("wru", 0)) + (after.get("rru", 0) - before.get("rru", 0))
        self.assertEqual(billed, said)
        self.assertEqual(said, 5.0, "3 units of the item, 1 of its index entry, 1 of a strongly consistent read")

    # ------------------------------------------------------------------ expressions
    # Developer guide, "Using expression attribute values": every value defined must be used;
    # DynamoDB answers ValidationException "Value provided in ExpressionAttributeValues unused in
    # expressions: keys: {…}", before it reads the item.

    def test_an_unused_expression_value_is_refused_whatever_the_condition(self):
        key = {"id": {"S": uuid.uuid4().hex}}
        requests = {
            "PutItem": lambda c: c.put_item(TableName=self.table, Item=key, ConditionExpression="attribute_not_exists(id)", ExpressionAttributeValues={":unused": {"S": "x"}}),
            "DeleteItem": lambda c: c.delete_item(TableName=self.table, Key=key, ConditionExpression="attribute_exists(id)", ExpressionAttributeValues={":unused": {"S": "x"}}),
            "Scan": lambda c: c.scan(TableName=self.table, ExpressionAttributeValues={":unused": {"S": "x"}}, FilterExpression="attribute_exists(id)"),
            "TransactWriteItems": lambda c: c.transact_write_items(TransactItems=[{"Put": {
                "TableName": self.table, "Item": key, "ConditionExpression": "attribute_not_exists(id)",
                "ExpressionAttributeValues": {":unused": {"S": "x"}}}}]),
        }
        before = self.rules().get("expression-placeholders", 0)
        for operation, request in requests.items():
            with self.subTest(operation=operation):
                refused = self.refusal(lambda: request(self.client))
                self.assertEqual(refused, ("ValidationException", "Value provided in ExpressionAttributeValues unused in expressions: keys: {:unused}"))
                self.assertNotEqual(self.refusal(lambda: request(self.both.moto)), refused, "moto alone accepts it")
        self.assertEqual(self.rules().get("expression-placeholders", 0) - before, len(requests))
        self.assertNotIn("Item", self.client.get_item(TableName=self.table, Key=key), "nothing was written")

    def test_an_unused_expression_name_is_refused(self):
        refused = self.refusal(lambda: self.client.scan(TableName=self.table, ExpressionAttributeNames={"#n": "name"}))
        self.assertEqual(refused, ("ValidationException", "Value provided in ExpressionAttributeNames unused in expressions: keys: {#n}"))

    # ------------------------------------------------------------------ BatchWriteItem
    # API reference, BatchWriteItem: "DynamoDB rejects the entire batch write operation" when it
    # holds more than 25 requests, operations on the same item, or one invalid request.

    def test_a_batch_naming_one_key_twice_is_refused_whole(self):
        number_keyed = f"numbers-{uuid.uuid4().hex[:8]}"
        for _, dynamodb in self.both.each():
            dynamodb.create_table(
                TableName=number_keyed, KeySchema=[{"AttributeName": "n", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "n", "AttributeType": "N"}], BillingMode="PAY_PER_REQUEST",
            )
        key = {"id": {"S": uuid.uuid4().hex}}
        batches = {
            "a put and a delete": {self.table: [{"PutRequest": {"Item": {**key, "a": {"S": "1"}}}}, {"DeleteRequest": {"Key": key}}]},
            "1000 and 1e3": {number_keyed: [{"PutRequest": {"Item": {"n": {"N": "1000"}}}}, {"PutRequest": {"Item": {"n": {"N": "1e3"}, "b": {"S": "2"}}}}]},
        }
        for case, batch in batches.items():
            with self.subTest(case=case):
                self.assertEqual(self.refusal(lambda: self.client.batch_write_item(RequestItems=batch)), ("ValidationException", "Provided list of item keys contains duplicates"))
                self.assertIsNone(self.refusal(lambda: self.both.moto.batch_write_item(RequestItems=batch)), "moto alone writes it")
        self.assertNotIn("Item", self.client.get_item(TableName=self.table, Key=key))
        self.assertNotIn("Item", self.client.get_item(TableName=number_keyed, Key={"n": {"N": "1000"}}))

    def test_a_batch_of_26_requests_is_refused(self):
        batch = {self.table: [{"PutRequest": {"Item": {"id": {"S": uuid.uuid4().hex}}}} for _ in range(26)]}
        code, _ = self.refusal(lambda: self.client.batch_write_item(RequestItems=batch))
        self.assertEqual(code, "ValidationException")
        self.assertIsNone(self.refusal(lambda: self.both.moto.batch_write_item(RequestItems=batch)), "moto alone writes 26")
        self.assertEqual(self.client.scan(TableName=self.table, ScanFilter={"id": {"AttributeValueList": [batch[self.table][0]["PutRequest"]["Item"]["id"]], "ComparisonOperator": "EQ"}})["Count"], 0)

    def test_a_batch_with_one_invalid_request_writes_nothing(self):
        first = {"id": {"S": uuid.uuid4().hex}}
        # The second put lacks the key attribute: DynamoDB rejects the entire batch.
        batch = {self.table: [{"PutRequest": {"Item": first}}, {"PutRequest": {"Item": {"body": {"S": "no key"}}}}]}
        before = self.rules().get("batch-write-nothing-written", 0)
        records = self.stream_records()
        for name, dynamodb in self.both.each():
            code, _ = self.refusal(lambda: dynamodb.batch_write_item(RequestItems=batch))
            self.assertEqual(code, "ValidationException")
        self.assertNotIn("Item", self.client.get_item(TableName=self.table, Key=first))
        self.assertIn("Item", self.both.moto.get_item(TableName=self.table, Key=first), "moto alone wrote the first")
        self.assertEqual(self.stream_records(), records, "and no stream record")
        self.assertEqual(self.rules().get("batch-write-nothing-written", 0) - before, 1)

    # ------------------------------------------------------------------ transactions and updates

    def test_a_transaction_cancelled_by_an_items_content_says_validation_error(self):
        # API reference, TransactWriteItems: the cancellation reason codes are None,
        # ConditionalCheckFailed, ItemCollectionSizeLimitExceeded, TransactionConflict,
        # ProvisionedThroughputExceeded, ThrottlingError and ValidationError.
        key = {"id": {"S": uuid.uuid4().hex}}
        other = {"id": {"S": uuid.uuid4().hex}}
        reasons = {}
        for name, dynamodb in self.both.each():
            dynamodb.put_item(TableName=self.table, Item={**key, "word": {"S": "text"}})
            try:
                dynamodb.transact_write_items(TransactItems=[
                    {"Put": {"TableName": self.table, "Item": other}},
                    {"Update": {"TableName": self.table, "Key": key, "UpdateExpression": "ADD word :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}},
                ])
            except ClientError as error:
                reasons[name] = error.response["Error"]["Code"], [r["Code"] for r in error.response.get("CancellationReasons", [])]
        self.assertEqual(reasons["emulator"], ("TransactionCanceledException", ["None", "ValidationError"]))
        self.assertEqual(reasons["moto"], ("ValidationException", []), "moto alone refuses the request instead")
        self.assertNotIn("Item", self.client.get_item(TableName=self.table, Key=other))

    def test_an_update_that_only_removes_creates_no_item_and_no_record(self):
        # Writes nothing: "If you perform a PutItem or UpdateItem operation that does not change
        # any data in an item, DynamoDB Streams does not write a stream record" (Streams.html).
        key = {"id": {"S": uuid.uuid4().hex}}
        records = self.stream_records()
        for _, dynamodb in self.both.each():
            dynamodb.update_item(TableName=self.table, Key=key, UpdateExpression="REMOVE gone, #b", ExpressionAttributeNames={"#b": "body"})
        self.assertNotIn("Item", self.client.get_item(TableName=self.table, Key=key))
        self.assertEqual(self.stream_records(), records)
        self.assertIn("Item", self.both.moto.get_item(TableName=self.table, Key=key), "moto alone creates the bare key")
        # A SET still creates it.
        self.client.update_item(TableName=self.table, Key=key, UpdateExpression="SET a = :a REMOVE gone", ExpressionAttributeValues={":a": {"S": "a"}})
        self.assertIn("Item", self.client.get_item(TableName=self.table, Key=key))

    # ------------------------------------------------------------------ streams turned off and on
    # Developer guide, "Change data capture for DynamoDB Streams": a disabled stream's shards are
    # closed and stay readable for 24 hours; re-enabled, it is a new stream. DescribeStream: a
    # shard with an EndingSequenceNumber is closed. GetRecords: a null NextShardIterator means
    # the shard is closed and read to its end.

    def read_to_the_end(self, streams, arn):
        """Every record of the stream `arn`'s shards, read from TRIM_HORIZON until a page carries
        no next iterator (at most 50 pages a shard: an open shard never ends)."""
        records, ended = [], 0
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            for _ in range(50):
                page = streams.get_records(ShardIterator=iterator)
                records += page["Records"]
                iterator = page.get("NextShardIterator")
                if iterator is None:
                    ended += 1
                    break
        return records, ended

    def test_a_stream_turned_off_is_closed_and_readable_and_on_again_is_a_new_stream(self):
        table = f"onoff-{uuid.uuid4().hex[:8]}"
        streams = client(self.emulator.endpoint, "dynamodbstreams")
        for _, dynamodb in self.both.each():
            dynamodb.create_table(
                TableName=table, KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
            )
            for n in range(2):
                dynamodb.put_item(TableName=table, Item={"id": {"S": f"before-{n}"}})
            dynamodb.update_table(TableName=table, StreamSpecification={"StreamEnabled": False})
        # A write while the stream is off makes no record (moto alone fails it: it still writes
        # to the stream, whose view type it dropped).
        self.client.put_item(TableName=table, Item={"id": {"S": "while-off"}})
        old = self.client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        described = streams.describe_stream(StreamArn=old)["StreamDescription"]
        self.assertEqual(described["StreamStatus"], "DISABLED")
        (shard,) = described["Shards"]
        self.assertIn("EndingSequenceNumber", shard["SequenceNumberRange"], "the shard is closed")
        records, ended = self.read_to_the_end(streams, old)
        self.assertEqual([r["dynamodb"]["Keys"]["id"]["S"] for r in records], ["before-0", "before-1"])
        self.assertEqual(ended, 1, "the closed shard's last page has no next iterator")
        self.assertEqual(records[-1]["dynamodb"]["SequenceNumber"], shard["SequenceNumberRange"]["EndingSequenceNumber"])
        moto_streams = boto3.client("dynamodbstreams", region_name=REGION)
        moto_old = self.both.moto.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        self.assertIsNotNone(self.refusal(lambda: moto_streams.describe_stream(StreamArn=moto_old)), "moto alone fails it")

        self.client.update_table(TableName=table, StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
        new = self.client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        self.assertNotEqual(new, old)
        self.client.put_item(TableName=table, Item={"id": {"S": "after"}})
        latest = streams.describe_stream(StreamArn=new)["StreamDescription"]
        self.assertEqual(latest["StreamStatus"], "ENABLED")
        self.assertNotEqual(latest["Shards"][0]["ShardId"], shard["ShardId"])
        iterator = streams.get_shard_iterator(StreamArn=new, ShardId=latest["Shards"][0]["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        after = []
        for _ in range(3):  # through the emulator's empty pages
            page = streams.get_records(ShardIterator=iterator)
            after += page["Records"]
            iterator = page["NextShardIterator"]
        self.assertEqual([r["dynamodb"]["Keys"]["id"]["S"] for r in after], ["after"])
        self.assertGreater(int(after[0]["dynamodb"]["SequenceNumber"]), int(records[-1]["dynamodb"]["SequenceNumber"]))
        listed = {s["StreamArn"] for s in streams.list_streams(TableName=table)["Streams"]}
        self.assertEqual(listed, {old, new})
        self.assertEqual(self.read_to_the_end(streams, old)[0], records, "the old stream is as it was")


if __name__ == "__main__":
    unittest.main()
