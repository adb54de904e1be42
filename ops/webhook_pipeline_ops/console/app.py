"""The console's routes: server-rendered pages (Jinja2, autoescaped) and a few JSON endpoints.

Pages: ``/deliveries`` (filters, keyset pages, live refresh of the newest page), ``/delivery``,
``/resource``, ``/dlq`` (select, dry run, confirm, replay, progress), ``/health``.
JSON: ``POST /api/replay`` (the only state-changing request), ``GET /api/replay/{id}``,
``GET /api/health``. Every request first passes :class:`~.security.ConsoleGuard`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from webhook_pipeline.errors import InvalidReplayRequestError

from webhook_pipeline_ops.console.backend import Backend, describe_error
from webhook_pipeline_ops.console.jobs import BusyError
from webhook_pipeline_ops.console.security import TOKEN_HEADER, ConsoleGuard
from webhook_pipeline_ops.output import human_age, utc_time
from webhook_pipeline_ops.time_index import (
    MAX_PAGE,
    RECORD_OUTCOMES,
    DeliveryFilters,
    InvalidCursorError,
)

HERE = Path(__file__).resolve().parent
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
#: Resource history: windows (days) offered, default, most records listed.
RESOURCE_DAYS = (1, 7, 30)
DEFAULT_RESOURCE_DAYS = 7
MAX_HISTORY = 1_000
#: DLQ page: messages peeked.
DLQ_PEEK = 50
#: Largest request body accepted (the replay request).
MAX_REQUEST_BYTES = 1024 * 1024
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


class BadRequestError(Exception):
    """A query parameter the page cannot use (shown as a 400 page)."""


def create_app(backend: Backend, *, allowed_hosts: list[str], token: str) -> Any:
    """The ASGI application: routes behind :class:`ConsoleGuard`.

    Parameters
    ----------
    backend : Backend
        Data access (started and stopped with the application's lifespan).
    allowed_hosts : list[str]
        ``Host`` values the console answers to (``address:port``; the first is its origin).
    token : str
        The per-run token of state-changing requests (put in every page).
    """
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
    )
    env.filters["when"] = _when
    env.filters["age"] = human_age
    env.filters["epoch"] = _epoch
    env.filters["query"] = lambda params: urlencode({k: v for k, v in params.items() if v})
    templates = Jinja2Templates(env=env)
    sources = _known_sources()

    def page(
        request: Request, name: str, context: dict[str, Any], status_code: int = 200
    ) -> Response:
        return templates.TemplateResponse(
            request,
            name,
            {"target": backend.target, "token": token, "sources": sources, **context},
            status_code=status_code,
        )

    def error_page(request: Request, status: int, message: str) -> Response:
        return page(request, "error.html", {"page": "error", "message": message}, status)

    def guarded(handler: Any) -> Any:
        def run(request: Request) -> Response:
            try:
                response: Response = handler(request)
            except BadRequestError as exc:
                return error_page(request, 400, str(exc))
            except InvalidCursorError:
                return error_page(request, 400, "invalid page cursor: start from the newest page")
            except Exception as exc:  # AWS down, access denied...: a page, not a traceback
                return error_page(request, 502, describe_error(exc))
            return response

        run.__name__ = handler.__name__
        return run

    # -- pages ---------------------------------------------------------------------------------
    @guarded
    def deliveries(request: Request) -> Response:
        q = request.query_params
        filters = DeliveryFilters(
            source=_text(q, "source", 64),
            event_type=_text(q, "event_type", 256),
            outcome=_choice(q, "outcome", RECORD_OUTCOMES),
            resource_key=_text(q, "resource_key", 1024),
            delivery_id=_text(q, "delivery_id", 256),
        )
        newest, oldest, window = _window(q)
        limit = _integer(q, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
        cursor = _text(q, "cursor", 2048)
        result = backend.deliveries(
            filters, newest=newest, oldest=oldest, limit=limit, cursor=cursor
        )
        params = {
            **filters.active(),
            "window": window if window != "custom" else "",
            "from": q.get("from", "") if window == "custom" else "",
            "to": q.get("to", "") if window == "custom" else "",
            "limit": str(limit) if limit != DEFAULT_PAGE else "",
        }
        context = {
            "page": "deliveries",
            "result": result,
            "filters": filters,
            "params": params,
            "window": window,
            "windows": list(WINDOWS),
            "outcomes": RECORD_OUTCOMES,
            "form": {k: q.get(k, "") for k in ("from", "to")},
            "newest": newest,
            "oldest": oldest,
            "live": cursor is None and window != "custom",
            "cursor": cursor,
        }
        if q.get("partial") == "rows":
            return page(request, "_delivery_rows.html", context)
        return page(request, "deliveries.html", context)

    @guarded
    def delivery(request: Request) -> Response:
        q = request.query_params
        source = _required(q, "source", 64)
        delivery_id = _required(q, "id", 256)
        record = backend.delivery(source, delivery_id)
        if record is None:
            from webhook_pipeline_ops.commands_records import unknown_source_hint

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
        delay = _delay_ms(record.get("received_at"), record.get("recorded_at"))
        return page(
            request,
            "delivery.html",
            {
                "page": "delivery",
                "record": record,
                "fields": known,
                "others": others,
                "body": body,
                "body_error": body_error,
                "bucket": backend.bucket,
                "delay_ms": delay,
            },
        )

    @guarded
    def resource(request: Request) -> Response:
        q = request.query_params
        source = _required(q, "source", 64)
        key = _required(q, "key", 1024)
        days = _integer(q, "days", DEFAULT_RESOURCE_DAYS, 1, 366)
        now = datetime.now(UTC)
        item = backend.resource(source, key)
        history, truncated, stats = backend.resource_history(
            source,
            key,
            newest=now + timedelta(minutes=1),
            oldest=now - timedelta(days=days),
            max_items=MAX_HISTORY,
        )
        watermark = item.get("watermark") if item else None
        return page(
            request,
            "resource.html",
            {
                "page": "resource",
                "source": source,
                "key": key,
                "item": item,
                "watermark": watermark,
                "history": history,
                "truncated": truncated,
                "stats": stats,
                "days": days,
                "day_choices": RESOURCE_DAYS,
                "max_history": MAX_HISTORY,
            },
        )

    @guarded
    def dlq(request: Request) -> Response:
        rows = backend.dlq_messages(DLQ_PEEK)
        depth = backend.dlq_depth()
        for row in rows:
            payload = row.get("payload")
            if isinstance(payload, str) and not payload.startswith("s3://"):
                from webhook_pipeline_ops.console.bodies import body_view

                row["body_view"] = body_view(
                    payload.encode(), "envelope (inline body)", row.get("source")
                )
        return page(
            request,
            "dlq.html",
            {"page": "dlq", "rows": rows, "depth": depth, "peeked": DLQ_PEEK},
        )

    @guarded
    def health_page(request: Request) -> Response:
        return page(request, "health.html", {"page": "health"})

    def index(request: Request) -> Response:
        return RedirectResponse("/deliveries", status_code=303)

    # -- JSON ----------------------------------------------------------------------------------
    async def start_replay(request: Request) -> Response:
        try:
            doc = await request.json()
        except ValueError:
            return JSONResponse({"error": "the body must be JSON"}, status_code=400)
        try:
            selection, dry_run, rate, max_messages = _replay_input(doc)
        except BadRequestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

        def start() -> dict[str, Any]:
            count = max_messages
            if count is None:
                depth = backend.dlq_depth() or 0
                count = min(100_000, max(100, 2 * depth + 10))
            return backend.jobs.start(
                selection, dry_run=dry_run, rate_per_second=rate, max_messages=count
            ).snapshot()

        try:
            snapshot = await run_in_threadpool(start)
        except BusyError as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        except (InvalidReplayRequestError, ValidationError) as exc:
            return JSONResponse({"error": _validation_message(exc)}, status_code=400)
        return JSONResponse({"job": snapshot}, status_code=202)

    def replay_status(request: Request) -> Response:
        job = backend.jobs.get(request.path_params["job_id"])
        if job is None:
            return JSONResponse({"error": "no such replay"}, status_code=404)
        return JSONResponse({"job": job.snapshot()})

    def health_data(request: Request) -> Response:
        return JSONResponse(backend.health())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        backend.start()
        try:
            yield
        finally:
            await run_in_threadpool(backend.stop)

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/favicon.ico", lambda request: Response(status_code=204)),
            Route("/deliveries", deliveries),
            Route("/delivery", delivery),
            Route("/resource", resource),
            Route("/dlq", dlq),
            Route("/health", health_page),
            Route("/api/replay", start_replay, methods=["POST"]),
            Route("/api/replay/{job_id}", replay_status),
            Route("/api/health", health_data),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        lifespan=lifespan,
        max_body_size=MAX_REQUEST_BYTES,
    )
    return ConsoleGuard(app, allowed_hosts, token)


# -- query parameters ---------------------------------------------------------------------------


def _text(q: Any, name: str, max_length: int) -> str | None:
    value = (q.get(name) or "").strip()
    if len(value) > max_length:
        raise BadRequestError(f"{name}: at most {max_length} characters")
    return value or None


def _required(q: Any, name: str, max_length: int) -> str:
    value = _text(q, name, max_length)
    if value is None:
        raise BadRequestError(f"missing {name}")
    return value


def _choice(q: Any, name: str, choices: tuple[str, ...]) -> str | None:
    value = _text(q, name, 64)
    if value is not None and value not in choices:
        raise BadRequestError(f"{name}: one of {', '.join(choices)}")
    return value


def _integer(q: Any, name: str, default: int, low: int, high: int) -> int:
    raw = _text(q, name, 12)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequestError(f"{name}: a whole number") from None
    if not low <= value <= high:
        raise BadRequestError(f"{name}: within {low}..{high}")
    return value


def parse_time(value: str, name: str) -> datetime:
    """An ISO 8601 time (``YYYY-MM-DDTHH:MM`` from a date-time input); no zone = UTC."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequestError(f"{name}: an ISO 8601 time such as 2026-03-01T12:00") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _window(q: Any) -> tuple[datetime, datetime, str]:
    """``(newest, oldest, window name)``: a preset back from now, or custom ``from``/``to``."""
    now = datetime.now(UTC)
    start, end = _text(q, "from", 40), _text(q, "to", 40)
    if start or end:
        newest = parse_time(end, "to") if end else now + timedelta(minutes=1)
        oldest = parse_time(start, "from") if start else newest - WINDOWS[DEFAULT_WINDOW]
        if oldest >= newest:
            raise BadRequestError("from must be earlier than to")
        if newest - oldest > timedelta(days=400):
            raise BadRequestError("the time window is at most 400 days")
        return newest, oldest, "custom"
    window = _choice(q, "window", tuple(WINDOWS)) or DEFAULT_WINDOW
    # a minute ahead: a delivery received right now is in the newest page
    return now + timedelta(minutes=1), now - WINDOWS[window], window


def _replay_input(doc: Any) -> tuple[list[tuple[str, str]], bool, float | None, int | None]:
    if not isinstance(doc, dict):
        raise BadRequestError("the body must be a JSON object")
    unknown = set(doc) - {"deliveries", "dry_run", "rate_per_second", "max_messages"}
    if unknown:
        raise BadRequestError(f"unknown keys: {', '.join(sorted(unknown))}")
    pairs = doc.get("deliveries")
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


def _validation_message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
    return str(exc)


# -- formatting ---------------------------------------------------------------------------------


def _when(value: Any) -> str:
    """A time (``datetime`` or ISO text) as ``YYYY-MM-DD HH:MM:SS.mmm UTC`` (others as they are)."""
    if not value:
        return "-"
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return str(value)
    return utc_time(moment)


def _epoch(value: Any) -> str:
    try:
        return utc_time(datetime.fromtimestamp(int(value), UTC))
    except (TypeError, ValueError, OverflowError, OSError):
        return str(value)


def _delay_ms(received: Any, recorded: Any) -> float | None:
    try:
        start = datetime.fromisoformat(str(received))
        end = datetime.fromisoformat(str(recorded))
    except ValueError:
        return None
    return round((end - start).total_seconds() * 1000, 1)


def _known_sources() -> list[str]:
    from webhook_pipeline_ops.commands_records import known_sources

    return known_sources() or []


__all__ = ["TOKEN_HEADER", "create_app", "parse_time"]
