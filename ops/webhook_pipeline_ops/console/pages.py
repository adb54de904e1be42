"""Rendering the console's pages: the Jinja2 templates (autoescaped), their filters, the context
every page shares and the error pages.

Every page gets ``target`` (what the console reads), ``token`` (the per-run token its scripts send
with the replay request) and ``sources`` (the known sources, for the filters), read from the
application's state that :func:`.app.create_app` fills. Times are shown in the one format of the
console and the CLI (:func:`webhook_pipeline_ops.output.utc_time`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from webhook_pipeline_ops.console.backend import Backend, describe_error
from webhook_pipeline_ops.console.params import BadRequestError
from webhook_pipeline_ops.output import human_age, utc_time
from webhook_pipeline_ops.time_index import InvalidCursorError

HERE = Path(__file__).resolve().parent
Handler = Callable[[Request], Response]


def when(value: Any) -> str:
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


def epoch(value: Any) -> str:
    """Epoch seconds as :func:`when` shows times (others as they are)."""
    try:
        return utc_time(datetime.fromtimestamp(int(value), UTC))
    except (TypeError, ValueError, OverflowError, OSError):
        return str(value)


def query(params: dict[str, str]) -> str:
    """A query string of the non-empty ``params``."""
    return urlencode({k: v for k, v in params.items() if v})


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
    )
    env.filters["when"] = when
    env.filters["age"] = human_age
    env.filters["epoch"] = epoch
    env.filters["query"] = query
    return Jinja2Templates(env=env)


TEMPLATES = _templates()


def backend_of(request: Request) -> Backend:
    """The console's data access, from the application's state."""
    backend: Backend = request.app.state.backend
    return backend


def page(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
    """Template ``name`` rendered with ``context`` plus what every page shows."""
    state = request.app.state
    shared = {"target": state.backend.target, "token": state.token, "sources": state.sources}
    return TEMPLATES.TemplateResponse(request, name, {**shared, **context}, status_code=status_code)


def error_page(request: Request, status: int, message: str) -> Response:
    """The error page with ``message`` and HTTP status ``status``."""
    return page(request, "error.html", {"page": "error", "message": message}, status)


def guarded(handler: Handler) -> Handler:
    """``handler`` with its failures shown as pages: 400 for a parameter it cannot use or an
    invalid page cursor, 502 for anything else (AWS down, access denied...), never a traceback."""

    @functools.wraps(handler)
    def run(request: Request) -> Response:
        try:
            return handler(request)
        except BadRequestError as exc:
            return error_page(request, 400, str(exc))
        except InvalidCursorError:
            return error_page(request, 400, "invalid page cursor: start from the newest page")
        except Exception as exc:  # AWS down, access denied...: a page, not a traceback
            return error_page(request, 502, describe_error(exc))

    return run
