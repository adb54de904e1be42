"""template.yaml wiring of the processor (C08, C09) and the table the store writes to.

C09: processor ``Timeout: 60`` with queue ``VisibilityTimeout: 30`` redelivers messages that are
still being processed; the queue's visibility timeout must be at least 6 x the processor timeout
plus the maximum batching window. Parameters are checked at their worst allowed value (MaxValue
of the batching window and timeout, MinValue of the visibility timeout), not only their default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from webhook_pipeline.adapters.dynamodb_items import TIME_INDEX, TIME_KEY, TIME_SHARD

pytestmark = pytest.mark.template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"

if not TEMPLATE.exists():
    pytest.skip(
        "template.yaml is missing: the processor wiring cannot be checked", allow_module_level=True
    )


def load_template() -> dict[str, Any]:
    from cfn_tools import load_yaml  # CloudFormation-aware: !Ref, !GetAtt, !Sub...

    return dict(load_yaml(TEMPLATE.read_text()))


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def number(value: Any, template: dict[str, Any], worst: str) -> int:
    """A numeric property: a literal, or a ``!Ref`` to a Number parameter taken at its worst
    allowed value (``worst`` is ``"max"`` or ``"min"``), falling back to its Default."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        parameter = template["Parameters"][value["Ref"]]
        bound = parameter.get("MaxValue" if worst == "max" else "MinValue")
        allowed = parameter.get("AllowedValues")
        if allowed:
            return int((max if worst == "max" else min)(int(v) for v in allowed))
        return int(bound if bound is not None else parameter["Default"])
    if isinstance(value, int | str) and str(value).isdigit():
        return int(value)
    raise AssertionError(f"cannot evaluate {value!r} as a number")


def visibility_is_safe(
    visibility_timeout: int, function_timeout: int, batching_window: int
) -> bool:
    """C09 rule: VisibilityTimeout >= 6 x function timeout + MaximumBatchingWindowInSeconds."""
    return visibility_timeout >= 6 * function_timeout + batching_window


def processor(template: dict[str, Any]) -> dict[str, Any]:
    return template["Resources"]["ProcessorFunction"]["Properties"]


def sqs_event(template: dict[str, Any]) -> dict[str, Any]:
    events = [e for e in processor(template).get("Events", {}).values() if e.get("Type") == "SQS"]
    assert len(events) == 1, "ProcessorFunction needs exactly one SQS event source"
    return events[0]["Properties"]


def queue_of(event: dict[str, Any]) -> str:
    queue = event["Queue"]
    assert isinstance(queue, dict) and "Fn::GetAtt" in queue, queue
    target = queue["Fn::GetAtt"]
    name = target[0] if isinstance(target, list) else target.split(".")[0]
    return str(name)


@pytest.mark.parametrize(
    ("visibility", "timeout", "window", "safe"),
    [(30, 60, 0, False), (360, 60, 0, True), (360, 60, 1, False), (390, 60, 30, True)],
)
def test_c09_rule_with_the_case_input(
    visibility: int, timeout: int, window: int, safe: bool
) -> None:
    assert visibility_is_safe(visibility, timeout, window) is safe


def test_c09_main_queue_visibility_covers_six_processor_timeouts_plus_batching_window(
    template: dict[str, Any],
) -> None:
    event = sqs_event(template)
    queue = template["Resources"][queue_of(event)]["Properties"]
    function_timeout = processor(template).get("Timeout") or (
        template.get("Globals", {}).get("Function", {}).get("Timeout", 3)
    )
    timeout = number(function_timeout, template, "max")
    window = number(event.get("MaximumBatchingWindowInSeconds", 0), template, "max")
    visibility = number(queue.get("VisibilityTimeout", 30), template, "min")
    assert visibility_is_safe(visibility, timeout, window), (visibility, timeout, window)


def test_c08_event_source_mapping_reports_batch_item_failures(template: dict[str, Any]) -> None:
    event = sqs_event(template)
    assert event.get("FunctionResponseTypes") == ["ReportBatchItemFailures"]
    assert queue_of(event) == "MainQueue"


def test_batching_and_concurrency_are_parameters(template: dict[str, Any]) -> None:
    event = sqs_event(template)
    for value in (
        event["BatchSize"],
        event["MaximumBatchingWindowInSeconds"],
        event["ScalingConfig"]["MaximumConcurrency"],
    ):
        assert isinstance(value, dict) and value.get("Ref") in template["Parameters"], value
    assert number(event["ScalingConfig"]["MaximumConcurrency"], template, "min") >= 2
    assert number(event["BatchSize"], template, "max") <= 10


def test_processor_environment_names_what_the_settings_require(template: dict[str, Any]) -> None:
    variables = processor(template)["Environment"]["Variables"]
    assert variables["TABLE_NAME"] == {"Ref": "DeliveriesTable"}
    assert variables["PAYLOAD_BUCKET"] == {"Ref": "PayloadBucket"}


def test_deliveries_table_matches_the_store(template: dict[str, Any]) -> None:
    table = template["Resources"]["DeliveriesTable"]["Properties"]
    assert {(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]} == {
        ("pk", "HASH"),
        ("sk", "RANGE"),
    }
    assert {(a["AttributeName"], a["AttributeType"]) for a in table["AttributeDefinitions"]} == {
        ("pk", "S"),
        ("sk", "S"),
        (TIME_SHARD, "S"),
        (TIME_KEY, "S"),
    }
    (index,) = table["GlobalSecondaryIndexes"]
    assert index["IndexName"] == TIME_INDEX
    assert index["KeySchema"] == [
        {"AttributeName": TIME_SHARD, "KeyType": "HASH"},
        {"AttributeName": TIME_KEY, "KeyType": "RANGE"},
    ]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_processor_may_do_what_the_store_does_and_nothing_wider(template: dict[str, Any]) -> None:
    actions: set[str] = set()
    for policy in processor(template).get("Policies", []):
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            listed = statement["Action"]
            actions.update([listed] if isinstance(listed, str) else listed)
    # TransactWriteItems is authorized per item action: Put + Update (+ ConditionCheck).
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem", "s3:GetObject"} <= actions
    assert not any(a.endswith("*") for a in actions), actions
