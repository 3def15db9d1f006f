"""DynamoDB's own validation where moto is laxer: a request DynamoDB refuses is refused here too,
whole, with DynamoDB's error and message, before moto sees it (scripts/moto-server.py puts this
layer under the IAM gate, as AWS authorizes a request before it validates it).

The rules, each from the page that documents it:

- **Expression attribute names and values are all used.** "An expression attribute name or value
  that you define must be used in an expression"; otherwise the request fails with
  `ValidationException`: "Value provided in ExpressionAttributeValues unused in expressions: keys:
  {:v}" (the developer guide, "Using expression attribute values" and "Expression attribute names";
  API reference, `ExpressionAttributeValues` of PutItem, UpdateItem, DeleteItem, Query, Scan and
  `TransactWriteItems`' actions). It holds whatever the condition's outcome, since it is checked
  before the item is read. moto checks the names and, for `UpdateItem` alone, the values.
  <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ExpressionAttributeValues.html>
- **`BatchWriteItem` holds at most 25 requests, and no key twice.** "The total request size
  exceeds 16 MB, or there are more than 25 requests in the batch": `ValidationException`; "You try
  to perform multiple operations on the same item in the same BatchWriteItem request. For example,
  you cannot put and delete the same item in the same BatchWriteItem request." A key is the same
  key whatever its number is written as (`1000` and `1e3`). moto compares whole items, and puts
  with puts only. <https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html>
- **A `BatchWriteItem` with one invalid request writes nothing**: "If one or more of the
  following is true, DynamoDB rejects the entire batch write operation" (the same page). moto
  writes the requests before the invalid one; here the items it names are put back as they were
  (`Undo`), with the stream records it wrote.

`SidestreamControl.Rules` answers how many requests each rule refused so far (the tests read it,
to show that the rule and not moto answered).
"""

import decimal
import io
import json
import logging
import re
import threading

import iam_gate

DYNAMODB = "DynamoDB_20120810."
RULES = "SidestreamControl.Rules"
# "There are more than 25 requests in the batch" (BatchWriteItem, API reference).
BATCH_WRITE_LIMIT = 25
# The expressions of each operation, and where its actions keep them.
EXPRESSIONS = ("UpdateExpression", "ConditionExpression", "KeyConditionExpression", "FilterExpression", "ProjectionExpression")
PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")


class Refused(Exception):
    """A request DynamoDB refuses whole: its error type and message, and the rule's name."""

    def __init__(self, rule, message, kind="ValidationException"):
        super().__init__(message)
        self.rule, self.message, self.kind = rule, message, kind


def unused_placeholders(part, where=""):
    """Refuses `part` (a request, or one action of a transaction) when it defines an expression
    attribute name or value that none of its expressions uses, as DynamoDB does."""
    used = set()
    for field in EXPRESSIONS:
        text = part.get(field)
        if isinstance(text, str):
            used.update(PLACEHOLDER.findall(text))
    for field, what in (("ExpressionAttributeNames", "Names"), ("ExpressionAttributeValues", "Values")):
        given = part.get(field)
        if given is None:
            continue
        if not given:
            raise Refused("expression-placeholders", f"ExpressionAttribute{what} must not be empty")
        unused = [name for name in given if name not in used]
        if unused:
            raise Refused(
                "expression-placeholders",
                f"Value provided in ExpressionAttribute{what} unused in expressions: keys: {{{', '.join(unused)}}}{where}",
            )


def check_expressions(operation, request):
    if operation in ("PutItem", "UpdateItem", "DeleteItem", "GetItem", "Query", "Scan"):
        unused_placeholders(request)
    elif operation == "BatchGetItem":
        for wanted in (request.get("RequestItems") or {}).values():
            unused_placeholders(wanted)
    elif operation in ("TransactWriteItems", "TransactGetItems"):
        for action in request.get("TransactItems") or []:
            for part in action.values():
                unused_placeholders(part)


def canonical(value):
    """A key attribute's value as DynamoDB compares it: a number by its value."""
    ((kind, v),) = value.items()
    if kind == "N":
        try:
            return kind, decimal.Decimal(v).normalize()
        except decimal.InvalidOperation:
            return kind, v
    return kind, v


def check_batch_write(request, key_names):
    """Refuses a `BatchWriteItem` over 25 requests, or one naming a key twice. `key_names(table)`
    is the table's key attribute names (None when moto holds no such table: moto answers that)."""
    batches = request.get("RequestItems") or {}
    count = sum(len(writes) for writes in batches.values())
    if count > BATCH_WRITE_LIMIT:
        raise Refused("batch-write-size", "Too many items requested for the BatchWriteItem call")
    for table, writes in batches.items():
        names = key_names(table)
        if names is None:
            continue
        seen = set()
        for write in writes:
            if "PutRequest" in write:
                attributes = write["PutRequest"].get("Item") or {}
            else:
                attributes = (write.get("DeleteRequest") or {}).get("Key") or {}
            key = tuple(canonical(attributes[n]) if n in attributes else None for n in names)
            if key in seen:
                raise Refused("batch-write-duplicates", "Provided list of item keys contains duplicates")
            seen.add(key)


class Counts:
    """How many requests each rule refused or changed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}

    def add(self, rule):
        with self.lock:
            self.counts[rule] = self.counts.get(rule, 0) + 1

    def snapshot(self):
        with self.lock:
            return dict(self.counts)


COUNTS = Counts()


class Rules:
    """The WSGI layer: refuses what DynamoDB refuses (see the module's documentation); undoes a
    `BatchWriteItem` moto failed part-way. `key_names(environ, table)` is a table's key
    attribute names in the request's Region; `undo(environ, request)` returns the function that
    puts back what the request named."""

    def __init__(self, app, key_names, undo):
        self.app = app
        self.key_names = key_names
        self.undo = undo

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target == RULES:
            return answer_json(start_response, "200 OK", COUNTS.snapshot())
        if not target.startswith(DYNAMODB):
            return self.app(environ, start_response)
        operation = target[len(DYNAMODB):]
        request = environ.get(iam_gate.PARSED_BODY)
        if request is None:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length)
            environ["wsgi.input"] = io.BytesIO(body)
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                return self.app(environ, start_response)
        try:
            check_expressions(operation, request)
            if operation == "BatchWriteItem":
                check_batch_write(request, lambda table: self.key_names(environ, table))
        except Refused as refused:
            COUNTS.add(refused.rule)
            # In the emulator's log (.tools/moto.log): a refusal the project's own code met is a
            # bug in the project.
            logging.warning(
                "refused as DynamoDB refuses it (%s): %s %.300s: %s", refused.rule, operation, json.dumps(request), refused.message
            )
            return answer_json(
                start_response,
                "400 Bad Request",
                {"__type": f"com.amazon.coral.validate#{refused.kind}", "message": refused.message},
            )
        if operation != "BatchWriteItem":
            return self.app(environ, start_response)
        put_back = self.undo(environ, request)
        status = {}

        def keep(line, headers, exc_info=None):
            status["line"] = line
            return start_response(line, headers, exc_info)

        answer = b"".join(self.app(environ, keep))
        if not status.get("line", "500").startswith("2"):
            if put_back():
                COUNTS.add("batch-write-nothing-written")
                logging.warning(
                    "a BatchWriteItem refused part-way (%s, %.300s): what it wrote is put back, as DynamoDB writes nothing of it; tables %s",
                    status.get("line"), answer, ",".join(request.get("RequestItems") or {}),
                )
        return [answer]


def answer_json(start_response, status, body):
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(data)))])
    return [data]
