"""Query parameters and request bodies read by the console's routes, checked before any use.

A value the page cannot use raises :class:`BadRequestError`; :func:`.pages.guarded` turns it into
a 400 page.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


class BadRequestError(Exception):
    """A query parameter the page cannot use (shown as a 400 page)."""


def text(q: Any, name: str, max_length: int) -> str | None:
    """Parameter ``name`` stripped, ``None`` when absent or blank.

    Raises
    ------
    BadRequestError
        Longer than ``max_length`` characters.
    """
    value = (q.get(name) or "").strip()
    if len(value) > max_length:
        raise BadRequestError(f"{name}: at most {max_length} characters")
    return value or None


def required(q: Any, name: str, max_length: int) -> str:
    """Like :func:`text`, and :class:`BadRequestError` when absent or blank."""
    value = text(q, name, max_length)
    if value is None:
        raise BadRequestError(f"missing {name}")
    return value


def choice(q: Any, name: str, choices: tuple[str, ...]) -> str | None:
    """Parameter ``name``, one of ``choices`` or ``None`` (else :class:`BadRequestError`)."""
    value = text(q, name, 64)
    if value is not None and value not in choices:
        raise BadRequestError(f"{name}: one of {', '.join(choices)}")
    return value


def integer(q: Any, name: str, default: int, low: int, high: int) -> int:
    """Parameter ``name`` as a whole number within ``low..high`` (``default`` when absent).

    Raises
    ------
    BadRequestError
        Not a whole number, or out of range.
    """
    raw = text(q, name, 12)
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
    """An ISO 8601 time (``YYYY-MM-DDTHH:MM`` from a date-time input); no zone = UTC.

    Raises
    ------
    BadRequestError
        Not an ISO 8601 time.
    """
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequestError(f"{name}: an ISO 8601 time such as 2026-03-01T12:00") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
