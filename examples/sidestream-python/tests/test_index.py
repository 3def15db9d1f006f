"""Tests of the index reader without AWS: the definition, ``has_entry``, the row JSON the grid
prints, and pages read from an in-memory DynamoDB."""

from __future__ import annotations

import json
import unittest
from decimal import Decimal
from typing import Any

from sidestream_client.index import DefinitionError, IndexDefinition, IndexReader, Row, has_entry
from sidestream_client.keys import encode_text, hier_key

EXAMPLE: dict[str, Any] = {
    "base_key": ["id"],
    "indexes": [
        {
            "name": "custom-fields",
            "table": "issue-attrib-index",
            "source": "custom_fields",
            "scope": ["project"],
            "tiebreakers": ["num"],
            "include": ["name", "state"],
        }
    ],
}
DEFINITION = IndexDefinition.from_indexes(EXAMPLE)
Item = dict[str, Any]


class Definitions(unittest.TestCase):
    def test_the_definition_comes_from_multikey_indexes(self) -> None:
        self.assertEqual(DEFINITION, IndexDefinition.from_indexes(json.dumps(EXAMPLE), "custom-fields"))
        self.assertEqual(
            (DEFINITION.table, DEFINITION.partition_key, DEFINITION.sort_key, DEFINITION.binary),
            ("issue-attrib-index", "pk", "sk", False),
        )
        self.assertEqual(DEFINITION.columns(), ["num", "name", "state"])
        binary = {**EXAMPLE, "indexes": [{**EXAMPLE["indexes"][0], "key_format": "binary"}]}
        self.assertTrue(IndexDefinition.from_indexes(binary).binary)
        with self.assertRaisesRegex(DefinitionError, "no index named 'nope'"):
            IndexDefinition.from_indexes(EXAMPLE, "nope")
        two = {**EXAMPLE, "indexes": EXAMPLE["indexes"] * 2}
        with self.assertRaisesRegex(DefinitionError, "defines 2 indexes"):
            IndexDefinition.from_indexes(two)


def issue(**fields: Any) -> Item:
    item: Item = {"id": {"S": "af34"}, "project": {"S": "35e9"}, "num": {"N": "3"}, "name": {"S": "Girder"}}
    item.update(fields)
    return item


class HasEntry(unittest.TestCase):
    def test_scalar_map_values_have_entries(self) -> None:
        for value in [{"N": "42"}, {"S": "x" * 5000}, {"B": b"\x00" * 10}, {"BOOL": True}, {"NULL": True}]:
            with self.subTest(value=str(value)[:30]):
                self.assertTrue(has_entry(DEFINITION, issue(custom_fields={"M": {"f": value}}), "f"))

    def test_what_the_indexer_cannot_key_has_none(self) -> None:
        long_field = "f" * 2100
        cases = {
            "no field": issue(custom_fields={"M": {"g": {"N": "1"}}}),
            "no source": issue(),
            "a map value": issue(custom_fields={"M": {"f": {"M": {}}}}),
            "a list value": issue(custom_fields={"M": {"f": {"L": []}}}),
            "a binary too long for the sort key": issue(custom_fields={"M": {"f": {"B": b"\x01" * 600}}}),
            "no scope": {
                k: v for k, v in issue(custom_fields={"M": {"f": {"N": "1"}}}).items() if k != "project"
            },
            "a scope that is not S or N": issue(
                project={"BOOL": True}, custom_fields={"M": {"f": {"N": "1"}}}
            ),
            "a tiebreaker that is a map": issue(num={"M": {}}, custom_fields={"M": {"f": {"N": "1"}}}),
        }
        for reason, item in cases.items():
            with self.subTest(reason):
                self.assertFalse(has_entry(DEFINITION, item, "f"))
        item = issue(custom_fields={"M": {long_field: {"N": "1"}}})
        self.assertFalse(has_entry(DEFINITION, item, long_field), "its partition key is over 2048 bytes")

    def test_a_missing_tiebreaker_is_null_and_elements_are_members(self) -> None:
        without_num = {k: v for k, v in issue(custom_fields={"M": {"f": {"N": "1"}}}).items() if k != "num"}
        self.assertTrue(has_entry(DEFINITION, without_num, "f"))
        self.assertTrue(has_entry(DEFINITION, issue(custom_fields={"SS": ["a", "b"]}), "b"))
        self.assertTrue(has_entry(DEFINITION, issue(custom_fields={"NS": ["1.50"]}), "1.5"))
        self.assertTrue(has_entry(DEFINITION, issue(custom_fields={"L": [{"N": "15E-1"}, {"M": {}}]}), "1.5"))
        self.assertFalse(has_entry(DEFINITION, issue(custom_fields={"L": [{"BOOL": True}]}), "true"))


class RowJson(unittest.TestCase):
    def test_rows_print_as_the_grid_prints_them(self) -> None:
        # docs/grid-view.md's `sidestream grid --output json`, and grid/output.rs's pinned line.
        entry = {
            "pk": {"S": "35e9#3fe6"},
            "sk": {"S": "nM-Z8.4~#nA6#sb706#"},
            "entry": {"S": "3fe6"},
            "value": {"N": "-1.5"},
            "id": {"S": "b706"},
            "project": {"S": "35e9"},
            "num": {"N": "6"},
            "name": {"S": "Refund for cancelled inspection"},
            "state": {"S": "closed"},
            "sidestream_seq": {"S": "0" * 40},
        }
        reader = IndexReader(DEFINITION, table="issues", nulls_index="project-num", client=object())
        self.assertEqual(
            reader._row(entry, "index", entry["value"]).to_json(),
            '{"attributes":{"name":{"S":"Refund for cancelled inspection"},"num":{"N":"6"},'
            '"state":{"S":"closed"}},"key":{"id":{"S":"b706"}},"phase":"index","value":{"N":"-1.5"}}',
        )
        nulls = Row({"id": {"S": "b712"}}, "nulls", None, {"name": {"S": "Paint"}, "num": {"N": "12"}})
        self.assertEqual(
            nulls.to_json(),
            '{"attributes":{"name":{"S":"Paint"},"num":{"N":"12"}},"key":{"id":{"S":"b712"}},"phase":"nulls","value":null}',
        )
        binary = Row(
            {"id": {"B": b"\x00\xff"}}, "index", {"M": {"z": {"BS": [b"\x01"]}, "a": {"S": "é\n"}}}, {}
        )
        self.assertEqual(
            binary.to_json(),
            '{"attributes":{},"key":{"id":{"B":"AP8="}},"phase":"index","value":{"M":{"a":{"S":"é\\n"},"z":{"BS":["AQ=="]}}}}',
        )


def order(attribute: Item) -> Any:
    ((kind, value),) = attribute.items()
    return Decimal(value) if kind == "N" else value


class FakeDynamoDB:
    """``Query`` and ``BatchGetItem`` over in-memory tables, paged as DynamoDB pages them: items
    in key order, ``Limit`` counting every item read, ``LastEvaluatedKey`` while more remain."""

    def __init__(self, tables: dict[str, list[Item]], keys: dict[str, tuple[str, ...]]) -> None:
        self.tables = tables
        self.keys = keys  # table or index name: its key attributes, partition first

    def query(
        self,
        TableName: str,
        KeyConditionExpression: str,
        ExpressionAttributeNames: dict[str, str],
        ExpressionAttributeValues: Item,
        Limit: int,
        IndexName: str | None = None,
        ScanIndexForward: bool = True,
        ExclusiveStartKey: Item | None = None,
    ) -> Item:
        keys = self.keys[IndexName or TableName] + self.keys[TableName]
        conditions = [c.split(" = ") for c in KeyConditionExpression.split(" AND ")]
        items = [
            i
            for i in self.tables[TableName]
            if all(i.get(ExpressionAttributeNames[n]) == ExpressionAttributeValues[v] for n, v in conditions)
            and all(k in i for k in keys)
        ]
        items.sort(key=lambda i: [order(i[k]) for k in keys], reverse=not ScanIndexForward)
        start = 0
        if ExclusiveStartKey is not None:
            start = 1 + next(
                n for n, i in enumerate(items) if all(i[k] == v for k, v in ExclusiveStartKey.items())
            )
        page = items[start : start + Limit]
        answer: Item = {"Items": page}
        if start + Limit < len(items):
            answer["LastEvaluatedKey"] = {k: page[-1][k] for k in dict.fromkeys(keys)}
        return answer

    def batch_get_item(self, RequestItems: dict[str, Item]) -> Item:
        ((table, request),) = RequestItems.items()
        found = [i for i in self.tables[table] if {k: i[k] for k in self.keys[table]} in request["Keys"]]
        return {"Responses": {table: found}}


class Pages(unittest.TestCase):
    def setUp(self) -> None:
        values = {"a1": 42, "a2": -1.5, "a3": 7, "a4": 42, "a5": None, "a6": 0, "a7": "map", "a8": None}
        base, index = [], []
        for n, (key, value) in enumerate(values.items(), start=1):
            fields: Item = {} if value is None else {"f": {"M": {}} if value == "map" else {"N": str(value)}}
            item = {
                "id": {"S": key},
                "project": {"S": "35e9"},
                "num": {"N": str(10 - n)},
                "custom_fields": {"M": fields},
            }
            base.append(item)
            if has_entry(DEFINITION, item, "f"):
                sort_key = encode_text([Decimal(str(value)), 10 - n, key])
                index.append(
                    {
                        "pk": {"S": hier_key("35e9", "f")},
                        "sk": {"S": sort_key},
                        "id": item["id"],
                        "num": item["num"],
                        "value": fields["f"],
                    }
                )
                # a tombstone just after each entry, as a moved value leaves one
                index.append(
                    {
                        "pk": {"S": hier_key("35e9", "f")},
                        "sk": {"S": sort_key + "s~#"},
                        "sidestream_expires": {"N": "1"},
                    }
                )
        self.client = FakeDynamoDB(
            {"issues": base, "issue-attrib-index": index},
            {"issues": ("id",), "project-num": ("project", "num"), "issue-attrib-index": ("pk", "sk")},
        )
        self.reader = IndexReader(DEFINITION, table="issues", nulls_index="project-num", client=self.client)

    def rows(self, descending: bool, limit: int) -> list[list[tuple[str, str]]]:
        pages = self.reader.pages(["35e9"], "f", descending=descending, limit=limit)
        return [[(row.key["id"]["S"], row.phase) for row in page.rows] for page in pages]

    def test_entries_in_value_order_then_the_rest_by_num_in_both_orders(self) -> None:
        ascending = [("a2", "index"), ("a6", "index"), ("a3", "index"), ("a4", "index"), ("a1", "index")]
        nulls = [("a8", "nulls"), ("a7", "nulls"), ("a5", "nulls")]  # num 2, 3, 5
        descending = ascending[::-1]
        for limit in (1, 2, 3, 5, 8, 100):
            with self.subTest(limit=limit):
                for desc, indexed in ((False, ascending), (True, descending)):
                    pages = self.rows(desc, limit)
                    self.assertEqual([row for page in pages for row in page], indexed + nulls)
                    self.assertTrue(
                        all(len(page) == limit for page in pages[:-1]), "every page but the last is full"
                    )
                    self.assertTrue(0 < len(pages[-1]) <= limit)


if __name__ == "__main__":
    unittest.main()
