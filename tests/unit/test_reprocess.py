"""Reprocess without AWS: the envelope field, the hook's key, the group split, the skip rules."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from webhook_pipeline.envelope import Envelope, Reprocess
from webhook_pipeline.errors import MalformedEnvelopeError
from webhook_pipeline.hooks import HookEvent
from webhook_pipeline.process.model import HookState, Message, Outcome, ReprocessState
from webhook_pipeline.process.planning import plan, segments
from webhook_pipeline.process.reprocess import skip_reason

from tests.helpers import envelope_json


def test_an_envelope_without_reprocess_serializes_as_before() -> None:
    text = envelope_json("evt_1")
    assert "reprocess" not in json.loads(text)
    assert Envelope.from_json(text).reprocess is None


def test_the_reprocess_field_round_trips() -> None:
    text = envelope_json("evt_1", reprocess={"generation": 3, "job": "j" * 128})
    assert json.loads(text)["reprocess"] == {"generation": 3, "job": "j" * 128}
    assert Envelope.from_json(text).reprocess == Reprocess(generation=3, job="j" * 128)


@pytest.mark.parametrize(
    "reprocess",
    [
        {"generation": 0, "job": "j"},
        {"generation": -1, "job": "j"},
        {"generation": "1", "job": "j"},
        {"generation": 1, "job": ""},
        {"generation": 1, "job": "j" * 129},
        {"generation": 1},
        {"generation": 1, "job": "j", "extra": 1},
    ],
)
def test_an_invalid_reprocess_field_is_malformed(reprocess: dict[str, object]) -> None:
    good = json.loads(envelope_json("evt_1"))
    with pytest.raises(MalformedEnvelopeError, match="reprocess"):
        Envelope.from_json(json.dumps({**good, "reprocess": reprocess}))


def event(generation: int | None) -> HookEvent:
    return HookEvent(
        source="stripe",
        delivery_id="evt_1",
        event_type=None,
        resource_key=None,
        sequence=None,
        received_at=datetime(2026, 1, 1, tzinfo=UTC),
        replay_generation=generation,
    )


def test_the_idempotency_key_carries_the_generation_of_a_reprocess_only() -> None:
    assert event(None).idempotency_key == "stripe:evt_1"
    assert event(1).idempotency_key == "stripe:evt_1:g1"
    assert event(12).idempotency_key == "stripe:evt_1:g12"


def test_reprocessed_and_skipped_are_acknowledged() -> None:
    assert Outcome.REPROCESSED.acknowledged and Outcome.SKIPPED.acknowledged
    assert not Outcome.RETRY.acknowledged


def test_segments_keep_reprocesses_out_of_runs_and_keep_the_order() -> None:
    # Given one resource's batch: first runs at 1, 2, 4, 7; reprocesses at 3, 5, 6
    reprocess = {"generation": 1, "job": "j"}
    messages = [
        Message(f"m{s}", envelope_json(f"evt_{s}", seq=s, reprocess=reprocess))
        if s in (3, 5, 6)
        else Message(f"m{s}", envelope_json(f"evt_{s}", seq=s))
        for s in (7, 6, 5, 4, 3, 2, 1)  # arrival order: newest first
    ]
    _, (group,) = plan(messages)
    runs = [[m.message_id for m, _ in run] for run in segments(group)]
    assert runs == [["m1", "m2"], ["m3"], ["m4"], ["m5"], ["m6"], ["m7"]]


def test_the_skip_reasons() -> None:
    env = Envelope.from_json(envelope_json("evt_1"))
    applied = ReprocessState(Outcome.APPLIED, HookState.DONE, env.content_digest, 1)
    assert skip_reason(applied, env, 1) is None
    assert skip_reason(ReprocessState(Outcome.APPLIED, None, env.content_digest), env, 1) is None
    assert skip_reason(ReprocessState(None), env, 1) == "not recorded"
    assert skip_reason(ReprocessState(Outcome.STALE), env, 1) == "recorded as stale"
    pending = ReprocessState(Outcome.APPLIED, HookState.PENDING, env.content_digest)
    assert skip_reason(pending, env, 1) == "hook pending"
    marked = ReprocessState(Outcome.APPLIED, HookState.DONE, env.content_digest, 1, marked=True)
    assert skip_reason(marked, env, 4) == "generation 4 reprocessed already"
    other = ReprocessState(Outcome.APPLIED, HookState.DONE, "0" * 64)
    assert skip_reason(other, env, 1) == "body differs from the recorded delivery"


def test_a_reprocess_replayed_from_the_dlq_stays_a_reprocess_of_its_generation() -> None:
    from webhook_pipeline.replay.run import replayed_envelope

    env = Envelope.from_json(envelope_json("evt_1", reprocess={"generation": 2, "job": "j"}))
    back = Envelope.from_json(replayed_envelope(env).to_json())
    assert (back.reprocess, back.replay_count) == (Reprocess(generation=2, job="j"), 1)
