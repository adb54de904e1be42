"""One way to put a botocore error in words, for logs and the adapters' own errors."""

from __future__ import annotations

from botocore.exceptions import ClientError


def describe_error(exc: Exception) -> str:
    """``"<error code>: <message>"`` of a ``ClientError``; ``"<class>: <text>"`` otherwise."""
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        return f"{err.get('Code', 'ClientError')}: {err.get('Message', '')}".strip()
    return f"{type(exc).__name__}: {exc}"
