"""``events/`` is generated from the provider registry and cannot drift: the committed files are
exactly what ``webhook-pipeline events`` writes at the fixed time, one valid delivery per
example source (every provider) and one file per provider handshake; the archive's events are
what :mod:`webhook_pipeline_ops.simulator.archive_events` builds with the real archive models,
and hold what their names say."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from webhook_pipeline.archive.message import ArchiveMessage
from webhook_pipeline.archive.record import hour_of
from webhook_pipeline.archive.writer import to_record
from webhook_pipeline.replay.archive_request import ArchiveReplayRequest
from webhook_pipeline_ops.simulator.archive_events import (
    ARCHIVER_BATCH,
    REPLAY_DRY_RUN,
    SAMPLES,
    build_archive_events,
)
from webhook_pipeline_ops.simulator.deliveries import example_sources
from webhook_pipeline_ops.simulator.event_files import FIXED_TIME, build_events, write_events

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


# ------------------------------------------------------------------------------ archive events


def _committed(name: str) -> dict[str, object]:
    return dict(json.loads((EVENTS / name).read_text()))


def test_committed_archive_events_are_what_the_generator_writes(tmp_path: Path) -> None:
    # Given what `webhook-pipeline events` writes (the archive's events beside the ingest ones)
    written = {p.name for p in write_events(tmp_path, FIXED_TIME)}
    built = build_archive_events()
    assert set(built) == {ARCHIVER_BATCH, REPLAY_DRY_RUN} <= written
    # Then the committed files are exactly those bytes
    for name in built:
        assert (EVENTS / name).read_text() == (tmp_path / name).read_text(), (
            f"{name}: run `webhook-pipeline events` and commit events/"
        )


def test_archiver_batch_holds_archive_messages_of_two_sources_across_an_hour() -> None:
    records = _committed(ARCHIVER_BATCH)["Records"]
    assert isinstance(records, list) and len(records) == len(SAMPLES) == 4
    assert {r["eventSource"] for r in records} == {"aws:sqs"}
    assert len({r["messageId"] for r in records}) == 4
    for r in records:
        assert r["md5OfBody"] == hashlib.md5(r["body"].encode(), usedforsecurity=False).hexdigest()
    # Each body is an archive message (the model the archiver parses), in the samples' order
    messages = [ArchiveMessage.from_json(r["body"]) for r in records]
    assert [m.envelope.delivery_id for m in messages] == [s.envelope.delivery_id for s in SAMPLES]
    assert len({m.message_id for m in messages}) == 4
    assert [m.outcome for m in messages] == ["applied", "applied", "applied", "stale"]
    # Two sources; stripe on both sides of 10:00 UTC: three (source, hour) objects
    groups = {(m.envelope.source, hour_of(m.envelope.received_at)) for m in messages}
    assert groups == {
        ("stripe", "2026-01-01-09"),
        ("stripe", "2026-01-01-10"),
        ("generic-hmac", "2026-01-01-09"),
    }
    # Each body's bytes match its digest; exactly one is not UTF-8 and is archived as base64
    bodies = [base64.b64decode(m.envelope.body_b64 or "") for m in messages]
    for m, body in zip(messages, bodies, strict=True):
        assert hashlib.sha256(body).hexdigest() == m.envelope.body_sha256
        assert len(body) == m.envelope.body_size
    archived = [to_record(m, body) for m, body in zip(messages, bodies, strict=True)]
    assert [r.source for r in archived if r.body_base64 is not None] == ["generic-hmac"]
    assert [r.body_bytes() for r in archived] == bodies


def test_replay_from_archive_dry_run_is_a_reprocess_dry_run_over_every_sample() -> None:
    event = _committed(REPLAY_DRY_RUN)
    assert set(event) == {"from_archive"}  # the replay function refuses any other key
    request = ArchiveReplayRequest.parse(event["from_archive"])
    assert request.mode == "reprocess"
    assert request.dry_run is True
    received = [s.envelope.received_at for s in SAMPLES]
    assert request.start <= min(received) and max(received) < request.end
    # and no wider than the two hours the samples span
    assert request.end - request.start == timedelta(hours=2)
    assert not (request.sources or request.event_types or request.outcomes or request.where)
