"""``GET /deliveries``: the delivery records of a time window, newest first, with filters and
keyset pages; ``?partial=rows`` returns only the rows (the live refresh of the newest page).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from webhook_pipeline_ops.console import params
from webhook_pipeline_ops.console.pages import backend_of, guarded, page
from webhook_pipeline_ops.console.params import BadRequestError, parse_time
from webhook_pipeline_ops.time_index import MAX_PAGE, RECORD_OUTCOMES, DeliveryFilters

#: Time windows offered on the deliveries page.
WINDOWS = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT_WINDOW = "24h"
DEFAULT_PAGE = 50


@guarded
def deliveries(request: Request) -> Response:
    """The deliveries page (or its rows alone with ``partial=rows``)."""
    q = request.query_params
    filters = _filters(q)
    newest, oldest, window = _window(q)
    limit = params.integer(q, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    cursor = params.text(q, "cursor", 2048)
    result = backend_of(request).deliveries(
        filters, newest=newest, oldest=oldest, limit=limit, cursor=cursor
    )
    custom = window == "custom"
    links = {
        **filters.active(),
        "window": window if not custom else "",
        "from": q.get("from", "") if custom else "",
        "to": q.get("to", "") if custom else "",
        "limit": str(limit) if limit != DEFAULT_PAGE else "",
    }
    context = {
        "page": "deliveries",
        "result": result,
        "filters": filters,
        "params": links,
        "window": window,
        "windows": list(WINDOWS),
        "outcomes": RECORD_OUTCOMES,
        "form": {k: q.get(k, "") for k in ("from", "to")},
        "newest": newest,
        "oldest": oldest,
        "live": cursor is None and not custom,
        "cursor": cursor,
    }
    if q.get("partial") == "rows":
        return page(request, "_delivery_rows.html", context)
    return page(request, "deliveries.html", context)


def _filters(q: Any) -> DeliveryFilters:
    return DeliveryFilters(
        source=params.text(q, "source", 64),
        event_type=params.text(q, "event_type", 256),
        outcome=params.choice(q, "outcome", RECORD_OUTCOMES),
        resource_key=params.text(q, "resource_key", 1024),
        delivery_id=params.text(q, "delivery_id", 256),
    )


def _window(q: Any) -> tuple[datetime, datetime, str]:
    """``(newest, oldest, window name)``: a preset back from now, or custom ``from``/``to``."""
    now = datetime.now(UTC)
    start, end = params.text(q, "from", 40), params.text(q, "to", 40)
    if start or end:
        newest = parse_time(end, "to") if end else now + timedelta(minutes=1)
        oldest = parse_time(start, "from") if start else newest - WINDOWS[DEFAULT_WINDOW]
        if oldest >= newest:
            raise BadRequestError("from must be earlier than to")
        if newest - oldest > timedelta(days=400):
            raise BadRequestError("the time window is at most 400 days")
        return newest, oldest, "custom"
    window = params.choice(q, "window", tuple(WINDOWS)) or DEFAULT_WINDOW
    # a minute ahead: a delivery received right now is in the newest page
    return now + timedelta(minutes=1), now - WINDOWS[window], window
