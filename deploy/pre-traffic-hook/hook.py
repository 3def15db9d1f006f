"""CodeDeploy's pre-traffic hook for Sidestream's stream functions (template.yaml, PreTrafficHook).

Before an alias moves to a new version, CodeDeploy calls this hook. It invokes the new version
with a canary batch: one MODIFY of an item that no function acts on (its key is not a counter,
its images lack every indexed attribute, and it is no TTL delete), from the source the version
reads (DynamoDB Streams, or Kinesis when CHANGE_SOURCE is kinesis). The version must initialise
(read its configuration, prime its tables and buckets), decode and plan the record, and answer
an empty batchItemFailures. Anything else fails the deployment, and the alias stays where it was:
a bad build or configuration never takes a shard. The canary writes nothing (the local stack's
tests run it through every function and check so).

The canary's keys are the table's: every attribute of the index definition's `base_key`
(MULTIKEY_INDEXES), so that a team's PK/SK table gets a record its indexer can key. Before
invoking, the hook refuses a definition that the stack cannot serve, naming the field: an index
in a table other than the stack's index table (INDEX_TABLE, the only one the roles grant), a
source other than IndexedAttribute (INDEXED_ATTRIBUTE, what the stream filters test), or a
base_key other than BaseKeyAttributes (BASE_KEY_ATTRIBUTES, the key the touch grants name). The
function itself refuses every other mistake at cold start, naming the field, and the canary
carries that refusal into the deployment's failure.
"""

import base64
import json
import os

CANARY_KEY = "sidestream-deploy-canary"
# The article's table's key and the counter table's: what a function without MULTIKEY_INDEXES reads.
DEFAULT_KEYS = ("id", "pk")


def canary_event(kinesis, region, keys=DEFAULT_KEYS):
    """The canary batch, as Lambda delivers a DynamoDB stream's or a Kinesis stream's records,
    its item keyed by each of `keys`."""
    image = {key: {"S": CANARY_KEY} for key in keys}
    change = {
        "eventID": "canary",
        "eventName": "MODIFY",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": {
            "ApproximateCreationDateTime": 1700000000,
            "Keys": image,
            "NewImage": image,
            "OldImage": image,
            "SequenceNumber": "100000000000000000001",
            "SizeBytes": 64,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
        "eventSourceARN": f"arn:aws:dynamodb:{region}:000000000000:table/canary/stream/2000-01-01T00:00:00.000",
    }
    if not kinesis:
        return {"Records": [change]}
    data = {
        "awsRegion": region,
        "eventID": "canary",
        "eventName": "MODIFY",
        "userIdentity": None,
        "recordFormat": "application/json",
        "tableName": "canary",
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "ApproximateCreationDateTime": 1700000000000000,
            "Keys": image,
            "NewImage": image,
            "OldImage": image,
            "SizeBytes": 64,
        },
    }
    sequence = "49600000000000000000000000000000000000000000000000000001"
    return {
        "Records": [
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": "canary",
                    "sequenceNumber": sequence,
                    "data": base64.b64encode(json.dumps(data).encode()).decode(),
                    "approximateArrivalTimestamp": 1700000000.0,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": f"shardId-000000000000:{sequence}",
                "eventName": "aws:kinesis:record",
                "awsRegion": region,
                "eventSourceARN": f"arn:aws:kinesis:{region}:000000000000:stream/canary",
            }
        ]
    }


def base_key(variables):
    """The canary's key attributes for a function with these environment variables: the
    definition's base_key besides the defaults (a definition that is not JSON is the function's
    to refuse, at cold start, by name)."""
    try:
        definition = json.loads(variables.get("MULTIKEY_INDEXES", "{}"))
        keys = definition.get("base_key", []) if isinstance(definition, dict) else []
    except ValueError:
        keys = []
    return tuple(dict.fromkeys([*DEFAULT_KEYS, *(k for k in keys if isinstance(k, str) and k)]))


def definition_errors(variables, expected):
    """Why this function's index definition cannot work in this stack: its indexes' tables and
    sources and base key against `expected` (INDEX_TABLE, INDEXED_ATTRIBUTE,
    BASE_KEY_ATTRIBUTES), each naming the field."""
    try:
        definition = json.loads(variables.get("MULTIKEY_INDEXES", "{}"))
    except ValueError:
        return []  # the function names the variable at cold start
    indexes = definition.get("indexes", []) if isinstance(definition, dict) else []
    default_table = variables.get("MULTIKEY_INDEX_TABLE")
    errors = []
    granted = expected.get("BASE_KEY_ATTRIBUTES")
    key = definition.get("base_key") if isinstance(definition, dict) and "MULTIKEY_INDEXES" in variables else None
    if granted and isinstance(key, list) and ",".join(map(str, key)) != granted:
        errors.append(
            f"MULTIKEY_INDEXES base_key is {key!r}, but BaseKeyAttributes is {granted!r}: the roles that touch "
            f"your items may write those key attributes alone; set BaseKeyAttributes to {','.join(map(str, key))}"
        )
    for i, index in enumerate(indexes if isinstance(indexes, list) else []):
        if not isinstance(index, dict):
            continue
        table = index.get("table", default_table)
        if expected.get("INDEX_TABLE") and table != expected["INDEX_TABLE"]:
            errors.append(
                f"MULTIKEY_INDEXES indexes[{i}].table is {table!r}: the stack's roles write its index table "
                f"{expected['INDEX_TABLE']!r} alone; leave table out"
            )
        source = index.get("source")
        if expected.get("INDEXED_ATTRIBUTE") and source != expected["INDEXED_ATTRIBUTE"]:
            errors.append(
                f"MULTIKEY_INDEXES indexes[{i}].source is {source!r}, but IndexedAttribute is "
                f"{expected['INDEXED_ATTRIBUTE']!r}: the stream filters test IndexedAttribute; set it to the source"
            )
    return errors


def verdict(response):
    """None when the version passed; otherwise why it failed."""
    payload = response["Payload"].read()
    if response.get("FunctionError"):
        return f"the new version failed ({response['FunctionError']}): {payload[:1000]!r}"
    try:
        answer = json.loads(payload)
    except ValueError:
        return f"the new version answered no JSON: {payload[:1000]!r}"
    if not isinstance(answer, dict) or answer.get("batchItemFailures") != []:
        return f"the new version did not take the canary record: {answer!r}"
    return None


def check(deployment_id, codedeploy, lambda_client, region, expected=None):
    """Every target of the deployment's new version, checked; the failures' reasons."""
    expected = os.environ if expected is None else expected
    failures = []
    targets = codedeploy.list_deployment_targets(deploymentId=deployment_id)["targetIds"]
    for target in targets:
        info = codedeploy.get_deployment_target(deploymentId=deployment_id, targetId=target)
        function = info["deploymentTarget"]["lambdaTarget"]["lambdaFunctionInfo"]
        qualified = f"{function['functionName']}:{function['targetVersion']}"
        config = lambda_client.get_function_configuration(FunctionName=qualified)
        variables = config.get("Environment", {}).get("Variables", {})
        refused = definition_errors(variables, expected)
        if refused:
            reason = "; ".join(refused)
        else:
            event = canary_event(variables.get("CHANGE_SOURCE") == "kinesis", region, base_key(variables))
            response = lambda_client.invoke(FunctionName=qualified, Payload=json.dumps(event).encode())
            reason = verdict(response)
        print(json.dumps({"target": qualified, "passed": reason is None, "reason": reason}))
        if reason:
            failures.append(f"{qualified}: {reason}")
    if not targets:
        failures.append("the deployment has no targets")
    return failures


def handler(event, _context, clients=None):
    """CodeDeploy's hook entry: checks the new versions, then reports Succeeded or Failed."""
    if clients is None:
        import boto3  # in Lambda's Python runtime; imported here so that the tests need none

        clients = (boto3.client("codedeploy"), boto3.client("lambda"))
    codedeploy, lambda_client = clients
    region = os.environ.get("AWS_REGION", "us-east-1")
    try:
        failures = check(event["DeploymentId"], codedeploy, lambda_client, region)
    except Exception as error:  # any error fails the deployment; never leaves it waiting
        failures = [f"the hook failed: {error!r}"]
    status = "Failed" if failures else "Succeeded"
    print(json.dumps({"deployment": event["DeploymentId"], "status": status, "failures": failures}))
    codedeploy.put_lifecycle_event_hook_execution_status(
        deploymentId=event["DeploymentId"],
        lifecycleEventHookExecutionId=event["LifecycleEventHookExecutionId"],
        status=status,
    )
    return status
