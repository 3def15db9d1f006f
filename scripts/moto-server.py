"""moto's server, with every DynamoDB and DynamoDB Streams request handled one at a time.

moto's DynamoDB backend is not atomic the way DynamoDB is: `update_item` reads an item and
mutates it in place with no lock, and for a missing item puts an empty item first and then
updates it, so two concurrent `ADD`s to one item can lose one of them, and a stream read can see
half an update. DynamoDB makes every single-item operation atomic. This launcher runs the same
application as `moto_server`, served by scripts/http_server.py, a thread for each kept-alive
connection (moto's own server closes every connection after one request and starts a thread for
each; waitress, which served it before, handed each request between threads twice), with one lock
for DynamoDB requests (their `X-Amz-Target` starts with `DynamoDB`); S3 and the other services
stay concurrent. Request headers whose names hold an underscore are dropped, as waitress dropped
them (moto's own handler puts them back, for S3 metadata): Sidestream's S3 metadata names use
hyphens. Arguments are `moto_server`'s (-H HOST -p PORT).

DynamoDB Streams' `GetRecords` "might take multiple calls to get to a portion of the shard that
contains stream records": AWS answers empty pages, with a next iterator, where moto never does.
So this launcher answers a `GetRecords` with an empty page and the same iterator with probability
`SIDESTREAM_EMPTY_PAGES` (default 0.3), at most two times in a row for one iterator, drawn from a
seeded generator (`SIDESTREAM_EMPTY_PAGES_SEED`, default 7). Every stream reader of the project
meets them in the tests, and must read through them.

moto reads the list of its own modules from the disk on every request to route it, and lists a
handler class's methods on every request; this launcher does each once. moto's table `Scan`
walks the whole sorted table from its first item to find each page's `ExclusiveStartKey`; this
launcher starts the walk at that key by binary search (same order, same pages, same
`LastEvaluatedKey`). The sort behind every page compares moto's key objects through Python
methods; this launcher sorts by the same values as plain keys (`scripts/moto-sort-check`), and
once until a request that may write is answered. Its response
serializer looks up each member of a plain dict through a chain of aliases built afresh every
time; this launcher asks the chain once per shape and member and keeps its keys
(`SIDESTREAM_MOTO_CHECK=1` checks every answer against moto's own).

DynamoDB's TTL deletes an item as the service, and the REMOVE record in the stream carries
`userIdentity: {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}`; moto expires nothing
and writes no `userIdentity`. The project's TTL sweeper (stream-replayer) deletes expired items
itself, marking its `DeleteItem` with the header `X-Sidestream-Ttl-Delete: service`; this launcher
writes that delete's stream record with the service's identity, so that every reader of the
stream, the local mapping and `failures replay` alike, sees what AWS's stream holds.

moto's `DescribeAlarms` applies only one of its filters; this launcher applies every filter given,
as CloudWatch does.

Every request signed with the credentials of a role the local stack registered is decided as IAM
decides it, and refused as AWS refuses it where the role does not allow it (scripts/iam_gate.py).

DynamoDB refuses requests moto accepts: expression names and values that no expression uses,
a `BatchWriteItem` of more than 25 requests or naming one key twice, and it writes nothing of a
batch one request of which is invalid. This launcher refuses them as DynamoDB does
(scripts/dynamodb_rules.py, under the IAM gate: AWS authorizes a request before it validates
it), puts back what moto wrote of a batch it then refused (`Undo`), cancels a transaction an
action's content refuses with the reason `ValidationError`, and creates nothing for an
`UpdateItem` that only `REMOVE`s from a missing key.

Every DynamoDB and S3 request is metered as AWS bills it (scripts/meter.py, which states the
rules): `SidestreamControl.Meter` answers the totals. A request that asks for
`ReturnConsumedCapacity` gets what the meter billed it, by the same rules (`with_capacity`), in
place of moto's fixed figures; `SIDESTREAM_MOTO_CHECK=1` keeps moto's own in the header
`X-Sidestream-Moto-Consumed-Capacity`. DynamoDB publishes each table's
`ConsumedWriteCapacityUnits` (`AWS/DynamoDB`, by `TableName`) to CloudWatch every minute; moto
publishes nothing. This launcher puts the write units the meter billed into moto's CloudWatch, one
datum per table and minute, before it answers a CloudWatch request. The template's
mapping-stopped alarms read them.

CloudWatch speaks the Smithy RPC v2 CBOR protocol (`POST /service/GraniteServiceVersion20100801/
operation/<Operation>`, CBOR bodies, `smithy-protocol: rpc-v2-cbor`), and the AWS SDK for Rust's
CloudWatch client speaks nothing else; moto reads CloudWatch's JSON and Query protocols only. This
launcher translates: a CBOR request is decoded by botocore's CBOR parser against the operation's
input shape, encoded for moto by botocore's JSON serializer, and moto's JSON answer (or error,
`__type` and `message`) is decoded against the output shape and encoded back to CBOR by botocore's
CBOR serializer, timestamps as CBOR's epoch tags, as CloudWatch answers. A gzip-encoded request
body (the SDK compresses large `PutMetricData` requests) is inflated first.

DynamoDB Streams keeps a record 24 hours and then trims it: `GetShardIterator` at a trimmed
sequence number, and `GetRecords` with an iterator that points at one, fail with
`TrimmedDataAccessException`, and `TRIM_HORIZON` starts after them. moto keeps every record for
ever. This launcher trims as the service does when asked: a request with `X-Amz-Target:
SidestreamControl.TrimStream` and a body `{"TableName": …, "Region": …}` trims every record the
table's stream holds now, as if 24 hours had passed for them (`local_stack::trim_stream`), and
answers `{"Trimmed": n}`.

DynamoDB Streams writes one record for each write that changes an item, and none for one that
changes nothing; moto does not (`streams_write_what_dynamodb_writes`, one parity test each in
tests/it/emulator.rs, each naming the AWS documentation it follows):
- an `UpdateItem` that creates its item is one `INSERT` with the whole new image; moto first puts
  the bare key (an `INSERT` of the keys alone) and then updates it (a second `INSERT`), and an
  update that fails after that leaves the bare item and its record behind, which this launcher
  takes back;
- a `PutItem` or `UpdateItem` that leaves the item as it was writes no record ("If you perform a
  PutItem or UpdateItem operation that does not change any data in an item, DynamoDB Streams does
  not write a stream record for that operation"); moto writes a `MODIFY` with equal images;
- a record's `awsRegion` is its table's Region (moto writes `us-east-1` for every table), and its
  `ApproximateCreationDateTime` is rounded down to the second, as the Streams API documents it
  (moto keeps milliseconds);
- a shard iterator expires 15 minutes after it was handed out: `GetRecords` with it then fails
  with `ExpiredIteratorException` (moto's never expire). A request with `X-Amz-Target:
  SidestreamControl.AgeIterators` and a body `{"Seconds": n}` ages every iterator handed out so
  far by n seconds, so that a test can expire one without waiting.
- a stream turned off is kept, `DISABLED`, its shard closed and readable to its end (whose page
  has no `NextShardIterator`), and turned on again is a new stream (`streams_turn_off_and_on`);
  moto fails `DescribeStream` and every write after it is turned off.
`SizeBytes` stays moto's (the length of the record's JSON): AWS documents it only as "the size of
the stream record, in bytes".

moto's `TransactWriteItems` deep-copies every table it names before it starts, to put them back
if the transaction is cancelled; the launcher keeps only the items a transaction names and the
stream's length, and puts those back (`transactions_undo_only_what_they_touched`).

DynamoDB makes a `TransactWriteItems` with a `ClientRequestToken` idempotent: a repeat within 10
minutes of a successful original "return[s] successfully without making any changes", and one
whose other parameters differ fails with `IdempotentParameterMismatchException`; moto applies
every repeat again. This launcher remembers each successful transaction's token for 10 minutes
and answers its repeats as DynamoDB does (`client_tokens_make_transactions_idempotent`), so a
transaction the fault proxy applied and then failed (`apply-then-fail`) is applied once when the
SDK retries it with its token. A request with `X-Amz-Target: SidestreamControl.AgeClientTokens`
and a body `{"Seconds": n}` ages every token held by n seconds, so that a test can see one
forgotten without waiting.

With `SIDESTREAM_MOTO_PROFILE=FILE`, the DynamoDB requests (which run one at a time) are profiled
with cProfile, and on SIGTERM the launcher writes to FILE each operation's count, seconds answering
and seconds waiting for the lock, by table, then the functions that took the most time: where the
emulator spends the suite's time. The raw cProfile data goes to FILE.pstats, for `pstats`.
"""

import argparse
import base64
import calendar
import collections
import cProfile
import gc
import datetime
import gzip
import io
import json
import logging
import os
import pstats
import random
import re
import signal
import sys
import threading
import time
import zlib

from moto import backends

import http_server
import meter
import iam_gate
import dynamodb_rules
from dynamodb_rules import COUNTS as RULES_COUNTS
from iam_gate import Gate
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app


GET_RECORDS = "DynamoDBStreams_20120810.GetRecords"
# Empty pages at most in a row for one iterator: readers read through three (reader.rs).
MAX_EMPTY_IN_A_ROW = 2


class EmptyPages:
    """Decides which GetRecords requests get an empty page, as AWS may answer."""

    def __init__(self, probability, seed):
        self.probability = probability
        self.random = random.Random(seed)
        self.given = {}

    def answer(self, environ):
        """An empty page's body for this request, or None to let moto answer it. Called under
        the DynamoDB lock; the request's body is read and put back."""
        if self.probability <= 0:
            return None
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(body)
        try:
            iterator = json.loads(body)["ShardIterator"]
        except (ValueError, KeyError, TypeError):
            return None
        if iterator_expired(iterator):
            # AWS refuses an expired iterator whatever the page would have been.
            return None
        given = self.given.get(iterator, 0)
        if given >= MAX_EMPTY_IN_A_ROW or self.random.random() >= self.probability:
            self.given.pop(iterator, None)
            return None
        self.given[iterator] = given + 1
        return json.dumps({"Records": [], "NextShardIterator": iterator}).encode()


def remember_moto_modules():
    """moto lists its package's folders on every request (`backends.list_of_moto_modules`):
    4.5% of the DynamoDB requests' time under the suite. The list never changes while it runs."""
    modules = list(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def remember_handler_methods():
    """moto lists a response handler's methods (`inspect.getmembers` over its class) on every
    request to check that the action is one of them: 4.5% of the DynamoDB requests' own time in
    `SIDESTREAM_MOTO_PROFILE=FILE scripts/chaos --records 10000`. A class's methods never change
    while moto runs, so each class's list is taken once."""
    import functools

    from moto.core import responses as moto_responses

    moto_responses.method_names_from_class = functools.cache(moto_responses.method_names_from_class)


def remember_condition_lexing():
    """moto lexes a condition expression, with a regular expression per token, on every request
    that carries one: 12% of the DynamoDB requests' time in `SIDESTREAM_MOTO_PROFILE=FILE cargo
    test … chaos::five_thousand`, where nearly every request is the indexer's guarded `PutItem`
    with the same condition. The tokens depend on the expression's text alone (names and values
    are substituted after), so each text is lexed once; each request gets fresh nodes."""
    from moto.dynamodb.comparisons import ConditionExpressionParser

    lex = ConditionExpressionParser._lex_condition_expression
    lexed = {}

    def remembered(self):
        text = self.condition_expression
        nodes = lexed.get(text)
        if nodes is None:
            nodes = tuple(lex(self))
            if len(lexed) < 4096:
                lexed[text] = nodes
        return collections.deque(node._replace(children=list(node.children)) for node in nodes)

    ConditionExpressionParser._lex_condition_expression = remembered


def remember_condition_parses():
    """moto parses a request's condition expression twice, once in the handler (to check the
    names it uses) and once in the table's operation, each time from its tokens (parsing was a
    third of a guarded `PutItem`'s time in `scripts/bench-e2e --only emulator`). The tree depends
    only on the expression, its names and its values, and evaluating it reads an item without
    changing the tree: each parse is kept, by those three, and the second and every later parse
    of the same takes it (a backfill's touches share one condition and values; a guarded put's
    two parses, one). At most 4,096 are kept, then the store starts again."""
    from moto.dynamodb.comparisons import ConditionExpressionParser

    parse = ConditionExpressionParser.parse
    parsed = {}

    def remembered(self):
        if not self.condition_expression:
            return parse(self)
        # `repr`, not sorted JSON: two requests alike but for their entries' order only parse
        # once more each, and the key costs a fifth as much.
        key = (
            self.condition_expression,
            repr(self.expression_attribute_names),
            repr(self.expression_attribute_values),
        )
        kept = parsed.get(key)
        if kept is None:
            op = parse(self)
            if len(parsed) >= 4096:
                parsed.clear()
            parsed[key] = (op, list(self.expr_attr_names_found), list(self.expr_attr_values_found))
            return op
        op, names, values = kept
        self.expr_attr_names_found.extend(names)
        self.expr_attr_values_found.extend(values)
        return op

    ConditionExpressionParser.parse = remembered


def remember_update_parses():
    """moto parses an `UpdateItem`'s update expression twice, in the handler (to check the names
    and values it uses) and in the table's operation, each time from its tokens: 11% of a touch's
    time in `scripts/bench-e2e --only emulator`'s profile (py-spy). The tree depends only on the
    expression's text, and neither reader changes it (the validator works on a deep copy), so
    each text's tree is kept; a text that does not parse raises each time, as before. At most
    4,096 are kept.

    The validator then deep-copies the tree for each request (13% of a counter's `ADD`): a kept
    tree is also kept pickled, and its copy unpickled, six times quicker for the same objects."""
    import pickle

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    make = UpdateExpressionParser.make
    parsed = {}
    # Each kept tree's pickle, by the tree's id (a kept tree is never freed, so its id is its own).
    pickled = {}

    def remembered(text):
        tree = parsed.get(text)
        if tree is None:
            tree = make(text)
            if len(parsed) < 4096:
                parsed[text] = tree
                try:
                    pickled[id(tree)] = pickle.dumps(tree, pickle.HIGHEST_PROTOCOL)
                except Exception:  # noqa: BLE001 - a tree pickle cannot take is deep-copied
                    pass
        return tree

    deepcopy = validators.deepcopy

    def copied(value, memo=None):
        kept = pickled.get(id(value)) if memo is None else None
        return pickle.loads(kept) if kept is not None else deepcopy(value, memo)

    UpdateExpressionParser.make = remembered
    validators.deepcopy = copied


def json_errors_without_xml():
    """moto's `JsonRESTError`, which every DynamoDB error is, first renders its message as an XML
    document (its base class's body, for the query protocols) and then replaces it with JSON:
    the XML was 6% of a guarded `PutItem`'s time in `scripts/bench-e2e --only emulator`'s profile,
    where a third are refused. The error is made as the base class makes it, and given the JSON
    body only."""
    from moto.core import exceptions

    def init(self, error_type, message, _="", **_kwargs):
        exceptions.HTTPException.__init__(self)
        self.error_type = error_type
        self.message = message
        self.description = json.dumps({"__type": error_type, "message": message})
        self.content_type = "application/json"

    exceptions.JsonRESTError.__init__ = init


def quick_answer_dicts():
    """moto turns every DynamoDB answer into plain dicts and lists before serializing it
    (`dynamo_to_dict`), asking each value whether it is a date, a `DynamoType` or has `to_json`:
    15% of a `Scan`'s or `BatchGetItem`'s time in `scripts/bench-e2e --only emulator`'s profile,
    where the items are plain dicts of strings and `DynamoType`s. Plain dicts, lists, strings and
    numbers, and `DynamoType`s of no binary, are taken here as moto's function takes them,
    everything else by moto's."""
    from moto.dynamodb import responses as moto_dynamodb
    from moto.dynamodb.models import utilities
    from moto.dynamodb.models.dynamo_type import DynamoType

    slow = utilities.dynamo_to_dict

    def to_dict(obj):
        kind = type(obj)
        if kind is dict:
            return {k: to_dict(v) for k, v in obj.items()}
        if kind is list:
            return [to_dict(v) for v in obj]
        if kind is str or kind is bool or kind is int or kind is float or obj is None:
            return obj
        if kind is DynamoType and obj.type not in ("B", "BS"):
            return {obj.type: to_dict(obj.value)}
        return slow(obj)

    utilities.dynamo_to_dict = to_dict
    moto_dynamodb.dynamo_to_dict = to_dict


def items_sized_once():
    """moto makes an item from a request's attributes by adding them one at a time to a dict
    that, on every addition, sizes everything it already holds against DynamoDB's item limit:
    quadratic in the attributes, 10% of a guarded `PutItem`'s time in
    `scripts/bench-e2e --only emulator`'s profile. While an item is made its size only grows, so
    the attributes but the last are added without the check, and the last through it, once over
    the whole item: the same items are refused, with the same error."""
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict

    def init(self, hash_key, range_key, attrs):
        self.hash_key = hash_key
        self.range_key = range_key
        self.attrs = LimitedSizeDict()
        last = len(attrs) - 1
        for i, (key, value) in enumerate(attrs.items()):
            if i == last:
                self.attrs[key] = DynamoType(value)
            else:
                dict.__setitem__(self.attrs, key, DynamoType(value))

    Item.__init__ = init


def quick_request_plumbing():
    """Three of moto's steps around every request, each a few percent of a guarded `PutItem` in
    `scripts/bench-e2e --only emulator`'s profile, made quicker with the same results:

    - the action's name, converted from CamelCase on every request, is kept by its name;
    - a `DynamoType` finds its one member's type and value without making two lists;
    - the request id is put into the body's `<RequestId>` by a regular expression run over
      every body, JSON ones and megabyte `Scan` pages included: now only over a text body that
      holds `<RequestId>` (the expression changes no other)."""
    import functools
    import re

    from moto.core import responses as moto_responses
    from moto.core import utils as moto_utils
    from moto.dynamodb.models.dynamo_type import DynamoType

    moto_responses.camelcase_to_underscores = functools.cache(moto_utils.camelcase_to_underscores)

    def init(self, type_as_dict):
        if type(type_as_dict) is DynamoType:
            self.type = type_as_dict.type
            self.value = type_as_dict.value
        else:
            members = iter(type_as_dict.items())
            try:
                self.type, self.value = next(members)
            except StopIteration:
                raise IndexError("list index out of range") from None
        if self.type == "L":
            self.value = [DynamoType(val) for val in self.value]
        elif self.type == "M":
            self.value = {k: DynamoType(v) for k, v in self.value.items()}

    DynamoType.__init__ = init

    def enrich(headers, body):
        if "status" in headers:
            headers["status"] = str(headers["status"])
        request_id = moto_responses.gen_amzn_requestid_long(headers)
        if isinstance(body, str) and "<RequestId>" in body:
            body = re.sub(r"(?<=<RequestId>).*(?=<\/RequestId>)", request_id, body)
        return headers, body

    moto_responses.BaseResponse._enrich_response = staticmethod(enrich)


def quick_request_ids():
    """moto draws each response's 52-character request id a character at a time from its seeded
    generator: 3% of the DynamoDB requests' time in the same profile. A request id only has to
    be unique, so it is drawn at once, 208 bits from a generator the operating system seeds (not
    a system call per request, which was 2% of a guarded `PutItem`). (moto's responses module
    holds its own reference to the function, taken at import: both are replaced.)"""
    import random

    from moto.core import responses as moto_responses
    from moto.utilities import aws_headers

    draw = random.Random().getrandbits

    def request_id(headerdict=None):
        req_id = f"{draw(208):052x}"
        if isinstance(headerdict, dict):
            headerdict["x-amzn-requestid"] = req_id
        return req_id

    aws_headers.gen_amzn_requestid_long = request_id
    moto_responses.gen_amzn_requestid_long = request_id


def quick_backend_lookups():
    """moto finds a service's backend for an account (`backend_dict[account]`) by listing the
    dict's keys and then comparing it with every service's dict moto has made, each by `__eq__`:
    3.5% of a guarded `PutItem` in `scripts/bench-e2e --only emulator`'s profile, where the
    launcher's meter, the IAM check and the handler each look one up. An account's backend is
    made once and listed with its dict at once (`_create_account_specific_backend`), and moto's
    reset empties both together: one already held is answered at once, and any other is made
    as moto makes it."""
    from moto.core.base_backend import BackendDict

    made = BackendDict.__getitem__

    def getitem(self, account_id):
        held = dict.get(self, account_id)
        return held if held is not None else made(self, account_id)

    BackendDict.__getitem__ = getitem


def quick_tree_walks():
    """An `UpdateItem`'s validator walks the update expression's tree once for each of its ten
    processors (`DepthFirstTraverser`), and at every node asks whether it is a `Node` (an
    abstract class's `isinstance`) and builds the processor's map of node types again to ask
    whether to process it: 38% of a touch's time in `scripts/bench-e2e --only emulator`'s
    profile. Here the walk is moto's, node for node and hook for hook, but each answer is kept:
    whether a type of node is a `Node`, and whether a processor's class processes it (its map's
    keys are its class's own, in every processor moto has)."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node

    is_node = {}
    processes = {}

    def walk(self, node, child_id=-1):
        kind = type(node)
        node_kind = is_node.get(kind)
        if node_kind is None:
            node_kind = is_node[kind] = isinstance(node, Node)
        if node_kind:
            parent_node = node.parent
            if node.children is not None:
                for i, child_node in enumerate(node.children):
                    self.pre_processing_of_child(node, i)
                    walk(self, child_node, i)
            asked = (type(self), kind)
            processed = processes.get(asked)
            if processed is None:
                processed = processes[asked] = isinstance(node, self.nodes_to_be_processed())
            if processed:
                node = self.process(node)
                node.parent = parent_node
                if parent_node:
                    parent_node.children[child_id] = node
        return node

    DepthFirstTraverser.traverse_node_recursively = walk


# The operations answered by `dynamodb_directly`, by target prefix: the data plane Sidestream and
# its tests send by the thousand. Every other operation goes through moto's whole application.
DIRECT_OPERATIONS = {
    "DynamoDB_20120810": {
        "PutItem", "UpdateItem", "DeleteItem", "GetItem", "BatchWriteItem", "BatchGetItem",
        "Query", "Scan", "TransactWriteItems", "TransactGetItems", "DescribeTable",
    },
    "DynamoDBStreams_20120810": {"GetRecords"},
}


def dynamodb_directly(app, check):
    """A WSGI application that answers the DynamoDB and Streams data plane (`DIRECT_OPERATIONS`)
    by calling moto's own handler method for the operation, as moto's application does, without
    the layers above it; everything else goes to `app`, moto's application.

    Under the suite, moto's application spent six sevenths of a guarded `PutItem`'s time above the
    table's own `put_item` (docs/local.md, "moto's time"): Flask's and werkzeug's request and
    response objects, moto's `setup_class` (the URL, the body read as a form and a query string,
    the headers, the account), the request parsed again against the service's model, and the
    answer serialized by its shape through a chain of aliases for every member. Here the body is
    `json.loads`ed into the handler's parameters (DynamoDB's JSON protocol carries every input as
    it is, but for binaries, which moto's parser decodes: a request holding a `B` or `BS` goes to
    `app`), the handler gets the region, account and headers `setup_class` would give it, moto's
    `call_action` runs the operation (its validation, its errors, its CRC32 and request id), and
    a successful answer is written by `by_shape`: the members of the operation's output shape
    only, dates as seconds to the millisecond and binaries in base64, as moto's serializer writes
    them. The status line and headers are the ones moto's application answers.

    With `check` (SIDESTREAM_MOTO_CHECK), every request is also parsed by moto's parser and every
    answer also serialized by moto's serializer, and the launcher stops at the first difference."""
    from http import HTTPStatus

    from moto.core import responses as moto_responses
    from moto.core.parse import PROTOCOL_PARSERS
    from moto.core.request import determine_request_protocol
    from moto.core.utils import get_service_model
    from moto.dynamodb.responses import DynamoHandler
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
    from moto.iam.models import get_account_id_from, iam_backends, mark_account_as_visited
    from moto.utilities.utils import PARTITION_NAMES
    from moto.utilities.utils import get_partition
    from werkzeug.datastructures import EnvironHeaders

    handlers = {"DynamoDB_20120810": DynamoHandler, "DynamoDBStreams_20120810": DynamoDBStreamsHandler}
    models = {prefix: get_service_model(handler().service_name) for prefix, handler in handlers.items()}
    reasons = {status.value: f"{status.value} {status.phrase.upper()}" for status in HTTPStatus}
    original_serialized = moto_responses.BaseResponse.serialized
    accounts = {}

    def serialized(self, action_result):
        """The handler's answer, by its shape, where the handler was called directly."""
        prefix = getattr(self, "_sidestream_direct", None)
        result = action_result.result
        if prefix is None or type(result) is not dict:
            return original_serialized(self, action_result)
        shape = models[prefix].operation_model(self._sidestream_operation).output_shape
        body = json.dumps(by_shape(result, shape))
        if check:
            expected = original_serialized(self, action_result)[2]
            if json.loads(body) != json.loads(expected):
                stop(f"the direct answer to {self._sidestream_operation} differs from moto's serializer:\n"
                     f"  direct: {body!r:.2000}\n  moto:   {expected!r:.2000}")
        headers = {"Content-Type": "application/x-amz-json-1.0"}
        headers.update(self.response_headers)
        return 200, headers, body

    moto_responses.BaseResponse.serialized = serialized

    def parsed_by_moto(prefix, operation, body, headers):
        model = models[prefix]
        operation_model = model.operation_model(operation)
        protocol = determine_request_protocol(model, headers.get("Content-Type"))
        parser = PROTOCOL_PARSERS[protocol](operation_model, map_type=handlers[prefix].PROTOCOL_PARSER_MAP_TYPE)
        return parser.parse({"method": "POST", "values": {}, "headers": headers, "body": body,
                             "url_path": "/", "url_params": {}})

    def application(environ, start_response):
        prefix, _, operation = environ.get("HTTP_X_AMZ_TARGET", "").partition(".")
        if (
            operation not in DIRECT_OPERATIONS.get(prefix, ())
            or environ.get("REQUEST_METHOD") != "POST"
            or environ.get("HTTP_CONTENT_ENCODING")
            or "region/" in environ.get("HTTP_USER_AGENT", "")
        ):
            return app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(body)
        authorization = environ.get("HTTP_AUTHORIZATION", "")
        if b'"B"' in body or b'"BS"' in body or "AWS4" not in authorization:
            return app(environ, start_response)
        # The launcher's meter has parsed the body already (iam_gate.PARSED_BODY); moto reads a
        # request's parameters and changes none of them.
        params = environ.get(iam_gate.PARSED_BODY)
        if params is None:
            try:
                params = json.loads(body) if body else {}
            except ValueError:
                return app(environ, start_response)
        headers = EnvironHeaders(environ)
        handler = handlers[prefix]()
        if handler.automated_parameter_parsing and check:
            expected = parsed_by_moto(prefix, operation, body, headers)
            if params != expected:
                stop(f"the direct parameters of {operation} differ from moto's parser:\n"
                     f"  direct: {params!r:.2000}\n  moto:   {expected!r:.2000}")
        handler._sidestream_direct = prefix
        handler._sidestream_operation = operation
        handler.params = params
        handler.uri_match = {}
        handler.body = body.decode("utf-8")
        handler.raw_body = body
        handler.querystring = handler.data = {}
        handler.headers = headers
        handler.method = "POST"
        handler.uri = handler.path = handler.raw_path = "/"
        handler.is_werkzeug_request = True
        handler.region = authorization.split(",")[0].split("/")[2]
        handler.partition = get_partition(handler.region)
        handler.response_headers = {"server": "amazon.com"}
        # A request's access key, and the account moto's IAM holds it in, kept by its
        # credential: a key id is never made again, so the first answer stays right.
        credential = authorization.split(",", 1)[0]
        known = accounts.get(credential)
        if known is None:
            access_key = handler.get_access_key()
            held = any(access_key in account[partition].access_keys
                       for account in list(iam_backends.values()) for partition in PARTITION_NAMES)
            known = accounts[credential] = (access_key, get_account_id_from(access_key), held)
        handler.access_key = known[0]
        handler.current_account = (
            os.environ.get("MOTO_ACCOUNT_ID")
            or headers.get("x-moto-account-id")
            or known[1]
        )
        # moto notes a key's last use only for a key its IAM holds, and does nothing for others.
        if known[2]:
            mark_account_as_visited(account_id=handler.current_account, access_key=handler.access_key,
                                    service=handler.service_name, region=handler.region)
        status, answer_headers, answer = handler.call_action()
        status = int(status)
        if isinstance(answer, str):
            answer = answer.encode("utf-8")
        # As moto's Flask application answers: its CORS header, the headers moto set (its
        # `status` header among them on an error), the length.
        out = [("Access-Control-Allow-Origin", "*")]
        for name, value in answer_headers.items():
            if name.lower() != "content-length":
                out.append((name.title() if name.islower() else name, str(value)))
        if not any(name.lower() == "content-type" for name, _ in out):
            out.append(("Content-Type", "text/html; charset=utf-8"))
        out.append(("Content-Length", str(len(answer))))
        start_response(reasons.get(status, f"{status} UNKNOWN"), out)
        return [answer]

    return application


def by_shape(value, shape):
    """`value`, part of an answer, as moto's JSON serializer writes it for `shape`: a structure's
    members (none that the shape lacks, none that is None), lists and maps member by member, a
    date as seconds since the epoch to the millisecond, a binary in base64. An attribute value of
    strings, booleans, lists and maps is already what it writes, and is taken whole."""
    kind = shape.type_name
    if kind == "structure":
        if shape.name == "AttributeValue" and plain_attribute_value(value):
            return value
        members = shape.members
        return {k: by_shape(v, members[k]) for k, v in value.items() if v is not None and k in members}
    if kind == "list":
        member = shape.member
        return [by_shape(v, member) for v in value]
    if kind == "map":
        member = shape.value
        return {k: by_shape(v, member) for k, v in value.items()}
    if kind == "timestamp" and isinstance(value, datetime.datetime):
        seconds = calendar.timegm(value.timetuple())
        return seconds + (value.microsecond // 1000) / 1000.0 if value.microsecond else seconds
    if kind == "blob" and isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    return value


def plain_attribute_value(value):
    """Whether `value` is an attribute value that moto's JSON serializer would write as it is:
    one member, a string, a boolean or a list of strings, or a map or list of such values (a
    binary, which it would encode, is not)."""
    if type(value) is not dict or len(value) != 1:
        return False
    ((kind, inner),) = value.items()
    if kind in ("S", "N"):
        return type(inner) is str
    if kind in ("BOOL", "NULL"):
        return type(inner) is bool
    if kind in ("SS", "NS"):
        return type(inner) is list and all(type(member) is str for member in inner)
    if kind == "M":
        return type(inner) is dict and all(key and plain_attribute_value(v) for key, v in inner.items())
    if kind == "L":
        return type(inner) is list and all(plain_attribute_value(member) for member in inner)
    return False


def stop(message):
    """Stops the launcher with `message` (SIDESTREAM_MOTO_CHECK found a difference)."""
    sys.stderr.write(f"moto-server: {message}\n")
    sys.stderr.flush()
    os._exit(3)


def scan_from_the_start_key():
    """moto's `Table.scan` without an index walks every item before `ExclusiveStartKey` on every
    page (37% of the DynamoDB requests' time under the suite, 617 ms a page). Items are in
    (hash key, range key) order, so the page starts right after the key: found by bisection, and
    the rest handed to moto's own loop with no start key to skip to."""
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    original = Table.scan

    def order(table, item):
        return (item.hash_key, item.range_key) if table.range_key_attr else (item.hash_key,)

    def scan(self, filters, limit, exclusive_start_key, filter_expression=None, index_name=None,
             *rest, **kwargs):
        if index_name or exclusive_start_key is None:
            return original(self, filters, limit, exclusive_start_key, filter_expression,
                            index_name, *rest, **kwargs)
        start = [DynamoType(exclusive_start_key[self.hash_key_attr])]
        if self.range_key_attr:
            start.append(DynamoType(exclusive_start_key[self.range_key_attr]))
        start = tuple(start)
        items = self.all_items()
        low, high = 0, len(items)
        while low < high:
            middle = (low + high) // 2
            if order(self, items[middle]) <= start:
                low = middle + 1
            else:
                high = middle
        after = items[low:]
        self.all_items = lambda: after
        try:
            return original(self, filters, limit, None, filter_expression, index_name, *rest,
                            **kwargs)
        finally:
            del self.all_items

    Table.scan = scan


def sort_items_by_plain_keys(check):
    """moto's `Table.all_items` (every Scan page, and Query without an index) sorts the whole
    table by its `DynamoType` keys, whose comparisons are Python methods that build each side's
    `cast_value` afresh: 7.0 s for a 60,000-item table, on every page (`scripts/moto-sort-check
    60000`). This sorts by the same values as plain Python keys (`cast_value`: a `Decimal` for a
    number, the text for a string, the base64 text for a binary, as moto compares them): the same
    order, 0.28 s. And it sorts a table once until a request that may write answers
    (`TABLES_CHANGED`): a scan's pages after the first take a copy of the order they had, where
    each page sorted the whole table again (a verification's 240 pages of a 60,000-entry index
    spent about 90 s of moto's time in sorting).

    With `check` (SIDESTREAM_MOTO_CHECK), moto's own sort runs too, and the launcher stops at the
    first difference."""
    from decimal import Decimal

    from moto.dynamodb.models.table import Table

    original = Table.all_items

    def plain(value):
        return Decimal(value.value) if value.type == "N" else value.value

    def all_items(self):
        cached = getattr(self, "_sidestream_sorted", None)
        if cached is not None and cached[0] == TABLES_CHANGED.count:
            return list(cached[1])
        items = []
        for hash_set in self.items.values():
            if self.range_key_attr:
                items.extend(hash_set.values())
            else:
                items.append(hash_set)
        if self.range_key_attr:
            items.sort(key=lambda item: (plain(item.hash_key), plain(item.range_key)))
        else:
            items.sort(key=lambda item: plain(item.hash_key))
        self._sidestream_sorted = (TABLES_CHANGED.count, items)
        return list(items)

    def all_items_checked(self):
        items = all_items(self)
        expected = original(self)
        if [id(item) for item in items] != [id(item) for item in expected]:
            sys.stderr.write(f"moto-server: the plain-key sort differs from moto on {self.name}\n")
            sys.stderr.flush()
            os._exit(3)
        return items

    Table.all_items = all_items_checked if check else all_items


def pick_plain_dict_members_by_table(check):
    """moto's response serializer finds every member of every structure through its picker's
    chain of alias providers (`XFormedAttributePicker`): built afresh for each member, most of
    them absent (an attribute value holds one of its ten members), half of all the DynamoDB
    requests' time under the suite by cProfile. For a plain dict the chain's keys depend only on the member
    and its shape (no `Meta`, and the class is always `dict`), so this asks the chain once per
    (shape, parent, member) and keeps its keys in order; a value is then the first of those keys
    that the dict holds, as the picker would find it. Anything else (another picker, response
    transformers, a key with a dot, an object that is not a plain dict) goes to moto.

    An item's attribute values are most of what a DynamoDB answer holds, and the JSON serializer
    writes one made of strings, booleans, lists and maps as it is (DynamoDB JSON in, DynamoDB JSON
    out), member by member: such a value is written whole (a scan page of 250 index entries spent
    about half its time there). One holding a binary, which the serializer encodes, goes to moto.

    With `check` (SIDESTREAM_MOTO_CHECK), every answer is also serialized by moto alone, and the
    launcher stops at the first difference."""
    from moto.core import serialize as moto_serialize

    original_get_value = moto_serialize.ResponseSerializer.get_value
    original_serialize = moto_serialize.ResponseSerializer.serialize
    picker_class = moto_serialize.XFormedAttributePicker
    providers = moto_serialize.DEFAULT_ALIAS_PROVIDERS
    chains = {}
    moto_alone = threading.local()

    def get_value(self, value, key, shape):
        picker = self._value_picker
        if (
            type(value) is not dict
            or type(picker) is not picker_class
            or picker.response_transformers
            or picker.alias_providers is not providers
            or getattr(moto_alone, "on", False)
        ):
            return original_get_value(self, value, key, shape)
        slot = (shape, getattr(shape, "parent", None), key)
        keys = chains.get(slot)
        if keys is None:
            context = moto_serialize.AttributePickerContext(obj={}, key=key, shape=shape)
            keys = tuple(picker.get_possible_keys(context))
            if any("." in k for k in keys):
                keys = ()
            chains[slot] = keys
        if not keys:
            return original_get_value(self, value, key, shape)
        for candidate in keys:
            if candidate in value:
                return value[candidate]
        return None

    def serialize_checked(self, result):
        answer = original_serialize(self, result)
        moto_alone.on = True
        try:
            expected = original_serialize(self, result)
        finally:
            moto_alone.on = False
        if answer != expected:
            sys.stderr.write(
                f"moto-server: the serializer's shortcut differs from moto on {self.operation_name}:\n"
                f"  shortcut: {answer!r:.2000}\n  moto:     {expected!r:.2000}\n"
            )
            sys.stderr.flush()
            os._exit(3)
        return answer

    original_structure = moto_serialize.BaseJSONSerializer._serialize_type_structure

    def serialize_structure(self, serialized, value, shape, key):
        if (
            key
            and shape.name == "AttributeValue"
            and not getattr(moto_alone, "on", False)
            and plain_attribute_value(value)
        ):
            serialized[self.get_serialized_name(shape, key)] = value
            return
        original_structure(self, serialized, value, shape, key)

    moto_serialize.ResponseSerializer.get_value = get_value
    moto_serialize.BaseJSONSerializer._serialize_type_structure = serialize_structure
    if check:
        moto_serialize.ResponseSerializer.serialize = serialize_checked


# The header the TTL sweeper sends with its deletes (hyphenated: names with an underscore are dropped).
TTL_DELETE_HEADER = "HTTP_X_SIDESTREAM_TTL_DELETE"
# The account moto answers for when a request is not signed for another.
DEFAULT_ACCOUNT = "123456789012"
DELETE_ITEM = "DynamoDB_20120810.DeleteItem"
# The identity DynamoDB's TTL stream records carry, as the Streams API spells it (Lambda's event
# spells it `{"type": …, "principalId": …}`).
TTL_IDENTITY = {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}
# Set while a TTL delete is answered; DynamoDB requests run one at a time under the lock.
ttl_delete = threading.local()


def ttl_deletes_carry_the_service_identity():
    """Stream records made while the sweeper's delete is answered carry DynamoDB's identity."""
    from moto.dynamodb.models import table as table_module

    original = table_module.StreamRecord.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if getattr(ttl_delete, "active", False) and self.record.get("eventName") == "REMOVE":
            self.record["userIdentity"] = dict(TTL_IDENTITY)

    table_module.StreamRecord.__init__ = init


class TablesChanged:
    """How many DynamoDB requests that may have written have been answered: every one but those
    in `READS` (an operation this launcher does not know counts as a write). A table's sorted
    order (`sort_items_by_plain_keys`) is kept while this stays the same."""

    READS = {
        "BatchGetItem", "DescribeBackup", "DescribeContinuousBackups", "DescribeEndpoints",
        "DescribeExport", "DescribeImport", "DescribeKinesisStreamingDestination", "DescribeLimits",
        "DescribeStream", "DescribeTable", "DescribeTimeToLive", "GetItem", "GetRecords",
        "GetShardIterator", "ListBackups", "ListExports", "ListImports", "ListStreams", "ListTables",
        "ListTagsOfResource", "Query", "Scan", "TransactGetItems",
    }

    def __init__(self):
        self.count = 0

    def answered(self, target):
        if target.rpartition(".")[2] not in self.READS:
            self.count += 1


TABLES_CHANGED = TablesChanged()


class WriteCapacity:
    """Each table's consumed write units, by region and minute, until they are put into moto's
    CloudWatch as `AWS/DynamoDB` `ConsumedWriteCapacityUnits` (see the module's documentation)."""

    def __init__(self):
        self.lock = threading.Lock()
        # (region, table, minute) -> (units, when the last of them was written)
        self.pending = {}

    def count(self, region, units):
        """Counts the write units a request was billed, by table (`meter.Measure.billed`)."""
        now = time.time()
        with self.lock:
            for table, n in units.items():
                key = (region, table, int(now) // 60)
                counted, _ = self.pending.get(key, (0, now))
                self.pending[key] = (counted + n, now)

    def publish(self):
        """Puts the units counted so far into moto's CloudWatch."""
        from moto.cloudwatch.models import cloudwatch_backends

        with self.lock:
            pending, self.pending = self.pending, {}
        for (region, table, _), (units, last) in pending.items():
            # moto keeps naive UTC timestamps; the minute's datum is stamped with its last write,
            # so that it is never in the future of a query made after it.
            at = datetime.datetime.fromtimestamp(last, datetime.timezone.utc).replace(tzinfo=None)
            cloudwatch_backends[DEFAULT_ACCOUNT][region].put_metric_data(
                "AWS/DynamoDB",
                [
                    {
                        "MetricName": "ConsumedWriteCapacityUnits",
                        "Dimensions": [{"Name": "TableName", "Value": table}],
                        "Value": float(units),
                        "Unit": "Count",
                        "Timestamp": at,
                    }
                ],
            )


AGE_ITERATORS = "SidestreamControl.AgeIterators"
# How long a shard iterator may be used, as DynamoDB Streams allows: "A shard iterator expires 15
# minutes after it is returned to the requester" (GetShardIterator, API reference).
ITERATOR_LIFETIME_SECONDS = 15 * 60


def streams_write_what_dynamodb_writes():
    """One stream record per write that changes an item, none for one that does not, each with
    its table's Region and a time in whole seconds; iterators that expire (see the module's
    documentation)."""
    from moto.core.exceptions import JsonRESTError
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models import table as table_module
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodbstreams import models as streams_module

    original_update = DynamoDBBackend.update_item

    def update_item(self, table_name, key, *args, **kwargs):
        table = self.get_table(table_name)
        shard = table.stream_shard
        before = len(shard.items) if shard is not None else 0
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        existed = table.get_item(hash_value, range_value) is not None
        try:
            item = original_update(self, table_name, key, *args, **kwargs)
        except Exception:
            # moto may have put the bare key before the update failed: DynamoDB writes nothing.
            if not existed and table.get_item(hash_value, range_value) is not None:
                table.delete_item(hash_value, range_value)
            if shard is not None:
                del shard.items[before:]
            raise
        if not existed and removes_only(args[0] if args else kwargs.get("update_expression")):
            # "REMOVE" of a missing item's attributes: DynamoDB creates no item and writes no
            # record; moto puts the bare key.
            table.delete_item(hash_value, range_value)
            if shard is not None:
                del shard.items[before:]
            RULES_COUNTS.add("update-removes-only")
            return item
        if shard is not None and not existed and len(shard.items) - before == 2:
            # The bare key's INSERT, then the updated item's: one INSERT, as DynamoDB writes it.
            del shard.items[before]
            renumber(shard, before)
        return item

    def removes_only(expression):
        """Whether an update expression has REMOVE clauses and no other."""
        if not isinstance(expression, str):
            return False
        clauses = {c.upper() for c in UPDATE_CLAUSE.findall(expression)}
        return clauses == {"REMOVE"}

    def renumber(shard, start):
        for at in range(start, len(shard.items)):
            shard.items[at].record["dynamodb"]["SequenceNumber"] = str(shard.starting_sequence_number + at)

    DynamoDBBackend.update_item = update_item

    original_add = table_module.StreamShard.add

    def add(self, old, new):
        if old is not None and new is not None and old.to_json() == new.to_json():
            return
        original_add(self, old, new)

    table_module.StreamShard.add = add

    original_record = table_module.StreamRecord.__init__

    def record(self, table, *args, **kwargs):
        original_record(self, table, *args, **kwargs)
        self.record["awsRegion"] = table.region_name
        created = self.record["dynamodb"].get("ApproximateCreationDateTime")
        if created is not None:
            self.record["dynamodb"]["ApproximateCreationDateTime"] = created.replace(microsecond=0)

    table_module.StreamRecord.__init__ = record

    class ExpiredIterator(JsonRESTError):
        def __init__(self, age):
            super().__init__(
                "ExpiredIteratorException",
                f"Iterator expired. The iterator was created {age:.0f} s ago, which is further in the "
                f"past than the tolerated delay of {ITERATOR_LIFETIME_SECONDS * 1000} milliseconds.",
            )

    original_iterator = streams_module.ShardIterator.__init__

    def iterator(self, *args, **kwargs):
        original_iterator(self, *args, **kwargs)
        self.handed_out = time.monotonic()

    streams_module.ShardIterator.__init__ = iterator

    original_get = streams_module.ShardIterator.get

    def get(self, *args, **kwargs):
        age = time.monotonic() - getattr(self, "handed_out", time.monotonic())
        if age > ITERATOR_LIFETIME_SECONDS:
            raise ExpiredIterator(age)
        return original_get(self, *args, **kwargs)

    streams_module.ShardIterator.get = get


# An update expression's clause keywords: reserved words, so never a bare attribute name.
UPDATE_CLAUSE = re.compile(r"(?<![#:\w.])(SET|REMOVE|ADD|DELETE)(?![\w])", re.IGNORECASE)


def streams_turn_off_and_on():
    """A table's stream turned off and on as DynamoDB Streams documents it ("Change data capture
    for DynamoDB Streams": "If you disable a stream, any shards that are open will be closed. The
    data in the stream will continue to be readable for 24 hours", and "If you disable and then
    re-enable a stream on the table, a new stream is created with a different stream
    descriptor"). moto drops the stream's view type when it is turned off, so `DescribeStream`
    fails with HTTP 500, and it cannot turn a stream on again. Here a stream turned off is kept by
    its ARN: `DescribeStream` answers it `DISABLED`, its shard closed (`EndingSequenceNumber`: "If
    both StartingSequenceNumber and EndingSequenceNumber are present, then that shard is closed
    and can no longer receive more data", DescribeStream); its records stay readable, and the
    last page of a closed shard carries no `NextShardIterator` ("If set to null, the shard has
    been closed and the requested iterator will not return any more data", GetRecords). The
    table writes no record until its stream is turned on again, as a new stream: a new ARN
    (`LatestStreamArn`), a new shard whose sequence numbers follow the old one's. An ARN that
    names no stream of the table is `ResourceNotFoundException`."""
    from moto.core.exceptions import JsonRESTError
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models import table as table_module
    from moto.dynamodbstreams import models as streams_module

    closed = {}

    class StreamNotFound(JsonRESTError):
        def __init__(self, arn):
            super().__init__("ResourceNotFoundException", f"Requested resource not found: Stream: {arn} not found")

    def stream_arn(table):
        return f"{table.table_arn}/stream/{table.latest_stream_label}"

    def update_table_streams(self, table, specification):
        enabling = specification.get("StreamEnabled") or specification.get("StreamViewType")
        if enabling and table.stream_shard is not None:
            from moto.dynamodb.exceptions import StreamAlreadyEnabledException

            raise StreamAlreadyEnabledException
        before = table.stream_shard
        if not enabling and before is not None:
            # Turned off: the stream is kept, closed, by its ARN.
            before.closed = True
            closed[stream_arn(table)] = (before, table.stream_specification.get("StreamViewType"), table.latest_stream_label)
            table.set_stream_specification(specification)
            table.stream_shard = None
            return
        table.set_stream_specification(specification)
        previous = [shard for shard, _, _ in closed.values() if shard.table is table]
        if enabling and previous:
            # A new stream: a shard of its own, numbered after the last one's records.
            last = max(previous, key=lambda s: s.starting_sequence_number)
            table.stream_shard.starting_sequence_number = last.starting_sequence_number + len(last.items) + 1_000_000
            table.stream_shard.id = f"shardId-{int(time.time() * 1000):020d}-{random.getrandbits(32):08x}"

    DynamoDBBackend.update_table_streams = update_table_streams

    original_to_json = table_module.StreamShard.to_json

    def to_json(self):
        shard = original_to_json(self)
        if getattr(self, "closed", False):
            last = self.starting_sequence_number + max(len(self.items) - 1, 0)
            shard["SequenceNumberRange"]["EndingSequenceNumber"] = str(last)
        return shard

    table_module.StreamShard.to_json = to_json

    original_describe = streams_module.DynamoDBStreamsBackend.describe_stream

    def describe_stream(self, arn):
        if arn in closed:
            shard, view_type, label = closed[arn]
            return {
                "StreamArn": arn,
                "StreamLabel": label,
                "StreamStatus": "DISABLED",
                "StreamViewType": view_type,
                "CreationRequestDateTime": shard.created_on,
                "TableName": shard.table.name,
                "KeySchema": shard.table.schema,
                "Shards": [shard.to_json()],
            }
        table = self._get_table_from_arn(arn)
        if table.stream_shard is None or arn != stream_arn(table):
            raise StreamNotFound(arn)
        return original_describe(self, arn)

    streams_module.DynamoDBStreamsBackend.describe_stream = describe_stream

    original_iterator = streams_module.DynamoDBStreamsBackend.get_shard_iterator

    def get_shard_iterator(self, arn, shard_id, shard_iterator_type, sequence_number=None):
        if arn in closed:
            shard = closed[arn][0]
            if shard.id != shard_id:
                raise StreamNotFound(f"{arn} shard {shard_id}")
            iterator = streams_module.ShardIterator(self, shard, shard_iterator_type, sequence_number)
            self.shard_iterators[iterator.arn] = iterator
            return iterator
        table = self._get_table_from_arn(arn)
        if table.stream_shard is None or arn != stream_arn(table) or table.stream_shard.id != shard_id:
            raise StreamNotFound(f"{arn} shard {shard_id}")
        return original_iterator(self, arn, shard_id, shard_iterator_type, sequence_number)

    streams_module.DynamoDBStreamsBackend.get_shard_iterator = get_shard_iterator

    original_list = streams_module.DynamoDBStreamsBackend.list_streams

    def list_streams(self, table_name=None):
        listed = [s for s in original_list(self, table_name) if self.dynamodb.get_table(s["TableName"]).stream_shard is not None]
        for arn, (shard, _, label) in closed.items():
            if shard.table.region_name == self.region_name and table_name in (None, shard.table.name):
                listed.append({"StreamArn": arn, "TableName": shard.table.name, "StreamLabel": label})
        return listed

    streams_module.DynamoDBStreamsBackend.list_streams = list_streams

    original_get = streams_module.ShardIterator.get

    def get(self, *args, **kwargs):
        page = original_get(self, *args, **kwargs)
        shard = self.stream_shard
        if getattr(shard, "closed", False):
            following = self.streams_backend.shard_iterators.get(page["NextShardIterator"])
            if following is not None and following.sequence_number >= shard.starting_sequence_number + len(shard.items):
                # Past the closed shard's last record: no next iterator.
                del self.streams_backend.shard_iterators[page["NextShardIterator"]]
                del page["NextShardIterator"]
        return page

    streams_module.ShardIterator.get = get


def iterator_expired(arn):
    """Whether the shard iterator `arn` was handed out more than 15 minutes ago."""
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    parts = arn.split(":", 5)
    if len(parts) < 6:
        return False
    iterator = dynamodbstreams_backends[parts[4]][parts[3]].shard_iterators.get(arn)
    handed_out = getattr(iterator, "handed_out", None)
    return handed_out is not None and time.monotonic() - handed_out > ITERATOR_LIFETIME_SECONDS


def key_of(table, op_type, op):
    """The key of a transaction's or a batch's action on moto's `table`."""
    if op_type in ("Put", "PutRequest"):
        attrs = op["Item"]
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attrs[table.range_key_attr]
        return key
    return op["Key"]


class Undo:
    """The items a request names, as they were, and each table's stream length: `undo` puts them
    back, so that a request DynamoDB applies whole or not at all leaves nothing when it fails
    (a cancelled `TransactWriteItems`, a `BatchWriteItem` moto refused part-way). It costs the
    items the request names, not a copy of each table."""

    def __init__(self):
        self.kept = []
        self.streams = {}

    def keep(self, table, key):
        import copy
        from moto.dynamodb.models.dynamo_type import DynamoType

        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        held = table.get_item(hash_value, range_value)
        self.kept.append((table, hash_value, range_value, held, copy.deepcopy(held)))
        if table.stream_shard is not None:
            self.streams.setdefault(id(table), (table.stream_shard, len(table.stream_shard.items)))

    def undo(self):
        """Puts every item back; whether any had changed."""
        changed = any(len(shard.items) > length for shard, length in self.streams.values())
        for table, hash_value, range_value, held, item in reversed(self.kept):
            changed = changed or table.get_item(hash_value, range_value) is not held
            put_back(table, hash_value, range_value, item)
        for shard, length in self.streams.values():
            del shard.items[length:]
        return changed


def put_back(table, hash_value, range_value, item):
    """Puts `item` (None: nothing) under the key in moto's `table`."""
    if table.range_key_attr:
        if item is None:
            table.items.get(hash_value, {}).pop(range_value, None)
            if hash_value in table.items and not table.items[hash_value]:
                del table.items[hash_value]
        else:
            table.items.setdefault(hash_value, {})[range_value] = item
    elif item is None:
        table.items.pop(hash_value, None)
    else:
        table.items[hash_value] = item


def batch_write_undo(environ, request):
    """An `Undo` of the items a `BatchWriteItem` names (dynamodb_rules.Rules)."""
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends[DEFAULT_ACCOUNT][region_of(environ)]
    kept = Undo()
    for name, writes in (request.get("RequestItems") or {}).items():
        table = backend.tables.get(name.split("/", 1)[1] if name.startswith("arn:") else name)
        if table is None:
            continue
        for write in writes:
            ((kind, op),) = write.items()
            try:
                kept.keep(table, key_of(table, kind, op))
            except (KeyError, TypeError, AttributeError):
                continue  # a request without its key: moto refuses it before writing it
    return kept.undo


def key_names(environ, name):
    """The key attribute names of the table `name` in the request's Region (None when moto holds
    none)."""
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[DEFAULT_ACCOUNT][region_of(environ)].tables.get(name.split("/", 1)[1] if name.startswith("arn:") else name)
    if table is None:
        return None
    return [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])


def transactions_undo_only_what_they_touched():
    """moto's `TransactWriteItems` deep-copies every table it names before it starts, so that it
    can put them back if the transaction is cancelled: a 50,000-entry index table copied on every
    request, and a table object swapped under the stream iterators that point at its shard. This
    keeps the touched items and each touched table's stream length instead, and puts those back:
    the same answers (conditions checked in order, reasons per action, all or nothing), at the
    cost of the items a transaction names."""
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.models import DynamoDBBackend

    def transact_write_items(self, transact_items):
        if len(transact_items) > 100:
            raise TooManyTransactionsException()
        kept, seen, errors = Undo(), set(), []
        for entry in transact_items:
            if len(entry) > 1:
                raise TransactWriteSingleOpException
            op_type, op = next(iter(entry.items()))
            table = self.get_table(op["TableName"])
            key = key_of(table, op_type, op)
            unique = (op["TableName"], str(dict(sorted(key.items()))))
            if unique in seen:
                raise MultipleTransactionsException()
            seen.add(unique)
            kept.keep(table, key)

        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            name = op["TableName"]
            condition = op.get("ConditionExpression")
            names = op.get("ExpressionAttributeNames")
            values = op.get("ExpressionAttributeValues")
            table = self.get_table(name)
            key = key_of(table, op_type, op)
            old = None
            try:
                current = self.get_item(name, key)
                if condition is not None and not get_filter_expression(condition, names, values).expr(current):
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        old = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=old)
                if op_type == "Put":
                    self.put_item(name, op["Item"], condition_expression=condition,
                                  expression_attribute_names=names, expression_attribute_values=values)
                elif op_type == "Delete":
                    self.delete_item(name, key, condition_expression=condition,
                                     expression_attribute_names=names, expression_attribute_values=values)
                elif op_type == "Update":
                    self.update_item(name, key, update_expression=op["UpdateExpression"],
                                     condition_expression=condition, expression_attribute_names=names,
                                     expression_attribute_values=values)
                errors.append((None, None, None))
            except ConditionalCheckFailed as e:
                errors.append(("ConditionalCheckFailed", str(e.message), old))
            except Exception as e:  # noqa: BLE001 - every other reason is reported, as moto does
                # An action DynamoDB refuses for the item's content (over 400 KB, a number out of
                # range, an empty key, an ADD to a string) cancels the transaction with the reason
                # `ValidationError`, one of the codes the API reference lists (TransactWriteItems,
                # "CancellationReasons"); moto names the exception's class instead
                # (`ItemSizeTooLarge`, `IncorrectDataType`, ...).
                code = "ValidationError"
                errors.append((code, getattr(e, "message", str(e)), old))
        if any(code is not None for code, _, _ in errors):
            kept.undo()
            raise TransactionCanceledException(errors)

    DynamoDBBackend.transact_write_items = transact_write_items


AGE_CLIENT_TOKENS = "SidestreamControl.AgeClientTokens"
# How long DynamoDB remembers a TransactWriteItems client token: "A client token is valid for 10
# minutes after the request that uses it finishes" (developer guide, transaction-apis.html).
CLIENT_TOKEN_WINDOW_SECONDS = 10 * 60


class ClientTokens:
    """The client tokens of the successful `TransactWriteItems` of the last 10 minutes: for each
    (account, Region, token), the digest of the request's other parameters and when it finished,
    oldest first (a token is remembered once, and never for longer). Read and written under the
    DynamoDB lock, as every DynamoDB request is answered."""

    def __init__(self):
        self.held = collections.OrderedDict()
        # The read units, by table, of the repeat being answered (None for any other request):
        # set by the handler, taken by the meter in `serialized`.
        self.repeat = None

    def forget_expired(self, now):
        while self.held:
            key, (_, finished) = next(iter(self.held.items()))
            if now - finished < CLIENT_TOKEN_WINDOW_SECONDS:
                return
            del self.held[key]

    def digest_of(self, key, now):
        """The digest remembered for `key`, or None when it is not held (or no longer)."""
        self.forget_expired(now)
        held = self.held.get(key)
        return None if held is None else held[0]

    def remember(self, key, digest, now):
        self.forget_expired(now)
        self.held.pop(key, None)
        self.held[key] = (digest, now)

    def age(self, seconds):
        """Ages every token held by `seconds` (their order stays), as if that time had passed."""
        for key, (digest, finished) in self.held.items():
            self.held[key] = (digest, finished - seconds)
        aged = len(self.held)
        self.forget_expired(time.monotonic())
        return aged

    def take_repeat(self):
        repeat, self.repeat = self.repeat, None
        return repeat


CLIENT_TOKENS = ClientTokens()


def client_tokens_make_transactions_idempotent():
    """DynamoDB makes a `TransactWriteItems` that carries a `ClientRequestToken` idempotent; moto
    ignores the token and applies every repeat again. The developer guide ("Amazon DynamoDB
    Transactions: How it works", "Idempotency",
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html), with
    the API reference's `ClientRequestToken`
    (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html):
    "If the original TransactWriteItems call was successful, then subsequent TransactWriteItems
    calls with the same client token return successfully without making any changes. If the
    ReturnConsumedCapacity parameter is set, then the initial TransactWriteItems call returns the
    number of write capacity units consumed in making the changes. Subsequent TransactWriteItems
    calls with the same client token return the number of read capacity units consumed in
    reading the item." "A client token is valid for 10 minutes after the request that uses it
    finishes. After 10 minutes, any request that uses the same client token is treated as a new
    request." "If you repeat a request with the same client token within the 10-minute
    idempotency window but change some other request parameter, DynamoDB returns an
    IdempotentParameterMismatch exception" (`IdempotentParameterMismatchException`, HTTP 400, in
    the API reference's errors); the token is 1 to 36 characters (the service model's
    constraints, which moto does not check).

    So moto's handler is wrapped: a token of another length is refused with a
    `ValidationException`, worded as DynamoDB words a member outside its constraints; a token
    held (`CLIENT_TOKENS`, by account, Region and token, as moto resolves the request's account
    and Region) is answered without applying anything: the same success body as moto's (a
    `ConsumedCapacity` list, empty unless `ReturnConsumedCapacity` asks, then each table's read
    units; `ItemCollectionMetrics`), or `IdempotentParameterMismatchException` when the request's
    other parameters differ from the original's. The parameters compared are the whole JSON body
    as it came (moto's `raw_body`, after any gzip), every member but the token, by a digest of its
    canonical JSON. Only a transaction that succeeded is remembered, from when it finished: a
    cancelled one, or one refused before it started, is not, and its repeat applies. After 10
    minutes the token is forgotten, and its next use applies again (`SidestreamControl.
    AgeClientTokens` ages the tokens held, so that a test need not wait).

    The guide does not say how a repeat's reads are counted; here each item the transaction names
    is one strongly consistent read of the item as it is now (a unit per 4 KB, at least one), and
    the meter bills those read units for a repeat, no write units. A request without a token is
    moto's, as before (the AWS SDKs, Rust's and boto3 alike, give every `TransactWriteItems` one
    unless the caller does, and keep it for their retries). Its answers go through `dynamodb_directly` like every other, so
    `SIDESTREAM_MOTO_CHECK` serializes a repeat's answer by moto's serializer too. The handler runs
    under the launcher's DynamoDB lock (`serialized`), so a token is looked up and remembered with
    no request between."""
    import hashlib

    from moto.core.responses import ActionResult
    from moto.dynamodb.exceptions import ERROR_TYPE_PREFIX, DynamodbException, MockValidationException
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.responses import DynamoHandler

    class IdempotentParameterMismatch(DynamodbException):
        error_type = ERROR_TYPE_PREFIX + "IdempotentParameterMismatchException"

        def __init__(self):
            # The error's description in the API reference.
            super().__init__(
                self.error_type,
                message="DynamoDB rejected the request because you retried a request with a different "
                "payload but with an idempotent token that was already used.",
            )

    def binary(value):
        # A binary moto's parser decoded (the body as it came is JSON, and has none).
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(value).decode("ascii")
        raise TypeError(f"{type(value).__name__} is not JSON")

    def digest(self, request):
        try:
            whole = json.loads(self.raw_body)
        except (TypeError, ValueError):
            whole = request
        others = {name: value for name, value in whole.items() if name != "ClientRequestToken"}
        canonical = json.dumps(others, sort_keys=True, separators=(",", ":"), default=binary)
        return hashlib.sha256(canonical.encode()).digest()

    def read_units(backend, request):
        """Each table's read units for reading the items the transaction names, as they are."""
        units = {}
        for action in request.get("TransactItems", []):
            ((kind, op),) = action.items()
            table = backend.get_table(op["TableName"])
            key = op["Item"] if kind == "Put" else op["Key"]
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
            item = table.get_item(hash_value, range_value)
            read = meter.read_units(meter.stored_size(item) if item is not None else 0, True)
            units[table.name] = units.get(table.name, 0) + read
        return units

    def repeated(units, return_consumed_capacity):
        """A repeat's answer: moto's success body, the read units when they are asked for."""
        consumed = []
        if return_consumed_capacity in ("TOTAL", "INDEXES"):
            for name, read in units.items():
                capacity = {"TableName": name, "CapacityUnits": read, "ReadCapacityUnits": read}
                if return_consumed_capacity == "INDEXES":
                    capacity["Table"] = {"CapacityUnits": read, "ReadCapacityUnits": read}
                consumed.append(capacity)
        return {"ConsumedCapacity": consumed, "ItemCollectionMetrics": {}}

    original = DynamoHandler.transact_write_items

    def transact_write_items(self):
        request = self.body
        token = request.get("ClientRequestToken")
        if token is None:
            return original(self)
        if not 1 <= len(token) <= 36:
            bound = "greater than or equal to 1" if not token else "less than or equal to 36"
            raise MockValidationException(
                f"1 validation error detected: Value '{token}' at 'clientRequestToken' failed to "
                f"satisfy constraint: Member must have length {bound}"
            )
        key = (self.current_account, self.region, token)
        mine = digest(self, request)
        held = CLIENT_TOKENS.digest_of(key, time.monotonic())
        if held is not None:
            if held != mine:
                raise IdempotentParameterMismatch()
            units = read_units(self.dynamodb_backend, request)
            CLIENT_TOKENS.repeat = units
            return ActionResult(repeated(units, request.get("ReturnConsumedCapacity", "NONE")))
        result = original(self)
        CLIENT_TOKENS.remember(key, mine, time.monotonic())
        return result

    DynamoHandler.transact_write_items = transact_write_items


def age_client_tokens(environ, start_response):
    """Ages every client token held by n seconds, `{"Seconds": n}` (see the module's
    documentation); answers how many were held, `{"Aged": n}`."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    seconds = float(json.loads(environ["wsgi.input"].read(length) or b"{}").get("Seconds", 0))
    body = json.dumps({"Aged": CLIENT_TOKENS.age(seconds)}).encode()
    start_response(
        "200 OK",
        [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))],
    )
    return [body]


def age_iterators(environ, start_response):
    """Ages every shard iterator handed out so far (see the module's documentation)."""
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    length = int(environ.get("CONTENT_LENGTH") or 0)
    seconds = float(json.loads(environ["wsgi.input"].read(length) or b"{}").get("Seconds", 0))
    aged = 0
    for backends_by_region in dynamodbstreams_backends.values():
        for backend in backends_by_region.values():
            for iterator in backend.shard_iterators.values():
                iterator.handed_out = getattr(iterator, "handed_out", time.monotonic()) - seconds
                aged += 1
    body = json.dumps({"Aged": aged}).encode()
    start_response(
        "200 OK",
        [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))],
    )
    return [body]


TRIM_STREAM = "SidestreamControl.TrimStream"


def streams_are_trimmed():
    """Stream shards keep a trim horizon: records below it are gone, as after their 24 hours."""
    from moto.core.exceptions import JsonRESTError
    from moto.dynamodb.models import table as table_module
    from moto.dynamodbstreams import models as streams_module

    class TrimmedDataAccess(JsonRESTError):
        def __init__(self, sequence_number):
            super().__init__(
                "TrimmedDataAccessException",
                f"The operation attempted to read past the oldest stream record in a shard "
                f"(sequence number {sequence_number} is trimmed)",
            )

    def horizon(shard):
        return getattr(shard, "trim_horizon", shard.starting_sequence_number)

    original_init = streams_module.ShardIterator.__init__

    def init(self, streams_backend, stream_shard, shard_iterator_type, sequence_number=None):
        if shard_iterator_type in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            if sequence_number is not None and int(sequence_number) < horizon(stream_shard):
                raise TrimmedDataAccess(sequence_number)
            sequence_number = int(sequence_number)
        original_init(self, streams_backend, stream_shard, shard_iterator_type, sequence_number)
        if shard_iterator_type == "TRIM_HORIZON":
            self.sequence_number = horizon(stream_shard)

    streams_module.ShardIterator.__init__ = init

    original_get = table_module.StreamShard.get

    def get(self, start, quantity):
        if start < horizon(self):
            raise TrimmedDataAccess(start)
        return original_get(self, start, quantity)

    table_module.StreamShard.get = get


def trim_stream(environ, start_response):
    """Trims every record a table's stream holds now (see the module's documentation)."""
    from moto.dynamodb.models import dynamodb_backends

    length = int(environ.get("CONTENT_LENGTH") or 0)
    request = json.loads(environ["wsgi.input"].read(length) or b"{}")
    table = dynamodb_backends[DEFAULT_ACCOUNT][request.get("Region", "us-east-1")].get_table(
        request["TableName"]
    )
    shard = table.stream_shard
    end = shard.starting_sequence_number + len(shard.items)
    trimmed = end - getattr(shard, "trim_horizon", shard.starting_sequence_number)
    shard.trim_horizon = end
    body = json.dumps({"Trimmed": trimmed}).encode()
    start_response(
        "200 OK",
        [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))],
    )
    return [body]


def table_of(environ):
    """The table a DynamoDB or DynamoDB Streams request names (its stream's table for a stream
    ARN or shard iterator), or "-"; the request's body is read and put back."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = io.BytesIO(body)
    try:
        request = json.loads(body)
    except ValueError:
        return "-"
    if "TableName" in request:
        return request["TableName"]
    if "RequestItems" in request:
        return ",".join(sorted(request["RequestItems"]))
    for field in ("StreamArn", "ShardIterator"):
        if field in request:
            text = request[field]
            start = text.find(":table/")
            if start >= 0:
                return text[start + 7:].split("/")[0]
    return "-"


def describe_alarms_applies_every_filter():
    """moto's `DescribeAlarms` applies only the first of `ActionPrefix`, `AlarmNamePrefix`,
    `AlarmNames` and `StateValue` it is given; CloudWatch applies them all (`sidestream status`
    asks for a stack's alarms by name prefix in state ALARM)."""
    from moto.cloudwatch import responses as cloudwatch_responses

    def describe_alarms(self):
        action_prefix = self._get_param("ActionPrefix")
        name_prefix = self._get_param("AlarmNamePrefix")
        names = self._get_param("AlarmNames", [])
        state = self._get_param("StateValue")
        alarms = [
            a
            for a in self.cloudwatch_backend.describe_alarms()
            if (not action_prefix or any(str(x).startswith(action_prefix) for x in a.alarm_actions))
            and (not name_prefix or a.name.startswith(name_prefix))
            and (not names or a.name in names)
            and (not state or a.state_value == state)
        ]
        return cloudwatch_responses.ActionResult(
            {
                "MetricAlarms": [a for a in alarms if a.rule is None],
                "CompositeAlarms": [a for a in alarms if a.rule is not None],
            }
        )

    cloudwatch_responses.CloudWatchResponse.describe_alarms = describe_alarms


CBOR_OPERATION = "/service/GraniteServiceVersion20100801/operation/"
# CloudWatch's JSON protocol target prefix.
CLOUDWATCH_TARGET = "GraniteServiceVersion20100801."


def drained(response):
    """A WSGI response's body, whole, with the response closed as WSGI requires."""
    try:
        return b"".join(response)
    finally:
        close = getattr(response, "close", None)
        if close is not None:
            close()


def cloudwatch_over_cbor(app):
    """A WSGI application that answers CloudWatch's RPC v2 CBOR requests through moto's JSON
    protocol (see the module's documentation); other requests go to `app` as they are."""
    import botocore.session
    from botocore.parsers import JSONParser, RpcV2CBORParser
    from botocore.serialize import JSONSerializer, RpcV2CBORSerializer

    model = botocore.session.get_session().get_service_model("cloudwatch")
    cbor_in, json_out = RpcV2CBORParser(), JSONSerializer()
    json_in, cbor_out = JSONParser(), RpcV2CBORSerializer()

    def cbor(value, shape):
        body = bytearray()
        cbor_out._serialize_data_item(body, value, shape)
        return bytes(body)

    def application(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if not path.startswith(CBOR_OPERATION):
            return app(environ, start_response)
        operation = model.operation_model(path[len(CBOR_OPERATION):])
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        # The SDK compresses large PutMetricData bodies (`Content-Encoding: gzip`), as CloudWatch
        # accepts them.
        if environ.get("HTTP_CONTENT_ENCODING", "").strip().lower() == "gzip":
            body = gzip.decompress(body)
        parameters = {}
        if body and operation.input_shape is not None:
            parameters = cbor_in.parse({"body": body, "headers": {}, "status_code": 200}, operation.input_shape)
            parameters.pop("ResponseMetadata", None)
        request = json_out.serialize_to_request(parameters, operation)
        forwarded = dict(environ)
        forwarded.update(
            PATH_INFO="/",
            REQUEST_METHOD="POST",
            CONTENT_TYPE=request["headers"]["Content-Type"],
            CONTENT_LENGTH=str(len(request["body"])),
            HTTP_X_AMZ_TARGET=request["headers"]["X-Amz-Target"],
        )
        forwarded.pop("HTTP_CONTENT_ENCODING", None)
        forwarded["wsgi.input"] = io.BytesIO(request["body"])
        answered = {}

        def keep(status, headers, exc_info=None):
            answered["status"], answered["headers"] = status, headers

        raw = drained(app(forwarded, keep))
        status = answered.get("status", "500 Internal Server Error")
        if status.startswith("2"):
            shape = operation.output_shape
            parsed = {}
            if shape is not None and raw:
                parsed = json_in.parse({"body": raw, "headers": {}, "status_code": 200}, shape)
                parsed.pop("ResponseMetadata", None)
            out = cbor(parsed, shape) if shape is not None else b""
        else:
            try:
                error = json.loads(raw)
            except ValueError:
                error = {"message": raw.decode("utf-8", "replace")}
            code = str(error.get("__type", "InternalFailure")).rsplit("#", 1)[-1]
            message = str(error.get("message", error.get("Message", "")))
            out = cbor({"__type": code, "message": message}, STRING_MAP)
        start_response(
            status,
            [
                ("Content-Type", "application/cbor"),
                ("smithy-protocol", "rpc-v2-cbor"),
                ("Content-Length", str(len(out))),
            ],
        )
        return [out]

    return application


class _StringMap:
    """The shape of an error's body: a map of strings (for botocore's CBOR serializer)."""

    type_name = "map"
    serialization = {}

    class _String:
        type_name = "string"
        serialization = {}

    key = value = _String()


STRING_MAP = _StringMap()


class Profile:
    """cProfile over the DynamoDB requests, and each operation's count and seconds. Used only
    under the DynamoDB lock, so one profiler serves every thread."""

    def __init__(self, path):
        self.path = path
        self.profiler = cProfile.Profile()
        self.operations = collections.defaultdict(lambda: [0, 0.0, 0.0])

    def run(self, target, environ, arrived, call):
        start = time.perf_counter()
        table = table_of(environ)
        self.profiler.enable()
        try:
            return call()
        finally:
            self.profiler.disable()
            seen = self.operations[(target.split(".")[-1], table)]
            seen[0] += 1
            seen[1] += time.perf_counter() - start
            seen[2] += start - arrived

    def write(self):
        with open(self.path, "w") as out:
            total = sum(s for _, s, _ in self.operations.values())
            waited = sum(w for _, _, w in self.operations.values())
            out.write(
                f"DynamoDB requests: {sum(c for c, _, _ in self.operations.values())}, {total:.1f} s"
                f" answering, {waited:.1f} s waiting for the lock\n"
            )
            out.write(f"  {'operation':<22} {'table':<40} {'count':>8} {'answering':>11} {'each':>11} {'waiting':>9}\n")
            for (name, table), (count, seconds, wait) in sorted(self.operations.items(), key=lambda o: -o[1][1]):
                out.write(
                    f"  {name:<22} {table:<40} {count:>8} {seconds:>9.1f} s"
                    f" {1000 * seconds / count:>8.2f} ms {wait:>7.1f} s\n"
                )
            out.write("\n")
            self.profiler.dump_stats(self.path + ".pstats")
            stats = pstats.Stats(self.profiler, stream=out)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(25)


# What the requests answered would be billed (scripts/meter.py).
METER = meter.Meter()


def region_of(environ):
    """The Region a request is signed for (us-east-1 when unsigned)."""
    credential = environ.get("HTTP_AUTHORIZATION", "").split("Credential=", 1)[-1].split("/")
    return credential[2] if len(credential) > 2 else "us-east-1"


def service_of(environ):
    """The service a request is signed for."""
    credential = environ.get("HTTP_AUTHORIZATION", "").split("Credential=", 1)[-1].split("/")
    return credential[3] if len(credential) > 3 else ""


def serialized(app, raw, lock, empty_pages, write_capacity, profile=None, check=False):
    """A WSGI application that runs DynamoDB requests under `lock`, to their last byte, and
    answers some GetRecords requests with empty pages (`empty_pages`), meters every DynamoDB and
    S3 request (`METER`, scripts/meter.py; `raw`, moto itself, answers a read again for what it
    read before its filter; a transaction repeated with its client token is billed as the reads
    it made, `CLIENT_TOKENS`), counts the write units DynamoDB would publish (`write_capacity`)
    and puts them into CloudWatch before a CloudWatch request; `profile`, if given, times them."""
    from moto.dynamodb.models import dynamodb_backends

    def application(environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target == meter.METER:
            return METER.answer(environ, start_response)
        if target == TRIM_STREAM:
            with lock:
                return trim_stream(environ, start_response)
        if target == AGE_ITERATORS:
            with lock:
                return age_iterators(environ, start_response)
        if target == AGE_CLIENT_TOKENS:
            with lock:
                return age_client_tokens(environ, start_response)
        if not target.startswith("DynamoDB"):
            if environ.get("PATH_INFO", "").startswith(CBOR_OPERATION) or target.startswith(CLOUDWATCH_TARGET):
                write_capacity.publish()
            elif service_of(environ) == "s3":
                METER.count_s3(environ)
            return app(environ, start_response)
        arrived = time.perf_counter()
        with lock:
            if target == GET_RECORDS:
                empty = empty_pages.answer(environ)
                if empty is not None:
                    start_response(
                        "200 OK",
                        [
                            ("Content-Type", "application/x-amz-json-1.0"),
                            ("Content-Length", str(len(empty))),
                        ],
                    )
                    return [empty]
            ttl_delete.active = target == DELETE_ITEM and environ.get(TTL_DELETE_HEADER) == "service"
            try:
                if profile is not None:
                    return profile.run(target, environ, arrived, lambda: answer(environ, start_response))
                return answer(environ, start_response)
            finally:
                ttl_delete.active = False
                TABLES_CHANGED.answered(target)

    def answer(environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        environ["wsgi.input"] = io.BytesIO(body)
        measure = measured(target, environ, body)
        answered = {}

        def keep(status, headers, exc_info=None):
            answered["status"], answered["headers"] = status, headers

            def write(_data):
                raise RuntimeError("moto answers by its return value, not by write()")

            return write

        CLIENT_TOKENS.repeat = None
        answer = drained(app(environ, keep))
        status, headers = answered.get("status", "500 INTERNAL SERVER ERROR"), answered.get("headers", [])
        # A transaction repeated with its client token was read, not written
        # (`client_tokens_make_transactions_idempotent`).
        repeat = CLIENT_TOKENS.take_repeat()
        if measure is not None and repeat is not None:
            for table, units in repeat.items():
                METER.add(table, rru=units)
        elif measure is not None:
            try:
                measure.after(status, answer, lambda request: again(environ, request))
                if status.startswith("2"):
                    consumed = measure.consumed_capacity()
                    if consumed is not None:
                        answer, headers = with_capacity(answer, headers, consumed, check)
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                logging.warning("the meter could not bill %s: %r", target, error)
            write_capacity.count(region_of(environ), measure.billed)
        start_response(status, headers)
        return [answer]

    def measured(target, environ, body):
        """The request's measure, its items read before it; none for TTL's deletes (not billed)
        and streams' reads (free to Lambda)."""
        if target.startswith("DynamoDBStreams_"):
            METER.count_stream_read(target)
        if environ.get(TTL_DELETE_HEADER) == "service" or not target.startswith("DynamoDB_"):
            return None
        try:
            backend = dynamodb_backends[DEFAULT_ACCOUNT][region_of(environ)]
            request = json.loads(body or b"{}")
            # The IAM check reads it too (iam_gate.PARSED_BODY); neither changes it.
            environ[iam_gate.PARSED_BODY] = request
            return meter.Measure(METER, backend, target, request)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            logging.warning("the meter could not read %s: %r", target, error)
            return None

    def again(environ, request):
        """moto's answer to `request`, sent as `environ`'s was (a read, for the meter)."""
        body = json.dumps(request).encode()
        copy = dict(environ, **{"wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))})
        copy.pop(iam_gate.PARSED_BODY, None)
        return drained(raw(copy, lambda *_args, **_kwargs: None))

    return application


MOTO_CONSUMED_CAPACITY = "X-Sidestream-Moto-Consumed-Capacity"


def with_capacity(answer, headers, consumed, check):
    """moto's successful `answer` (JSON bytes) and its `headers` with the `ConsumedCapacity` the
    meter billed (scripts/meter.py: one set of rules for the bill and the answer) in place of
    moto's fixed figures, its length and CRC32 (which the SDKs check) made again. With `check`
    (SIDESTREAM_MOTO_CHECK), moto's own figure is kept, as JSON, in the header
    `X-Sidestream-Moto-Consumed-Capacity`, for comparison."""
    body = json.loads(answer)
    theirs = body.get("ConsumedCapacity")
    body["ConsumedCapacity"] = consumed
    answer = json.dumps(body).encode()
    replaced = {"content-length": str(len(answer)), "x-amz-crc32": str(zlib.crc32(answer))}
    headers = [(name, replaced.get(name.lower(), value)) for name, value in headers]
    headers += [(name, value) for name, value in replaced.items() if name not in {n.lower() for n, _ in headers}]
    if check:
        headers.append((MOTO_CONSUMED_CAPACITY, json.dumps(theirs)))
    return answer, headers


def quiet_collector():
    """Python's cycle collector runs after every 700 allocations more than deallocations and
    every so often walks all the objects the process holds: moto's and botocore's modules and
    models (63,000 objects once DynamoDB's are loaded, more with each service; made once and
    never freed), and every item the tables hold. The objects made by now are moved out of its
    reach (`gc.freeze`) and it runs after 50,000 allocations: a `Scan` page 12% quicker and a
    touch 8% in `scripts/bench-e2e --only emulator --kinds`, where the tables are small; the
    suite's are larger. Cycles are still collected, only later."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    remember_moto_modules()
    remember_handler_methods()
    remember_condition_lexing()
    remember_condition_parses()
    remember_update_parses()
    json_errors_without_xml()
    quick_answer_dicts()
    items_sized_once()
    quick_request_plumbing()
    quick_request_ids()
    quick_backend_lookups()
    quick_tree_walks()
    check = os.environ.get("SIDESTREAM_MOTO_CHECK") == "1"
    scan_from_the_start_key()
    sort_items_by_plain_keys(check)
    ttl_deletes_carry_the_service_identity()
    streams_are_trimmed()
    streams_write_what_dynamodb_writes()
    streams_turn_off_and_on()
    transactions_undo_only_what_they_touched()
    client_tokens_make_transactions_idempotent()
    describe_alarms_applies_every_filter()
    pick_plain_dict_members_by_table(check)
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True
    app = dynamodb_directly(app, check)
    lock = threading.Lock()
    profile = None
    if os.environ.get("SIDESTREAM_MOTO_PROFILE"):
        profile = Profile(os.environ["SIDESTREAM_MOTO_PROFILE"])

        def stop(_signal, _frame):
            with lock:
                profile.write()
            sys.exit(0)

        signal.signal(signal.SIGTERM, stop)
    # A thread for each kept-alive connection (scripts/http_server.py); werkzeug's development
    # server, which `moto_server` uses, closes every connection after one request and starts a
    # thread for each.
    logging.basicConfig(level=logging.WARNING)
    quiet_collector()
    http_server.Server(
        serialized(
            # IAM first, then DynamoDB's validation, as AWS authorizes a request before it
            # validates it.
            cloudwatch_over_cbor(Gate(dynamodb_rules.Rules(app, key_names, batch_write_undo))),
            app,
            lock,
            EmptyPages(
                float(os.environ.get("SIDESTREAM_EMPTY_PAGES", "0.3")),
                int(os.environ.get("SIDESTREAM_EMPTY_PAGES_SEED", "7")),
            ),
            WriteCapacity(),
            profile,
            check,
        ),
        args.host,
        args.port,
    ).run()


if __name__ == "__main__":
    main()
