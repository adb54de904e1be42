"""The archive's sample events of ``events/`` (written by ``webhook-pipeline events`` with the
ingest ones; a test compares the committed files with what this module builds).

- ``archiver-batch.json``: an SQS event of the archive queue for ``sam local invoke
  ArchiverFunction``. Its bodies are the archive messages the processor's own code
  (:func:`webhook_pipeline.process.archiving.archive_messages`) makes of :data:`SAMPLES`: two
  sources, one body that is not UTF-8 (archived as ``body_base64``), and ``stripe`` deliveries
  on both sides of 10:00 UTC, so the archiver writes three objects (``stripe`` hours 09 and 10,
  ``generic-hmac`` hour 09).
- ``replay-from-archive-dry-run.json``: ``{"from_archive": {...}}`` for ``sam local invoke
  ReplayFunction``: a reprocess dry run over :data:`WINDOW`, which holds every sample.

Every value is fixed (times, ids), so the files never change between regenerations.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webhook_pipeline.archive.record import format_time
from webhook_pipeline.envelope import Envelope, sha256_hex
from webhook_pipeline.fields import body_b64
from webhook_pipeline.process.archiving import archive_messages
from webhook_pipeline.process.model import Message, Outcome, RecordResult

__all__ = [
    "ARCHIVED_AT",
    "ARCHIVER_BATCH",
    "REPLAY_DRY_RUN",
    "SAMPLES",
    "WINDOW",
    "ArchiveSample",
    "build_archive_events",
]

ARCHIVER_BATCH = "archiver-batch.json"
REPLAY_DRY_RUN = "replay-from-archive-dry-run.json"
#: When the processor sent the samples' archive messages (UTC).
ARCHIVED_AT = datetime(2026, 1, 1, 10, 0, 5, tzinfo=UTC)
#: The receipt-time window of the dry run, ``[start, end)``: both hours of the samples.
WINDOW = (datetime(2026, 1, 1, 9, 0, tzinfo=UTC), datetime(2026, 1, 1, 11, 0, tzinfo=UTC))
_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:webhook-pipeline-ArchiveQueue"
_STRIPE_HEADERS = {
    "content-type": "application/json; charset=utf-8",
    "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
}


@dataclass(frozen=True)
class ArchiveSample:
    """One processed delivery of the batch.

    Attributes
    ----------
    envelope : Envelope
        As ingest sent it (body inline).
    body : bytes
        Its raw body bytes.
    outcome : Outcome
        What processing it ended in.
    reason : str | None
        Why it was stale (no body content).
    """

    envelope: Envelope
    body: bytes
    outcome: Outcome = Outcome.APPLIED
    reason: str | None = None


def _sample(
    source: str,
    delivery_id: str,
    at: datetime,
    body: bytes,
    headers: dict[str, str],
    outcome: Outcome = Outcome.APPLIED,
    reason: str | None = None,
) -> ArchiveSample:
    """The sample of a delivery received ``at`` (its sequence: the Unix second it was sent)."""
    fields = json.loads(body) if headers["content-type"].startswith("application/json") else {}
    envelope = Envelope(
        source=source,
        delivery_id=delivery_id,
        received_at=at,
        event_type=fields.get("type", "contact.updated"),
        resource_key=fields.get("data", {}).get("object", {}).get("id", "contact_7"),
        sequence=fields.get("created", int(at.timestamp())),
        headers=headers,
        body_b64=body_b64(body),
        body_size=len(body),
        body_sha256=sha256_hex(body),
        provider=source,
        verified_with="current",
    )
    return ArchiveSample(envelope, body, outcome, reason)


def _stripe_body(delivery_id: str, created: datetime) -> bytes:
    event = {
        "id": delivery_id,
        "object": "event",
        "type": "customer.updated",
        "created": int(created.timestamp()),
        "data": {"object": {"id": "cus_Archive1", "object": "customer", "name": "Zoë Ångström"}},
    }
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()


def _utc(hour: int, minute: int, second: int, micro: int = 0) -> datetime:
    return datetime(2026, 1, 1, hour, minute, second, micro, tzinfo=UTC)


#: The deliveries of the batch, in its order: a ``stripe`` delivery received at 09:59:58.5
#: (applied), a ``generic-hmac`` form body in ISO-8859-1 (not UTF-8) at 09:59:59.25 (applied), a
#: ``stripe`` delivery at 10:00:00.125 (applied) and one sent at 09:30 that arrived at 10:00:01,
#: after it (stale).
SAMPLES: tuple[ArchiveSample, ...] = (
    _sample(
        "stripe",
        "evt_1ArchiveSample0959",
        _utc(9, 59, 58, 500_000),
        _stripe_body("evt_1ArchiveSample0959", _utc(9, 59, 58)),
        _STRIPE_HEADERS,
    ),
    _sample(
        "generic-hmac",
        "gh-archive-sample-0959",
        _utc(9, 59, 59, 250_000),
        "name=Andr\u00e9&city=K\u00f6ln&note=\u00a7 5".encode("iso-8859-1"),
        {"content-type": "application/x-www-form-urlencoded; charset=iso-8859-1"},
    ),
    _sample(
        "stripe",
        "evt_1ArchiveSample1000",
        _utc(10, 0, 0, 125_000),
        _stripe_body("evt_1ArchiveSample1000", _utc(10, 0, 0)),
        _STRIPE_HEADERS,
    ),
    _sample(
        "stripe",
        "evt_1ArchiveSampleLate",
        _utc(10, 0, 1),
        _stripe_body("evt_1ArchiveSampleLate", _utc(9, 30, 0)),
        _STRIPE_HEADERS,
        Outcome.STALE,
        "sequence 1767259800 is older than the resource's watermark 1767261600",
    ),
)


def _message_id(salt: str) -> str:
    return str(uuid.UUID(hashlib.sha256(salt.encode()).hexdigest()[:32], version=4))


def _sqs_record(main_message_id: str, body: str) -> dict[str, Any]:
    message_id = _message_id(f"archive-queue:{main_message_id}")
    sent = int(ARCHIVED_AT.timestamp() * 1000)
    return {
        "messageId": message_id,
        "receiptHandle": f"AQEB{message_id.replace('-', '')}==",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(sent),
            "SenderId": "AIDAEXAMPLEEXAMPLE",
            "ApproximateFirstReceiveTimestamp": str(sent + 5),
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": _QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def archiver_event(samples: Sequence[ArchiveSample] = SAMPLES) -> dict[str, Any]:
    """The archive queue's SQS event holding the archive message of each of ``samples``, as
    the processor builds it after processing them (one main-queue message each)."""
    messages = [
        Message(_message_id(f"main-queue:{s.envelope.delivery_id}"), s.envelope.to_json())
        for s in samples
    ]
    results = {
        m.message_id: RecordResult(m.message_id, s.outcome, s.envelope, s.reason)
        for m, s in zip(messages, samples, strict=True)
    }
    built = archive_messages(messages, results, clock=lambda: ARCHIVED_AT)
    return {"Records": [_sqs_record(mid, body) for mid, body in built]}


def replay_dry_run_event() -> dict[str, Any]:
    """``{"from_archive": ...}``: a reprocess dry run over :data:`WINDOW`."""
    start, end = WINDOW
    return {
        "from_archive": {
            "mode": "reprocess",
            "start": format_time(start)[:19] + "Z",
            "end": format_time(end)[:19] + "Z",
            "dry_run": True,
        }
    }


def build_archive_events() -> dict[str, dict[str, Any]]:
    """``{file name: event}`` of the archive's sample events (module docstring)."""
    return {ARCHIVER_BATCH: archiver_event(), REPLAY_DRY_RUN: replay_dry_run_event()}
