"""The emulator's TransactWriteItems with a ClientRequestToken, against what DynamoDB documents
(scripts/moto-server.py, `client_tokens_make_transactions_idempotent`): a repeat within 10 minutes
of a successful original changes nothing and succeeds; a repeat with other parameters fails with
IdempotentParameterMismatchException; a cancelled original is not remembered; after 10 minutes the
token is forgotten.

    .tools/moto/bin/python scripts/moto-server-tests/test_idempotency.py

starts one emulator on a free loopback port (as scripts/moto does) for the whole file and stops
it; under scripts/moto (SIDESTREAM_MOTO_ENDPOINT set) it uses that one instead.
`SIDESTREAM_MOTO_CHECK=1` is passed on to the emulator it starts.
"""

import unittest
import uuid

from botocore.exceptions import ClientError

from emulator import Emulator, client


class TransactWriteItemsIdempotency(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.emulator = Emulator()
        cls.addClassCleanup(cls.emulator.stop)
        cls.client = client(cls.emulator.endpoint)
        cls.table = f"idempotency-{uuid.uuid4().hex[:8]}"
        cls.client.create_table(
            TableName=cls.table,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )

    def key(self):
        return {"pk": {"S": uuid.uuid4().hex}}

    def add(self, key, token, by="1", condition=None, **parameters):
        """One TransactWriteItems: `ADD n :by` on the item at `key`, with `token`."""
        update = {
            "TableName": self.table,
            "Key": key,
            "UpdateExpression": "ADD n :by",
            "ExpressionAttributeValues": {":by": {"N": by}},
        }
        if condition is not None:
            update["ConditionExpression"] = condition
        return self.client.transact_write_items(
            TransactItems=[{"Update": update}], ClientRequestToken=token, **parameters
        )

    def count(self, key):
        item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        return None if item is None else int(item["n"]["N"])

    def error_code(self, call):
        with self.assertRaises(ClientError) as raised:
            call()
        return raised.exception.response["Error"]["Code"]

    def test_a_repeat_with_the_same_token_counts_once(self):
        key, token = self.key(), str(uuid.uuid4())
        first = self.add(key, token)
        second = self.add(key, token)
        self.assertEqual(self.count(key), 1)
        def body(answer):
            return {k: v for k, v in answer.items() if k != "ResponseMetadata"}

        self.assertEqual(body(second), body(first), "a repeat answers as the original did")
        self.assertEqual(second["ResponseMetadata"]["HTTPStatusCode"], 200)

    def test_a_repeat_with_other_parameters_is_a_mismatch(self):
        key, token = self.key(), str(uuid.uuid4())
        self.add(key, token)
        code = self.error_code(lambda: self.add(key, token, by="2"))
        self.assertEqual(code, "IdempotentParameterMismatchException")
        self.assertEqual(self.count(key), 1, "the mismatched repeat applied nothing")
        # The same parameters are still a plain repeat.
        self.add(key, token)
        self.assertEqual(self.count(key), 1)

    def test_different_tokens_count_twice(self):
        key = self.key()
        self.add(key, str(uuid.uuid4()))
        self.add(key, str(uuid.uuid4()))
        self.assertEqual(self.count(key), 2)

    def test_a_cancelled_transaction_is_not_remembered(self):
        key, token = self.key(), str(uuid.uuid4())
        exists = {"condition": "attribute_exists(pk)"}
        code = self.error_code(lambda: self.add(key, token, **exists))
        self.assertEqual(code, "TransactionCanceledException")
        self.assertIsNone(self.count(key))
        self.client.put_item(TableName=self.table, Item={**key, "n": {"N": "10"}})
        # The same request with the same token now succeeds, and applies.
        self.add(key, token, **exists)
        self.assertEqual(self.count(key), 11)
        self.add(key, token, **exists)
        self.assertEqual(self.count(key), 11)

    def test_a_token_is_forgotten_after_ten_minutes(self):
        # Ages every token the emulator holds: another client's too, on a shared emulator.
        key, token = self.key(), str(uuid.uuid4())
        self.add(key, token)
        self.emulator.control("SidestreamControl.AgeClientTokens", {"Seconds": 599})
        self.add(key, token)
        self.assertEqual(self.count(key), 1, "held for 10 minutes")
        self.emulator.control("SidestreamControl.AgeClientTokens", {"Seconds": 2})
        self.add(key, token)
        self.assertEqual(self.count(key), 2, "a new request after 10 minutes")
        self.add(key, token)
        self.assertEqual(self.count(key), 2, "and remembered again")

    def test_a_repeat_reports_and_is_billed_read_units(self):
        key, token = self.key(), str(uuid.uuid4())
        self.add(key, token, ReturnConsumedCapacity="TOTAL")

        def units():
            return self.emulator.control("SidestreamControl.Meter", {})["dynamodb"]["tables"][self.table]

        before = units()
        repeat = self.add(key, token, ReturnConsumedCapacity="TOTAL")
        after = units()
        self.assertEqual(
            repeat["ConsumedCapacity"],
            [{"TableName": self.table, "CapacityUnits": 1.0, "ReadCapacityUnits": 1.0}],
        )
        self.assertEqual(after.get("wru", 0), before.get("wru", 0), "a repeat writes nothing")
        self.assertEqual(after.get("rru", 0) - before.get("rru", 0), 1, "one strongly consistent read")
        self.assertEqual(self.count(key), 1)

    def test_a_transaction_holding_a_binary_is_idempotent_too(self):
        # A body holding a binary is answered by moto's whole application, not `dynamodb_directly`.
        key, token = self.key(), str(uuid.uuid4())
        update = {
            "TableName": self.table,
            "Key": key,
            "UpdateExpression": "SET b = :b ADD n :by",
            "ExpressionAttributeValues": {":b": {"B": b"\x00\xff"}, ":by": {"N": "1"}},
        }
        for _ in range(2):
            self.client.transact_write_items(TransactItems=[{"Update": update}], ClientRequestToken=token)
        self.assertEqual(self.count(key), 1)
        update["ExpressionAttributeValues"][":b"] = {"B": b"\x00\xfe"}
        code = self.error_code(
            lambda: self.client.transact_write_items(TransactItems=[{"Update": update}], ClientRequestToken=token)
        )
        self.assertEqual(code, "IdempotentParameterMismatchException")

    def test_a_token_longer_than_36_characters_is_refused(self):
        key = self.key()
        code = self.error_code(lambda: self.add(key, "x" * 37))
        self.assertEqual(code, "ValidationException")
        self.assertIsNone(self.count(key))
        self.add(key, "x" * 36)
        self.assertEqual(self.count(key), 1)


if __name__ == "__main__":
    unittest.main()
