"""A request body (or part of one) read as a JSON object: the one parse every provider that looks
inside a JSON body uses, so that what is not an object is ``None``, never an exception."""

from __future__ import annotations

import json
from typing import Any


def json_object(body: bytes | str) -> dict[str, Any] | None:
    """``body`` parsed as a JSON object, or ``None`` when it is not one: not JSON, another JSON
    value (an array, a string...), or nested too deeply to parse (``RecursionError``). For
    providers that read a credential, a handshake or a signed value inside the body."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def with_field(body: bytes, name: str, value: Any) -> bytes:
    """A JSON object ``body`` re-serialised compactly with ``name`` set to ``value`` (any other
    body unchanged): how :meth:`Provider.sign_body` puts a value in the body."""
    doc = json_object(body)
    if doc is None:
        return body
    doc[name] = value
    return json.dumps(doc, separators=(",", ":")).encode()
