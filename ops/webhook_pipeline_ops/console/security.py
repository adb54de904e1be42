"""Safety of a web server on the operator's machine (it acts with the operator's AWS credentials).

Checked on every request, before any route runs (:class:`ConsoleGuard`):

- **Host**: the ``Host`` header must be one of the console's own ``address:port`` (the bound one,
  plus ``--allowed-host`` values). A page on ``evil.example`` whose name an attacker re-points to
  127.0.0.1 (DNS rebinding) sends ``Host: evil.example:PORT`` and is refused with 400.
- **Cross-site requests**: a browser's ``Sec-Fetch-Site: cross-site`` is refused unless it is a
  top-level navigation (following a link to the console is fine; an image, script or fetch from
  another site is not).
- **State-changing requests** (anything but GET/HEAD; the replay): must be a POST from the
  console's own origin (``Origin`` equal to ``http://address:port``, or, when the browser sent no
  ``Origin``, ``Sec-Fetch-Site: same-origin``) and carry the per-run token (``X-Console-Token``)
  that only the console's own pages contain. A form on another site can send neither the header
  nor a custom token; a script on another site cannot read the token (same-origin policy).

Every response gets headers that keep the pages to themselves: a Content-Security-Policy that
allows only the console's own scripts and styles (no inline script, so even an unescaped body could
not run one), ``nosniff``, no framing, no referrer, no caching.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable
from typing import Any

TOKEN_HEADER = "x-console-token"  # noqa: S105 - a header name
SAFE_METHODS = frozenset({"GET", "HEAD"})
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; "
        b"frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def host_port(host: str, port: int) -> str:
    """``address:port`` as a browser writes it in ``Host`` (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class ConsoleGuard:
    """ASGI middleware applying the checks of the module docstring.

    Parameters
    ----------
    app : ASGI application
    allowed_hosts : Iterable[str]
        ``Host`` values accepted (``address:port``, compared case-insensitively); the first is
        the console's own origin for the same-origin check.
    token : str
        The per-run token state-changing requests must carry.
    """

    def __init__(self, app: Any, allowed_hosts: Iterable[str], token: str) -> None:
        self.app = app
        self.hosts = [h.lower() for h in allowed_hosts]
        if not self.hosts:
            raise ValueError("at least one allowed host")
        self.origins = {f"http://{h}" for h in self.hosts}
        self.token = token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self.refusal(scope["method"], headers)
        if refusal is not None:
            status, reason = refusal
            await _send_json(send, status, {"error": reason})
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                names = {name for name, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *(h for h in SECURITY_HEADERS if h[0] not in names),
                ]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def refusal(self, method: str, headers: dict[str, str]) -> tuple[int, str] | None:
        """``(status, reason)`` when the request must be refused, else ``None``."""
        if headers.get("host", "").lower() not in self.hosts:
            return 400, "unexpected Host header (this console answers only to its own address)"
        site = headers.get("sec-fetch-site")
        if method in SAFE_METHODS:
            if site == "cross-site" and headers.get("sec-fetch-mode") != "navigate":
                return 403, "cross-site request refused"
            return None
        if method != "POST":
            return 405, "method not allowed"
        origin = headers.get("origin")
        if origin is not None:
            if origin.lower() not in self.origins:
                return 403, "cross-origin request refused"
        elif site != "same-origin":
            return 403, "request without a same-origin proof (Origin or Sec-Fetch-Site) refused"
        if site is not None and site not in ("same-origin", "none"):
            return 403, "cross-site request refused"
        token = headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return 403, "missing or wrong console token (reload the page)"
        return None


async def _send_json(send: Any, status: int, doc: dict[str, Any]) -> None:
    body = json.dumps(doc).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
