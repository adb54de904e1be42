"""A short-tolerance provider through ``sam local invoke``: Discord accepts a signed timestamp
for 15 s, and one container start takes longer. ``local run --for-containers`` gives the ingest
function ``LOCAL_MIN_TOLERANCE_SECONDS=300`` (declared "0" in the template), so an event signed
20 s before it reaches the handler passes; with the template's value it is 401
``timestamp_stale``. In-process: the real ingest handler, Redis and moto; the 20 s are the
signing time moved back, not a wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline.settings import IngestSettings
from webhook_pipeline_ops.local.containers import (
    CONTAINER_MIN_TOLERANCE_SECONDS,
    container_environment,
)
from webhook_pipeline_ops.simulator.event_files import build_events

from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def template_ingest_environment() -> dict[str, str]:
    """The IngestFunction variables the template declares as plain strings."""
    from cfn_tools import load_yaml

    doc = load_yaml(TEMPLATE.read_text())
    variables = doc["Resources"]["IngestFunction"]["Properties"]["Environment"]["Variables"]
    return {k: v for k, v in variables.items() if isinstance(v, str)}


def signed_ago(seconds: int) -> dict[str, Any]:
    return build_events(int(time.time()) - seconds)


def status(harness: IngestHarness, event: dict[str, Any]) -> tuple[int, str | None]:
    response = harness.invoke(event)
    return response["statusCode"], harness.body(response).get("reason")


def test_a_discord_event_signed_20_s_earlier_passes_only_with_the_container_environment(
    make_ingest: Callable[..., IngestHarness],
) -> None:
    # Given the ingest environment as the template declares it, and as --for-containers writes it
    declared = template_ingest_environment()
    assert declared["LOCAL_MIN_TOLERANCE_SECONDS"] == "0"
    for_containers = dict(declared)
    container_environment(for_containers)
    assert for_containers["LOCAL_MIN_TOLERANCE_SECONDS"] == str(CONTAINER_MIN_TOLERANCE_SECONDS)
    keys = ("LOCAL_MIN_TOLERANCE_SECONDS",)
    plain = make_ingest(SOURCES_CATALOGUE="true", **{k: declared[k] for k in keys})
    widened = make_ingest(SOURCES_CATALOGUE="true", **{k: for_containers[k] for k in keys})
    # When the Discord event signed 20 s ago is invoked
    event = signed_ago(20)["ingest-discord.json"]
    # Then the template's value refuses it as stale, the container environment accepts it
    assert status(plain, event) == (401, "timestamp_stale")
    assert status(widened, event)[0] == 200  # Discord's acknowledgement of an interaction
    assert [e["source"] for e in widened.envelopes()] == ["discord"]


def test_the_widened_tolerance_is_a_floor_not_a_bypass(
    make_ingest: Callable[..., IngestHarness],
) -> None:
    widened = make_ingest(SOURCES_CATALOGUE="true", LOCAL_MIN_TOLERANCE_SECONDS="300")
    old = signed_ago(CONTAINER_MIN_TOLERANCE_SECONDS + 60)
    # Discord and Stripe (300 s of its own) beyond 300 s: still stale
    assert status(widened, old["ingest-discord.json"]) == (401, "timestamp_stale")
    assert status(widened, old["ingest-stripe.json"]) == (401, "timestamp_stale")


def test_a_deployed_stack_refuses_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "QUEUE_URL": "https://sqs.example/q",
        "PAYLOAD_BUCKET": "payloads",
        "SECRETS_PREFIX": "p/",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "LOCAL_MIN_TOLERANCE_SECONDS": "300",
        "SOURCES_CATALOGUE": "false",
    }.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match="LOCAL_MIN_TOLERANCE_SECONDS"):
        IngestSettings.load()
    monkeypatch.setenv("SOURCES_CATALOGUE", "true")
    assert IngestSettings.load().local_min_tolerance_seconds == 300
