"""``GET /delivery?source=...&id=...``: one delivery record, its fields labelled, and its body
(inline or from the payload bucket, shown safely by :mod:`webhook_pipeline_ops.console.bodies`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from webhook_pipeline_ops.console import params
from webhook_pipeline_ops.console.backend import describe_error
from webhook_pipeline_ops.console.pages import backend_of, error_page, guarded, page

#: Fields of a delivery record shown first, with their labels (the rest follow as they are).
RECORD_FIELDS = (
    ("outcome", "outcome"),
    ("source", "source"),
    ("delivery_id", "delivery id"),
    ("event_type", "event type"),
    ("resource_key", "resource key"),
    ("sequence", "sequence"),
    ("watermark_at_receipt", "resource watermark at receipt"),
    ("received_at", "received at (ingest)"),
    ("recorded_at", "recorded at (processor)"),
    ("body_size", "body size (bytes)"),
    ("body_sha256", "body SHA-256"),
    ("hook_state", "hook state"),
    ("replay_count", "replay count"),
    ("gate", "ack path (gate)"),
    ("duplicate_body_mismatches", "duplicates with a different body"),
    ("message_id", "SQS message id"),
    ("expires_at", "record expires at"),
)
HIDDEN_FIELDS = frozenset({"pk", "sk", "type", "received_shard", "received_key"})


@guarded
def delivery(request: Request) -> Response:
    """The delivery page; 404 when no record has that source and delivery id."""
    q = request.query_params
    source = params.required(q, "source", 64)
    delivery_id = params.required(q, "id", 256)
    backend = backend_of(request)
    record = backend.delivery(source, delivery_id)
    if record is None:
        from webhook_pipeline_ops.delivery_records import unknown_source_hint

        message = (
            f"no delivery recorded for source {source!r}, delivery id {delivery_id!r}"
            + unknown_source_hint(source)
        )
        return error_page(request, 404, message)
    body_error = None
    try:
        body = backend.delivery_body(record)
    except Exception as exc:  # the record is still worth showing
        body, body_error = None, describe_error(exc)
    known = [(label, name, record[name]) for name, label in RECORD_FIELDS if name in record]
    listed = {name for _, name, _ in known} | HIDDEN_FIELDS
    others = sorted((k, v) for k, v in record.items() if k not in listed)
    context = {
        "page": "delivery",
        "record": record,
        "fields": known,
        "others": others,
        "body": body,
        "body_error": body_error,
        "bucket": backend.bucket,
        "delay_ms": _delay_ms(record.get("received_at"), record.get("recorded_at")),
    }
    return page(request, "delivery.html", context)


def _delay_ms(received: Any, recorded: Any) -> float | None:
    try:
        start = datetime.fromisoformat(str(received))
        end = datetime.fromisoformat(str(recorded))
    except ValueError:
        return None
    return round((end - start).total_seconds() * 1000, 1)
