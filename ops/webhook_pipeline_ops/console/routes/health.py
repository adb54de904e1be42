"""``GET /health`` (the page; its script draws the charts) and ``GET /api/health`` (queue
counters, metric series and alarms as JSON, from :mod:`webhook_pipeline_ops.console.health`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from webhook_pipeline_ops.console.pages import backend_of, guarded, page


@guarded
def health_page(request: Request) -> Response:
    """The health page."""
    return page(request, "health.html", {"page": "health"})


def health_data(request: Request) -> Response:
    """The health page's data (:meth:`~webhook_pipeline_ops.console.backend.Backend.health`)."""
    return JSONResponse(backend_of(request).health())
