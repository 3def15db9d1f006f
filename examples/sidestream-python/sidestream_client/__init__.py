"""Sidestream from Python: its order-preserving keys, a direct reader of its multikey index, and
its write-sharded counters.

- :mod:`sidestream_client.keys`: K1 and B1 keys, encoded and decoded, and hierarchical keys.
- :mod:`sidestream_client.index`: a scope's items sorted by a field, row for row as
  ``sidestream grid --output json`` prints them.
- :mod:`sidestream_client.counters`: increment (exactly once), the total, the exact sum.
"""

from .counters import CounterError, Counters
from .index import DefinitionError, IndexDefinition, IndexReader, Page, Position, Row, has_entry
from .keys import (
    Desc,
    KeyCodecError,
    decode_binary,
    decode_text,
    encode_binary,
    encode_text,
    hier_key,
    hier_split,
    parse_number,
)

__version__ = "0.1.0"

__all__ = [
    "CounterError",
    "Counters",
    "DefinitionError",
    "Desc",
    "IndexDefinition",
    "IndexReader",
    "KeyCodecError",
    "Page",
    "Position",
    "Row",
    "decode_binary",
    "decode_text",
    "encode_binary",
    "encode_text",
    "has_entry",
    "hier_key",
    "hier_split",
    "parse_number",
]
