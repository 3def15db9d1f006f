#!/usr/bin/env python3
"""Lints every IAM policy document of a SAM template with parliament (PyPI).

    scripts/iam-lint.py TEMPLATE...

Each template (scripts/template-check passes every variant it makes) is read with CloudFormation's
short tags, and resolved for a few parameter sets: its own defaults; with every optional part on
(the backfill, the verify job with repair, the restore job, the grid API); and that again with the
stack's key and existing tables and bucket, each under a key of its own. Each resolution's
roles' inline policies (`AWS::IAM::Role` `Policies`) and managed policies
(`AWS::IAM::ManagedPolicy`) go to parliament's `analyze_policy_string`, intrinsics replaced by
ARNs of the shape CloudFormation would give them (resources named `sidestream-<logical id>`, in
account 123456789012). A finding of the kinds below fails the run; each is printed with its
template, parameter set, policy and statement Sid. parliament carries a copy of the Service
Authorization Reference: RESOURCE_MISMATCH is a statement that grants nothing for an action (a
resource of a type the action does not take, or an ARN for an action that takes none but "*").
"""

import fnmatch
import json
import sys

import yaml

import parliament

# What fails the run: errors, malformed statements, actions or prefixes the reference does not
# know, resources no action of the statement takes, conditions of the wrong type or unknown.
FAILING = {
    "EXCEPTION",
    "MALFORMED_JSON",
    "MALFORMED",
    "DUPLICATE_SID",
    "UNKNOWN_ACTION",
    "UNKNOWN_PREFIX",
    "UNKNOWN_PRINCIPAL",
    "UNKNOWN_OPERATOR",
    "UNKNOWN_CONDITION_FOR_ACTION",
    "MISMATCHED_TYPE",
    "MISMATCHED_TYPE_OPERATION_TO_NULL",
    "INVALID_ARN",
    "INVALID_SID",
    "INVALID_VERSION",
    "NO_VERSION",
    "RESOURCE_MISMATCH",
    "RESOURCE_EFFECTIVELY_STAR",
}

# parliament's known misreadings, each with why it is one. It requires a resource of every
# required ("*") type an action lists, where the reference means any one of them:
# states:DescribeExecution takes a Standard execution or an Express one, and a Distributed Map's
# children here are Standard (ExecutionType STANDARD), named execution:<machine>/<map run>:<id>.
FALSE_POSITIVES = [("RESOURCE_MISMATCH", "states:DescribeExecution", ":express:")]
# And it refuses a colon in a resource's id that its format lacks, but a DynamoDB stream's ARN
# ends in its label, a time with colons (table/issues/stream/2026-01-01T00:00:00.000): for these
# actions the statement's resources are matched against the format here instead.
STREAM_ACTIONS = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}

REGION, ACCOUNT, STACK = "us-east-1", "123456789012", "sidestream"
STACK_ID = f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK}/5c6d9a20-0000-4000-8000-0123456789ab"


def key(n):
    return f"arn:aws:kms:{REGION}:{ACCOUNT}:key/0000000{n}-aaaa-bbbb-cccc-dddddddddddd"


OPTIONAL = {
    "EnableBackfill": "true",
    "GridApi": "true",
    "EnableArchiveRestore": "true",
    "IndexVerifySchedule": "rate(1 day)",
    "IndexVerifyRepair": "true",
}
KEYED = dict(
    OPTIONAL,
    KmsKeyArn=key(1),
    IssuesTableStreamArn=f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/issues/stream/2026-01-01T00:00:00.000",
    IssuesTableKmsKeyArn=key(2),
    IndexTableName="issue-attrib-index",
    IndexTableKmsKeyArn=key(3),
    CounterTableStreamArn=f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/counters/stream/2026-01-01T00:00:00.000",
    CounterTableKmsKeyArn=key(4),
    ArchiveBucketName="existing-archive",
    ArchiveBucketKmsKeyArn=key(5),
)
PARAMETER_SETS = {"defaults": {}, "optional parts on": OPTIONAL, "keys and existing resources": KEYED}


class Tagged(dict):
    """An intrinsic function read from a short tag, as its long form."""


def loader():
    class Loader(yaml.SafeLoader):
        pass

    def construct(tag):
        name = "Ref" if tag == "Ref" else "Condition" if tag == "Condition" else f"Fn::{tag}"

        def build(loader, node):
            if isinstance(node, yaml.ScalarNode):
                value = loader.construct_scalar(node)
                if tag == "GetAtt":
                    value = value.split(".", 1)
            elif isinstance(node, yaml.SequenceNode):
                value = loader.construct_sequence(node, deep=True)
            else:
                value = loader.construct_mapping(node, deep=True)
            return {name: value}

        return build

    for tag in ["Ref", "Condition", "GetAtt", "Sub", "If", "Join", "Select", "Split", "Equals", "Not", "And", "Or",
                "FindInMap", "Base64", "GetAZs", "ImportValue", "Cidr", "Length", "ToJsonString"]:
        Loader.add_constructor(f"!{tag}", construct(tag))
    return Loader


NO_VALUE = object()


class Resolver:
    def __init__(self, template, overrides):
        self.t = template
        self.resources = template.get("Resources", {})
        self.parameters = {}
        for name, declaration in template.get("Parameters", {}).items():
            value = overrides.get(name, declaration.get("Default"))
            self.parameters[name] = "" if value is None else str(value)
        self.conditions = {}

    def condition(self, name):
        if name not in self.conditions:
            self.conditions[name] = self.truth(self.t["Conditions"][name])
        return self.conditions[name]

    def truth(self, body):
        (fn, arg), = body.items()
        if fn == "Fn::Equals":
            return self.text(arg[0]) == self.text(arg[1])
        if fn == "Fn::Not":
            return not self.truth(arg[0])
        if fn == "Fn::And":
            return all(self.truth(c) for c in arg)
        if fn == "Fn::Or":
            return any(self.truth(c) for c in arg)
        if fn == "Condition":
            return self.condition(arg)
        raise ValueError(f"condition function {fn}")

    def exists(self, logical_id):
        condition = self.resources.get(logical_id, {}).get("Condition")
        return condition is None or self.condition(condition)

    def text(self, value):
        value = self.resolve(value)
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def physical(self, logical_id):
        resource = self.resources.get(logical_id)
        if resource is None:
            return f"{STACK}-{logical_id.lower()}"
        properties = resource.get("Properties", {})
        for field in ["TableName", "BucketName", "Name", "FunctionName", "LogGroupName", "StateMachineName"]:
            if field in properties:
                return self.text(properties[field])
        return f"{STACK}-{logical_id.lower()}"

    def ref(self, target):
        pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": STACK,
            "AWS::StackId": STACK_ID,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
        }
        if target == "AWS::NoValue":
            return NO_VALUE
        if target in pseudo:
            return pseudo[target]
        if target in self.parameters:
            return self.parameters[target]
        kind = self.resources.get(target, {}).get("Type", "")
        name = self.physical(target)
        return {
            "AWS::IAM::ManagedPolicy": f"arn:aws:iam::{ACCOUNT}:policy/{name}",
            "AWS::SNS::Topic": f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}",
            "AWS::Serverless::StateMachine": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}",
            "AWS::SecretsManager::Secret": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-AbCdEf",
            "AWS::SQS::Queue": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}",
        }.get(kind, name)

    def attribute(self, target, attribute):
        kind = self.resources.get(target, {}).get("Type", "")
        name = self.physical(target)
        arn = lambda service, rest: f"arn:aws:{service}:{REGION}:{ACCOUNT}:{rest}"  # noqa: E731
        known = {
            ("AWS::DynamoDB::Table", "Arn"): arn("dynamodb", f"table/{name}"),
            ("AWS::DynamoDB::Table", "StreamArn"): arn("dynamodb", f"table/{name}/stream/2026-01-01T00:00:00.000"),
            ("AWS::Kinesis::Stream", "Arn"): arn("kinesis", f"stream/{name}"),
            ("AWS::S3::Bucket", "Arn"): f"arn:aws:s3:::{name}",
            ("AWS::Logs::LogGroup", "Arn"): arn("logs", f"log-group:{name}:*"),
            ("AWS::IAM::Role", "Arn"): f"arn:aws:iam::{ACCOUNT}:role/{name}",
            ("AWS::Serverless::Function", "Arn"): arn("lambda", f"function:{name}"),
            ("AWS::SQS::Queue", "Arn"): arn("sqs", name),
        }
        if (kind, attribute) not in known:
            raise ValueError(f"GetAtt {target}.{attribute} ({kind})")
        return known[(kind, attribute)]

    def sub(self, arg):
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        out, rest = [], text
        while "${" in rest:
            start = rest.index("${")
            out.append(rest[:start])
            after = rest[start + 2:]
            if after.startswith("!"):
                out.append("${")
                rest = after[1:]
                continue
            end = after.index("}")
            name = after[:end].strip()
            if name in variables:
                out.append(self.text(variables[name]))
            elif "." in name:
                out.append(self.attribute(*name.split(".", 1)))
            else:
                out.append(str(self.ref(name)))
            rest = after[end + 1:]
        out.append(rest)
        return "".join(out)

    def resolve(self, value):
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (fn, arg), = value.items()
            if fn == "Ref":
                return self.ref(arg)
            if fn == "Fn::GetAtt":
                return self.attribute(*self.resolve(arg))
            if fn == "Fn::If":
                return self.resolve(arg[1] if self.condition(arg[0]) else arg[2])
            if fn == "Fn::Sub":
                return self.sub(arg)
            if fn == "Fn::Join":
                separator, items = self.resolve(arg)
                return separator.join(str(i) for i in items)
            if fn == "Fn::Split":
                separator, text = self.resolve(arg)
                return text.split(separator)
            if fn == "Fn::Select":
                index, items = self.resolve(arg)
                return items[int(index)]
            if fn.startswith("Fn::"):
                raise ValueError(f"{fn} is not resolved here")
        out = {}
        for k, v in value.items():
            v = self.resolve(v)
            if v is not NO_VALUE:
                out[k] = v
        return out


def documents(template, overrides):
    """(policy name, document) for every role's inline policy and every managed policy that
    exists with these parameters."""
    r = Resolver(template, overrides)
    for logical_id, resource in template.get("Resources", {}).items():
        if not r.exists(logical_id):
            continue
        kind = resource.get("Type")
        properties = resource.get("Properties", {})
        if kind == "AWS::IAM::Role":
            for policy in r.resolve(properties.get("Policies", [])):
                yield f"{logical_id}/{policy.get('PolicyName')}", policy["PolicyDocument"]
        elif kind == "AWS::IAM::ManagedPolicy":
            yield logical_id, r.resolve(properties["PolicyDocument"])


def sid_of(document, finding):
    """The Sid of the statement a finding points at, when parliament says which."""
    statements = document.get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    location = finding.location or {}
    text = json.dumps(location)
    sids = [s.get("Sid") for s in statements if s.get("Sid") and f'"{s.get("Sid")}"' in text]
    if sids:
        return sids[0]
    # parliament names the statement by its content: find the one whose actions it names.
    for statement in statements:
        actions = statement.get("Action", [])
        actions = actions if isinstance(actions, list) else [actions]
        if any(a in text or a in str(finding.detail) for a in actions):
            return statement.get("Sid", "(no Sid)")
    return "(statement not named)"


def misread(finding, document):
    """Whether every part of a finding is one of parliament's known misreadings."""
    details = finding.detail if isinstance(finding.detail, list) else [finding.detail]

    def resources_of(action):
        statements = document.get("Statement", [])
        for statement in statements if isinstance(statements, list) else [statements]:
            actions = statement.get("Action", [])
            if action in (actions if isinstance(actions, list) else [actions]):
                resources = statement.get("Resource", [])
                yield from resources if isinstance(resources, list) else [resources]

    def one(d):
        if finding.issue != "RESOURCE_MISMATCH" or not isinstance(d, dict):
            return False
        action, form = d.get("action"), str(d.get("required_format"))
        if action in STREAM_ACTIONS:
            found = list(resources_of(action))
            return bool(found) and all(fnmatch.fnmatchcase(r, form) for r in found)
        return any(action == a and fragment in form for _, a, fragment in FALSE_POSITIVES)

    return all(one(d) for d in details)


def main(paths):
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    seen, failures, findings, checked = set(), 0, 0, 0
    for path in paths:
        with open(path) as f:
            template = yaml.load(f, Loader=loader())
        for set_name, overrides in PARAMETER_SETS.items():
            for name, document in documents(template, overrides):
                text = json.dumps(document, sort_keys=True)
                if text in seen:
                    continue
                seen.add(text)
                checked += 1
                policy = parliament.analyze_policy_string(text)
                for finding in policy.findings:
                    findings += 1
                    failing = finding.issue in FAILING and not misread(finding, document)
                    failures += failing
                    print(
                        f"iam-lint: {'FAIL' if failing else 'note'} {path} [{set_name}] {name} "
                        f"{sid_of(document, finding)}: {finding.issue} {finding.detail} {finding.location}"
                    )
    print(f"iam-lint: {checked} distinct policy documents, {findings} findings, {failures} failing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
