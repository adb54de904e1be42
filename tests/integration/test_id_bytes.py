"""Ids, event types and resource keys are bounded in UTF-8 bytes, and every value at its bound
reaches its record (invariant I5).

A 256-character id of 4-byte characters (1,024 bytes) used to be answered 202 and then never
recorded: its time index sort key ``<received_at>#<source>#<id>`` was over DynamoDB's 1,024 bytes,
so the processor's write was refused and the message went to the DLQ, and its replay failed the
same way. Each value here goes through the real ingest handler, the real processor and moto's
DynamoDB (which enforces the key limits on the table's and the index's keys), and is read back
with the CLI.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from webhook_pipeline_ops import aws as ops_aws
from webhook_pipeline_ops.cli import main
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.integration.ingest_harness import IngestHarness
from tests.integration.pipeline_harness import Pipeline, build_pipeline

pytestmark = pytest.mark.integration

#: The bounds of the HTTP contract, in UTF-8 bytes (``webhook_pipeline.bounds``).
MAX_DELIVERY_ID_BYTES = 256
MAX_EVENT_TYPE_BYTES = 256
MAX_RESOURCE_KEY_BYTES = 1024
#: A printable character of each UTF-8 width.
WIDE = {1: "x", 2: "\u00e9", 3: "\u20ac", 4: "\U0001f600"}


def of_bytes(size: int, width: int) -> str:
    """A string of exactly ``size`` UTF-8 bytes, as many ``width``-byte characters as fit and
    ASCII for the rest."""
    text = WIDE[width] * (size // width) + "a" * (size % width)
    assert len(text.encode("utf-8")) == size
    return text


@pytest.fixture
def pipeline(
    ingest: IngestHarness, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> Iterator[Pipeline]:
    for name in ops_aws.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WEBHOOK_PIPELINE_LOCAL_DIR", f"{tmp_path}/no-local-stack")
    yield build_pipeline(ingest, monkeypatch)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str]]:
    def run(*argv: str) -> tuple[int, str]:
        capsys.readouterr()  # the handlers' metric lines, printed before
        code = main(list(argv))
        return code, capsys.readouterr().out

    return run


def send_stripe(
    pipeline: Pipeline, delivery_id: str, event_type: str, resource: str
) -> tuple[int, dict[str, str]]:
    sent = signed_delivery(
        example_sources()["stripe"],
        delivery_id=delivery_id,
        event_type=event_type,
        resource=resource,
        sequence=7,
    )
    response = pipeline.ingest.invoke(http_api_event(sent))
    return response["statusCode"], json.loads(response["body"])


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_values_at_their_byte_bounds_are_recorded_and_read_back(
    pipeline: Pipeline, cli: Callable[..., tuple[int, str]], width: int
) -> None:
    # Given a signed Stripe event whose id, type and resource key are each at their bound in
    # UTF-8 bytes, written in characters of one width
    delivery_id = "evt_" + of_bytes(MAX_DELIVERY_ID_BYTES - 4, width)
    event_type = of_bytes(MAX_EVENT_TYPE_BYTES, width)
    resource = of_bytes(MAX_RESOURCE_KEY_BYTES, width)
    # When it is sent and the processor takes what was enqueued
    code, answer = send_stripe(pipeline, delivery_id, event_type, resource)
    assert (code, answer["delivery_id"]) == (202, delivery_id)
    assert pipeline.process() == []
    # Then the CLI reads the record by its id and the resource by its key
    code, out = cli("deliveries", "get", "stripe", "--table", pipeline.table, "--", delivery_id)
    assert code == 0, out
    item = json.loads(out)
    assert (item["delivery_id"], item["event_type"], item["resource_key"]) == (
        delivery_id,
        event_type,
        resource,
    )
    assert item["outcome"] == "applied"
    code, out = cli("resources", "get", "stripe", "--table", pipeline.table, "--", resource)
    assert code == 0, out
    assert (json.loads(out)["watermark"], json.loads(out)["last_delivery_id"]) == (7, delivery_id)


@pytest.mark.parametrize("width", [1, 2, 3, 4])
@pytest.mark.parametrize(
    ("field", "reason"),
    [
        ("delivery_id", "delivery_id_too_long"),
        ("event_type", "event_type_too_long"),
        ("resource", "resource_key_too_long"),
    ],
)
def test_one_byte_over_a_bound_is_400_and_nothing_is_enqueued(
    pipeline: Pipeline, width: int, field: str, reason: str
) -> None:
    values = {
        "delivery_id": "evt_" + of_bytes(MAX_DELIVERY_ID_BYTES - 4, width),
        "event_type": "invoice.paid",
        "resource": "cus_1",
    }
    bound = {
        "delivery_id": MAX_DELIVERY_ID_BYTES,
        "event_type": MAX_EVENT_TYPE_BYTES,
        "resource": MAX_RESOURCE_KEY_BYTES,
    }[field]
    # one byte over: the bound in characters of this width, and one ASCII byte more
    values[field] = of_bytes(bound - bound % width, width) + "a" * (bound % width + 1)
    assert len(values[field].encode()) == bound + 1
    code, answer = send_stripe(pipeline, **values)
    assert (code, answer.get("reason")) == (400, reason)
    assert pipeline.ingest.messages() == []


def test_the_reported_id_of_1024_bytes_is_400_not_a_202_that_is_never_recorded(
    pipeline: Pipeline, cli: Callable[..., tuple[int, str]]
) -> None:
    # The input class: 256 characters, 4 bytes each
    delivery_id = "\U0001f600" * 256
    code, answer = send_stripe(pipeline, delivery_id, "invoice.paid", "cus_1")
    assert (code, answer.get("reason")) == (400, "delivery_id_too_long")
    assert pipeline.process() == []
    assert pipeline.scan() == []
