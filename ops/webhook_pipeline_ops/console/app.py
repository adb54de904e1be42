"""The console's application: its routes (:mod:`.routes`, one module per page), the static files
and :class:`~.security.ConsoleGuard` in front of them all.

Pages: ``/deliveries`` (filters, keyset pages, live refresh of the newest page), ``/delivery``,
``/resource``, ``/dlq`` (select, dry run, confirm, replay, progress), ``/health``, ``/archive``
and ``/archive/delivery`` (search the archive, one archived delivery).
JSON: ``POST /api/replay`` (the only state-changing request), ``GET /api/replay/{id}``,
``GET /api/health``. Every request first passes :class:`~.security.ConsoleGuard`.

The routes are module-level endpoints; what they need per application is in its state:
``backend`` (:class:`~.backend.Backend`), ``token`` (the per-run token put in every page) and
``sources`` (the known sources, for the filters).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from webhook_pipeline_ops.console.backend import Backend
from webhook_pipeline_ops.console.pages import HERE
from webhook_pipeline_ops.console.routes import archive, deliveries, delivery, dlq, health, resource
from webhook_pipeline_ops.console.security import TOKEN_HEADER, ConsoleGuard

#: Largest request body accepted (the replay request).
MAX_REQUEST_BYTES = 1024 * 1024


def index(request: Request) -> Response:
    """``/``: to the deliveries page."""
    return RedirectResponse("/deliveries", status_code=303)


def no_favicon(request: Request) -> Response:
    """``/favicon.ico``: none (204), so browsers stop asking."""
    return Response(status_code=204)


ROUTES: list[BaseRoute] = [
    Route("/", index),
    Route("/favicon.ico", no_favicon),
    Route("/deliveries", deliveries.deliveries),
    Route("/delivery", delivery.delivery),
    Route("/resource", resource.resource),
    Route("/dlq", dlq.dlq),
    Route("/health", health.health_page),
    Route("/archive", archive.archive),
    Route("/archive/delivery", archive.archive_delivery),
    Route("/api/replay", dlq.start_replay, methods=["POST"]),
    Route("/api/replay/{job_id}", dlq.replay_status),
    Route("/api/health", health.health_data),
    Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
]


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Start the backend (replay jobs, the local queue sampler) with the server, stop it after."""
    backend: Backend = app.state.backend
    backend.start()
    try:
        yield
    finally:
        await run_in_threadpool(backend.stop)


def create_app(backend: Backend, *, allowed_hosts: list[str], token: str) -> Any:
    """The ASGI application: :data:`ROUTES` behind :class:`ConsoleGuard`.

    Parameters
    ----------
    backend : Backend
        Data access (started and stopped with the application's lifespan).
    allowed_hosts : list[str]
        ``Host`` values the console answers to (``address:port``; the first is its origin).
    token : str
        The per-run token of state-changing requests (put in every page).
    """
    app = Starlette(routes=ROUTES, lifespan=lifespan, max_body_size=MAX_REQUEST_BYTES)
    app.state.backend = backend
    app.state.token = token
    app.state.sources = _known_sources()
    return ConsoleGuard(app, allowed_hosts, token)


def _known_sources() -> list[str]:
    from webhook_pipeline_ops.delivery_records import known_sources

    return known_sources() or []


__all__ = ["TOKEN_HEADER", "create_app"]
