"""What AWS would bill for the requests the local stack's moto answers: DynamoDB read and write
request units by item size, consistency and kind, and S3 requests by class.

The launcher (scripts/moto-server.py) measures every DynamoDB request under its lock, so the
items a request replaces are read before it and the items it leaves after it, and counts every S3
request. `SidestreamControl.Meter` answers the totals as JSON, and with `{"Reset": true}` starts
them again. Lambda, CloudWatch Logs and Step Functions are billed where they run, in the local
stack (`local_stack::bench::cost`); the prices are in scripts/prices.json.

The rules, from the DynamoDB developer guide ("Read/write capacity mode", "Capacity management
for transactions", "Item sizes and formats") and S3's pricing page:

- An item's size is the sum of its attributes' names and values: a string's UTF-8 bytes, a
  binary's bytes, a number's significant digits two to a byte and one more, a boolean or null 1,
  a list or map 3 plus 1 per element (and a map's keys), a set its elements.
- Writes: one write unit per KB (1,024 bytes), rounded up, of the larger of the item before and
  after: a `PutItem`, `UpdateItem`, `DeleteItem`, and each write of a `BatchWriteItem` alike (a
  delete of a missing item, 1). A write refused by its condition is billed by the item it found
  (at least 1). TTL's deletes are not billed.
- A `TransactWriteItems` bills each action twice. AWS documents neither how a `ConditionCheck`
  is billed nor whether a cancelled transaction is: this meter bills a `ConditionCheck` as a
  transactional write of the item it checks, and a cancelled transaction as if every action had
  been applied (the dearer reading of both).
- Reads: one read unit per 4 KB of an item, rounded up, for a strongly consistent read, half for
  an eventually consistent one, twice for a transactional one; a `GetItem` of a missing item,
  the minimum. `Query` and `Scan` are billed by the bytes of the items they read, before any
  filter or projection, rounded up to 4 KB per request; `BatchGetItem` by each item.
- A global or local secondary index's writes ("Global secondary indexes", provisioned throughput
  considerations): an entry put or deleted, one write of its size (the attributes it projects);
  its index key changed, two; only its projected attributes changed, one of the larger; an
  index the write leaves as it was, none. A read of an index is billed by its entries.
- What a request asks for with `ReturnConsumedCapacity` is what it was billed
  (`Measure.consumed_capacity`): one entry per table for the batch and transaction operations,
  `CapacityUnits` (split into read and write units for transactions, as DynamoDB answers them),
  and with `INDEXES` the table's own units and each index's that spent any.
- DynamoDB Streams' requests are free when Lambda's event source mapping makes them, which is
  every caller of the local stack: counted (`requests`), not billed.
- S3: `PUT`, `COPY`, `POST` and `LIST` requests in one class, `GET` and every other read
  (`HEAD` too) in the other; `DELETE` is free.

Besides what is billed, each DynamoDB write is also measured as a *single write*: what the same
item write costs as one unconditional `PutItem` or `DeleteItem` (once, not twice), and nothing
for a write refused by its condition or a `ConditionCheck`. The bench divides the two.
"""

import base64
import collections
import json
import re
import threading
import urllib.parse

from moto.dynamodb.models.dynamo_type import DynamoType

METER = "SidestreamControl.Meter"

KB = 1024
READ_UNIT = 4096


def size(value):
    """The size of an attribute value in DynamoDB JSON (`{"S": "x"}`)."""
    ((kind, v),) = value.items()
    return sized(kind, v, size)


def sized(kind, v, element_size):
    """The size of a value of DynamoDB type `kind`, its list and map elements sized by
    `element_size` (they are DynamoDB JSON in a request, `DynamoType`s in moto's items)."""
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return number_size(v)
    if kind == "B":
        return len(base64.b64decode(v)) if isinstance(v, str) else len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + element_size(e) for e in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + element_size(e) for k, e in v.items())
    if kind == "SS":
        return sum(len(e.encode()) for e in v)
    if kind == "NS":
        return sum(number_size(e) for e in v)
    if kind == "BS":
        return sum(len(base64.b64decode(e)) if isinstance(e, str) else len(e) for e in v)
    raise ValueError(f"no DynamoDB type {kind}")


def number_size(text):
    """A number's size: its significant digits, two to a byte, and one byte more."""
    mantissa = text.lower().split("e")[0]
    digits = "".join(c for c in mantissa if c.isdigit()).strip("0")
    return (max(len(digits), 1) + 1) // 2 + 1


def item_size(item):
    """An item's size: its attributes' names and values."""
    return sum(len(name.encode()) + size(value) for name, value in (item or {}).items())


def stored_size(item):
    """The size of an item as moto holds it (`Item.attrs`, names to `DynamoType`s), by the same
    rules as `item_size`, without writing it out as JSON first."""
    return sum(len(name.encode()) + typed_size(value) for name, value in item.attrs.items())


def typed_size(value):
    """`size` of a `DynamoType`, whose lists and maps hold `DynamoType`s."""
    return sized(value.type, value.value, typed_size)


def write_units(before, after):
    """The write units of one item write: the larger item, per KB, at least 1."""
    return max(1, -(-max(before, after) // KB))


def read_units(nbytes, consistent):
    """The read units of `nbytes` read at once, at least one unit's worth."""
    units = max(1, -(-nbytes // READ_UNIT))
    return units if consistent else units / 2


class Meter:
    """The totals: per table, write units billed and as single writes, read units; requests by
    operation; S3 requests by bucket and class."""

    def __init__(self):
        self.lock = threading.Lock()
        with self.lock:
            self.tables = collections.defaultdict(collections.Counter)
            self.operations = collections.Counter()
            self.s3 = collections.defaultdict(collections.Counter)

    def totals(self):
        with self.lock:
            return {
                "dynamodb": {
                    "tables": {name: dict(counts) for name, counts in sorted(self.tables.items())},
                    "requests": dict(self.operations),
                },
                "s3": {bucket: dict(counts) for bucket, counts in sorted(self.s3.items())},
            }

    def add(self, table, **counts):
        with self.lock:
            self.tables[table].update(counts)

    def answer(self, environ, start_response):
        """`SidestreamControl.Meter`: the totals so far."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        environ["wsgi.input"].read(length)
        body = json.dumps(self.totals()).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def count_stream_read(self, target):
        """Counts one DynamoDB Streams request (free to Lambda)."""
        with self.lock:
            self.operations[target.rsplit(".", 1)[-1]] += 1

    def count_s3(self, environ):
        """Counts one S3 request by its bucket (path-style, as the local stack addresses S3) and
        class."""
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/").strip("/")
        bucket = path.split("/", 1)[0]
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        if method == "DELETE":
            kind = "free"
        elif method in ("PUT", "POST"):
            kind = "put_copy_post_list"
        elif method == "GET" and ("/" not in path or "list-type" in query or "uploads" in query):
            kind = "put_copy_post_list"
        else:
            kind = "get_and_other"
        with self.lock:
            self.s3[bucket][kind] += 1


class Measure:
    """One DynamoDB request measured: `before` reads the items it may replace, `after` bills it
    by its answer."""

    def __init__(self, meter, backend, target, request):
        self.meter = meter
        self.backend = backend
        self.operation = target.rsplit(".", 1)[-1]
        self.request = request
        # Write units billed, by table: what CloudWatch's ConsumedWriteCapacityUnits says.
        self.billed = collections.Counter()
        with meter.lock:
            meter.operations[self.operation] += 1
        # What DynamoDB answers as `ConsumedCapacity`, by table: read and write units, and the
        # indexes' (`consumed_capacity`).
        self.consumed = {}
        # The size stored under each key written, in `keys_written`'s order, and its index entries.
        self.before = []
        self.before_entries = []
        for table, key in self.keys_written():
            held = self.stored(table, key)
            self.before.append(stored_size(held) if held is not None else 0)
            self.before_entries.append(index_entries(self.table(table), held))

    def keys_written(self):
        """Each (table, key) the request may write or check."""
        r, op = self.request, self.operation
        if op == "PutItem":
            yield r["TableName"], self.key_of(r["TableName"], r.get("Item", {}))
        elif op in ("UpdateItem", "DeleteItem"):
            yield r["TableName"], r["Key"]
        elif op == "BatchWriteItem":
            for table, writes in r.get("RequestItems", {}).items():
                for w in writes:
                    if "PutRequest" in w:
                        yield table, self.key_of(table, w["PutRequest"]["Item"])
                    else:
                        yield table, w["DeleteRequest"]["Key"]
        elif op == "TransactWriteItems":
            for action in r.get("TransactItems", []):
                ((kind, a),) = action.items()
                key = self.key_of(a["TableName"], a["Item"]) if kind == "Put" else a["Key"]
                yield a["TableName"], key

    def key_of(self, table, item):
        t = self.table(table)
        if t is None:
            return {}
        names = [t.hash_key_attr] + ([t.range_key_attr] if t.range_key_attr else [])
        return {n: item[n] for n in names if n in item}

    def table(self, name):
        name = name.split("/", 1)[1] if name.startswith("arn:") else name
        return self.backend.tables.get(name)

    def stored(self, table, key):
        """The item stored under `key`, None when there is none. It is looked up in the table's
        items as `Table.get_item` looks it up, without its checks: a key moto cannot look up (its
        range key missing, a value of another shape) is one it holds nothing under."""
        t = self.table(table)
        if t is None or t.hash_key_attr not in key:
            return None
        try:
            held = t.items.get(DynamoType(key[t.hash_key_attr]))
            if t.range_key_attr:
                if t.range_key_attr not in key or held is None:
                    return None
                held = held.get(DynamoType(key[t.range_key_attr]))
        except Exception:  # noqa: BLE001 - see above
            return None
        return held

    def stored_size(self, table, key):
        """The size of the item stored under `key`, 0 when there is none."""
        held = self.stored(table, key)
        return stored_size(held) if held is not None else 0

    def written(self, table, key, before_entries, factor=1):
        """Bills the write units of the indexes of `table` that a write to `key` changed, from
        their entries before (`before_entries`) to the item stored now."""
        after = index_entries(self.table(table), self.stored(table, key))
        for index, units in index_write_units(before_entries, after).items():
            # Billed with the table's own writes (its CloudWatch metric, `billed`, is the table's
            # alone: an index has its own).
            self.meter.add(self.name(table), wru=factor * units, wru_single=units)
            self.charge(table, write=factor * units, index=index)

    def after(self, status, answer, rerun):
        """Bills the request answered with `status` and `answer` (JSON bytes); `rerun(request)`
        answers a request again, for the items a filtered or projected read read."""
        op = self.operation
        ok = status.startswith("2")
        refused = b"ConditionalCheckFailed" in answer
        cancelled = b"TransactionCanceledException" in answer
        name = self.request.get("TableName", "")
        if op in ("PutItem", "UpdateItem", "DeleteItem") and (ok or refused):
            key = next(iter(self.keys_written()))[1]
            old = self.before[0]
            if op == "DeleteItem" or refused:
                new = 0
            elif op == "PutItem":
                # A put stores its item as it came.
                new = item_size(self.request.get("Item"))
            else:
                new = self.stored_size(self.request["TableName"], key)
            units = write_units(old, new)
            self.bill(name, wru=units, wru_single=0 if refused else units, refused=int(refused))
            if ok:
                self.written(name, key, self.before_entries[0])
        elif op == "BatchWriteItem" and ok:
            # moto leaves nothing unprocessed (the fault proxy answers that itself).
            for (table, key), old, entries in zip(self.keys_written(), self.before, self.before_entries):
                units = write_units(old, self.stored_size(table, key))
                self.bill(table, wru=units, wru_single=units)
                self.written(table, key, entries)
        elif op == "TransactWriteItems" and (ok or cancelled):
            for action, old, entries in zip(self.request.get("TransactItems", []), self.before, self.before_entries):
                ((kind, a),) = action.items()
                table = a["TableName"]
                key = self.key_of(table, a["Item"]) if kind == "Put" else a["Key"]
                new = 0 if kind in ("Delete", "ConditionCheck") or not ok else self.stored_size(table, key)
                units = write_units(old, new)
                single = units if ok and kind != "ConditionCheck" else 0
                self.bill(table, wru=2 * units, wru_single=single)
                if ok and kind != "ConditionCheck":
                    self.written(table, key, entries, factor=2)
        elif op == "GetItem" and ok:
            item = json.loads(answer).get("Item")
            consistent = bool(self.request.get("ConsistentRead"))
            if self.request.get("ProjectionExpression") and item is not None:
                item = json.loads(rerun(strip(self.request, "ProjectionExpression", "ExpressionAttributeNames"))).get("Item")
            self.read(name, read_units(item_size(item), consistent))
        elif op == "BatchGetItem" and ok:
            for table, wanted in self.request.get("RequestItems", {}).items():
                consistent = bool(wanted.get("ConsistentRead"))
                plain = {"RequestItems": {table: strip(wanted, "ProjectionExpression", "ExpressionAttributeNames")}}
                items = json.loads(answer).get("Responses", {}).get(table, [])
                if wanted.get("ProjectionExpression"):
                    items = json.loads(rerun(plain)).get("Responses", {}).get(table, [])
                # Each item its own units; a key asked and not found costs nothing here.
                units = sum(read_units(item_size(i), consistent) for i in items)
                self.read(table, units)
        elif op == "TransactGetItems" and ok:
            for action, got in zip(self.request.get("TransactItems", []), json.loads(answer).get("Responses", [])):
                self.read(action["Get"]["TableName"], 2 * read_units(item_size(got.get("Item")), True))
        elif op in ("Query", "Scan") and ok:
            consistent = bool(self.request.get("ConsistentRead"))
            shaped = any(k in self.request for k in ("FilterExpression", "ProjectionExpression", "Select", "ScanFilter", "QueryFilter"))
            items = json.loads(answer).get("Items", [])
            if shaped:
                plain = strip(self.request, "FilterExpression", "ProjectionExpression", "Select", "ScanFilter", "QueryFilter")
                plain = drop_unused_names(plain)
                items = json.loads(rerun(plain)).get("Items", [])
            self.read(name, read_units(sum(item_size(i) for i in items), consistent), index=self.request.get("IndexName"))

    def read(self, table, units, index=None):
        """Bills `units` read from `table` (through `index`)."""
        self.meter.add(self.name(table), rru=units)
        self.charge(table, read=units, index=index)

    def charge(self, table, read=0.0, write=0.0, index=None):
        """Counts units into what the request answers as `ConsumedCapacity`."""
        spent = self.consumed.setdefault(self.name(table), {"read": 0.0, "write": 0.0, "indexes": {}})
        if index is None:
            spent["read"] += read
            spent["write"] += write
        else:
            units = spent["indexes"].setdefault(index, {"read": 0.0, "write": 0.0})
            units["read"] += read
            units["write"] += write

    def consumed_capacity(self):
        """`ConsumedCapacity` as DynamoDB answers it for this request, for
        `ReturnConsumedCapacity` TOTAL or INDEXES (None for NONE): a list for the batch and
        transaction operations, one entry per table, else the one table's entry."""
        mode = self.request.get("ReturnConsumedCapacity", "NONE")
        if mode not in ("TOTAL", "INDEXES"):
            return None
        split = self.operation.startswith("Transact")
        entries = [
            capacity_entry(table, spent, mode == "INDEXES", self.index_kinds(table), split)
            for table, spent in self.consumed.items()
        ]
        if self.operation in ("BatchWriteItem", "BatchGetItem", "TransactWriteItems", "TransactGetItems"):
            return entries
        if entries:
            return entries[0]
        nothing = {"read": 0.0, "write": 0.0, "indexes": {}}
        return capacity_entry(self.name(self.request.get("TableName", "")), nothing, mode == "INDEXES", {}, split)

    def index_kinds(self, table):
        """Each index of `table`: whether it is global (else local)."""
        t = self.table(table)
        if t is None:
            return {}
        kinds = {i.name: True for i in getattr(t, "global_indexes", [])}
        kinds.update({i.name: False for i in getattr(t, "indexes", [])})
        return kinds

    def name(self, table):
        return table.split("/", 1)[1] if table.startswith("arn:") else table

    def bill(self, table, **counts):
        """Bills a write to `table` itself (its indexes: `written`)."""
        self.billed[self.name(table)] += counts["wru"]
        self.meter.add(self.name(table), **counts)
        self.charge(table, write=counts["wru"])


def strip(request, *names):
    return {k: v for k, v in request.items() if k not in names}


def drop_unused_names(request):
    """The request without the expression names and values no expression it keeps uses."""
    used = " ".join(str(request.get(k, "")) for k in ("KeyConditionExpression", "ConditionExpression"))
    out = dict(request)
    for field in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        if field in out:
            kept = {k: v for k, v in out[field].items() if re.search(re.escape(k) + r"(?![\w])", used)}
            if kept:
                out[field] = kept
            else:
                del out[field]
    return out


def capacity_entry(table, spent, indexes, kinds, split):
    """One table's `ConsumedCapacity`: `CapacityUnits`, the table's and its indexes' together;
    with `split` (the transactions, as DynamoDB answers them) also as read and write units where
    any were spent; with INDEXES the table's own (`Table`, 0 when only an index was read) and
    each index's that spent any, global and local apart."""
    def units(read, write):
        entry = {"CapacityUnits": read + write}
        if split and read:
            entry["ReadCapacityUnits"] = read
        if split and write:
            entry["WriteCapacityUnits"] = write
        return entry

    read = spent["read"] + sum(i["read"] for i in spent["indexes"].values())
    write = spent["write"] + sum(i["write"] for i in spent["indexes"].values())
    entry = {"TableName": table, **units(read, write)}
    if indexes:
        entry["Table"] = units(spent["read"], spent["write"])
        for index, used in spent["indexes"].items():
            group = "GlobalSecondaryIndexes" if kinds.get(index, True) else "LocalSecondaryIndexes"
            entry.setdefault(group, {})[index] = units(used["read"], used["write"])
    return entry


def index_entries(table, item):
    """The entries `item` (moto's `Item`, or None) makes in each of `table`'s indexes: for each
    index whose key attributes the item holds, its key and its projected attributes, sized.
    An item lacking an index's key attribute is not in that (sparse) index."""
    if table is None or item is None:
        return {}
    entries = {}
    attrs = item.attrs
    table_keys = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    for index in list(getattr(table, "global_indexes", [])) + list(getattr(table, "indexes", [])):
        index_keys = [k["AttributeName"] for k in index.schema]
        if any(k not in attrs for k in index_keys):
            continue
        projection = (index.projection or {}).get("ProjectionType", "ALL")
        if projection == "ALL":
            names = list(attrs)
        else:
            names = table_keys + index_keys
            if projection == "INCLUDE":
                names += list((index.projection or {}).get("NonKeyAttributes", []))
        projected = {n: attrs[n] for n in dict.fromkeys(names) if n in attrs}
        key = tuple(fingerprint(attrs[k]) for k in index_keys)
        content = json.dumps({n: fingerprint(v) for n, v in projected.items()}, sort_keys=True)
        size = sum(len(n.encode()) + typed_size(v) for n, v in projected.items())
        entries[index.name] = (key, content, size)
    return entries


def fingerprint(value):
    """A `DynamoType` as text, equal for equal values: its lists' and maps' elements (more
    `DynamoType`s) and binaries written out too."""
    def plain(o):
        if isinstance(o, DynamoType):
            return o.to_json()
        if isinstance(o, (bytes, bytearray)):
            return base64.b64encode(o).decode()
        raise TypeError(f"no plain form for {type(o).__name__}")

    return json.dumps(value.to_json(), sort_keys=True, default=plain)


def index_write_units(before, after):
    """The write units each index spends going from `before`'s entries to `after`'s (both from
    `index_entries`), as the developer guide states them ("Provisioned throughput considerations
    for Global Secondary Indexes"): an entry put or deleted, one write of its size; its key
    changed, two writes (the old entry deleted, the new put); only its projected attributes
    changed, one write of the larger; nothing it projects changed, none."""
    spent = {}
    for index in dict.fromkeys(list(before) + list(after)):
        old, new = before.get(index), after.get(index)
        if old is None and new is None:
            continue
        if old is None or new is None:
            spent[index] = write_units(0, (old or new)[2])
        elif old[0] != new[0]:
            spent[index] = write_units(0, old[2]) + write_units(0, new[2])
        elif old[1] != new[1]:
            spent[index] = write_units(old[2], new[2])
    return spent
