"""``GET /resource?source=...&key=...&days=...``: one resource's watermark and its deliveries of
the last days in sequence order.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from starlette.requests import Request
from starlette.responses import Response

from webhook_pipeline_ops.console import params
from webhook_pipeline_ops.console.pages import backend_of, guarded, page

#: Resource history: windows (days) offered, default, most records listed.
RESOURCE_DAYS = (1, 7, 30)
DEFAULT_RESOURCE_DAYS = 7
MAX_HISTORY = 1_000


@guarded
def resource(request: Request) -> Response:
    """The resource page."""
    q = request.query_params
    source = params.required(q, "source", 64)
    key = params.required(q, "key", 1024)
    days = params.integer(q, "days", DEFAULT_RESOURCE_DAYS, 1, 366)
    now = datetime.now(UTC)
    backend = backend_of(request)
    item = backend.resource(source, key)
    history, truncated, stats = backend.resource_history(
        source,
        key,
        newest=now + timedelta(minutes=1),
        oldest=now - timedelta(days=days),
        max_items=MAX_HISTORY,
    )
    context = {
        "page": "resource",
        "source": source,
        "key": key,
        "item": item,
        "watermark": item.get("watermark") if item else None,
        "history": history,
        "truncated": truncated,
        "stats": stats,
        "days": days,
        "day_choices": RESOURCE_DAYS,
        "max_history": MAX_HISTORY,
    }
    return page(request, "resource.html", context)
