"""template.yaml: the archive (issue 23) - bucket, lifecycle, queues, archiver, IAM, the Athena
table over the archive and its workgroup, the alarm and the outputs.

The Glue table's columns, partition layout and hour format are compared with
``webhook_pipeline.archive.record`` itself (``ArchiveRecord.model_fields``, ``partition_prefix``,
``HOUR_FORMAT``), so the table and the objects the archiver writes cannot drift apart. The
conditional parts (the KMS key) are evaluated both ways with the local stack's resolver.
"""

from __future__ import annotations

import re
import types
import typing
from datetime import datetime
from typing import Any

import pytest
from webhook_pipeline.archive.record import (
    ARCHIVE_PREFIX,
    HOUR_FORMAT,
    ArchiveRecord,
    partition_prefix,
)

from tests.template.test_template import (
    DAY,
    _allowed_actions,
    _find,
    default_of,
    env,
    is_ref,
    load_plain_template,
    max_of,
    parameter,
    policy_statements,
    props,
    resources_of,
    sam_transform,
)

pytestmark = pytest.mark.template


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_plain_template()


@pytest.fixture(scope="module")
def transformed(template: dict[str, Any]) -> dict[str, Any]:
    return sam_transform(template)


@pytest.fixture(scope="module")
def alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in resources_of(template, "AWS::CloudWatch::Alarm").items()}


KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
NO_VALUE = {"Ref": "AWS::NoValue"}


class _AnyAttrs(dict[str, str]):
    """Every ``!GetAtt`` attribute of a stand-in resource: ``<Name.Attr>``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> str:
        return f"<{self.name}.{key}>"


def resolve(template: dict[str, Any], value: Any, **parameters: str) -> Any:
    """``value`` with conditions and intrinsics evaluated for ``parameters`` (the local stack's
    resolver; every resource stands in as ``<Name>``)."""
    from webhook_pipeline_ops.local.template import Resolved, Resolver

    resolver = Resolver(
        template, region="eu-west-1", stack_name="st", parameter_overrides=parameters
    )
    for name in template["Resources"]:
        resolver.resources[name] = Resolved(f"<{name}>", _AnyAttrs(name))
    return resolver.resolve(value)


# ------------------------------------------------------------------------------ bucket


def test_archive_bucket_is_sse_s3_by_default_and_sse_kms_with_a_bucket_key_when_a_key_is_set(
    template: dict[str, Any],
) -> None:
    assert parameter(template, "ArchiveKmsKeyArn")["Default"] == ""
    encryption = props(template, "ArchiveBucket")["BucketEncryption"]
    (default,) = resolve(template, encryption)["ServerSideEncryptionConfiguration"]
    assert default == {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    (kms,) = resolve(template, encryption, ArchiveKmsKeyArn=KEY_ARN)[
        "ServerSideEncryptionConfiguration"
    ]
    assert kms == {
        "ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": KEY_ARN},
        "BucketKeyEnabled": True,
    }


def test_archive_bucket_is_private_and_tls_only(template: dict[str, Any]) -> None:
    bucket = props(template, "ArchiveBucket")
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert bucket["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert template["Resources"]["ArchiveBucket"]["DeletionPolicy"] == "Retain"
    policies = [
        p["Properties"]
        for p in resources_of(template, "AWS::S3::BucketPolicy").values()
        if is_ref(p["Properties"]["Bucket"], "ArchiveBucket")
    ]
    assert len(policies) == 1
    (statement,) = policies[0]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Action"] == "s3:*"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert statement["Resource"] == [
        {"Fn::GetAtt": ["ArchiveBucket", "Arn"]},
        {"Fn::Sub": "${ArchiveBucket.Arn}/*"},
    ]


def _rules(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rules = props(template, "ArchiveBucket")["LifecycleConfiguration"]["Rules"]
    assert all(r["Status"] == "Enabled" and r.get("Prefix") for r in rules), rules
    return {r["Prefix"]: r for r in rules}


def test_archive_lifecycle_expires_archive_after_the_retention_parameter_and_keeps_jobs(
    template: dict[str, Any],
) -> None:
    rules = _rules(template)
    assert set(rules) == {ARCHIVE_PREFIX, "athena-results/"}
    assert is_ref(rules[ARCHIVE_PREFIX]["ExpirationInDays"], "ArchiveRetentionDays")
    retention = parameter(template, "ArchiveRetentionDays")
    assert retention["MinValue"] == 1
    # The archive outlives the delivery records, so a replay can restore what the table held.
    assert retention["Default"] >= parameter(template, "DeliveryRetentionDays")["Default"]
    assert 1 <= rules["athena-results/"]["ExpirationInDays"] <= 30
    # Replay-from-archive job state is never expired: no rule's prefix covers it.
    assert not any("replay-jobs/".startswith(prefix) for prefix in rules)


# ------------------------------------------------------------------------------ queues, archiver


def test_archive_queue_visibility_covers_six_archiver_timeouts_plus_the_window(
    template: dict[str, Any],
) -> None:
    queue = props(template, "ArchiveQueue")
    archiver = props(template, "ArchiverFunction")
    event = archiver["Events"]["ArchiveQueue"]["Properties"]
    visibility = queue["VisibilityTimeout"]
    assert isinstance(visibility, int)
    timeout = max_of(template, archiver["Timeout"])
    window = max_of(template, event["MaximumBatchingWindowInSeconds"])
    assert visibility >= 6 * timeout + window, (visibility, timeout, window)
    redrive = queue["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["ArchiveDeadLetterQueue", "Arn"]}
    assert is_ref(redrive["maxReceiveCount"], "MaxReceiveCount")
    dlq = props(template, "ArchiveDeadLetterQueue")
    assert dlq["MessageRetentionPeriod"] == 14 * DAY > queue["MessageRetentionPeriod"]
    for name in ("ArchiveQueue", "ArchiveDeadLetterQueue"):
        assert props(template, name)["SqsManagedSseEnabled"] is True, name
        assert props(template, name)["MaximumMessageSize"] == 262144, name


def test_archiver_reads_large_batches_from_the_archive_queue(
    template: dict[str, Any], transformed: dict[str, Any]
) -> None:
    (mapping,) = (
        m["Properties"]
        for m in resources_of(transformed, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": "ArchiverFunction"}
    )
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["ArchiveQueue", "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert is_ref(mapping["BatchSize"], "ArchiverBatchSize")
    assert is_ref(mapping["MaximumBatchingWindowInSeconds"], "ArchiverBatchingWindowSeconds")
    size = parameter(template, "ArchiverBatchSize")
    assert size["Default"] >= 1000 and size["MaxValue"] <= 10000
    # Above 10 records a batching window of at least 1 s is required by Lambda.
    assert (
        size["MinValue"] > 10
        or parameter(template, "ArchiverBatchingWindowSeconds")["MinValue"] >= 1
    )
    assert parameter(template, "ArchiverBatchingWindowSeconds")["MinValue"] >= 1


def test_archiver_code_environment_and_log_group(template: dict[str, Any]) -> None:
    archiver = props(template, "ArchiverFunction")
    assert archiver["CodeUri"] == "functions/archiver"
    assert archiver["Handler"] == "app.handler"
    assert template["Resources"]["ArchiverFunction"]["Metadata"] == {
        "BuildMethod": "makefile",
        "ContextPath": {"Fn::Sub": "packaging/${Architecture}"},
    }
    variables = env(template, "ArchiverFunction")
    assert is_ref(variables["ARCHIVE_BUCKET"], "ArchiveBucket")
    assert is_ref(variables["PAYLOAD_BUCKET"], "PayloadBucket")
    assert variables["POWERTOOLS_SERVICE_NAME"] == {"Fn::Sub": "${AWS::StackName}-archiver"}
    group = archiver["LoggingConfig"]["LogGroup"]["Ref"]
    assert is_ref(props(template, group)["RetentionInDays"], "LogRetentionDays")
    assert props(template, group)["LogGroupName"] == {
        "Fn::Sub": "/aws/lambda/${AWS::StackName}-ArchiverFunction"
    }
    assert is_ref(env(template, "ProcessorFunction")["ARCHIVE_QUEUE_URL"], "ArchiveQueue")
    assert is_ref(env(template, "ReplayFunction")["ARCHIVE_BUCKET"], "ArchiveBucket")


# ------------------------------------------------------------------------------ IAM

ARCHIVE_QUEUE = [{"Fn::GetAtt": ["ArchiveQueue", "Arn"]}]
POLLER = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
}


def _kms_statements(transformed: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [
        s
        for owner, s in policy_statements(transformed)
        if owner == role and any(a.startswith("kms:") for a in _actions(s))
    ]


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def test_archiver_may_only_poll_its_queue_write_archive_objects_and_read_claim_checks(
    transformed: dict[str, Any],
) -> None:
    archiver = _allowed_actions(transformed, "ArchiverFunctionRole")
    sqs = {a for a in archiver if a.startswith("sqs:")}
    assert sqs >= POLLER
    for action in sqs:
        resources = archiver[action]
        for resource in resources:
            pattern, variables = resource["Fn::Sub"]
            assert pattern.endswith(":${queueName}"), action
            assert variables == {"queueName": {"Fn::GetAtt": ["ArchiveQueue", "QueueName"]}}
    s3 = {a: r for a, r in archiver.items() if a.startswith("s3:")}
    assert s3 == {
        "s3:PutObject": [{"Fn::Sub": "${ArchiveBucket.Arn}/archive/*"}],
        "s3:GetObject": [{"Fn::Sub": "${PayloadBucket.Arn}/bodies/*"}],
    }
    assert set(archiver) - sqs - set(s3) == {"kms:GenerateDataKey"}
    (kms,) = _kms_statements(transformed, "ArchiverFunctionRole")
    assert kms["Resource"] == {"Ref": "ArchiveKmsKeyArn"}


def test_processor_may_send_to_the_archive_queue_and_touch_no_archive_object(
    transformed: dict[str, Any],
) -> None:
    processor = _allowed_actions(transformed, "ProcessorFunctionRole")
    assert processor["sqs:SendMessage"] == ARCHIVE_QUEUE
    everything = [r for resources in processor.values() for r in resources]
    assert not any("ArchiveBucket" in str(r) for r in everything)
    assert not any(a.startswith("kms:") for a in processor)


def test_replay_reads_the_archive_and_reads_and_writes_only_its_job_state(
    transformed: dict[str, Any],
) -> None:
    """Replay from the archive reads ``archive/``, keeps its jobs' state and claims generations
    (``replay-jobs/``, ``replay-generations/``), reads whether a delivery is recorded, and puts a
    body over the inline threshold where the processor follows claim checks; nothing more."""
    replay = _allowed_actions(transformed, "ReplayFunctionRole")
    s3 = {a: r for a, r in replay.items() if a.startswith("s3:")}
    assert s3 == {
        "s3:ListBucket": [{"Fn::GetAtt": ["ArchiveBucket", "Arn"]}],
        "s3:GetObject": [
            {"Fn::Sub": "${ArchiveBucket.Arn}/archive/*"},
            {"Fn::Sub": "${ArchiveBucket.Arn}/replay-jobs/*"},
            {"Fn::Sub": "${ArchiveBucket.Arn}/replay-generations/*"},
        ],
        "s3:PutObject": [
            {"Fn::Sub": "${ArchiveBucket.Arn}/replay-jobs/*"},
            {"Fn::Sub": "${ArchiveBucket.Arn}/replay-generations/*"},
            {"Fn::Sub": "${PayloadBucket.Arn}/bodies/*"},
        ],
    }
    dynamodb = {a: r for a, r in replay.items() if a.startswith("dynamodb:")}
    assert dynamodb == {"dynamodb:BatchGetItem": [{"Fn::GetAtt": ["DeliveriesTable", "Arn"]}]}
    (listing,) = (
        s
        for owner, s in policy_statements(transformed)
        if owner == "ReplayFunctionRole" and "s3:ListBucket" in _actions(s)
    )
    assert listing["Condition"] == {
        "StringLike": {"s3:prefix": ["archive/*", "replay-jobs/*", "replay-generations/*"]}
    }
    (kms,) = _kms_statements(transformed, "ReplayFunctionRole")
    assert sorted(_actions(kms)) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert kms["Resource"] == {"Ref": "ArchiveKmsKeyArn"}


def test_kms_permissions_exist_only_with_a_key_and_only_through_s3(
    template: dict[str, Any],
) -> None:
    for function in ("ArchiverFunction", "ReplayFunction"):
        statements = next(
            p["Statement"] for p in props(template, function)["Policies"] if "Statement" in p
        )
        conditional = [s for s in statements if "Fn::If" in s]
        assert len(conditional) == 1, function
        without = resolve(template, statements)
        with_key = resolve(template, statements, ArchiveKmsKeyArn=KEY_ARN)
        assert not any("kms:" in str(s.get("Action")) for s in without), function
        (kms,) = [s for s in with_key if "kms:" in str(s.get("Action"))]
        assert kms["Resource"] == KEY_ARN
        assert kms["Condition"] == {
            "StringEquals": {"kms:ViaService": "s3.eu-west-1.amazonaws.com"}
        }


# ------------------------------------------------------------------------------ Athena


def _athena_type(annotation: Any) -> str:
    """The Athena type of an ``ArchiveRecord`` field's annotation."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:  # StrictInt
        return _athena_type(args[0])
    if origin in (typing.Union, types.UnionType):
        (inner,) = args
        return _athena_type(inner)
    if origin is typing.Literal:
        return _athena_type(type(args[0]))
    if origin is dict:
        key, value = (_athena_type(a) for a in args)
        return f"map<{key},{value}>"
    types_ = {str: "string", int: "bigint", bool: "boolean", float: "double"}
    assert annotation in types_, annotation
    return types_[annotation]


def _table(template: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, Any] = props(template, "ArchiveTable")["TableInput"]
    return table


def test_athena_columns_are_the_archive_record_fields_but_the_partition_keys(
    template: dict[str, Any],
) -> None:
    table = _table(template)
    partition_keys = [(k["Name"], k["Type"]) for k in table["PartitionKeys"]]
    assert partition_keys == [("source", "string"), ("hour", "string")]
    expected = [
        (name, _athena_type(field.annotation))
        for name, field in ArchiveRecord.model_fields.items()
        if name != "source"  # the partition key source= of the key; Hive forbids both
    ]
    columns = [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]]
    assert columns == expected
    assert ("headers", "map<string,string>") in columns
    assert ("signed_headers", "map<string,string>") in columns


def test_athena_table_reads_gzip_json_lines_with_the_openx_serde(
    template: dict[str, Any],
) -> None:
    table = _table(template)
    storage = table["StorageDescriptor"]
    assert storage["SerdeInfo"]["SerializationLibrary"] == "org.openx.data.jsonserde.JsonSerDe"
    assert storage["InputFormat"] == "org.apache.hadoop.mapred.TextInputFormat"
    assert table["Parameters"]["compressionType"] == "gzip"
    assert table["TableType"] == "EXTERNAL_TABLE"
    assert resolve(template, storage["Location"]) == f"s3://<ArchiveBucket>/{ARCHIVE_PREFIX}"
    assert is_ref(props(template, "ArchiveTable")["DatabaseName"], "ArchiveDatabase")


_JAVA_TO_STRFTIME = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H"}


def test_partition_projection_matches_the_archive_key_layout(template: dict[str, Any]) -> None:
    parameters = _table(template)["Parameters"]
    assert parameters["projection.enabled"] == "true"
    assert parameters["projection.source.type"] == "injected"
    assert parameters["projection.hour.type"] == "date"
    java = parameters["projection.hour.format"]
    strftime = java
    for token, code in _JAVA_TO_STRFTIME.items():
        strftime = strftime.replace(token, code)
    assert strftime == HOUR_FORMAT, java
    start, end = parameters["projection.hour.range"].split(",")
    datetime.strptime(start, HOUR_FORMAT)
    assert end == "NOW"
    assert (
        parameters["projection.hour.interval"],
        parameters["projection.hour.interval.unit"],
    ) == (
        "1",
        "HOURS",
    )
    location = resolve(template, parameters["storage.location.template"])
    assert location == "s3://<ArchiveBucket>/" + partition_prefix("${source}", "${hour}")


def test_athena_workgroup_writes_encrypted_results_under_the_expiring_prefix(
    template: dict[str, Any],
) -> None:
    config = props(template, "ArchiveWorkGroup")["WorkGroupConfiguration"]
    assert config["EnforceWorkGroupConfiguration"] is True
    result = config["ResultConfiguration"]
    location = resolve(template, result["OutputLocation"])
    assert location == "s3://<ArchiveBucket>/athena-results/"
    assert location.removeprefix("s3://<ArchiveBucket>/") in _rules(template)
    assert resolve(template, result["EncryptionConfiguration"]) == {"EncryptionOption": "SSE_S3"}
    assert resolve(template, result["EncryptionConfiguration"], ArchiveKmsKeyArn=KEY_ARN) == {
        "EncryptionOption": "SSE_KMS",
        "KmsKey": KEY_ARN,
    }


def test_glue_database_name_is_an_athena_identifier(template: dict[str, Any]) -> None:
    name = props(template, "ArchiveDatabase")["DatabaseInput"]["Name"]
    from webhook_pipeline_ops.local.template import Resolver

    resolver = Resolver(template, region="eu-west-1", stack_name="my-hooks-prod")
    assert resolver.resolve(name) == "my_hooks_prod_archive"


# ------------------------------------------------------------------------------ alarm, outputs


def test_archive_write_failures_alarm_reads_all_three_failure_signals(
    alarms: dict[str, dict[str, Any]], template: dict[str, Any]
) -> None:
    processor = env(template, "ProcessorFunction")["POWERTOOLS_SERVICE_NAME"]
    send = _find(alarms, "WebhookPipeline", "ArchiveSendFailed", service=processor)
    errors = _find(alarms, "AWS/Lambda", "Errors", FunctionName={"Ref": "ArchiverFunction"})
    dlq = _find(
        alarms,
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        QueueName={"Fn::GetAtt": ["ArchiveDeadLetterQueue", "QueueName"]},
    )
    assert send == errors == dlq == ["ArchiveWriteFailuresAlarm"]
    alarm = alarms["ArchiveWriteFailuresAlarm"]
    assert [q["Expression"] for q in alarm["Metrics"] if "Expression" in q] == ["SUM(METRICS())"]
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_archive_outputs(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    expected = {
        "ArchiveBucketName": "ArchiveBucket",
        "ArchiveQueueUrl": "ArchiveQueue",
        "ArchiveDeadLetterQueueUrl": "ArchiveDeadLetterQueue",
        "ArchiveDatabaseName": "ArchiveDatabase",
        "ArchiveTableName": "ArchiveTable",
        "ArchiveWorkGroupName": "ArchiveWorkGroup",
    }
    for output, resource in expected.items():
        assert is_ref(outputs[output]["Value"], resource), output
    assert default_of(template, {"Ref": "ArchiveRetentionDays"}) == 90


def test_every_function_built_by_makefile_has_its_target(template: dict[str, Any]) -> None:
    # sam build runs `make build-<LogicalId>` in packaging/<arch>/ (packaging/lambda.mk)
    from tests.template.test_template import ROOT

    makefile = (ROOT / "packaging" / "lambda.mk").read_text()
    targets = set(re.findall(r"^([\w -]+):", makefile, re.MULTILINE))
    declared = {name for line in targets for name in line.split()}
    functions = resources_of(template, "AWS::Serverless::Function")
    assert "ArchiverFunction" in functions
    for name, resource in functions.items():
        assert resource["Metadata"]["BuildMethod"] == "makefile", name
        assert f"build-{name}" in declared, name
