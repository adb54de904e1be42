"""``events/`` is generated from the provider registry and cannot drift: the committed files are
exactly what ``webhook-pipeline events`` writes at the fixed time, one valid delivery per
example source (every provider) and one file per provider handshake."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from webhook_pipeline_ops.simulator.deliveries import example_sources
from webhook_pipeline_ops.simulator.event_files import FIXED_TIME, build_events

pytestmark = pytest.mark.unit

EVENTS = Path(__file__).resolve().parents[2] / "events"


def test_committed_ingest_events_are_what_the_registry_builds() -> None:
    built = build_events(FIXED_TIME)
    committed = {p.name for p in EVENTS.glob("ingest-*.json")}
    assert committed == set(built), "run `webhook-pipeline events` and commit events/"
    for name, event in built.items():
        event.get("requestContext", {}).pop("timeEpoch", None)
        assert json.loads((EVENTS / name).read_text()) == event, name


def test_every_example_source_and_handshake_has_an_event() -> None:
    built = build_events(FIXED_TIME)
    for name, source in example_sources().items():
        assert f"ingest-{name}.json" in built
        for handshake in source.provider.handshakes:
            slug = re.sub(r"[^a-z0-9]+", "-", handshake.name.lower()).strip("-")
            assert f"ingest-{name}-{slug}.json" in built


def test_the_provider_tables_of_the_docs_are_the_registry() -> None:
    from webhook_pipeline_ops.provider_table import DOCUMENTS, END, START, provider_table

    for path in DOCUMENTS:
        text = path.read_text()
        assert text.count(START) == text.count(END) == 1, path
        table = text.split(START, 1)[1].split(END, 1)[0].strip()
        assert table == provider_table(), f"run `webhook-pipeline providers --write` ({path})"
