"""CodeDeploy's pre-traffic hook for Sidestream's stream functions (template.yaml, PreTrafficHook).

Before an alias moves to a new version, CodeDeploy calls this hook. It invokes the new version
with a canary batch: one MODIFY of an item that no function acts on (its key is not a counter,
its images lack every indexed attribute, and it is no TTL delete), from the source the version
reads (DynamoDB Streams, or Kinesis when CHANGE_SOURCE is kinesis). The version must initialise
(read its configuration, prime its tables and buckets), decode and plan the record, and answer
an empty batchItemFailures. Anything else fails the deployment, and the alias stays where it was:
a bad build or configuration never takes a shard. The canary writes nothing (the local stack's
tests run it through every function and check so).
"""

import base64
import json
import os

CANARY_KEY = "sidestream-deploy-canary"


def canary_event(kinesis, region):
    """The canary batch, as Lambda delivers a DynamoDB stream's or a Kinesis stream's records."""
    image = {"id": {"S": CANARY_KEY}, "pk": {"S": CANARY_KEY}}
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


def check(deployment_id, codedeploy, lambda_client, region):
    """Every target of the deployment's new version, checked; the failures' reasons."""
    failures = []
    targets = codedeploy.list_deployment_targets(deploymentId=deployment_id)["targetIds"]
    for target in targets:
        info = codedeploy.get_deployment_target(deploymentId=deployment_id, targetId=target)
        function = info["deploymentTarget"]["lambdaTarget"]["lambdaFunctionInfo"]
        qualified = f"{function['functionName']}:{function['targetVersion']}"
        config = lambda_client.get_function_configuration(FunctionName=qualified)
        variables = config.get("Environment", {}).get("Variables", {})
        event = canary_event(variables.get("CHANGE_SOURCE") == "kinesis", region)
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
