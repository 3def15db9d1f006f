"""The multikey indexer's decode and plan, as a Powertools for AWS Lambda (Python) user would
write the Lambda body: the yardstick for Sidestream's decode path (docs/benchmarks.md).

It does the same diff as `multikey_indexer::Plan` on the same configuration: for each record
and each index, the entries of the old and the new image (one per map entry, list or set
element of the source attribute), keyed by a hierarchical partition key (scope values, then the
member) and a K1 sort key (the value, the tiebreakers, the base key); then a delete for an
entry only in the old image, a put for one only in the new, and for one in both a put when the
entry item changed, with a delete first when its key changed. Writes are coalesced to one per
index key, the last one winning, as the Rust plan does. The counts it prints must equal the
Rust plan's on the same event, or the comparison is not honest.

Usage: python multikey_indexer.py EVENT.json MULTIKEY_INDEXES_JSON REPEATS
Prints one JSON line: records, puts, deletes, and the in-process seconds of each repeat.
"""

import json
import sys
import time
from decimal import Decimal

from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent

# --- K1 text keys (docs/formats.md), ascending components only, as the configuration uses.


def k1_string(s: str) -> str:
    out = []
    for ch in s:
        c = ord(ch)
        out.append("$" + chr(c + 0x3F) if c <= 0x24 else ch)
    return "s" + "".join(out) + "#"


def k1_number(n: Decimal) -> str:
    if n == 0:
        return "n0#"
    sign, digits, exponent = n.normalize().as_tuple()
    digits = "".join(map(str, digits))
    e = len(digits) - 1 + exponent  # scientific exponent
    int_digits = e + 1 if e >= 0 else 0
    if e >= 0:
        plain = digits[:int_digits].ljust(int_digits, "0")
        if len(digits) > int_digits:
            plain += "." + digits[int_digits:]
    else:
        plain = "." + "0" * (-e - 1) + digits
    if not sign:
        cls = "@" if int_digits == 0 else chr(ord("A") - 1 + int_digits) if int_digits <= 25 else f"Z{int_digits:03}"
        return "n" + cls + plain + "#"
    cls = "[" if int_digits == 0 else chr(ord("Z") + 1 - int_digits) if int_digits <= 25 else f"A{999 - int_digits:03}"
    nines = "".join(c if c == "." else str(9 - int(c)) for c in plain)
    return "n-" + cls + nines + "~#"


def k1(value) -> str:
    if value is None:
        return "%#"
    if isinstance(value, bool):
        return "t#" if value else "f#"
    if isinstance(value, Decimal):
        return k1_number(value)
    if isinstance(value, str):
        return k1_string(value)
    if isinstance(value, (bytes, bytearray)):
        return "b" + bytes(value).hex() + "#"
    raise ValueError("unkeyable")


def hier(*segments: str) -> str:
    return "#".join(s.replace("%", "%25").replace("#", "%23") for s in segments)


# --- The plan.


def members(image, index):
    """(member id, entry, value, has a value component) for each entry of the source."""
    source = image.get(index["source"])
    if isinstance(source, dict):
        return [(k, k, v, True) for k, v in source.items()]
    if isinstance(source, (list, set)):
        return [(repr(v), v, None, False) for v in source]
    return []


def entries(image, index, base_key):
    """Member id → (entry key, entry item), for one image."""
    if not image:
        return {}
    scope = [image.get(a) for a in index["scope"]]
    if any(s is None for s in scope):
        return {}
    tiebreakers = index.get("tiebreakers", [])
    copied_names = base_key + index["scope"] + tiebreakers + index.get("include", [])
    copied = {a: image[a] for a in copied_names if a in image}
    out = {}
    for member_id, entry, value, keyed_by_value in members(image, index):
        if isinstance(value, (dict, list, set)):
            continue  # a nested value cannot be keyed
        try:
            parts = [k1(value)] if keyed_by_value else []
            parts += [k1(image.get(t)) for t in tiebreakers]
            parts += [k1(image[b]) for b in base_key]
        except (KeyError, ValueError):
            continue
        pk = hier(*[str(s) for s in scope], str(member_id))
        sk = "".join(parts)
        item = dict(copied)
        item.update({"pk": pk, "sk": sk, "entry": entry})
        if keyed_by_value:
            item["value"] = value
        out[member_id] = ((index["table"], pk, sk), item)
    return out


def plan(records, config):
    """Index key → ("put", item) or ("delete", None): the last write to each key."""
    writes = {}
    for record in records:
        ddb = record.dynamodb
        old, new = ddb.old_image, ddb.new_image
        for index in config["indexes"]:
            before = entries(old, index, config["base_key"])
            after = entries(new, index, config["base_key"])
            for member, (key, _) in before.items():
                if member not in after:
                    writes[key] = ("delete", None)
            for member, (key, item) in after.items():
                was = before.get(member)
                if was is None:
                    writes[key] = ("put", item)
                elif was[1] != item:
                    if was[0] != key:
                        writes[was[0]] = ("delete", None)
                    writes[key] = ("put", item)
    return writes


def handler(event, config):
    records = list(DynamoDBStreamEvent(event).records)
    writes = plan(records, config)
    puts = sum(1 for op, _ in writes.values() if op == "put")
    return len(records), puts, len(writes) - puts


def main():
    path, config_json, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = json.loads(config_json)
    raw = open(path, "rb").read()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        event = json.loads(raw)  # what the Lambda runtime hands the body
        records, puts, deletes = handler(event, config)
        seconds.append(time.perf_counter() - started)
    print(json.dumps({"records": records, "puts": puts, "deletes": deletes, "seconds": seconds}))


if __name__ == "__main__":
    main()
