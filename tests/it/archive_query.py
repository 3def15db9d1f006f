"""Runs the template's Athena named queries over a local copy of the TTL archive with DuckDB.

Reads one JSON object on stdin:
  {"root": DIR, "glob": "table=*/year=*/month=*/day=*/*",   (the Glue table's location template,
                                                               each ${partition} a *)
   "database": NAME, "table": NAME,
   "columns": [{"Name":..., "Type": <Hive type>}], "partitions": [{"Name":..., "Type":...}],
   "queries": [{"sql": <QueryString as the template has it>, "params": [...]}]}
and prints {"rows": [[row, ...] per query]} with each row a list of strings (or null).

The Glue table becomes a DuckDB view of the same name in a schema of the database's name, over
`read_json` with Hive partitioning, with the Glue columns' Hive types turned into DuckDB's. The
query text runs unchanged: Athena's and DuckDB's SQL agree on everything it uses (quoted
identifiers, struct field access, `?` parameters, DISTINCT, ORDER BY). One difference is bridged
here: the OpenX JSON SerDe matches JSON keys to Glue's lower-case names case-insensitively,
DuckDB's `read_json` does not, so the view names the fields as the archive writes them (`Item`,
and DynamoDB's type tags in capitals).
"""

import json
import sys

import duckdb

TAGS = {"s", "n", "b", "bool", "null", "m", "l", "ss", "ns", "bs"}
SCALARS = {"string": "VARCHAR", "int": "INTEGER", "bigint": "BIGINT", "boolean": "BOOLEAN"}


def split_fields(text):
    """Splits `a:T,b:U` at the commas outside angle brackets."""
    fields, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "," and depth == 0:
            fields.append(text[start:i])
            start = i + 1
    fields.append(text[start:])
    return fields


def duck_type(hive):
    """A Hive type (as Glue holds it) as a DuckDB type."""
    hive = hive.strip()
    if hive in SCALARS:
        return SCALARS[hive]
    if hive.startswith("struct<") and hive.endswith(">"):
        parts = []
        for field in split_fields(hive[len("struct<"):-1]):
            name, _, inner = field.partition(":")
            key = name.upper() if name in TAGS else name
            parts.append(f'"{key}" {duck_type(inner)}')
        return "STRUCT(" + ", ".join(parts) + ")"
    if hive.startswith("map<") and hive.endswith(">"):
        key, value = split_fields(hive[len("map<"):-1])
        return f"MAP({duck_type(key)}, {duck_type(value)})"
    raise SystemExit(f"archive_query: no DuckDB type for the Hive type {hive!r}")


def main():
    spec = json.load(sys.stdin)
    columns = {
        ("Item" if c["Name"] == "item" else c["Name"]): duck_type(c["Type"]) for c in spec["columns"]
    }
    hive_types = {p["Name"]: duck_type(p["Type"]) for p in spec["partitions"]}
    files = spec["root"].rstrip("/") + "/" + spec["glob"]
    con = duckdb.connect()
    con.execute(f'CREATE SCHEMA "{spec["database"]}"')
    con.execute(
        f'CREATE VIEW "{spec["database"]}"."{spec["table"]}" AS SELECT * FROM read_json('
        f"{quote(files)}, format = 'newline_delimited', hive_partitioning = true, "
        f"hive_types = {duck_literal(hive_types)}, columns = {duck_literal(columns)})"
    )
    out = []
    for query in spec["queries"]:
        rows = con.execute(query["sql"], query["params"]).fetchall()
        out.append([[None if v is None else str(v) for v in row] for row in rows])
    json.dump({"rows": out}, sys.stdout)


def quote(text):
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def duck_literal(mapping):
    """A DuckDB struct literal of strings: {'k': 'v', ...}."""
    return "{" + ", ".join(f"{quote(k)}: {quote(v)}" for k, v in mapping.items()) + "}"


if __name__ == "__main__":
    main()
