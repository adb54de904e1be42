"""The processor's archive messages (which results, what they carry) and the archive queue
sender's chunks (at most 10 entries and 262,144 bytes per ``SendMessageBatch``; an entry over
the limit failed alone, never sent), against in-process moto SQS."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from webhook_pipeline.adapters.sqs import BATCH_MAX_BYTES
from webhook_pipeline.adapters.sqs_archive import SqsArchiveQueue
from webhook_pipeline.archive.message import ArchiveMessage, MalformedArchiveMessageError
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.process.archiving import archive_batch, archive_messages
from webhook_pipeline.process.model import Message, Outcome, RecordResult

from tests.helpers import envelope_json

NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


class Recording:
    """The real moto SQS client, each ``SendMessageBatch`` call's entry count and bytes kept."""

    def __init__(self, real: Any) -> None:
        self.real, self.calls = real, []

    def send_message_batch(self, QueueUrl: str, Entries: list[Any]) -> Any:
        self.calls.append((len(Entries), sum(len(e["MessageBody"].encode()) for e in Entries)))
        return self.real.send_message_batch(QueueUrl=QueueUrl, Entries=Entries)


@pytest.fixture
def queue(aws: None) -> SqsArchiveQueue:
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="archive")["QueueUrl"]
    return SqsArchiveQueue(Recording(sqs), url)  # type: ignore[arg-type]


def drain(queue: SqsArchiveQueue) -> list[str]:
    sqs = boto3.client("sqs")
    bodies: list[str] = []
    while got := sqs.receive_message(QueueUrl=queue.queue_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        bodies.extend(m["Body"] for m in got)
    return bodies


def test_25_small_messages_go_in_3_calls_of_at_most_10(queue: SqsArchiveQueue) -> None:
    bodies = [json.dumps({"n": n}) for n in range(25)]
    assert queue.send(bodies) == {}
    assert [n for n, _ in queue.client.calls] == [10, 10, 5]  # type: ignore[attr-defined]
    assert sorted(drain(queue)) == sorted(bodies)


def test_large_messages_are_split_by_bytes_and_one_over_the_limit_fails_alone(
    queue: SqsArchiveQueue,
) -> None:
    big = [json.dumps({"n": n, "pad": "x" * 100_000}) for n in range(4)]
    over = json.dumps({"n": "over", "pad": "y" * BATCH_MAX_BYTES})
    failed = queue.send([big[0], over, *big[1:]])
    assert list(failed) == [1] and "over 262144 bytes" in failed[1]
    calls = queue.client.calls  # type: ignore[attr-defined]
    assert all(size <= BATCH_MAX_BYTES for _, size in calls) and len(calls) == 2
    assert sorted(drain(queue)) == sorted(big)


def test_a_refused_character_is_escaped_not_refused(queue: SqsArchiveQueue) -> None:
    text = json.dumps({"id": "a\ufffeb"}, ensure_ascii=False)
    assert queue.send([text]) == {}
    assert json.loads(drain(queue)[0]) == {"id": "a\ufffeb"}


def result(mid: str, outcome: Outcome, envelope: Envelope | None, reason: str | None = None):
    return RecordResult(mid, outcome, envelope, reason=reason)


def test_every_parsed_envelope_but_a_malformed_one_gets_one_message() -> None:
    env = {n: Envelope.from_json(envelope_json(n, resource=f"r{n}")) for n in "abcdef"}
    messages = [Message(m, "{}", receive_count=3) for m in ("ma", "mb", "mc", "md", "me", "mf")]
    results = {
        "ma": result("ma", Outcome.APPLIED, env["a"]),
        "mb": result("mb", Outcome.DUPLICATE, env["b"], "already recorded as applied"),
        "mc": result("mc", Outcome.STALE, env["c"], "older"),
        "md": result("md", Outcome.RETRY, env["d"], "hook failed: " + "x" * 2000),
        "me": result("me", Outcome.MALFORMED, env["e"], "body sha256 mismatch"),
        "mf": result("mf", Outcome.MALFORMED, None, "not a valid envelope"),
    }
    out = archive_messages(messages, results, clock=lambda: NOW)
    assert [mid for mid, _ in out] == ["ma", "mb", "mc", "md"]
    parsed = [ArchiveMessage.from_json(text) for _, text in out]
    assert [p.envelope for p in parsed] == [env["a"], env["b"], env["c"], env["d"]]
    assert [p.outcome for p in parsed] == ["applied", "duplicate", "stale", "retry"]
    assert parsed[1].reason == "already recorded as applied" and len(parsed[3].reason or "") == 1000
    assert {(p.receive_count, p.archived_at) for p in parsed} == {
        (3, "2026-03-01T12:00:00.123456Z")
    }


def test_a_sender_that_raises_fails_every_archived_message() -> None:
    class Broken:
        def send(self, bodies: Any) -> dict[int, str]:
            raise TimeoutError

    env = Envelope.from_json(envelope_json("a"))
    messages = [Message("m1", "{}"), Message("m2", "{}")]
    results = {
        "m1": result("m1", Outcome.APPLIED, env),
        "m2": result("m2", Outcome.MALFORMED, None),
    }
    assert archive_batch(messages, results, Broken()) == {"m1": "archive send raised TimeoutError"}


@pytest.mark.parametrize(
    "body",
    ["not json", "{}", '{"envelope": {}, "outcome": "applied"}'],
)
def test_what_is_not_an_archive_message_is_refused_by_field_never_by_value(body: str) -> None:
    with pytest.raises(MalformedArchiveMessageError) as caught:
        ArchiveMessage.from_json(body)
    assert "not json" not in str(caught.value)


def test_an_unknown_outcome_is_refused() -> None:
    text = ArchiveMessage(
        envelope=Envelope.from_json(envelope_json("a")),
        outcome="applied",
        message_id="m",
        archived_at="x",
    ).to_json()
    with pytest.raises(MalformedArchiveMessageError, match="unknown outcome"):
        ArchiveMessage.from_json(text.replace('"applied"', '"won"'))


def test_a_reprocess_envelope_is_not_archived_again() -> None:
    """Its bytes came from the archive; a first-run copy in the same batch is archived."""
    from webhook_pipeline.envelope import Reprocess

    first = Envelope.from_json(envelope_json("a", resource="ra"))
    again = first.model_copy(update={"reprocess": Reprocess(generation=2, job="fix-1")})
    messages = [Message("m1", "{}"), Message("m2", "{}")]
    results = {
        "m1": result("m1", Outcome.REPROCESSED, again),
        "m2": result("m2", Outcome.APPLIED, first),
    }
    assert [mid for mid, _ in archive_messages(messages, results, clock=lambda: NOW)] == ["m2"]
