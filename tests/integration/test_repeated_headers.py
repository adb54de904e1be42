"""An unsigned identity header given twice, through the real ingest handler (invariant I8).

API Gateway joins a repeated header's values with ``","`` (HTTP API 2.0 in ``headers``; REST 1.0
lists them in ``multiValueHeaders``; the local gateway joins them as 2.0 does), so
``X-GitHub-Delivery`` sent twice once read as the new delivery id ``x,x``. Equal values are one
value; different ones are 400 ``field_ambiguous``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from webhook_pipeline_ops.local.http_gateway import build_event
from webhook_pipeline_ops.simulator.deliveries import (
    SampleDelivery,
    example_sources,
    http_api_event,
    rest_api_event,
    signed_delivery,
)

from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()
SHAPES = ["http-api-2.0", "rest-1.0", "local-gateway"]
#: Every example source reading its delivery id from a header (none is signed).
HEADER_ID_SOURCES = sorted(
    name for name, source in SOURCES.items() if source.delivery_id.header is not None
)


def test_the_header_id_sources_are_the_ones_found_by_the_review() -> None:
    providers = {SOURCES[name].provider.name for name in HEADER_ID_SOURCES}
    assert providers >= {
        "github",
        "shopify",
        "bitbucket",
        "gitlab",
        "jira",
        "linear",
        "razorpay",
        "sentry",
        "zendesk",
    }


def repeated(delivery: SampleDelivery, shape: str, name: str, values: list[str]) -> dict[str, Any]:
    """``delivery`` as an event of ``shape`` whose header ``name`` is given once per value, as
    API Gateway passes a repeated header on (joined with "," in 2.0, listed in 1.0)."""
    if shape == "http-api-2.0":
        event = http_api_event(delivery)
        event["headers"][name.lower()] = ",".join(values)
        return event
    if shape == "local-gateway":  # the pairs as they arrive, the repeated one kept twice
        pairs = [(k, v) for k, v in delivery.headers.items() if k.lower() != name.lower()]
        return build_event(
            method="POST",
            target=f"/webhooks/{delivery.source}",
            headers=pairs + [(name, v) for v in values],
            body=delivery.body,
            route_key="POST /webhooks/{source}",
            path_parameters={"source": delivery.source},
            source_ip="127.0.0.1",
            host="localhost",
        )
    event = rest_api_event(delivery)
    key = next(k for k in event["multiValueHeaders"] if k.lower() == name.lower())
    event["multiValueHeaders"][key] = list(values)
    event["headers"][key] = values[-1]  # REST 1.0 keeps the last one in headers
    return event


def answer(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, Any]:
    response = harness.invoke(event)
    try:
        return response["statusCode"], json.loads(response["body"])
    except ValueError:
        return response["statusCode"], response["body"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("source", HEADER_ID_SOURCES)
def test_an_id_header_given_twice_with_one_value_is_one_delivery(
    ingest: IngestHarness, source: str, shape: str
) -> None:
    # Given a genuine delivery whose (unsigned) id header is sent twice with the same value
    header = SOURCES[source].delivery_id.header
    assert header is not None
    d = signed_delivery(SOURCES[source])
    genuine_id = d.headers[next(k for k in d.headers if k.lower() == header.lower())]
    # When it arrives with the header repeated, then again as sent
    first, _ = answer(ingest, repeated(d, shape, header, [genuine_id, genuine_id]))
    second, _ = answer(ingest, http_api_event(d))
    # Then the repeat reads as the one id: accepted once, the plain copy a duplicate
    assert first < 300 and second < 300
    assert [e["delivery_id"] for e in ingest.envelopes()] == [genuine_id]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("source", HEADER_ID_SOURCES)
def test_an_id_header_given_twice_with_two_values_is_ambiguous(
    ingest: IngestHarness, source: str, shape: str
) -> None:
    header = SOURCES[source].delivery_id.header
    assert header is not None
    d = signed_delivery(SOURCES[source])
    genuine_id = d.headers[next(k for k in d.headers if k.lower() == header.lower())]
    other = str(uuid.uuid4())
    for values in ([genuine_id, other], [other, genuine_id]):
        code, body = answer(ingest, repeated(d, shape, header, values))
        assert (code, body) == (400, {"status": "rejected", "reason": "field_ambiguous"})
    assert ingest.messages() == []


@pytest.mark.parametrize("shape", SHAPES)
def test_an_event_type_header_given_twice_reads_as_one_type(
    ingest: IngestHarness, shape: str
) -> None:
    # GitHub's X-GitHub-Event (the event type) is unsigned too: "push,push" is "push"
    d = signed_delivery(SOURCES["github"], event_type="push")
    assert answer(ingest, repeated(d, shape, "X-GitHub-Event", ["push", "push"]))[0] == 202
    assert [e.get("event_type") for e in ingest.envelopes()] == ["push"]
    e = signed_delivery(SOURCES["github"], event_type="push")
    code, body = answer(ingest, repeated(e, shape, "X-GitHub-Event", ["push", "issues"]))
    assert (code, body) == (400, {"status": "rejected", "reason": "field_ambiguous"})
