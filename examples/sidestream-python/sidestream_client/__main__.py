"""The command line: ``python -m sidestream_client key|grid|counter …``; ``--help`` on each.

DynamoDB is reached as the AWS SDKs reach it: the Region from ``AWS_REGION`` (or
``AWS_DEFAULT_REGION``), the endpoint from ``AWS_ENDPOINT_URL_DYNAMODB`` or ``AWS_ENDPOINT_URL``
(an emulator), credentials from the usual chain.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import os
import re
import sys
from collections.abc import Sequence
from itertools import islice
from typing import Any, Callable

from botocore.exceptions import BotoCoreError, ClientError

from .counters import Counters
from .index import DefinitionError, IndexDefinition, IndexReader
from .keys import (
    PARTITION_KEY_MAX_BYTES,
    SORT_KEY_MAX_BYTES,
    Component,
    Desc,
    KeyCodecError,
    Value,
    decode_binary,
    decode_text,
    encode_binary,
    encode_text,
    format_number,
    format_time,
    parse_number,
)


def _from_typed(typed: Any) -> Value:
    """A component from typed JSON: DynamoDB JSON (``{"S": …}``, ``{"N": …}``, ``{"B": base64}``,
    ``{"BOOL": …}``, ``{"NULL": true}``), ``{"DATE": "YYYY-MM-DD"}`` or ``{"DATETIME": RFC 3339}``,
    as ``sidestream key`` reads them."""
    if not isinstance(typed, dict) or len(typed) != 1:
        raise ValueError(f'expected an object with one type key like {{"S":"text"}}, got {json.dumps(typed)}')
    ((kind, inner),) = typed.items()
    if kind == "BOOL" and isinstance(inner, bool):
        return inner
    if kind == "NULL" and inner is True:
        return None
    if not isinstance(inner, str):
        raise ValueError(
            f"{kind} takes {'true' if kind == 'NULL' else 'a JSON string'}, got {json.dumps(inner)}"
        )
    if kind == "S":
        return inner
    if kind == "N":
        return parse_number(inner)
    if kind == "B":
        return base64.b64decode(inner, validate=True)
    if kind == "DATE" and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", inner):
        return dt.date.fromisoformat(inner)
    if kind == "DATETIME":
        return dt.datetime.fromisoformat(re.sub(r"[Zz]$", "+00:00", inner))
    raise ValueError(
        f"cannot read {json.dumps(typed)}: use S, N, B, BOOL, NULL, DATE (YYYY-MM-DD) or DATETIME"
    )


def _to_typed(value: Value) -> dict[str, Any]:
    """A component as typed JSON, the inverse of :func:`_from_typed`."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bytes):
        return {"B": base64.b64encode(value).decode()}
    if isinstance(value, dt.datetime):
        return {"DATETIME": format_time(value) + "Z"}
    if isinstance(value, dt.date):
        return {"DATE": format_time(value)}
    return {"N": format_number(value)}


def _print(value: Any) -> None:
    """One line of compact JSON, as ``sidestream`` prints it."""
    print(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _positions(text: str) -> set[int]:
    return {int(p) for p in text.split(",") if p}


def _key_encode(args: argparse.Namespace) -> int:
    typed = json.loads(args.tuple)
    if not isinstance(typed, list):
        raise ValueError('expected a JSON array of typed values, like [{"S":"Open"},{"N":"42"}]')
    desc = _positions(args.desc)
    components: list[Component] = []
    for position, item in enumerate(typed):
        value = _from_typed(item)
        components.append(Desc(value) if position in desc else value)
    kind, limit = (
        ("partition key", PARTITION_KEY_MAX_BYTES) if args.partition else ("sort key", SORT_KEY_MAX_BYTES)
    )
    key: str | bytes = encode_binary(components) if args.binary else encode_text(components)
    size = len(key) if isinstance(key, bytes) else len(key.encode())
    if size == 0:
        raise KeyCodecError(f"{kind} is empty; DynamoDB key attributes must be at least 1 byte")
    if size > limit:
        raise KeyCodecError(f"{kind} is {size} bytes; DynamoDB allows at most {limit} bytes")
    _print({"B": base64.b64encode(key).decode()} if isinstance(key, bytes) else {"S": key})
    return 0


def _key_decode(args: argparse.Namespace) -> int:
    components = (
        decode_binary(base64.b64decode(args.key, validate=True)) if args.binary else decode_text(args.key)
    )
    if args.desc is not None:
        desc = _positions(args.desc)
        for position, component in enumerate(components):
            if isinstance(component, Desc) and position not in desc:
                raise KeyCodecError(f"component {position} is descending but --desc does not list it")
            if not isinstance(component, Desc) and position in desc:
                raise KeyCodecError(f"component {position} is ascending but --desc lists it")
    values = [c.value if isinstance(c, Desc) else c for c in components]
    _print([_to_typed(v) for v in values])
    return 0


def _grid(args: argparse.Namespace) -> int:
    if not args.indexes:
        raise DefinitionError("give the index definitions with --indexes or MULTIKEY_INDEXES")
    definition = IndexDefinition.from_indexes(args.indexes, args.index, os.environ.get("MULTIKEY_INDEX_TABLE"))
    reader = IndexReader(definition, table=args.table, nulls_index=args.nulls_index)
    pages = reader.pages(args.scope, args.field, descending=args.desc, limit=args.limit)
    for page in islice(pages, args.pages or None):
        for row in page.rows:
            print(row.to_json())
    return 0


def _counter(args: argparse.Namespace) -> int:
    counters = Counters(
        args.table,
        shards=getattr(args, "shards", 1),  # the total item's key does not depend on the shards
        partition_key=args.partition_key,
        region=getattr(args, "region_number", 0),
        regions=getattr(args, "regions", 1),
    )
    if args.action == "increment":
        _print({"shard": counters.increment(args.name, args.by)})
    elif args.action == "total":
        _print({"total": counters.total(args.name)})
    else:
        _print({"exact": counters.exact(args.name)})
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sidestream_client",
        description="Sidestream's keys, multikey index and sharded counters, from the command line.",
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    key = commands.add_parser("key", help="encode and decode K1/B1 keys").add_subparsers(
        required=True, metavar="ACTION"
    )
    form = argparse.ArgumentParser(add_help=False)
    form.add_argument("--binary", action="store_true", help="B1 keys (base64) instead of K1 text keys")
    encode = key.add_parser(
        "encode", parents=[form], help='a typed tuple, e.g. [{"S":"Open"},{"N":"42"}], to a key'
    )
    encode.add_argument("tuple", metavar="TUPLE_JSON")
    encode.add_argument(
        "--desc", default="", metavar="LIST", help="comma-separated 0-based positions that sort descending"
    )
    encode.add_argument(
        "--partition", action="store_true", help="check the 2048-byte partition-key limit, not 1024"
    )
    encode.set_defaults(run=_key_encode)
    decode = key.add_parser(
        "decode", parents=[form], help="a key (S text, or base64 with --binary) to its typed tuple"
    )
    decode.add_argument("key", metavar="KEY")
    decode.add_argument("--desc", metavar="LIST", help="check that exactly these positions are descending")
    decode.set_defaults(run=_key_decode)

    grid = commands.add_parser(
        "grid", help="a scope's items sorted by a field, as `sidestream grid --output json`"
    )
    grid.add_argument("--table", required=True, help="the base table")
    grid.add_argument(
        "--indexes",
        default=os.environ.get("MULTIKEY_INDEXES"),
        help="MULTIKEY_INDEXES (default: from the environment)",
    )
    grid.add_argument("--index", help="which index of --indexes to read (needed when it defines several)")
    grid.add_argument(
        "--nulls-index", required=True, help="the base table's index by scope and first tiebreaker"
    )
    grid.add_argument(
        "--scope", required=True, action="append", help="the scope's value; once per scope attribute"
    )
    grid.add_argument("--field", required=True, help="the field to sort by (a key of the indexed map)")
    grid.add_argument(
        "--desc", action="store_true", help="highest values first (items without one still come last)"
    )
    grid.add_argument("--limit", type=int, default=20, help="rows per page, 1-100 (default 20)")
    grid.add_argument("--pages", type=int, default=1, help="pages to print (default 1; 0 for all)")
    grid.set_defaults(run=_grid)

    counter = commands.add_parser("counter", help="write-sharded counters").add_subparsers(
        required=True, metavar="ACTION"
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--table", required=True, help="the counter table")
    common.add_argument("--name", required=True, help="the counter's name")
    common.add_argument(
        "--partition-key", default="pk", help="the table's partition key attribute (default pk)"
    )
    sharded = argparse.ArgumentParser(add_help=False)
    sharded.add_argument("--shards", type=int, required=True, help="shards per counter per Region")
    sharded.add_argument(
        "--regions", type=int, default=1, help="Regions writing the table's counters (default 1)"
    )
    increment = counter.add_parser(
        "increment", parents=[common, sharded], help="add to a random shard, exactly once"
    )
    increment.add_argument("--by", type=int, default=1, help="the amount (default 1)")
    increment.add_argument(
        "--region-number", type=int, default=0, help="this Region's number, from 0 (default 0)"
    )
    counter.add_parser("total", parents=[common], help="the aggregated total (one GetItem)")
    counter.add_parser("exact", parents=[common, sharded], help="the sum of every shard (consistent reads)")
    for action, sub in counter.choices.items():
        sub.set_defaults(run=_counter, action=action)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; the exit status is 1 after an error, which goes to stderr."""
    args = _parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except (ValueError, ClientError, BotoCoreError) as error:
        print(f"sidestream_client: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
