"""``GET /archive``: search the archive with the filters of ``webhook-pipeline archive search``
(count, the first :data:`MAX_SHOWN` matches, the objects that could not be read);
``GET /archive/delivery?source=...&id=...&sha256=...&received_at=...``: one archived delivery,
its signed metadata, headers and body.

Both read through :func:`webhook_pipeline.archive.query.search` (records deduplicated per
source, delivery id and body SHA-256); the bucket is the stack output ``ArchiveBucketName``
(``--archive-bucket``, ``WEBHOOK_PIPELINE_ARCHIVE_BUCKET``). Without it the page says so.
"""

from __future__ import annotations

import functools
import json
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from webhook_pipeline.archive.query import ArchiveFilter
from webhook_pipeline.archive.record import OUTCOMES, ArchiveRecord, CorruptRecordError
from webhook_pipeline.archive.record import parse_time as parse_record_time

from webhook_pipeline_ops.console import params
from webhook_pipeline_ops.console.archive_form import FIELDS, archive_filter
from webhook_pipeline_ops.console.bodies import body_view, bytes_dump
from webhook_pipeline_ops.console.pages import backend_of, error_page, guarded, page
from webhook_pipeline_ops.console.params import BadRequestError

#: Matches listed on the page (the count is always of all of them).
MAX_SHOWN = 200
NO_BUCKET = (
    "No archive bucket is known: the stack has no ArchiveBucketName output (a stack deployed "
    "before the archive, or a local stack started before it). Give one with --archive-bucket "
    "or WEBHOOK_PIPELINE_ARCHIVE_BUCKET."
)
#: Fields of an archived delivery shown on its page, with their labels, in this order.
RECORD_FIELDS = (
    ("outcome", "outcome"),
    ("reason", "reason"),
    ("source", "source"),
    ("provider", "provider"),
    ("delivery_id", "delivery id"),
    ("event_type", "event type"),
    ("resource_key", "resource key"),
    ("sequence", "sequence"),
    ("received_at", "received at (ingest)"),
    ("archived_at", "archived at (processor)"),
    ("verified_with", "verified with"),
    ("body_sha256", "body SHA-256"),
    ("body_size", "body size (bytes)"),
    ("content_sha256", "content SHA-256"),
    ("gate", "ack path (gate)"),
    ("replay_count", "replay count"),
    ("message_id", "SQS message id"),
    ("receive_count", "receive count"),
    ("batch_index", "batch index"),
    ("batch_count", "batch count"),
)


@guarded
def archive(request: Request) -> Response:
    """The Archive page: the form, and with any filter submitted the count and the matches;
    400 with the form for a filter it cannot use (nothing read)."""
    q = request.query_params
    backend = backend_of(request)
    context: dict[str, Any] = {
        "page": "archive",
        "form": {name: q.get(name, "") for name in FIELDS},
        "outcomes": OUTCOMES,
        "max_shown": MAX_SHOWN,
        "bucket": backend.archive_bucket,
        "result": None,
    }
    if not backend.archive_bucket:
        return page(request, "archive.html", {**context, "missing": NO_BUCKET})
    sources = functools.cache(lambda: _sources(request))
    if not any(name in q for name in FIELDS):
        return page(request, "archive.html", {**context, "sources": sources()})
    try:
        flt = archive_filter(q, sources)
    except BadRequestError as exc:
        return page(request, "archive.html", {**context, "error": str(exc)}, 400)
    result = backend.archive_search(flt)
    context.update(
        sources=sources(),
        result=result,
        shown=result.records[:MAX_SHOWN],
        link=detail_query,
    )
    return page(request, "archive.html", context)


@guarded
def archive_delivery(request: Request) -> Response:
    """One archived delivery; 404 when the archive has none with that source, delivery id,
    body SHA-256 and receipt time."""
    q = request.query_params
    source = params.required(q, "source", 64)
    delivery_id = params.required(q, "id", 256)
    sha256 = params.required(q, "sha256", 64)
    received_text = params.required(q, "received_at", 40)
    try:
        received = parse_record_time(received_text)
    except ValueError:
        raise BadRequestError("received_at: a time such as 2026-03-01T12:00:00.000000Z") from None
    backend = backend_of(request)
    if not backend.archive_bucket:
        return error_page(request, 404, NO_BUCKET)
    flt = ArchiveFilter(
        sources=(source,),
        start=received,
        end=received + timedelta(microseconds=1),
        delivery_id_prefix=delivery_id,
    )
    result = backend.archive_search(flt)
    found = [r for r in result.records if r.delivery_id == delivery_id and r.body_sha256 == sha256]
    if not found:
        message = (
            f"no archived delivery of source {source!r} with delivery id {delivery_id!r}, body "
            f"SHA-256 {sha256} received at {received_text}"
        )
        if result.problems:
            message += f" ({len(result.problems)} archive lines of that hour could not be read)"
        return error_page(request, 404, message)
    record = found[0]
    context = {
        "page": "archive_delivery",
        "record": record,
        "fields": [(label, name, getattr(record, name)) for name, label in RECORD_FIELDS],
        "body": archived_body(record),
        "problems": result.problems,
        "bucket": backend.archive_bucket,
    }
    return page(request, "archive_delivery.html", context)


def detail_query(record: ArchiveRecord) -> dict[str, str]:
    """The query parameters of ``record``'s page."""
    return {
        "source": record.source,
        "id": record.delivery_id,
        "sha256": record.body_sha256,
        "received_at": record.received_at,
    }


def archived_body(record: ArchiveRecord) -> dict[str, Any]:
    """How the page shows ``record``'s body: ``view`` (a :class:`~..bodies.BodyView`, credential
    fields redacted) and ``pretty`` (indented JSON, when it is JSON) for UTF-8 text, ``dump``
    (:class:`~..bodies.BytesDump`) for other bytes; ``problem`` when the body does not match its
    SHA-256 (shown anyway)."""
    problem = None
    try:
        raw = record.body_bytes()
    except (CorruptRecordError, UnicodeEncodeError) as exc:
        problem = str(exc)
        raw = record.body.encode("utf-8", "surrogatepass") if record.body is not None else b""
    if record.body is None:
        return {"view": None, "pretty": None, "dump": bytes_dump(raw), "problem": problem}
    view = body_view(raw, "the archive record", record.source)
    pretty = None
    if view.tree is not None:
        pretty = json.dumps(json.loads(view.text), indent=2, ensure_ascii=False)
    return {"view": view, "pretty": pretty, "dump": None, "problem": problem}


def _sources(request: Request) -> list[str]:
    """The configured sources and those with an archive partition."""
    configured: list[str] = request.app.state.sources
    return sorted(set(configured) | set(backend_of(request).archive_sources()))
