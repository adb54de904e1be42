"""The archive write path at its limits, found by review: an archive message over SQS's
262,144 bytes for a delivery the ingest accepted (its body reaches the archive as a claim check
instead of failing the record forever), ... Every handler the real one, AWS in-process moto."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from webhook_pipeline.adapters.sqs import BATCH_MAX_BYTES, entry_size
from webhook_pipeline.archive.message import ArchiveMessage
from webhook_pipeline.envelope import BodyPointer, Envelope
from webhook_pipeline.errors import PayloadUnavailableError
from webhook_pipeline.process.archiving import archive_batch, spill_key
from webhook_pipeline.process.model import Message, Outcome, RecordResult
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    payload,
    signed_delivery,
)

from tests.helpers import envelope_json
from tests.integration.archive_harness import ArchivePipeline, build_archive_pipeline
from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()
#: The largest inline threshold the settings allow (``MAX_INLINE_BODY_BYTES``).
INLINE_MAX = 180_000


@pytest.fixture
def arc(make_ingest: Callable[..., IngestHarness], monkeypatch: pytest.MonkeyPatch) -> Any:
    ingest = make_ingest(SOURCES_CATALOGUE="true", INLINE_BODY_MAX_BYTES=str(INLINE_MAX))
    return build_archive_pipeline(ingest, monkeypatch)


def send_inline_max(
    arc: ArchivePipeline, delivery_id: str, accents: int
) -> tuple[bytes, dict[str, Any]]:
    """A Stripe delivery of exactly :data:`INLINE_MAX` bytes (inline), whose event type holds
    U+FFFE (SQS refuses it raw, so the whole envelope is sent with ``\\uXXXX`` escapes) and
    whose User-Agent is ``accents`` times "é" (2 UTF-8 bytes, 6 once escaped; 7,200 bytes stay
    under API Gateway's 10 KiB of headers). Returns the body and its main-queue message."""
    body, _ = payload(SOURCES["stripe"], delivery_id=delivery_id, resource="cus_big")
    document = json.loads(body)
    document["type"] = "customer.updated\ufffe"
    document["padding"] = ""
    document["padding"] = "x" * (INLINE_MAX - len(json.dumps(document).encode()))
    raw = json.dumps(document).encode()
    assert len(raw) == INLINE_MAX
    headers = {"user-agent": "\u00e9" * accents}
    sent = signed_delivery(SOURCES["stripe"], body=raw, extra_headers=headers)
    response = arc.ingest.invoke(http_api_event(sent))
    assert response["statusCode"] == 202, response
    (message,) = [m for m in arc.ingest.messages() if f'"{delivery_id}"' in m["Body"]]
    return raw, message


def main_entry_size(message: dict[str, Any]) -> int:
    """The bytes SQS counted for the ingest's message (body and attributes)."""
    return entry_size(message["Body"], message.get("MessageAttributes") or {})


def test_an_archive_message_over_the_sqs_limit_carries_its_body_as_a_claim_check(
    arc: ArchivePipeline,
) -> None:
    # Given a delivery the ingest accepted whose envelope is a few bytes under SQS's limit
    # (calibrated: one "é" adds 6 bytes), so its archive message (the envelope and the verdict)
    # is over it
    _, probe = send_inline_max(arc, "evt_cal", 100)
    accents = 100 + (BATCH_MAX_BYTES - 30 - main_entry_size(probe)) // 6
    raw, message = send_inline_max(arc, "evt_big", accents)
    assert BATCH_MAX_BYTES - 40 < main_entry_size(message) <= BATCH_MAX_BYTES
    # When the processor applies it, its archive message is accepted (not failed forever: every
    # redelivery would fail the same way, then the DLQ, the delivery applied and never archived)
    assert arc.pipeline.process([message]) == []
    recorded = {i["delivery_id"]["S"]: i for i in arc.pipeline.scan() if "delivery_id" in i}
    assert recorded["evt_big"]["outcome"]["S"] == "applied"
    # Then the archive holds it with its exact bytes, its body read from the claim check
    (queued,) = arc.queued()
    sent = json.loads(queued["Body"])["envelope"]
    envelope = Envelope.model_validate(sent)
    assert "body_b64" not in sent and sent["body_ref"]["key"] == spill_key(envelope)
    arc.sqs.change_message_visibility(
        QueueUrl=arc.queue_url, ReceiptHandle=queued["ReceiptHandle"], VisibilityTimeout=0
    )
    assert arc.archive() == []
    (record,) = arc.search(sources=("stripe",)).records
    assert (record.delivery_id, record.outcome) == ("evt_big", "applied")
    assert record.body_bytes() == raw and record.event_type == "customer.updated\ufffe"
    assert record.headers["user-agent"] == "\u00e9" * accents


class TightQueue:
    """An archive sender whose limit is ``limit`` bytes (the sent bodies kept)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.sent = limit, []

    def fits(self, body: str) -> bool:
        return len(body.encode()) <= self.limit

    def send(self, bodies: Any) -> dict[int, str]:
        self.sent.extend(bodies)
        return {i: "over" for i, b in enumerate(bodies) if not self.fits(b)}


class Spill:
    def __init__(self, down: bool = False) -> None:
        self.down, self.put_keys = down, []

    def put(self, key: str, body: bytes) -> BodyPointer:
        if self.down:
            raise PayloadUnavailableError("claim-check put failed: SlowDown")
        self.put_keys.append((key, body))
        return BodyPointer(bucket="payloads", key=key)


def test_only_a_message_over_the_limit_is_spilled_and_a_failed_spill_fails_it_alone() -> None:
    small, big = b'{"id": "small"}', b'{"id": "big", "pad": "' + b"x" * 3000 + b'"}'
    envs = {
        mid: Envelope.from_json(envelope_json(mid, resource=mid, body=raw))
        for mid, raw in (("m-small", small), ("m-big", big))
    }
    messages = [Message(mid, "{}") for mid in envs]
    results = {mid: RecordResult(mid, Outcome.APPLIED, env) for mid, env in envs.items()}
    queue, spill = TightQueue(2000), Spill()
    assert archive_batch(messages, results, queue, spill=spill) == {}
    assert spill.put_keys == [(spill_key(envs["m-big"]), big)]
    sent = [ArchiveMessage.from_json(b).envelope for b in queue.sent]
    assert [e.body_b64 is None for e in sent] == [False, True]
    assert sent[1].body_ref == BodyPointer(bucket="payloads", key=spill_key(envs["m-big"]))
    assert sent[1].model_dump(exclude={"body_b64", "body_ref"}) == envs["m-big"].model_dump(
        exclude={"body_b64", "body_ref"}
    )
    # S3 refusing the body fails that message only (retried), the small one is sent
    queue = TightQueue(2000)
    failed = archive_batch(messages, results, queue, spill=Spill(down=True))
    assert list(failed) == ["m-big"] and "SlowDown" in failed["m-big"]
    assert [ArchiveMessage.from_json(b).envelope.delivery_id for b in queue.sent] == ["m-small"]
