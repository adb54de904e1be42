"""template.yaml: linters, and assertions on the template's own values.

Two views of the template are checked:

- ``template``: template.yaml as written (CloudFormation tags decoded by cfn-lint's loader), for
  the values we set ourselves (queues, table, bucket, alarms, functions);
- ``transformed``: the same template after the SAM transform (run offline with samtranslator), for
  what SAM generates from it (IAM roles and their policies, the SQS event source mapping, the
  HTTP API stage).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
VENV_BIN = Path(sys.executable).parent

FUNCTIONS = ("IngestFunction", "ProcessorFunction", "ReplayFunction")
DAY = 86400


# ------------------------------------------------------------------------------ loading


def _plain(node: Any) -> Any:
    """cfn-lint's decoded nodes as plain dicts/lists/str (JSON round trip)."""
    return json.loads(json.dumps(node))


def load_plain_template() -> dict[str, Any]:
    """template.yaml as written, CloudFormation tags decoded (the ``template`` fixture)."""
    from cfnlint.decode import cfn_yaml

    return _plain(cfn_yaml.load(str(TEMPLATE)))


def sam_transform(template: dict[str, Any]) -> dict[str, Any]:
    """``template`` after the SAM transform (the ``transformed`` fixture)."""
    from samtranslator.translator.transform import transform

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    doc = json.loads(json.dumps(template))
    for resource in doc["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str):
                props[key] = "s3://bucket/key"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(doc, {}, NoManagedPolicies())


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_plain_template()


@pytest.fixture(scope="module")
def transformed(template: dict[str, Any]) -> dict[str, Any]:
    """The template after the SAM transform (offline; code locations replaced by S3 URIs)."""
    return sam_transform(template)


def resources_of(doc: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in doc["Resources"].items() if v["Type"] == type_}


def props(doc: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return doc["Resources"][logical_id].get("Properties", {})


def parameter(template: dict[str, Any], name: str) -> dict[str, Any]:
    return template["Parameters"][name]


def is_ref(value: Any, target: str) -> bool:
    return value == {"Ref": target}


def max_of(template: dict[str, Any], value: Any) -> float:
    """A number, or the largest value a Ref'd Number parameter can take (MaxValue)."""
    if isinstance(value, dict) and "Ref" in value:
        spec = parameter(template, value["Ref"])
        assert "MaxValue" in spec, f"parameter {value['Ref']} needs a MaxValue"
        return float(spec["MaxValue"])
    return float(value)


def default_of(template: dict[str, Any], value: Any) -> Any:
    if isinstance(value, dict) and "Ref" in value:
        return parameter(template, value["Ref"])["Default"]
    return value


def env(template: dict[str, Any], function: str) -> dict[str, Any]:
    own = props(template, function).get("Environment", {}).get("Variables", {})
    shared = template["Globals"]["Function"].get("Environment", {}).get("Variables", {})
    return {**shared, **own}


def policy_statements(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every IAM/resource policy statement in the (transformed) template, with its owner."""
    for logical_id, resource in doc["Resources"].items():
        p = resource.get("Properties", {})
        documents = []
        if resource["Type"] == "AWS::IAM::Role":
            documents += [pol["PolicyDocument"] for pol in p.get("Policies", [])]
        if "PolicyDocument" in p:
            documents.append(p["PolicyDocument"])
        for document in documents:
            statements = document["Statement"]
            for statement in statements if isinstance(statements, list) else [statements]:
                # A conditional statement (!If [cond, statement, !Ref AWS::NoValue]): both
                # branches are checked.
                for branch in statement["Fn::If"][1:] if "Fn::If" in statement else [statement]:
                    if branch != {"Ref": "AWS::NoValue"}:
                        yield logical_id, branch


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# ------------------------------------------------------------------------------ linters


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False, **kwargs
    )


def _tool(name: str) -> str:
    path = VENV_BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def test_cfn_lint_is_clean() -> None:
    result = _run([_tool("cfn-lint"), "template.yaml"])
    assert result.returncode == 0, f"cfn-lint findings:\n{result.stdout}\n{result.stderr}"


def test_sam_validate_lint_is_clean() -> None:
    environ = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SAM_CLI_TELEMETRY": "0"}
    result = _run(
        [_tool("sam"), "validate", "--lint", "--template-file", "template.yaml"], env=environ
    )
    assert result.returncode == 0, f"sam validate --lint:\n{result.stdout}\n{result.stderr}"
    assert "is a valid SAM Template" in result.stdout + result.stderr


# ------------------------------------------------------------------------------ fixed names


def test_logical_ids_and_types_are_those_of_docs_architecture(template: dict[str, Any]) -> None:
    expected = {
        "WebhookApi": "AWS::Serverless::HttpApi",
        "CommonLayer": "AWS::Serverless::LayerVersion",
        "IngestFunction": "AWS::Serverless::Function",
        "ProcessorFunction": "AWS::Serverless::Function",
        "ReplayFunction": "AWS::Serverless::Function",
        "MainQueue": "AWS::SQS::Queue",
        "DeadLetterQueue": "AWS::SQS::Queue",
        "DeliveriesTable": "AWS::DynamoDB::Table",
        "PayloadBucket": "AWS::S3::Bucket",
    }
    actual = {k: template["Resources"][k]["Type"] for k in expected if k in template["Resources"]}
    assert actual == expected


def test_functions_carry_the_environment_of_docs_architecture(template: dict[str, Any]) -> None:
    required = {
        "IngestFunction": {"QUEUE_URL", "PAYLOAD_BUCKET", "SECRETS_PREFIX", "REDIS_URL"},
        "ProcessorFunction": {"TABLE_NAME", "PAYLOAD_BUCKET"},
        "ReplayFunction": {"QUEUE_URL", "DLQ_URL"},
    }
    for function, names in required.items():
        variables = env(template, function)
        assert names | {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"} <= set(variables)
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "WebhookPipeline"
    assert is_ref(env(template, "IngestFunction")["QUEUE_URL"], "MainQueue")
    assert is_ref(env(template, "ReplayFunction")["QUEUE_URL"], "MainQueue")
    assert is_ref(env(template, "ReplayFunction")["DLQ_URL"], "DeadLetterQueue")
    assert is_ref(env(template, "ProcessorFunction")["TABLE_NAME"], "DeliveriesTable")
    services = {json.dumps(env(template, f)["POWERTOOLS_SERVICE_NAME"]) for f in FUNCTIONS}
    assert len(services) == 3, "one service name per function"


def test_functions_use_the_documented_code_and_handler(template: dict[str, Any]) -> None:
    code = {
        "IngestFunction": "functions/ingest",
        "ProcessorFunction": "functions/processor",
        "ReplayFunction": "functions/replay",
    }
    globals_ = template["Globals"]["Function"]
    assert globals_["Runtime"] == "python3.13"
    for function, uri in code.items():
        p = props(template, function)
        assert p["CodeUri"] == uri
        assert p.get("Handler", globals_.get("Handler")) == "app.lambda_handler"
        assert (ROOT / uri).is_dir()


def test_architecture_is_a_parameter_defaulting_to_arm64(template: dict[str, Any]) -> None:
    spec = parameter(template, "Architecture")
    assert spec["Default"] == "arm64"
    assert set(spec["AllowedValues"]) == {"arm64", "x86_64"}
    assert template["Globals"]["Function"]["Architectures"] == [{"Ref": "Architecture"}]
    layer = template["Resources"]["CommonLayer"]
    assert layer["Metadata"]["BuildArchitecture"] == {"Ref": "Architecture"}
    assert layer["Properties"]["CompatibleArchitectures"] == [{"Ref": "Architecture"}]


# ------------------------------------------------------------------------------ layer


def test_layer_is_built_by_sam_from_layers_common(template: dict[str, Any]) -> None:
    layer = template["Resources"]["CommonLayer"]
    assert layer["Properties"]["ContentUri"] == "layers/common"
    # Built by packaging/lambda.mk (pip install, then .pyc; tests/template/test_build_artifact.py
    # checks the result), through the Makefile of the build's architecture.
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Metadata"]["ContextPath"] == {"Fn::Sub": "packaging/${Architecture}"}
    for arch in parameter(template, "Architecture")["AllowedValues"]:
        assert (ROOT / "packaging" / arch / "Makefile").is_file()
    for function in FUNCTIONS:
        assert template["Resources"][function]["Metadata"] == {
            "BuildMethod": "makefile",
            "ContextPath": {"Fn::Sub": "packaging/${Architecture}"},
        }
    assert (ROOT / "layers/common/requirements.txt").is_file()
    assert (ROOT / "layers/common/webhook_pipeline/__init__.py").is_file()
    assert (ROOT / "layers/common/sources.toml").is_file()
    # BuildMethod copies the folder into python/: a python/ folder here would nest twice.
    assert not (ROOT / "layers/common/python").exists()
    assert template["Globals"]["Function"]["Layers"] == [{"Ref": "CommonLayer"}]


def _requirement_name(line: str) -> str:
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    assert name, line
    return re.sub(r"[-_.]+", "-", name.group(1)).lower()


def test_layer_requirements_name_the_same_packages_as_pyproject() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {_requirement_name(d) for d in pyproject["project"]["dependencies"]}
    lines = (ROOT / "layers/common/requirements.txt").read_text().splitlines()
    layer = {_requirement_name(x) for x in lines if x.strip() and not x.lstrip().startswith("#")}
    assert layer == declared


# ------------------------------------------------------------------------------ queues (C09)


def test_c09_visibility_timeout_covers_six_processor_timeouts_plus_batching_window(
    template: dict[str, Any],
) -> None:
    queue = props(template, "MainQueue")
    processor = props(template, "ProcessorFunction")
    sqs_event = processor["Events"]["MainQueue"]["Properties"]
    visibility = queue["VisibilityTimeout"]
    assert isinstance(visibility, int), "a literal, so the local stack and this test read it"
    timeout = max_of(template, processor["Timeout"])
    window = max_of(template, sqs_event["MaximumBatchingWindowInSeconds"])
    assert visibility >= 6 * timeout + window, (visibility, timeout, window)


def test_redrive_to_the_dead_letter_queue_with_max_receive_count_parameter(
    template: dict[str, Any],
) -> None:
    redrive = props(template, "MainQueue")["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}
    assert is_ref(redrive["maxReceiveCount"], "MaxReceiveCount")
    assert parameter(template, "MaxReceiveCount")["Default"] == 5


def test_dead_letter_queue_keeps_messages_longer_than_the_main_queue(
    template: dict[str, Any],
) -> None:
    main = props(template, "MainQueue")["MessageRetentionPeriod"]
    dlq = props(template, "DeadLetterQueue")["MessageRetentionPeriod"]
    assert dlq > main
    assert dlq == 14 * DAY


def test_claim_check_bodies_outlive_every_message_that_points_at_them(
    template: dict[str, Any],
) -> None:
    # A message lives at most the DLQ retention (counted from the first enqueue); a replayed copy
    # then gets a fresh main-queue retention. The S3 body must still be there for it.
    rule = props(template, "PayloadBucket")["LifecycleConfiguration"]["Rules"][0]
    assert rule["Status"] == "Enabled"
    days = rule["ExpirationInDays"]
    smallest = parameter(template, days["Ref"])["MinValue"] if isinstance(days, dict) else days
    main = props(template, "MainQueue")["MessageRetentionPeriod"]
    dlq = props(template, "DeadLetterQueue")["MessageRetentionPeriod"]
    assert smallest * DAY >= dlq + main


# ------------------------------------------------------------------------------ processor (C08)


def test_c08_event_source_mapping_reports_batch_item_failures(
    transformed: dict[str, Any],
) -> None:
    mappings = resources_of(transformed, "AWS::Lambda::EventSourceMapping")
    # The processor's, and the archiver's (tests/template/test_archive_template.py).
    assert len(mappings) == 2
    (mapping,) = (
        m["Properties"]
        for m in mappings.values()
        if m["Properties"]["FunctionName"] == {"Ref": "ProcessorFunction"}
    )
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["MainQueue", "Arn"]}
    assert mapping["FunctionName"] == {"Ref": "ProcessorFunction"}
    assert is_ref(mapping["BatchSize"], "ProcessorBatchSize")
    assert is_ref(mapping["MaximumBatchingWindowInSeconds"], "ProcessorBatchingWindowSeconds")
    assert is_ref(mapping["ScalingConfig"]["MaximumConcurrency"], "ProcessorMaxConcurrency")


def test_function_sizes(template: dict[str, Any]) -> None:
    ingest = props(template, "IngestFunction")
    assert ingest["Timeout"] <= 10, "ingest acknowledges fast"
    assert ingest["MemorySize"] >= 256
    # I1: a claim outliving a crashed invocation expires about when the sender may retry.
    claim_ttl = int(env(template, "IngestFunction")["CLAIM_TTL_SECONDS"])
    assert ingest["Timeout"] < claim_ttl <= 2 * ingest["Timeout"]
    assert props(template, "ReplayFunction")["Timeout"] <= 900
    assert "Events" not in props(template, "ReplayFunction")


# ------------------------------------------------------------------------------ encryption, storage


def test_queues_are_encrypted_at_rest(template: dict[str, Any]) -> None:
    for queue in ("MainQueue", "DeadLetterQueue"):
        p = props(template, queue)
        assert p.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in p, queue


def test_table_keys_ttl_pitr_encryption_and_deletion_protection(template: dict[str, Any]) -> None:
    table = props(template, "DeliveriesTable")
    assert table["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert {a["AttributeName"]: a["AttributeType"] for a in table["AttributeDefinitions"]} == {
        "pk": "S",
        "sk": "S",
        "received_shard": "S",
        "received_key": "S",
    }
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert table["SSESpecification"]["SSEEnabled"] is True
    protection = table["DeletionProtectionEnabled"]
    assert is_ref(protection, "TableDeletionProtection")
    assert set(parameter(template, "TableDeletionProtection")["AllowedValues"]) == {"true", "false"}
    assert template["Resources"]["DeliveriesTable"]["DeletionPolicy"] == "Retain"


def test_bucket_is_encrypted_private_and_tls_only(template: dict[str, Any]) -> None:
    bucket = props(template, "PayloadBucket")
    (rule,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    policies = [
        p
        for p in resources_of(template, "AWS::S3::BucketPolicy").values()
        if is_ref(p["Properties"]["Bucket"], "PayloadBucket")
    ]
    assert len(policies) == 1
    statements = policies[0]["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )


# ------------------------------------------------------------------------------ IAM

ALLOWED_MANAGED_POLICIES = {
    "service-role/AWSLambdaBasicExecutionRole",
    "service-role/AWSLambdaVPCAccessExecutionRole",
    "service-role/AWSLambdaSQSQueueExecutionRole",
    "AWSXrayWriteOnlyAccess",
}


def test_no_wildcard_actions_in_any_allow_statement(transformed: dict[str, Any]) -> None:
    statements = list(policy_statements(transformed))
    assert statements, "no policy statements found"
    for owner, statement in statements:
        assert "NotAction" not in statement, owner
        assert "NotResource" not in statement, owner
        actions = as_list(statement["Action"])
        if statement["Effect"] == "Allow":
            wild = [a for a in actions if "*" in a]
            assert not wild, f"{owner}: wildcard action(s) {wild}"
            assert "*" not in as_list(statement.get("Resource")), f"{owner}: Resource '*'"
        else:
            # A Deny may cover every action (that is what a TLS-only guard is), nothing else.
            assert statement["Effect"] == "Deny"
            assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}, owner


def test_only_narrow_aws_managed_policies_and_no_full_access(transformed: dict[str, Any]) -> None:
    for logical_id, role in resources_of(transformed, "AWS::IAM::Role").items():
        for arn in role["Properties"].get("ManagedPolicyArns", []):
            assert isinstance(arn, str), (logical_id, arn)
            assert "FullAccess" not in arn, (logical_id, arn)
            name = arn.split(":policy/", 1)[1]
            assert name in ALLOWED_MANAGED_POLICIES, (logical_id, arn)


def _allowed_actions(transformed: dict[str, Any], role: str) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for owner, statement in policy_statements(transformed):
        if owner == role and statement["Effect"] == "Allow":
            for action in as_list(statement["Action"]):
                found.setdefault(action, []).extend(as_list(statement["Resource"]))
    return found


def test_each_function_may_do_only_its_own_job(transformed: dict[str, Any]) -> None:
    ingest = _allowed_actions(transformed, "IngestFunctionRole")
    assert set(ingest) == {"sqs:SendMessage", "s3:PutObject", "secretsmanager:GetSecretValue"}
    assert ingest["sqs:SendMessage"] == [{"Fn::GetAtt": ["MainQueue", "Arn"]}]
    assert ingest["s3:PutObject"] == [{"Fn::Sub": "${PayloadBucket.Arn}/*"}]

    processor = _allowed_actions(transformed, "ProcessorFunctionRole")
    dynamodb = {a for a in processor if a.startswith("dynamodb:")}
    assert dynamodb == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",
    }
    assert all(processor[a] == [{"Fn::GetAtt": ["DeliveriesTable", "Arn"]}] for a in dynamodb)
    assert processor["s3:GetObject"] == [{"Fn::Sub": "${PayloadBucket.Arn}/*"}]
    # The processor sends archive messages, never to the main queue.
    assert processor["sqs:SendMessage"] == [{"Fn::GetAtt": ["ArchiveQueue", "Arn"]}]

    replay = _allowed_actions(transformed, "ReplayFunctionRole")
    dlq = [{"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}]
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert replay[action] == dlq, action
    assert replay["sqs:SendMessage"] == [{"Fn::GetAtt": ["MainQueue", "Arn"]}]


def test_secrets_are_readable_only_under_the_stack_prefix(
    template: dict[str, Any], transformed: dict[str, Any]
) -> None:
    (resource,) = _allowed_actions(transformed, "IngestFunctionRole")[
        "secretsmanager:GetSecretValue"
    ]
    pattern, variables = resource["Fn::Sub"]
    assert pattern.endswith(":secret:${Prefix}*")
    account = "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:"
    assert pattern.startswith(account)
    # The policy and the function read the same prefix expression.
    assert variables["Prefix"] == env(template, "IngestFunction")["SECRETS_PREFIX"]
    default = variables["Prefix"]["Fn::If"][2]
    assert default == {"Fn::Sub": "webhook-pipeline/${AWS::StackName}/"}


# ------------------------------------------------------------------------------ network, Redis


def test_redis_is_tls_and_reachable_only_from_the_ingest_function(
    template: dict[str, Any],
) -> None:
    cache = props(template, "RedisCache")
    assert cache["Engine"] in {"valkey", "redis"}
    assert template["Resources"]["RedisCache"]["Condition"] == "CreateRedis"
    redis_url = env(template, "IngestFunction")["REDIS_URL"]["Fn::If"]
    assert redis_url[0] == "CreateRedis"
    assert redis_url[1]["Fn::Sub"].startswith("rediss://")
    assert is_ref(redis_url[2], "ExistingRedisUrl")
    assert parameter(template, "ExistingRedisUrl")["AllowedPattern"].startswith("^(rediss?://")
    ingress = [
        r["Properties"]
        for r in resources_of(template, "AWS::EC2::SecurityGroupIngress").values()
        if is_ref(r["Properties"]["GroupId"], "RedisSecurityGroup")
    ]
    assert ingress == [
        {
            "GroupId": {"Ref": "RedisSecurityGroup"},
            "IpProtocol": "tcp",
            "FromPort": 6379,
            "ToPort": 6379,
            "SourceSecurityGroupId": {"Ref": "IngestSecurityGroup"},
            "Description": ingress[0]["Description"],
        }
    ]
    assert "SecurityGroupIngress" not in props(template, "RedisSecurityGroup")
    assert cache["SecurityGroupIds"] == [{"Ref": "RedisSecurityGroup"}]


def test_ingest_runs_in_private_subnets_of_two_azs_without_nat(template: dict[str, Any]) -> None:
    vpc = props(template, "IngestFunction")["VpcConfig"]
    assert vpc["SecurityGroupIds"] == [{"Ref": "IngestSecurityGroup"}]
    assert vpc["SubnetIds"]["Fn::If"][1] == [{"Ref": "PrivateSubnetA"}, {"Ref": "PrivateSubnetB"}]
    azs = [props(template, s)["AvailabilityZone"] for s in ("PrivateSubnetA", "PrivateSubnetB")]
    assert azs[0] != azs[1]
    assert all(
        props(template, s)["MapPublicIpOnLaunch"] is False
        for s in ("PrivateSubnetA", "PrivateSubnetB")
    )
    forbidden = {"AWS::EC2::NatGateway", "AWS::EC2::InternetGateway", "AWS::EC2::Route"}
    assert not forbidden & {r["Type"] for r in template["Resources"].values()}


def test_vpc_endpoints_cover_what_the_ingest_function_calls(template: dict[str, Any]) -> None:
    endpoints = {}
    for r in resources_of(template, "AWS::EC2::VPCEndpoint").values():
        service = r["Properties"]["ServiceName"]["Fn::Sub"].rsplit(".", 1)[1]
        endpoints[service] = r["Properties"]["VpcEndpointType"]
    assert endpoints == {
        "sqs": "Interface",
        "secretsmanager": "Interface",
        "s3": "Gateway",
        "dynamodb": "Gateway",
    }
    for r in resources_of(template, "AWS::EC2::VPCEndpoint").values():
        if r["Properties"]["VpcEndpointType"] == "Interface":
            assert r["Properties"]["PrivateDnsEnabled"] is True
            assert r["Properties"]["SecurityGroupIds"] == [{"Ref": "VpcEndpointSecurityGroup"}]


# ------------------------------------------------------------------------------ HTTP API


def test_http_api_route_throttling_and_access_logs(
    template: dict[str, Any], transformed: dict[str, Any]
) -> None:
    webhook = props(template, "IngestFunction")["Events"]["Webhook"]
    assert webhook["Type"] == "HttpApi"
    assert webhook["Properties"]["Method"] == "POST"
    assert webhook["Properties"]["Path"] == "/webhooks/{source}"
    assert is_ref(webhook["Properties"]["ApiId"], "WebhookApi")
    api = props(template, "WebhookApi")
    assert is_ref(api["DefaultRouteSettings"]["ThrottlingRateLimit"], "ApiThrottlingRateLimit")
    assert is_ref(api["DefaultRouteSettings"]["ThrottlingBurstLimit"], "ApiThrottlingBurstLimit")
    log_group = api["AccessLogSettings"]["DestinationArn"]["Fn::GetAtt"][0]
    assert "RetentionInDays" in props(template, log_group)
    json.loads(api["AccessLogSettings"]["Format"])  # one JSON object per request
    (stage,) = resources_of(transformed, "AWS::ApiGatewayV2::Stage").values()
    assert "AccessLogSettings" in stage["Properties"]


# ------------------------------------------------------------------------------ logs


def test_every_function_logs_to_a_log_group_with_retention(template: dict[str, Any]) -> None:
    for function in FUNCTIONS:
        group = props(template, function)["LoggingConfig"]["LogGroup"]
        assert set(group) == {"Ref"}, function
        log_group = template["Resources"][group["Ref"]]
        assert log_group["Type"] == "AWS::Logs::LogGroup"
        assert is_ref(log_group["Properties"].get("RetentionInDays"), "LogRetentionDays"), function
    assert parameter(template, "LogRetentionDays")["Default"] in {14, 30, 60, 90}


# ------------------------------------------------------------------------------ alarms


def _alarm_metrics(alarm: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(namespace, metric name, dimensions) of every metric an alarm reads."""
    if "MetricName" in alarm:
        dims = {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
        return [(alarm["Namespace"], alarm["MetricName"], dims)]
    found = []
    for query in alarm["Metrics"]:
        if "MetricStat" in query:
            metric = query["MetricStat"]["Metric"]
            dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            found.append((metric["Namespace"], metric["MetricName"], dims))
    return found


def _expressions(alarm: dict[str, Any]) -> list[str]:
    return [q["Expression"] for q in alarm.get("Metrics", []) if "Expression" in q]


def _find(alarms: dict[str, dict[str, Any]], namespace: str, metric: str, **dims: Any) -> list[str]:
    return [
        name
        for name, alarm in alarms.items()
        if any(
            ns == namespace and m == metric and all(d.get(k) == v for k, v in dims.items())
            for ns, m, d in _alarm_metrics(alarm)
        )
    ]


@pytest.fixture(scope="module")
def alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in resources_of(template, "AWS::CloudWatch::Alarm").items()}


def test_every_alarm_notifies_the_topic_on_alarm_and_ok(
    alarms: dict[str, dict[str, Any]], template: dict[str, Any]
) -> None:
    assert len(alarms) >= 9
    for name, alarm in alarms.items():
        assert alarm.get("AlarmActions") == [{"Ref": "AlarmTopic"}], name
        assert alarm.get("OKActions") == [{"Ref": "AlarmTopic"}], name
        assert alarm.get("TreatMissingData") == "notBreaching", name
        assert alarm.get("AlarmDescription"), name
    subscription = props(template, "AlarmEmailSubscription")
    assert template["Resources"]["AlarmEmailSubscription"]["Condition"] == "HasAlarmEmail"
    assert is_ref(subscription["Endpoint"], "AlarmEmail")
    assert subscription["Protocol"] == "email"


def test_queue_alarms(alarms: dict[str, dict[str, Any]]) -> None:
    main = {"QueueName": {"Fn::GetAtt": ["MainQueue", "QueueName"]}}
    dlq = {"QueueName": {"Fn::GetAtt": ["DeadLetterQueue", "QueueName"]}}
    assert _find(alarms, "AWS/SQS", "ApproximateNumberOfMessagesVisible", **main)
    assert _find(alarms, "AWS/SQS", "ApproximateAgeOfOldestMessage", **main)
    on_dlq = _find(alarms, "AWS/SQS", "ApproximateNumberOfMessagesVisible", **dlq)
    depth = [a for a in on_dlq if "MetricName" in alarms[a]]
    assert depth and alarms[depth[0]]["Threshold"] == 0
    assert alarms[depth[0]]["ComparisonOperator"] == "GreaterThanThreshold"
    growth = [
        a for a in on_dlq if any(re.match(r"(RATE|DIFF)\(", e) for e in _expressions(alarms[a]))
    ]
    assert growth, "a DLQ growth alarm (RATE/DIFF over the depth)"
    assert alarms[growth[0]]["Threshold"] == 0


def test_processor_and_ingest_alarms(alarms: dict[str, dict[str, Any]]) -> None:
    processor = {"FunctionName": {"Ref": "ProcessorFunction"}}
    assert _find(alarms, "AWS/Lambda", "Errors", **processor)
    assert _find(alarms, "AWS/Lambda", "Throttles", **processor)
    assert _find(alarms, "AWS/ApiGateway", "5xx", ApiId={"Ref": "WebhookApi"})


#: Metrics both the ingest function and the processor emit.
BOTH_FUNCTIONS_METRICS = {"DuplicateBodyMismatch"}
PROCESSOR_METRICS = {
    "Applied",
    "Duplicate",
    "Stale",
    "Retry",
    "Malformed",
    "ProcessorBug",
    "HookFailed",
    "HookCompleted",
    "ArchiveSendFailed",
}


def test_pipeline_metric_alarms_use_the_emitting_function_service_dimension(
    alarms: dict[str, dict[str, Any]], template: dict[str, Any]
) -> None:
    # Powertools Metrics adds the dimension service=POWERTOOLS_SERVICE_NAME to every metric.
    service = env(template, "IngestFunction")["POWERTOOLS_SERVICE_NAME"]
    processor_service = env(template, "ProcessorFunction")["POWERTOOLS_SERVICE_NAME"]
    assert _find(alarms, "WebhookPipeline", "SignatureInvalid", service=service)
    anomaly = _find(alarms, "WebhookPipeline", "DuplicateDiscarded", service=service)
    assert anomaly
    alarm = alarms[anomaly[0]]
    assert any(e.startswith("ANOMALY_DETECTION_BAND(") for e in _expressions(alarm))
    band = next(q for q in alarm["Metrics"] if q.get("Expression", "").startswith("ANOMALY"))
    assert alarm["ThresholdMetricId"] == band["Id"]
    assert alarm["ComparisonOperator"] == "GreaterThanUpperThreshold"
    for alarm in alarms.values():
        for namespace, metric, dims in _alarm_metrics(alarm):
            if namespace != "WebhookPipeline":
                continue
            if metric in BOTH_FUNCTIONS_METRICS:
                assert dims in ({"service": service}, {"service": processor_service}), metric
            else:
                emitter = processor_service if metric in PROCESSOR_METRICS else service
                assert dims == {"service": emitter}, metric


def test_secret_and_body_mismatch_alarms(
    alarms: dict[str, dict[str, Any]], template: dict[str, Any]
) -> None:
    ingest = env(template, "IngestFunction")["POWERTOOLS_SERVICE_NAME"]
    processor = env(template, "ProcessorFunction")["POWERTOOLS_SERVICE_NAME"]
    assert _find(alarms, "WebhookPipeline", "SecretInvalid", service=ingest)
    # A duplicate with another body is noticed at the gate and, behind a bypassed gate, in the
    # processor: one alarm sums both.
    at_gate = _find(alarms, "WebhookPipeline", "DuplicateBodyMismatch", service=ingest)
    in_processor = _find(alarms, "WebhookPipeline", "DuplicateBodyMismatch", service=processor)
    assert at_gate and at_gate == in_processor


def test_processor_record_failures_alarm_although_the_batch_succeeds(
    alarms: dict[str, dict[str, Any]], template: dict[str, Any]
) -> None:
    # A partial batch response never raises, so Lambda's Errors metric misses failed records.
    service = env(template, "ProcessorFunction")["POWERTOOLS_SERVICE_NAME"]
    for metric in ("Malformed", "ProcessorBug", "HookFailed"):
        assert _find(alarms, "WebhookPipeline", metric, service=service), metric


def test_alarm_and_dashboard_metric_names_are_the_package_metric_names(
    alarms: dict[str, dict[str, Any]], template: dict[str, Any]
) -> None:
    from webhook_pipeline.observability import MetricName

    known = {v for k, v in vars(MetricName).items() if k.isupper()}
    used = {m for a in alarms.values() for ns, m, _ in _alarm_metrics(a) if ns == "WebhookPipeline"}
    body = props(template, "Dashboard")["DashboardBody"]["Fn::Sub"][0]
    used |= set(re.findall(r'\["WebhookPipeline", "(\w+)"', body))
    assert used and used <= known, used - known


def test_dashboard_shows_queue_depth_duplicates_dlq_and_ack_latency(
    template: dict[str, Any],
) -> None:
    body_template, variables = props(template, "Dashboard")["DashboardBody"]["Fn::Sub"]
    body = json.loads(re.sub(r"\$\{[^}]+\}", "x", body_template))
    titles = " | ".join(w["properties"]["title"].lower() for w in body["widgets"])
    for needed in ("queue depth", "duplicate rate", "dead-letter queue depth", "ack latency"):
        assert needed in titles
    assert "AckLatency" in body_template
    assert set(variables) >= {"MainQueueName", "DeadLetterQueueName", "IngestService"}


# ------------------------------------------------------------------------------ outputs


def test_outputs_used_by_the_operator_cli(template: dict[str, Any]) -> None:
    expected = {
        "ApiUrl",
        "MainQueueUrl",
        "DeadLetterQueueUrl",
        "DeliveriesTableName",
        "PayloadBucketName",
        "ReplayFunctionName",
        "DashboardUrl",
    }
    assert expected <= set(template["Outputs"])
    outputs = template["Outputs"]
    assert is_ref(outputs["MainQueueUrl"]["Value"], "MainQueue")
    assert is_ref(outputs["DeadLetterQueueUrl"]["Value"], "DeadLetterQueue")
    assert is_ref(outputs["DeliveriesTableName"]["Value"], "DeliveriesTable")
    assert is_ref(outputs["PayloadBucketName"]["Value"], "PayloadBucket")
    assert is_ref(outputs["ReplayFunctionName"]["Value"], "ReplayFunction")


# ------------------------------------------------------------------------------ local invoke env


def test_local_invoke_env_file_only_sets_variables_the_template_declares(
    template: dict[str, Any],
) -> None:
    # sam local invoke applies --env-vars values only to variables the template declares.
    path = ROOT / "env" / "local-invoke.json"
    doc = json.loads(path.read_text())
    assert set(doc) <= set(FUNCTIONS) | {"Parameters"}
    for function, variables in doc.items():
        declared = (
            set(env(template, function))
            if function != "Parameters"
            else set().union(*(env(template, f) for f in FUNCTIONS))
        )
        assert set(variables) <= declared, (function, set(variables) - declared)
    for function in FUNCTIONS:
        assert function in doc
        assert doc[function]["AWS_ENDPOINT_URL"].startswith("http://host.docker.internal:")
    assert doc["IngestFunction"]["REDIS_URL"].startswith("redis://host.docker.internal:")


def test_ingest_worst_case_fits_the_budget_and_the_budget_the_function_timeout(
    template: dict[str, Any],
) -> None:
    from webhook_pipeline.settings import IngestSettings

    # The ingest settings as the template sets them (literal values; resource references
    # replaced by placeholders, which do not take part in the timing)
    variables = {k: v for k, v in env(template, "IngestFunction").items() if isinstance(v, str)}
    placeholders = {
        "queue_url": "https://sqs.example/q",
        "payload_bucket": "b",
        "secrets_prefix": "p/",
        "redis_url": "rediss://cache:6379/0",
    }
    fields = {name.lower(): value for name, value in variables.items()}
    settings = IngestSettings.model_validate(
        {**placeholders, **{k: v for k, v in fields.items() if k in IngestSettings.model_fields}}
    )
    timeout_ms = int(props(template, "IngestFunction")["Timeout"]) * 1000
    worst_ms = settings.worst_case_seconds() * 1000
    # The worst case of one request's calls fits the budget, and the budget leaves the handler
    # time to answer 503 before Lambda stops the invocation
    assert settings.ingest_time_budget_ms == int(variables["INGEST_TIME_BUDGET_MS"])
    assert worst_ms <= settings.ingest_time_budget_ms <= timeout_ms - 1000, (worst_ms, timeout_ms)
