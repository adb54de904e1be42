"""Credentials a provider puts in the body or the URL, replaced before they are shown or logged.

Some senders carry their credential where the pipeline keeps or prints things: Google Ads'
``google_key`` and Microsoft Graph's ``clientState`` in the body, Mollie's token and Meta's
``hub.verify_token`` in the URL's query string. A provider names them declaratively
(:attr:`~webhook_pipeline.providers.base.Provider.credential_fields` and
:attr:`~webhook_pipeline.providers.base.Provider.credential_params`); this module is the one place
that replaces their values with :data:`REDACTED`.

What is redacted where (``docs/providers.md``, "Credentials in bodies and URLs"):

- redacted: every log line (the ingest's reconstructed URL, the local gateway's access log), the
  console's pages and ``dlq peek --show-body`` (bodies are shown through :func:`redact_body`),
  and the delivery record (a field location may not read a credential: refused at load);
- kept exact: the body bytes on the queue and in the S3 claim check. They are the verified bytes
  a hook receives and a replay moves (invariant I10), checked against ``body_sha256``; both
  stores are encrypted at rest and expire (SQS retention, the bucket's lifecycle rule).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote_plus, urlencode

from webhook_pipeline.errors import ConfigurationError

if TYPE_CHECKING:
    from webhook_pipeline.fields import FieldLocation
    from webhook_pipeline.providers.base import Provider

#: What a credential's value is replaced with.
REDACTED = "[redacted]"
#: Request headers that carry a credential whatever the provider (HTTP authentication, cookies,
#: the common API key header), lower case.
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-api-key", "x-amz-security-token"}
)


def redact_headers(headers: Mapping[str, str], names: Collection[str] = ()) -> dict[str, str]:
    """``headers`` with lower-cased names, the value of every header in ``names`` (lower case:
    a provider's token header, such as Telegram's secret token) or in
    :data:`CREDENTIAL_HEADERS` replaced by :data:`REDACTED`; every other value as received."""
    shown: dict[str, str] = {}
    for name, value in headers.items():
        lower = name.lower()
        shown[lower] = REDACTED if lower in CREDENTIAL_HEADERS or lower in names else value
    return shown


def redact_query(query: str, names: Collection[str]) -> str:
    """``query`` (a raw query string, without ``?``) with the value of every parameter in
    ``names`` (compared after percent-decoding the name) replaced by :data:`REDACTED`; every
    other byte as received."""
    if not query or not names:
        return query
    parts = query.split("&")
    for i, part in enumerate(parts):
        name, sep, _ = part.partition("=")
        if unquote_plus(name) in names:
            parts[i] = f"{name}={REDACTED}" if sep else part
    return "&".join(parts)


def redact_target(target: str, names: Collection[str]) -> str:
    """A request target or URL (``/path?query``, ``https://host/path?query``) with
    :func:`redact_query` applied to its query string."""
    path, sep, query = target.partition("?")
    return f"{path}{sep}{redact_query(query, names)}" if sep else target


def _redact_path(node: Any, path: list[str]) -> bool:
    """Replace the value at dotted ``path`` below ``node`` (every element of a list on the
    way); ``True`` when one was replaced."""
    if isinstance(node, list):
        return any([_redact_path(item, path) for item in node])
    if not isinstance(node, dict) or path[0] not in node:
        return False
    if len(path) == 1:
        node[path[0]] = REDACTED
        return True
    return _redact_path(node[path[0]], path[1:])


def redact_document(document: Any, fields: Collection[str], batch_path: str | None) -> bool:
    """Replace, in place, the value of every dotted body path of ``fields`` in a parsed JSON
    ``document`` (relative to each event of the array at ``batch_path`` when it is not
    ``None``; ``""`` is the document itself). ``True`` when anything was replaced."""
    events = document
    if batch_path:
        events = document
        for part in batch_path.split("."):
            events = events.get(part) if isinstance(events, dict) else None
    found = False
    for field in fields:
        found = _redact_path(events, field.split(".")) or found
    return found


def redact_body(raw: bytes, fields: Collection[str], batch_path: str | None = None) -> bytes:
    """``raw`` for display: a JSON or form body holding a credential of ``fields`` comes back
    re-serialised with its value :data:`REDACTED` (by :func:`shown_json`: always valid UTF-8);
    any other body (none of the fields, not UTF-8, neither JSON nor form) comes back as the
    same bytes.

    The result is for people and logs only: it is not the signed body and never verifies.
    """
    if not fields or not raw:
        return raw
    try:
        text = raw.decode("utf-8")
        document = json.loads(text)
    except ValueError:
        return _redact_form(raw, fields)
    if not redact_document(document, fields, batch_path):
        return raw
    return shown_json(document).encode("utf-8")


def shown_json(value: Any) -> str:
    """``value`` (parsed JSON) serialised compactly for display, non-ASCII characters as they
    are; a lone surrogate (valid JSON as an escape such as ``"\\ud800"``, but not encodable as
    UTF-8) stays an escape, so the text always encodes as UTF-8."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _redact_form(raw: bytes, fields: Collection[str]) -> bytes:
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=True)
    except ValueError:
        return raw
    if not any(name in fields for name, _ in pairs):
        return raw
    return urlencode([(n, REDACTED if n in fields else v) for n, v in pairs]).encode()


def refuse_credentials(
    where: str,
    provider: Provider,
    locations: dict[str, FieldLocation | None],
    forward_headers: list[str],
) -> None:
    """A credential never becomes a recorded field or a forwarded header (it would be stored
    in the delivery record or the envelope and shown by the console): ``locations`` are a
    source's field locations by field name, ``where`` names the source in the error.

    Raises
    ------
    ConfigurationError
        A location reads one of ``provider.credential_fields``, or ``forward_headers`` (lower
        case) names the provider's signature or credential header.
    """
    secret_fields = set(provider.credential_fields)
    for name, loc in locations.items():
        paths = [] if loc is None or loc.body is None else loc.body
        if secret_fields & set([paths] if isinstance(paths, str) else paths):
            raise ConfigurationError(f"{where}: {name} may not read a credential field")
    if provider.signature_header and provider.signature_header.lower() in forward_headers:
        raise ConfigurationError(
            f"{where}: forward_headers may not name the signature or credential header "
            f"{provider.signature_header}"
        )
