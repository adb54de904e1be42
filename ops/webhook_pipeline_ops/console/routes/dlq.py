"""The dead-letter queue and its replay: ``GET /dlq`` (the messages peeked, to select),
``POST /api/replay`` (start a dry run or a replay of the selection in the background; the only
state-changing request) and ``GET /api/replay/{job_id}`` (its progress).

The page's script runs the flow: select, dry run (``dry_run: true``: what would be replayed),
confirm, replay (``dry_run: false``) at a rate, then poll the progress. The replay itself is the
CLI's (:mod:`webhook_pipeline_ops.console.jobs`); one runs at a time (409 otherwise).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from webhook_pipeline.errors import InvalidReplayRequestError

from webhook_pipeline_ops.console.bodies import body_view
from webhook_pipeline_ops.console.jobs import BusyError
from webhook_pipeline_ops.console.pages import backend_of, guarded, page
from webhook_pipeline_ops.console.params import BadRequestError

#: DLQ page: messages peeked.
DLQ_PEEK = 50
ReplayInput = tuple[list[tuple[str, str]], bool, float | None, int | None]


@guarded
def dlq(request: Request) -> Response:
    """The DLQ page: the first :data:`DLQ_PEEK` messages (inline bodies shown safely), the depth."""
    backend = backend_of(request)
    rows = backend.dlq_messages(DLQ_PEEK)
    depth = backend.dlq_depth()
    for row in rows:
        payload = row.get("payload")
        if isinstance(payload, str) and not payload.startswith("s3://"):
            row["body_view"] = body_view(
                payload.encode(), "envelope (inline body)", row.get("source")
            )
    return page(
        request,
        "dlq.html",
        {"page": "dlq", "rows": rows, "depth": depth, "peeked": DLQ_PEEK},
    )


async def start_replay(request: Request) -> Response:
    """Start a replay job: 202 ``{"job": snapshot}``; 400 for a body it cannot use, 409 while
    another replay runs.

    The body: ``{"deliveries": [[source, delivery id], ...], "dry_run": bool,
    "rate_per_second": number | null, "max_messages": int | null}``; without ``max_messages``
    the job reads at most ``2 * DLQ depth + 10`` messages (within 100..100,000).
    """
    try:
        doc = await request.json()
    except ValueError:
        return JSONResponse({"error": "the body must be JSON"}, status_code=400)
    try:
        replay_input = _replay_input(doc)
    except BadRequestError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    try:
        snapshot = await run_in_threadpool(_start, request, replay_input)
    except BusyError as exc:
        return JSONResponse({"error": str(exc)}, status_code=409)
    except (InvalidReplayRequestError, ValidationError) as exc:
        return JSONResponse({"error": _validation_message(exc)}, status_code=400)
    return JSONResponse({"job": snapshot}, status_code=202)


def replay_status(request: Request) -> Response:
    """``{"job": snapshot}`` of a replay job, 404 when unknown."""
    job = backend_of(request).jobs.get(request.path_params["job_id"])
    if job is None:
        return JSONResponse({"error": "no such replay"}, status_code=404)
    return JSONResponse({"job": job.snapshot()})


def _start(request: Request, replay_input: ReplayInput) -> dict[str, Any]:
    selection, dry_run, rate, max_messages = replay_input
    backend = backend_of(request)
    count = max_messages
    if count is None:
        depth = backend.dlq_depth() or 0
        count = min(100_000, max(100, 2 * depth + 10))
    return backend.jobs.start(
        selection, dry_run=dry_run, rate_per_second=rate, max_messages=count
    ).snapshot()


def _replay_input(doc: Any) -> ReplayInput:
    if not isinstance(doc, dict):
        raise BadRequestError("the body must be a JSON object")
    unknown = set(doc) - {"deliveries", "dry_run", "rate_per_second", "max_messages"}
    if unknown:
        raise BadRequestError(f"unknown keys: {', '.join(sorted(unknown))}")
    selection = _selection(doc.get("deliveries"))
    dry_run = doc.get("dry_run")
    if not isinstance(dry_run, bool):
        raise BadRequestError("dry_run: true or false")
    rate = doc.get("rate_per_second")
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate)
    ):
        raise BadRequestError("rate_per_second: a number (sends per second) or null")
    max_messages = doc.get("max_messages")
    if max_messages is not None and (
        isinstance(max_messages, bool) or not isinstance(max_messages, int)
    ):
        raise BadRequestError("max_messages: a whole number or null")
    return selection, dry_run, None if rate is None else float(rate), max_messages


def _selection(pairs: Any) -> list[tuple[str, str]]:
    if not isinstance(pairs, list) or not pairs:
        raise BadRequestError("deliveries: select at least one delivery")
    selection: list[tuple[str, str]] = []
    for pair in pairs:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(part, str) and part for part in pair)
        ):
            raise BadRequestError("deliveries: a list of [source, delivery id] pairs")
        selection.append((pair[0], pair[1]))
    return selection


def _validation_message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
    return str(exc)
