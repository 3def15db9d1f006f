"""A direct reader of a multikey index: a scope's items sorted by one field, as ``sidestream grid``
pages them, read from the index table and the base table without the grid's Lambda or cursor.

The order is the grid's (``ops/operations/src/grid/read.rs``, ``docs/grid-view.md``): first every
item with an index entry for the field, in the entry's sort-key order (value, tiebreakers, base
key), ascending or descending; tombstones (items with ``sidestream_expires``) are read past and
never shown. Then, in both orders, every other item of the scope, by the first tiebreaker
ascending, read from the base table's index by scope and that tiebreaker (the "nulls index",
``project-num`` in the docs) and passed over when the indexer does write an entry for it
(:func:`has_entry`, ``formats::has_entry``). A page holds ``limit`` rows whenever that many
remain, the two phases sharing the page where one ends, and its ``next`` is ``None`` exactly when
nothing remains: each phase reads one item past the page to know.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from . import _dynamodb
from ._dynamodb import Item
from .keys import (
    PARTITION_KEY_MAX_BYTES,
    SORT_KEY_MAX_BYTES,
    InvalidNumber,
    Value,
    encode_binary,
    encode_text,
    format_number,
    hier_key,
    parse_number,
)

MAX_LIMIT = 100
"""The largest page: the grid's, one ``BatchGetItem``."""
TOMBSTONE_ATTRIBUTE = "sidestream_expires"
"""The attribute that tells a tombstone from an entry (docs/formats.md, "Tombstones")."""
Phase = Literal["index", "nulls"]
"""The grid's two phases: the items with an entry for the field, then the others."""
VALUE_ATTRIBUTE = "value"
"""An entry's map value."""
TOMBSTONE_GROWTH = 16
"""After tombstones, each ``Query`` reads this many times the tombstones read so far past what the
page still needs, as the grid's ``index_limit`` does, so that a long run of them costs a few
queries rather than one per page."""
NULLS_BATCH = 100
"""Items a ``Query`` of the nulls index lists, each round."""


class DefinitionError(ValueError):
    """An index definition the reader cannot use."""


@dataclass(frozen=True)
class IndexDefinition:
    """One index of ``MULTIKEY_INDEXES`` (``shared/formats/src/config.rs``), with the base table's
    key attributes."""

    name: str
    table: str
    source: str
    base_key: tuple[str, ...]
    partition_key: str = "pk"
    sort_key: str = "sk"
    scope: tuple[str, ...] = ()
    tiebreakers: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    binary: bool = False

    @classmethod
    def from_indexes(
        cls, document: str | Mapping[str, Any], name: str | None = None, default_table: str | None = None
    ) -> IndexDefinition:
        """The index ``name`` of a ``MULTIKEY_INDEXES`` document (JSON text or parsed), or its only
        index when ``name`` is ``None``. An index that leaves out ``table`` is in
        ``default_table``: the stack's index table, its functions' ``MULTIKEY_INDEX_TABLE``."""
        indexes = json.loads(document) if isinstance(document, str) else document
        base_key = tuple(indexes.get("base_key", ()))
        if not 1 <= len(base_key) <= 2:
            raise DefinitionError(f"base_key must name 1 or 2 attributes, found {len(base_key)}")
        defined = indexes.get("indexes", [])
        if name is not None:
            chosen = [i for i in defined if i.get("name") == name]
            if not chosen:
                raise DefinitionError(f"MULTIKEY_INDEXES has no index named {name!r}")
        elif len(defined) != 1:
            raise DefinitionError(f"MULTIKEY_INDEXES defines {len(defined)} indexes; name the one to read")
        else:
            chosen = defined
        index = dict(chosen[0])
        if not index.get("table") and default_table:
            index["table"] = default_table
        missing = [field for field in ("name", "table", "source") if not index.get(field)]
        if missing:
            raise DefinitionError(
                f"the index definition lacks {', '.join(missing)}"
                + (" (an index without a table is in MULTIKEY_INDEX_TABLE's)" if "table" in missing else "")
            )
        key_format = index.get("key_format", "text")
        if key_format not in ("text", "binary"):
            raise DefinitionError(f"key_format must be text or binary, not {key_format!r}")
        return cls(
            name=index["name"],
            table=index["table"],
            source=index["source"],
            base_key=base_key,
            partition_key=index.get("partition_key", "pk"),
            sort_key=index.get("sort_key", "sk"),
            scope=tuple(index.get("scope", ())),
            tiebreakers=tuple(index.get("tiebreakers", ())),
            include=tuple(index.get("include", ())),
            binary=key_format == "binary",
        )

    def columns(self) -> list[str]:
        """The attributes a row shows: the order attribute (the first tiebreaker), then the
        ``include`` ones, as the grid's ``output::columns``."""
        columns = [self.tiebreakers[0]]
        for name in self.include:
            if name not in columns and name not in self.base_key:
                columns.append(name)
        return columns


@dataclass(frozen=True)
class Position:
    """Where the next page starts: its phase and the key to continue after, as DynamoDB's
    ``ExclusiveStartKey`` (``None``: from the phase's start)."""

    phase: Phase
    key: Item | None


@dataclass(frozen=True)
class Row:
    """One item of a page, in DynamoDB JSON as the low-level client gives it."""

    key: Item
    """The item's key in the base table."""
    phase: Phase
    """``index`` (sorted by the field's value) or ``nulls`` (no indexed value, by order)."""
    value: Item | None
    """The field's value; ``None`` in the nulls phase and for list and set sources."""
    attributes: Item
    """The order attribute and the included ones, as the item has them."""

    def to_json(self) -> str:
        """The row as ``sidestream grid --output json`` prints it (``grid/output.rs``): keys in
        byte order, binary as base64, numbers as DynamoDB's strings."""
        row = {
            "attributes": {name: dynamodb_json(v) for name, v in self.attributes.items()},
            "key": {name: dynamodb_json(v) for name, v in self.key.items()},
            "phase": self.phase,
            "value": None if self.value is None else dynamodb_json(self.value),
        }
        return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Page:
    """The rows of one page, and where the next one starts (``None`` after the last)."""

    rows: list[Row]
    next: Position | None


def dynamodb_json(attribute: Item) -> Any:
    """A low-level client's attribute value as DynamoDB JSON text holds it: B and BS as base64."""
    ((kind, inner),) = attribute.items()
    if kind == "B":
        inner = base64.b64encode(inner).decode()
    elif kind == "BS":
        inner = [base64.b64encode(b).decode() for b in inner]
    elif kind == "M":
        inner = {name: dynamodb_json(v) for name, v in inner.items()}
    elif kind == "L":
        inner = [dynamodb_json(v) for v in inner]
    return {kind: inner}


class _Unkeyable(Exception):
    """An attribute value that cannot be a key component."""


def _component(attribute: Item) -> Value:
    """A scalar attribute as a key component, as the indexer pushes it."""
    ((kind, inner),) = attribute.items()
    if kind == "N":
        return parse_number(inner)
    if kind in ("S", "B", "BOOL"):
        return cast(Value, inner)
    if kind == "NULL":
        return None
    raise _Unkeyable(kind)


def _canonical_numbers(texts: Iterator[str]) -> set[str]:
    """The canonical text of each DynamoDB number (an NS or list element's entry id)."""
    numbers = set()
    for text in texts:
        try:
            numbers.add(format_number(parse_number(text)))
        except InvalidNumber:
            continue
    return numbers


def _member(source: Item | None, member: str) -> tuple[bool, Item | None]:
    """Whether the source attribute has a keyable member ``member``, and its value (maps only)."""
    if source is None:
        return False, None
    ((kind, inner),) = source.items()
    if kind == "M":
        value = inner.get(member)
        keyable = value is not None and next(iter(value)) not in ("M", "L", "SS", "NS", "BS")
        return keyable, value if keyable else None
    if kind == "SS":
        return member in inner, None
    if kind == "NS":
        return member in _canonical_numbers(iter(inner)), None
    if kind == "L":
        strings = {e["S"] for e in inner if "S" in e}
        return member in strings or member in _canonical_numbers(e["N"] for e in inner if "N" in e), None
    return False, None


def has_entry(definition: IndexDefinition, item: Item, member: str) -> bool:
    """Whether the indexer writes an entry for ``member`` (a map key, or an element's text) of
    the base item ``item``, as ``formats::has_entry`` decides: the item has its key, the member
    with a scalar value, scope attributes that are S or N, and keys within DynamoDB's limits
    (a long string value is truncated to fit, so only a value of another type can be too long)."""
    d = definition
    if any(name not in item for name in d.base_key):
        return False
    keyable, value = _member(item.get(d.source), member)
    scope = [item.get(name, {}) for name in d.scope]
    segments = [v.get("S", v.get("N")) for v in scope]
    if not keyable or None in segments:
        return False
    partition_key = hier_key(*segments, member)
    if not 0 < len(partition_key.encode()) <= PARTITION_KEY_MAX_BYTES:
        return False

    def size(components: list[Value]) -> int:
        return len(encode_binary(components) if d.binary else encode_text(components).encode())

    try:
        suffix = [_component(item.get(name, {"NULL": True})) for name in d.tiebreakers]
        budget = SORT_KEY_MAX_BYTES - size(suffix + [_component(item[name]) for name in d.base_key])
        if budget < 0 or value is None:
            return budget >= 0
        return size([_component(value)]) <= budget or ("S" in value and size([""]) <= budget)
    except (_Unkeyable, InvalidNumber):
        return False


class IndexReader:
    """Pages through one index's scopes, field by field, as ``sidestream grid`` does.

    ``table`` is the base table and ``nulls_index`` its global secondary index keyed by the
    index's scope attributes (partition key) and first tiebreaker (sort key). ``client`` is a
    boto3 DynamoDB client; by default one configured from the environment."""

    def __init__(
        self, definition: IndexDefinition, *, table: str, nulls_index: str, client: Any = None
    ) -> None:
        if not definition.scope:
            raise DefinitionError(f"index {definition.name}: the nulls index needs a scope attribute")
        if not definition.tiebreakers:
            raise DefinitionError(
                f"index {definition.name}: the nulls index needs a tiebreaker (its sort key)"
            )
        self.definition = definition
        self.table = table
        self.nulls_index = nulls_index
        self.client = client if client is not None else _dynamodb.client()

    def page(
        self,
        scope: Sequence[str],
        field: str,
        *,
        descending: bool = False,
        limit: int = 20,
        start: Position | None = None,
    ) -> Page:
        """The page of the scope (one value per scope attribute) sorted by ``field`` that starts
        at ``start`` (the previous page's ``next``; the first page without one)."""
        if len(scope) != len(self.definition.scope):
            raise ValueError(f"the index's scope is {list(self.definition.scope)}; got {len(scope)} values")
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit {limit} is not between 1 and {MAX_LIMIT}")
        rows: list[Row] = []
        at = start or Position("index", None)
        if at.phase == "index":
            more = self._index_rows(scope, field, descending, limit, at.key, rows)
            if more is not None:
                return Page(rows, more)
            at = Position("nulls", None)
        return Page(rows, self._nulls_rows(scope, field, limit, at.key, rows))

    def pages(
        self, scope: Sequence[str], field: str, *, descending: bool = False, limit: int = 20
    ) -> Iterator[Page]:
        """Every page of the scope, first to last."""
        start = None
        while True:
            page = self.page(scope, field, descending=descending, limit=limit, start=start)
            yield page
            if page.next is None:
                return
            start = page.next

    def _row(self, item: Item, phase: Phase, value: Item | None) -> Row:
        d = self.definition
        return Row(
            key={name: item[name] for name in d.base_key if name in item},
            phase=phase,
            value=value,
            attributes={name: item[name] for name in d.columns() if name in item},
        )

    def _index_rows(
        self,
        scope: Sequence[str],
        field: str,
        descending: bool,
        limit: int,
        start: Item | None,
        rows: list[Row],
    ) -> Position | None:
        """Appends the index entries after ``start``, up to ``limit``; where more follow."""
        d = self.definition
        partition_key = hier_key(*scope, field)
        if not 0 < len(partition_key.encode()) <= PARTITION_KEY_MAX_BYTES:
            return None  # no partition key fits the field's name: the indexer wrote no entry
        entries: list[Item] = []
        tombstones = 0
        while True:
            request: dict[str, Any] = {
                "TableName": d.table,
                "KeyConditionExpression": "#pk = :pk",
                "ExpressionAttributeNames": {"#pk": d.partition_key},
                "ExpressionAttributeValues": {":pk": {"S": partition_key}},
                "ScanIndexForward": not descending,
                "Limit": min(limit + 1 - len(entries) + TOMBSTONE_GROWTH * tombstones, 2**31 - 1),
            }
            if start is not None:
                request["ExclusiveStartKey"] = start
            answer = self.client.query(**request)
            for item in answer.get("Items", []):
                if TOMBSTONE_ATTRIBUTE in item:
                    tombstones += 1
                else:
                    entries.append(item)
            start = answer.get("LastEvaluatedKey") or None
            if start is None or len(entries) > limit:
                break
        rows.extend(self._row(entry, "index", entry.get(VALUE_ATTRIBUTE)) for entry in entries[:limit])
        if len(entries) <= limit:
            return None
        last = entries[limit - 1]
        return Position("index", {d.partition_key: last[d.partition_key], d.sort_key: last[d.sort_key]})

    def _nulls_rows(
        self, scope: Sequence[str], field: str, limit: int, start: Item | None, rows: list[Row]
    ) -> Position | None:
        """Appends the scope's items without an entry for ``field`` after ``start`` until the page
        holds ``limit`` rows; where more follow."""
        d = self.definition
        names = {f"#s{i}": name for i, name in enumerate(d.scope)}
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": self.nulls_index,
            "KeyConditionExpression": " AND ".join(f"{n} = :{n[1:]}" for n in names),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {f":s{i}": {"S": v} for i, v in enumerate(scope)},
            "Limit": NULLS_BATCH,
        }
        resume = start
        # The key of a nulls-index item, as ExclusiveStartKey wants it: the table's and the index's.
        position_names = [*d.base_key, *d.scope, d.tiebreakers[0]]
        while True:
            if start is not None:
                request["ExclusiveStartKey"] = start
            answer = self.client.query(**request)
            listed = [i for i in answer.get("Items", []) if all(name in i for name in d.base_key)]
            found = {self._identity(item): item for item in self._base_items(listed, field)}
            for item in listed:
                base = found.get(self._identity(item))
                if base is None or has_entry(d, base, field):
                    continue  # deleted meanwhile, or listed in the index phase
                if len(rows) == limit:
                    return Position("nulls", resume)
                rows.append(self._row(base, "nulls", None))
                resume = {name: item[name] for name in position_names if name in item}
            start = answer.get("LastEvaluatedKey") or None
            if start is None:
                return None

    def _identity(self, item: Item) -> tuple[Any, ...]:
        return tuple(next(iter(item[name].items())) for name in self.definition.base_key)

    def _base_items(self, listed: list[Item], field: str) -> list[Item]:
        """The listed items from the base table: their key, scope, tiebreakers, included
        attributes and the field, to tell whether each has an entry."""
        if not listed:
            return []
        d = self.definition
        names: dict[str, str] = {}
        for name in (*d.base_key, *d.scope, *d.tiebreakers, *d.include):
            if name not in names.values():
                names[f"#a{len(names)}"] = name
        projection = ", ".join([*names, "#src.#field"])
        names.update({"#src": d.source, "#field": field})
        keys = [{name: item[name] for name in d.base_key} for item in listed]
        return _dynamodb.batch_get(self.client, self.table, keys, projection=(projection, names))
