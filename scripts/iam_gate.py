"""The emulator's IAM check: every request signed with a role's credentials is decided as IAM decides it.

moto answers every call whatever the caller may do. AWS does not: a function, a state machine's
task, the grid API and the deployment hook each act under the role the template gives them, and
a call that role does not allow fails with AccessDenied. This WSGI layer, in front of moto in
scripts/moto-server.py, makes the local stack do the same.

- The local stack registers each role of the template it creates (`SidestreamControl.PutRoles`):
  an access key id of its own, the role's ARN, its identity policies as the template resolves
  them (inline and managed), and the stack's resource policies (its buckets' policies).
  Each caller then signs with its role's key (`local_stack::iam`).
- A request signed with a registered key is turned into the IAM requests AWS makes of it (one
  action, resource ARN and the condition keys the template uses, per call: a BatchWriteItem is one
  per table, a TransactWriteItems one per item as PutItem, UpdateItem, DeleteItem or
  ConditionCheckItem), and each is evaluated by @cloud-copilot/iam-simulate (scripts/iam/
  evaluate.mjs, a Node process; decisions are cached by role, action, resource and context).
  A request one of whose parts is not allowed is answered as AWS answers it: 403 AccessDenied
  from S3, AccessDeniedException from the JSON services. A request the gate cannot map to IAM
  (a service or operation it does not know) is refused the same way, naming it, so that nothing
  a role signs goes unchecked.
- S3's rule for a missing key: GetObject and HeadObject answer 404 NoSuchKey only to a caller
  that may `s3:ListBucket` the bucket; to any other, 403 AccessDenied (S3 API reference,
  GetObject, "Permissions"). A ListBucket statement conditioned on `s3:prefix` does not help: the
  GetObject request carries no prefix.
- Requests signed with any other key (the tests' and the operators' own, `testing`) are not
  checked: they stand for an administrator.
- `SidestreamControl.IamReport` answers, for the keys asked about, how many calls were checked
  and every denial (the role, the call, its resource and why), so that a run fails naming them.
- `SidestreamControl.Authorize` decides one call made outside the emulator (a state machine's
  `lambda:InvokeFunction`, run in process by the local stack) under a registered role.

Every request that reaches AWS is made over TLS, so `aws:SecureTransport` is true for all.
"""

import functools
import io
import json
import os
import re
import subprocess
import threading
import urllib.parse
from xml.etree import ElementTree

PUT_ROLES = "SidestreamControl.PutRoles"
IAM_REPORT = "SidestreamControl.IamReport"
AUTHORIZE = "SidestreamControl.Authorize"
ACCOUNT = "123456789012"
# The WSGI environ key under which a request's JSON body may come parsed already (the launcher's
# meter parses every DynamoDB request's): read, never changed.
PARSED_BODY = "sidestream.parsed_body"
CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/")


class Evaluator:
    """The Node process of scripts/iam/evaluate.mjs, one request at a time."""

    def __init__(self):
        here = os.path.dirname(os.path.abspath(__file__))
        script = os.path.join(here, "iam", "evaluate.mjs")
        if not os.path.isdir(os.path.join(here, "iam", "node_modules")):
            raise SystemExit(
                "moto-server: the IAM check's evaluator is not installed (scripts/setup moto runs npm ci in scripts/iam)"
            )
        self.process = subprocess.Popen(
            ["node", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.lock = threading.Lock()

    def ask(self, request):
        with self.lock:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the IAM evaluator (scripts/iam/evaluate.mjs) stopped")
        return json.loads(line)


def _statements(policy):
    statements = (policy or {}).get("Statement") or []
    return statements if isinstance(statements, list) else [statements]


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _pattern(arn_pattern):
    """IAM's match of a Resource element: `*` any run of characters, `?` any one, case-sensitive."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in arn_pattern) + r"\Z")


class Shape:
    """What of a request a set of policies can tell apart, so that requests alike in it are
    decided alike and one decision serves them all: for each statement, whether the request's
    resource matches its `Resource` (or `NotResource`); and the condition keys any statement
    names (the request's other context keys cannot change a decision)."""

    def __init__(self, policies):
        self.resources = []
        self.condition_keys = set()
        # Each resource's matches, kept by its ARN (a few tables, or a bucket's objects).
        self.matched = {}
        for policy in policies:
            for statement in _statements(policy):
                for element in ("Resource", "NotResource"):
                    if element in statement:
                        self.resources.append([_pattern(p) for p in _as_list(statement[element])])
                for conditions in (statement.get("Condition") or {}).values():
                    self.condition_keys.update(k.lower() for k in conditions)

    def of(self, resource, context):
        matches = self.matched.get(resource)
        if matches is None:
            matches = tuple(any(p.match(resource) for p in patterns) for patterns in self.resources)
            if len(self.matched) < 4096:
                self.matched[resource] = matches
        if not self.condition_keys:
            return matches, ""
        kept = {k: v for k, v in context.items() if k.lower() in self.condition_keys}
        return matches, json.dumps(kept, sort_keys=True)


class Role:
    def __init__(self, key, arn, name, policies):
        self.key, self.arn, self.name = key, arn, name
        self.shape = Shape(policies)
        self.checked = 0
        self.calls = {}
        self.denials = []


def _table_arn(region, table, index=None):
    if table.startswith("arn:"):
        arn = table
    else:
        arn = f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{table}"
    return f"{arn}/index/{index}" if index else arn


IDENTIFIER = re.compile(r"(#?[A-Za-z_][A-Za-z0-9_]*)")
KEYWORDS = {
    "SET", "REMOVE", "ADD", "DELETE", "AND", "OR", "NOT", "BETWEEN", "IN", "if_not_exists",
    "attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains", "size",
    "list_append",
}


def _attributes(body, item=None, key=None):
    """`dynamodb:Attributes`: the top-level attribute names a write names (its item's, or its key's
    and those its expressions name)."""
    names = set()
    if item:
        names.update(item)
    if key:
        names.update(key)
    aliases = body.get("ExpressionAttributeNames") or {}
    for field in ("UpdateExpression", "ConditionExpression", "ProjectionExpression"):
        names.update(aliases.get(top, top) for top in _top_level_names(body.get(field) or ""))
    return sorted(n for n in names if n)


@functools.lru_cache(maxsize=4096)
def _top_level_names(expression):
    """The top-level attribute names or `#aliases` an expression names, kept by its text (the
    requests of one kind share a few)."""
    tops = []
    # Values (:v) are not names; paths name their top-level attribute only.
    expression = re.sub(r":[A-Za-z0-9_]+", " ", expression)
    for token in re.split(r"[\s,()=<>+\-]+", expression):
        if not token:
            continue
        top = re.split(r"[.\[]", token)[0]
        if top in KEYWORDS or top.upper() in KEYWORDS:
            continue
        tops.append(top)
    return tuple(tops)


def _leading_keys(region, table, items):
    """`dynamodb:LeadingKeys`: the partition key values of `items` (keys or whole items) of `table`."""
    from moto.dynamodb.models import dynamodb_backends

    name = table.rsplit("/", 1)[-1] if table.startswith("arn:") else table
    try:
        hash_key = dynamodb_backends[ACCOUNT][region].get_table(name).hash_key_attr
    except Exception:  # noqa: BLE001 - a missing table: DynamoDB answers ResourceNotFound after IAM
        return []
    values = []
    for item in items:
        value = (item or {}).get(hash_key) or {}
        values.extend(str(v) for v in value.values())
    return values


def dynamodb_calls(operation, body, region, named=None):
    """The IAM requests a DynamoDB or DynamoDB Streams operation makes: (action, resource, context).
    `named`, the condition keys (lower case) the deciding policies name: a context key no
    statement names cannot change a decision (`Shape`), so it is left out, not worked out (the
    table and item a `dynamodb:LeadingKeys` looks up, the names `dynamodb:Attributes` parses);
    None, every key."""
    calls = []

    def wanted(key):
        return named is None or key.lower() in named

    def key_context(table, items):
        if not wanted("dynamodb:LeadingKeys"):
            return {}
        return {"dynamodb:LeadingKeys": _leading_keys(region, table, items)}

    def write_context(part, items, item=None, key=None):
        context = key_context(part["TableName"], items)
        if wanted("dynamodb:Attributes"):
            context["dynamodb:Attributes"] = _attributes(part, item=item, key=key)
        if wanted("dynamodb:ReturnValues"):
            context["dynamodb:ReturnValues"] = part.get("ReturnValues") or "NONE"
        return context

    if operation in ("PutItem",):
        calls.append(("dynamodb:PutItem", _table_arn(region, body["TableName"]),
                      write_context(body, [body.get("Item")], item=body.get("Item"))))
    elif operation in ("UpdateItem", "DeleteItem"):
        calls.append((f"dynamodb:{operation}", _table_arn(region, body["TableName"]),
                      write_context(body, [body.get("Key")], key=body.get("Key"))))
    elif operation == "GetItem":
        calls.append(("dynamodb:GetItem", _table_arn(region, body["TableName"]),
                      key_context(body["TableName"], [body.get("Key")])))
    elif operation in ("Query", "Scan"):
        calls.append((f"dynamodb:{operation}", _table_arn(region, body["TableName"], body.get("IndexName")), {}))
    elif operation == "BatchGetItem":
        for table, asked in (body.get("RequestItems") or {}).items():
            calls.append(("dynamodb:BatchGetItem", _table_arn(region, table), key_context(table, asked.get("Keys") or [])))
    elif operation == "BatchWriteItem":
        for table, requests in (body.get("RequestItems") or {}).items():
            items = [r.get("PutRequest", {}).get("Item") or r.get("DeleteRequest", {}).get("Key") for r in requests]
            calls.append(("dynamodb:BatchWriteItem", _table_arn(region, table), key_context(table, items)))
    elif operation == "TransactWriteItems":
        actions = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
        for entry in body.get("TransactItems") or []:
            for kind, part in entry.items():
                action = actions.get(kind)
                if action is None:
                    return None
                items = [part.get("Item") or part.get("Key")]
                context = key_context(part["TableName"], items)
                if action != "ConditionCheckItem":
                    context = write_context(part, items, item=part.get("Item"), key=part.get("Key"))
                    context.pop("dynamodb:ReturnValues", None)
                calls.append((f"dynamodb:{action}", _table_arn(region, part["TableName"]), context))
    elif operation == "TransactGetItems":
        for entry in body.get("TransactItems") or []:
            calls.append(("dynamodb:GetItem", _table_arn(region, entry["Get"]["TableName"]), {}))
    elif operation in ("ListTables", "ListStreams"):
        # Neither takes a resource type (Service Authorization Reference): "*".
        calls.append((f"dynamodb:{operation}", "*", {}))
    elif operation in ("DescribeStream", "GetShardIterator"):
        calls.append((f"dynamodb:{operation}", body["StreamArn"], {}))
    elif operation == "GetRecords":
        calls.append(("dynamodb:GetRecords", body["ShardIterator"].split("|", 1)[0], {}))
    elif "TableName" in body:
        # GetItem, DescribeTable, DescribeTimeToLive, UpdateTable and the rest name one table.
        calls.append((f"dynamodb:{operation}", _table_arn(region, body["TableName"]), {}))
    else:
        return None
    return calls


def s3_calls(method, bucket, key, query, headers, body):
    """The IAM requests an S3 request makes, as in the Service Authorization Reference."""
    if not bucket:
        return [("s3:ListAllMyBuckets", "*", {})] if method == "GET" else None
    bucket_arn = f"arn:aws:s3:::{bucket}"
    if not key:
        if method in ("GET", "HEAD"):
            if "location" in query:
                return [("s3:GetBucketLocation", bucket_arn, {})]
            if "versions" in query:
                return [("s3:ListBucketVersions", bucket_arn, {})]
            if "uploads" in query:
                return [("s3:ListBucketMultipartUploads", bucket_arn, {})]
            if method == "GET" and set(query) - {"list-type", "prefix", "delimiter", "max-keys",
                                                 "continuation-token", "start-after", "encoding-type",
                                                 "fetch-owner", "marker"}:
                return None
            context = {}
            if "prefix" in query:
                context["s3:prefix"] = query["prefix"]
            if "delimiter" in query:
                context["s3:delimiter"] = query["delimiter"]
            return [("s3:ListBucket", bucket_arn, context)]
        if method == "POST" and "delete" in query:
            keys = [e.text or "" for e in ElementTree.fromstring(body).iter() if e.tag.endswith("Key")]
            return [("s3:DeleteObject", f"{bucket_arn}/{k}", {}) for k in keys]
        return None
    if method not in OBJECT_ACTIONS:
        return None
    object_arn = f"{bucket_arn}/{key}"
    by_subresource, otherwise = OBJECT_ACTIONS[method]
    action = next((a for sub, a in by_subresource.items() if sub in query), otherwise)
    calls = [(action, object_arn, {})]
    source = headers.get("HTTP_X_AMZ_COPY_SOURCE")
    if method == "PUT" and action == "s3:PutObject" and source:
        # CopyObject and UploadPartCopy also read their source.
        source = urllib.parse.unquote(source.lstrip("/").split("?", 1)[0])
        calls.append(("s3:GetObject", f"arn:aws:s3:::{source}", {}))
    return calls


# An object request's action, by method: the action of the first subresource of the query that
# names one, else the method's own (Service Authorization Reference, Amazon S3's actions).
# UploadPart, CreateMultipartUpload and CompleteMultipartUpload are s3:PutObject.
OBJECT_ACTIONS = {
    "GET": ({"tagging": "s3:GetObjectTagging", "uploadId": "s3:ListMultipartUploadParts"}, "s3:GetObject"),
    "PUT": ({"tagging": "s3:PutObjectTagging"}, "s3:PutObject"),
    "POST": ({"restore": "s3:RestoreObject"}, "s3:PutObject"),
    "DELETE": ({"uploadId": "s3:AbortMultipartUpload"}, "s3:DeleteObject"),
}
OBJECT_ACTIONS["HEAD"] = OBJECT_ACTIONS["GET"]


def _secret_arn(secret_id, region):
    if secret_id.startswith("arn:"):
        return secret_id
    from moto.secretsmanager.models import secretsmanager_backends

    secrets = secretsmanager_backends[ACCOUNT][region].secrets
    if secret_id in secrets:
        return secrets[secret_id].arn
    return f"arn:aws:secretsmanager:{region}:{ACCOUNT}:secret:{secret_id}"


def json_calls(target, body, region):
    """The IAM requests of a JSON-protocol request other than DynamoDB's."""
    service, _, operation = target.partition(".")
    if service == "secretsmanager":
        if "SecretId" not in body:
            return None
        return [(f"secretsmanager:{operation}", _secret_arn(body["SecretId"], region), {})]
    if service == "AmazonSQS":
        url = body.get("QueueUrl")
        if not url:
            return None
        name = url.rstrip("/").rsplit("/", 1)[-1]
        return [(f"sqs:{operation}", f"arn:aws:sqs:{region}:{ACCOUNT}:{name}", {})]
    if service == "GraniteServiceVersion20100801":
        # CloudWatch's metric reads and writes take no resource.
        return [(f"cloudwatch:{operation}", "*", {})]
    if service.startswith("Kinesis_"):
        arn = body.get("StreamARN") or (
            f"arn:aws:kinesis:{region}:{ACCOUNT}:stream/{body['StreamName']}" if body.get("StreamName") else None
        )
        if arn is None and body.get("ShardIterator"):
            return None
        return [(f"kinesis:{operation}", arn, {})] if arn else None
    return None


class Gate:
    """The WSGI layer (see the module's documentation)."""

    def __init__(self, app, evaluator=None):
        self.app = app
        self.evaluator = evaluator or Evaluator()
        self.roles = {}
        self.resource_policies = {}
        self.resource_shapes = {}
        self.decisions = {}
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ control requests

    def put_roles(self, body):
        with self.lock:
            for key, role in body.get("Roles", {}).items():
                self.evaluator.ask({"op": "role", "key": key, "principal": role["Principal"], "policies": role["Policies"]})
                self.roles[key] = Role(key, role["Arn"], role["Name"], [p["policy"] for p in role["Policies"]])
                self.decisions = {k: v for k, v in self.decisions.items() if k[0] != key}
            self.resource_policies.update(body.get("ResourcePolicies", {}))
            self.resource_shapes = {}
        return {"Registered": len(body.get("Roles", {}))}

    def report(self, body):
        keys = body.get("Keys") or list(self.roles)
        roles = [self.roles[k] for k in keys if k in self.roles]
        return {
            "Checked": sum(r.checked for r in roles),
            "Denials": [d for r in roles for d in r.denials],
            "Calls": {r.name: r.calls for r in roles},
        }

    # ------------------------------------------------------------------ decisions

    def decide(self, role, action, resource, context, region):
        """None if allowed, else the reason."""
        context = dict(context)
        context["aws:SecureTransport"] = "true"
        context["aws:RequestedRegion"] = region
        resource_policy, bucket = None, None
        if resource.startswith("arn:aws:s3:::"):
            bucket = "arn:aws:s3:::" + resource[len("arn:aws:s3:::"):].split("/", 1)[0]
            resource_policy = self.resource_policies.get(bucket)
        # Decided once per shape of request (`Shape`): an object's key, an item's attributes
        # that no statement names, do not make another decision.
        shape = role.shape.of(resource, context)
        # The server answers requests on several threads, and `put_roles` replaces these tables:
        # they are read and written under the gate's lock (not while the evaluator decides).
        with self.lock:
            if resource_policy is not None:
                resource_shape = self.resource_shapes.setdefault(bucket, Shape([resource_policy]))
                shape = (shape, resource_shape.of(resource, context))
            cache_key = (role.key, action, shape)
            if cache_key in self.decisions:
                return self.decisions[cache_key]
        answer = self.evaluator.ask({
            "op": "eval", "key": role.key, "action": action, "resource": resource,
            "account": ACCOUNT, "context": context, "resourcePolicy": resource_policy,
        })
        decision = None if answer.get("result") == "Allowed" else f"{answer.get('result')}: {answer.get('detail')}"
        with self.lock:
            self.decisions[cache_key] = decision
        return decision

    def check(self, role, calls, region, operation):
        """The first denial of `calls` (a dict), recorded; or None when every call is allowed."""
        role.checked += 1
        if calls is None:
            denial = {"role": role.name, "role_arn": role.arn, "action": operation, "resource": "",
                      "reason": "the local stack's IAM check cannot map this request to IAM; teach scripts/iam_gate.py"}
            role.denials.append(denial)
            return denial
        for action, resource, context in calls:
            role.calls[action] = role.calls.get(action, 0) + 1
            reason = self.decide(role, action, resource, context, region)
            if reason is not None:
                denial = {"role": role.name, "role_arn": role.arn, "action": action, "resource": resource, "reason": reason}
                role.denials.append(denial)
                return denial
        return None

    # ------------------------------------------------------------------ WSGI

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target in (PUT_ROLES, IAM_REPORT, AUTHORIZE):
            body = json.loads(self._body(environ) or b"{}")
            if target == PUT_ROLES:
                answer = self.put_roles(body)
            elif target == IAM_REPORT:
                answer = self.report(body)
            else:
                answer = self.authorize(body)
            return self._json(start_response, "200 OK", answer)
        match = CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
        if match is None:
            query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
            credential = (query.get("X-Amz-Credential") or [""])[0]
            match = CREDENTIAL.search("Credential=" + credential)
        role = self.roles.get(match.group(1)) if match else None
        if role is None:
            return self.app(environ, start_response)
        region, service = match.group(2), match.group(3)
        body = self._body(environ)
        if service == "s3":
            return self._s3(environ, start_response, role, region, body)
        operation = target or f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')}"
        # The launcher's meter has parsed a DynamoDB request's body already (moto-server.py).
        parsed = environ.get(PARSED_BODY)
        if parsed is None:
            try:
                parsed = json.loads(body or b"{}")
            except ValueError:
                parsed = None
        calls = None
        if parsed is not None and target.startswith("DynamoDB"):
            calls = dynamodb_calls(target.partition(".")[2], parsed, region, role.shape.condition_keys)
        elif parsed is not None and target:
            calls = json_calls(target, parsed, region)
        denial = self.check(role, calls, region, operation)
        if denial is not None:
            kind = "com.amazon.coral.service#AccessDeniedException" if target.startswith("DynamoDB") else "AccessDeniedException"
            if target.startswith("GraniteServiceVersion"):
                kind = "AccessDenied"
            return self._json(start_response, "400 Bad Request", {"__type": kind, "Message": self._message(denial), "message": self._message(denial)})
        return self.app(environ, start_response)

    def authorize(self, body):
        role = self.roles.get(body.get("Key"))
        if role is None:
            return {"Allowed": False, "Reason": f"no role is registered for {body.get('Key')}"}
        denial = self.check(role, [(body["Action"], body["Resource"], body.get("Context") or {})], body.get("Region", "us-east-1"), body["Action"])
        return {"Allowed": denial is None, "Reason": self._message(denial) if denial else ""}

    def _s3(self, environ, start_response, role, region, body):
        method = environ.get("REQUEST_METHOD", "GET")
        path = urllib.parse.unquote(environ.get("PATH_INFO", ""))
        host = environ.get("HTTP_HOST", "").split(":", 1)[0]
        first = host.split(".", 1)[0]
        if host and not re.fullmatch(r"[0-9.]+|localhost", host) and first not in ("s3", "localhost"):
            bucket, key = first, path.lstrip("/")
        else:
            bucket, _, key = path.lstrip("/").partition("/")
        query = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        calls = s3_calls(method, bucket, key, query, environ, body)
        denial = self.check(role, calls, region, f"s3 {method} {path}")
        if denial is not None:
            return self._s3_denied(start_response, self._message(denial))
        answered = {}

        def keep(status, headers, exc_info=None):
            answered["status"], answered["headers"], answered["exc_info"] = status, headers, exc_info

        from_moto = b"".join(self.app(environ, keep))
        # A missing key is 404 only to a caller that may list the bucket; to another, 403.
        if calls and calls[0][0] == "s3:GetObject" and answered.get("status", "").startswith("404") and method in ("GET", "HEAD"):
            reason = self.decide(role, "s3:ListBucket", f"arn:aws:s3:::{bucket}", {}, region)
            if reason is not None:
                denial = {"role": role.name, "role_arn": role.arn, "action": "s3:ListBucket",
                          "resource": f"arn:aws:s3:::{bucket}",
                          "reason": f"{reason} (S3 answers a missing key with 403 AccessDenied, not 404, to a caller without s3:ListBucket)"}
                role.denials.append(denial)
                return self._s3_denied(start_response, self._message(denial), head=method == "HEAD")
        start_response(answered["status"], answered["headers"])
        return [from_moto]

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _message(denial):
        return (f"User: {denial['role_arn'].replace(':iam::', ':sts::').replace(':role/', ':assumed-role/')}/local "
                f"is not authorized to perform: {denial['action']} on resource: {denial['resource'] or '*'} "
                f"because {denial['reason']}")

    @staticmethod
    def _body(environ):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        return body

    @staticmethod
    def _json(start_response, status, answer):
        out = json.dumps(answer).encode()
        start_response(status, [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(out)))])
        return [out]

    @staticmethod
    def _s3_denied(start_response, message, head=False):
        out = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
            f"<Message>{message.replace('&', '&amp;').replace('<', '&lt;')}</Message></Error>"
        ).encode()
        start_response("403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(0 if head else len(out)))])
        return [b"" if head else out]
