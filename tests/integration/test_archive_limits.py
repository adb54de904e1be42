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
from webhook_pipeline.errors import MalformedEnvelopeError, PayloadUnavailableError
from webhook_pipeline.process.archiving import archive_batch, archive_messages, spill_key
from webhook_pipeline.process.model import Message, Outcome, RecordResult
from webhook_pipeline.redaction import CREDENTIAL_HEADERS, REDACTED
from webhook_pipeline_ops.simulator.deliveries import (
    dev_secret_value,
    example_sources,
    http_api_event,
    payload,
    signed_delivery,
)

from tests.helpers import FakeContext, envelope_json
from tests.integration.archive_harness import ArchivePipeline, build_archive_pipeline, sqs_event
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


def redeliver(arc: ArchivePipeline, messages: list[dict[str, Any]]) -> list[str]:
    """Hand ``messages`` to the processor again as their second receive; the failed ids."""
    event = sqs_event(messages, receive_count=2)
    response = arc.pipeline.processor.lambda_handler(event, FakeContext("ProcessorFunction"))
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


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


@pytest.fixture
def arc_all(make_ingest: Callable[..., IngestHarness], monkeypatch: pytest.MonkeyPatch) -> Any:
    return build_archive_pipeline(make_ingest(SOURCES_CATALOGUE="true"), monkeypatch)


def credential_values(source: str, headers: dict[str, str]) -> set[str]:
    """What must never reach the archive from a signed request: the source's secret (and the
    verify token of a handshake), and the value of its signature header and every credential
    header (a token scheme's header is the secret itself, Basic auth its encoding)."""
    provider = SOURCES[source].provider
    values = {provider.dev_secret, dev_secret_value(SOURCES[source])}
    names = {provider.signature_header.lower(), *CREDENTIAL_HEADERS}
    values |= {v for k, v in headers.items() if k.lower() in names}
    return {v for v in values if len(v) >= 8}


def test_no_provider_leaves_its_secret_or_signature_in_the_archive(
    arc_all: ArchivePipeline,
) -> None:
    # Given one signed delivery of every example source, each accepted by the ingest
    leaked: dict[str, set[str]] = {}
    for n, name in enumerate(sorted(SOURCES)):
        sent = signed_delivery(SOURCES[name], resource=f"res_{n}", sequence=n + 1)
        response = arc_all.ingest.invoke(http_api_event(sent))
        if response["statusCode"] not in (200, 202):  # Discord answers its interaction 200
            continue
        leaked[name] = credential_values(name, sent.headers)
    assert len(leaked) >= 30, sorted(leaked)
    assert arc_all.pipeline.process() == []
    assert arc_all.archive() == []
    records = arc_all.search().records
    assert {r.source for r in records} == set(leaked)
    # Then no secret and no signature value is in any record's metadata or headers
    for record in records:
        shown = json.dumps(record.model_dump(exclude={"body", "body_base64"}))
        assert {v for v in leaked[record.source] if v in shown} == set(), record.source
        name = SOURCES[record.source].provider.signature_header.lower()
        assert record.signed_headers.get(name, REDACTED) == REDACTED, record.source
    # And a secret is in an archived object only where the provider puts it in the signed body
    # (Google Ads' google_key, Microsoft Graph's clientState: the exact bytes are the archive's
    # promise; the console redacts them when it shows a body)
    raw = arc_all.raw_objects().decode("utf-8")
    in_objects = {name for name, values in leaked.items() if any(v in raw for v in values)}
    assert in_objects == {"google-ads", "microsoft-graph"}
    assert all(SOURCES[n].provider.credential_fields for n in in_objects)


def test_no_request_can_make_a_reprocess_envelope(arc_all: ArchivePipeline) -> None:
    # A sender putting a reprocess field in its body, a header and the query string
    body, _ = payload(SOURCES["stripe"], delivery_id="evt_rp", resource="cus_rp")
    document = json.loads(body) | {"reprocess": {"generation": 7, "job": "sender"}}
    forged = {"reprocess": '{"generation": 7, "job": "sender"}', "x-reprocess": "7"}
    sent = signed_delivery(
        SOURCES["stripe"], body=json.dumps(document).encode(), extra_headers=forged
    )
    event = http_api_event(sent)
    event["rawQueryString"] = "reprocess=7&generation=7"
    event["queryStringParameters"] = {"reprocess": "7", "generation": "7"}
    assert arc_all.ingest.invoke(event)["statusCode"] == 202
    (message,) = arc_all.ingest.messages()
    assert "reprocess" not in json.loads(message["Body"])
    assert Envelope.from_json(message["Body"]).reprocess is None
    # And an envelope that grew any other field is refused, not read with it ignored
    grown = json.loads(message["Body"]) | {"reprocess_job": "sender"}
    with pytest.raises(MalformedEnvelopeError, match="extra_forbidden"):
        Envelope.from_json(json.dumps(grown))


def test_every_member_of_a_coalesced_group_is_archived_with_its_own_outcome(
    arc_all: ArchivePipeline,
) -> None:
    def send(delivery_id: str, resource: str, sequence: int) -> None:
        sent = signed_delivery(
            SOURCES["stripe"], delivery_id=delivery_id, resource=resource, sequence=sequence
        )
        assert arc_all.ingest.invoke(http_api_event(sent))["statusCode"] == 202

    # Given cus_g at watermark 3, then one batch with three events of cus_g (the group write)
    # at 1, 4 and 2, a second copy of the one at 4 (another message: a bypassed gate) and an
    # event of cus_h
    send("evt_g0", "cus_g", 3)
    first = arc_all.ingest.messages()
    assert arc_all.pipeline.process(first) == []
    for n, seq in ((1, 1), (2, 4), (3, 2)):
        send(f"evt_g{n}", "cus_g", seq)
    send("evt_h", "cus_h", 1)
    messages = arc_all.ingest.messages()
    copy = next(m for m in messages if '"evt_g2"' in m["Body"]) | {"MessageId": "copy-of-g2"}
    # When the processor takes them in one batch and the archiver writes the archive queue
    assert arc_all.pipeline.process([*messages, copy]) == []
    assert arc_all.archive() == []
    # Then every message is one archived line, each with the outcome of its own record
    lines = arc_all.lines()
    sent = [*first, *messages, copy]
    assert sorted(r.message_id for r in lines) == sorted(m["MessageId"] for m in sent)
    items = [i for i in arc_all.pipeline.scan() if "delivery_id" in i]
    stored = {i["delivery_id"]["S"]: i["outcome"]["S"] for i in items}
    by_message = {r.message_id: r for r in lines}
    for m in [*first, *messages]:
        record = by_message[m["MessageId"]]
        assert record.outcome == stored[record.delivery_id], record.delivery_id
    assert by_message["copy-of-g2"].outcome == "duplicate"
    assert stored == {
        "evt_g0": "applied",
        "evt_g1": "stale",
        "evt_g2": "applied",
        "evt_g3": "stale",
        "evt_h": "applied",
    }
    assert sorted(r.delivery_id for r in arc_all.search().records) == sorted(stored)


def test_a_delivery_archived_only_by_its_redelivery_is_found_by_its_recorded_verdict(
    arc_all: ArchivePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    def send(delivery_id: str, sequence: int) -> dict[str, Any]:
        sent = signed_delivery(
            SOURCES["stripe"], delivery_id=delivery_id, resource="cus_1", sequence=sequence
        )
        assert arc_all.ingest.invoke(http_api_event(sent))["statusCode"] == 202
        (message,) = arc_all.ingest.messages()
        return message

    # Given cus_1 at 5 (evt_n, archived), then evt_a (6: applied) and evt_s (1: stale) in one
    # batch whose processor stops after the records are written, before the archive send
    assert arc_all.pipeline.process([send("evt_n", 5)]) == []
    batch = [send("evt_a", 6), send("evt_s", 1)]

    def timed_out(*_: Any, **__: Any) -> dict[str, str]:
        raise TimeoutError("the function timed out")

    with monkeypatch.context() as patch:
        patch.setattr(arc_all.pipeline.processor, "archive_batch", timed_out)
        with pytest.raises(TimeoutError):
            arc_all.pipeline.process(batch)
    # When SQS redelivers the batch (duplicates now) and the archiver writes the archive queue
    assert redeliver(arc_all, batch) == []
    assert arc_all.archive() == []
    # Then each attempt's line says what the attempt did (a duplicate) and the verdict recorded
    # for the delivery; a search by outcome finds each delivery by that verdict
    lines = {r.delivery_id: r for r in arc_all.lines()}
    assert (lines["evt_a"].outcome, lines["evt_a"].recorded_outcome) == ("duplicate", "applied")
    assert (lines["evt_s"].outcome, lines["evt_s"].recorded_outcome) == ("duplicate", "stale")
    assert lines["evt_n"].recorded_outcome is None
    applied = arc_all.search(outcomes=("applied",)).records
    assert sorted(r.delivery_id for r in applied) == ["evt_a", "evt_n"]
    assert [r.delivery_id for r in arc_all.search(outcomes=("stale",)).records] == ["evt_s"]
    assert arc_all.search(outcomes=("duplicate",)).records == []


def test_the_recorded_verdict_is_carried_only_by_a_copy_with_the_recorded_bytes() -> None:
    # A redelivered copy (same bytes), a copy with other bytes (body mismatch), a copy of a
    # provider with volatile fields (its raw bytes may differ: another archive identity), an
    # applied first run
    plain = Envelope.from_json(envelope_json("evt_1"))
    volatile = Envelope.from_json(envelope_json("evt_2", content_sha256="ab" * 32))
    results = {
        "same": RecordResult("same", Outcome.DUPLICATE, plain, recorded_outcome=Outcome.APPLIED),
        "other": RecordResult(
            "other", Outcome.DUPLICATE, plain, body_mismatch=True, recorded_outcome=Outcome.APPLIED
        ),
        "vol": RecordResult("vol", Outcome.DUPLICATE, volatile, recorded_outcome=Outcome.STALE),
        "first": RecordResult("first", Outcome.APPLIED, plain),
    }
    messages = [Message(mid, "{}") for mid in results]
    sent = {
        mid: ArchiveMessage.from_json(text) for mid, text in archive_messages(messages, results)
    }
    assert {mid: m.recorded_outcome for mid, m in sent.items()} == {
        "same": "applied",
        "other": None,
        "vol": None,
        "first": None,
    }
