"""Source definitions: who may send webhooks, with which signature scheme, and where the
delivery id, event type, resource key and sequence value are found in a delivery.

Definitions live in a versioned TOML file deployed with the code (``layers/common/sources.toml``,
which lands at ``/opt/python/sources.toml`` in the layer). The file is validated once at cold
start; any error fails the init loudly (:class:`ConfigurationError`). Secret *values* never appear
here: a source names its secret in AWS Secrets Manager.

Example::

    [sources.stripe]
    scheme = "stripe"
    tolerance_seconds = 300
    delivery_id = { body = "id" }
    event_type = { body = "type" }
    resource_key = { body = "data.object.id" }
    sequence = { body = "created" }
"""

from __future__ import annotations

import base64
import hashlib
import json
import tomllib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from webhook_pipeline.errors import BadDeliveryError, ConfigurationError
from webhook_pipeline.http import WebhookRequest

DEFAULT_SOURCES_FILE = Path(__file__).resolve().parent.parent / "sources.toml"
MAX_DELIVERY_ID_LENGTH = 256
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Sequences are stored as DynamoDB numbers: 38 significant digits at most.
MAX_SEQUENCE_DIGITS = 38
SOURCE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"


class FieldLocation(BaseModel):
    """Where one value of a delivery is read from: exactly one of the three ways.

    Attributes
    ----------
    header : str | list[str] | None
        A header name (any case), or several alternatives of which the first present wins
        (``["webhook-id", "svix-id"]``).
    body : str | None
        A dotted path into the JSON body (``"data.object.id"``), or a field name of an
        ``application/x-www-form-urlencoded`` body.
    digest : Literal["sha256"] | None
        The hex SHA-256 of the raw body bytes: for senders that give no delivery id at all.
    format : Literal["int", "iso8601", "string"]
        How a sequence value is read: ``int`` (plain integer), ``iso8601`` (converted to integer
        microseconds since the epoch), ``string`` (for ids and event types).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    header: str | list[str] | None = None
    body: str | None = None
    digest: Literal["sha256"] | None = None
    format: Literal["int", "iso8601", "string"] = "string"

    @model_validator(mode="after")
    def _exactly_one(self) -> FieldLocation:
        given = [x for x in (self.header, self.body, self.digest) if x]
        if len(given) != 1:
            raise ValueError("give exactly one of header, body, digest")
        return self


class Source(BaseModel):
    """One named sender configuration.

    Attributes
    ----------
    name : str
        The ``{source}`` path segment; also the default secret name suffix.
    scheme : str
        Signature scheme name (see ``webhook_pipeline.signatures.registry.SCHEMES``).
    scheme_options : dict
        Scheme-specific options (the generic HMAC scheme's header, algorithm, encoding...).
    secret : str
        Secret name under the stack's secrets prefix; defaults to ``name``. The secret value is
        either a plain string or JSON ``{"current": "...", "previous": "..."}``.
    tolerance_seconds : int | None
        Timestamp tolerance in seconds (both directions); the scheme's default when unset.
    delivery_id : FieldLocation
        Where the delivery id is. Required.
    event_type, resource_key, sequence : FieldLocation | None
        Optional: event type; the resource whose order matters; its ordering value.
    forward_headers : list[str]
        Headers copied into the envelope (lower-cased) besides the scheme's own.
    enabled : bool
        Disabled sources answer 404.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SOURCE_NAME_PATTERN)
    scheme: str
    scheme_options: dict[str, Any] = Field(default_factory=dict)
    secret: str = ""
    tolerance_seconds: int | None = Field(default=None, gt=0, le=86_400)
    delivery_id: FieldLocation
    event_type: FieldLocation | None = None
    resource_key: FieldLocation | None = None
    sequence: FieldLocation | None = None
    forward_headers: list[str] = Field(default_factory=list)
    enabled: bool = True

    @field_validator("forward_headers")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [h.lower() for h in value]

    @model_validator(mode="after")
    def _defaults(self) -> Source:
        if not self.secret:
            object.__setattr__(self, "secret", self.name)
        if (self.sequence is None) != (self.resource_key is None):
            raise ValueError("resource_key and sequence go together: give both or neither")
        return self


class SourcesFile(BaseModel):
    """The whole sources file: ``[sources.<name>]`` tables."""

    model_config = ConfigDict(extra="forbid")

    sources: dict[str, Source]


def parse_sources(
    data: Mapping[str, Any], known_schemes: set[str] | None = None
) -> dict[str, Source]:
    """Validate a parsed sources document and return the sources by name.

    Raises
    ------
    ConfigurationError
        On any schema error, or a scheme name not in ``known_schemes``.
    """
    raw_sources = data.get("sources")
    if not isinstance(raw_sources, Mapping) or not raw_sources:
        raise ConfigurationError("sources file: no [sources.<name>] tables")
    prepared = {
        "sources": {
            name: {**dict(body), "name": name} if isinstance(body, Mapping) else body
            for name, body in raw_sources.items()
        }
    }
    try:
        parsed = SourcesFile.model_validate(prepared)
    except ValidationError as exc:
        raise ConfigurationError(f"sources file is invalid:\n{exc}") from exc
    if known_schemes is not None:
        unknown = {
            s.name: s.scheme for s in parsed.sources.values() if s.scheme not in known_schemes
        }
        if unknown:
            raise ConfigurationError(
                f"sources file: unknown signature scheme(s) {unknown}; "
                f"known: {sorted(known_schemes)}"
            )
    return parsed.sources


def load_sources(
    path: str | Path | None = None, known_schemes: set[str] | None = None
) -> dict[str, Source]:
    """Read and validate the TOML sources file at ``path`` (default: next to the package).

    Raises
    ------
    ConfigurationError
        File missing, not TOML, or invalid.
    """
    file = Path(path) if path else DEFAULT_SOURCES_FILE
    try:
        with file.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigurationError(f"sources file not found: {file}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"sources file {file} is not valid TOML: {exc}") from exc
    return parse_sources(data, known_schemes)


class ParsedBody:
    """The body parsed once (JSON object or form fields), lazily, after verification."""

    def __init__(self, request: WebhookRequest) -> None:
        self._request = request
        self._parsed: Any = None
        self._done = False

    def value(self) -> Any:
        if not self._done:
            self._done = True
            ctype = (self._request.header("content-type") or "").lower()
            text = self._request.body.decode("utf-8", errors="strict") if self._request.body else ""
            if "application/x-www-form-urlencoded" in ctype:
                self._parsed = {k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()}
            else:
                try:
                    self._parsed = json.loads(text) if text else None
                except (ValueError, RecursionError):  # not JSON, or nested past the limit
                    self._parsed = None
        return self._parsed


def _dig(document: Any, path: str) -> Any:
    node = document
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def extract(location: FieldLocation, request: WebhookRequest, body: ParsedBody) -> str | int | None:
    """Read one value from a verified request.

    Returns
    -------
    str | int | None
        A string for ``format="string"``, an integer for ``int``/``iso8601`` (iso8601 becomes
        integer microseconds since the epoch), or ``None`` when absent.

    Raises
    ------
    BadDeliveryError
        The value is present but of the wrong shape (an object where a string is expected, a
        sequence that is not an integer or ISO-8601 timestamp, a body that is not UTF-8).
    """
    if location.digest:
        return hashlib.sha256(request.body).hexdigest()
    if location.header:
        names = [location.header] if isinstance(location.header, str) else location.header
        raw: Any = next((v for n in names if (v := request.header(n)) is not None), None)
    else:
        try:
            raw = _dig(body.value(), location.body or "")
        except UnicodeDecodeError as exc:
            raise BadDeliveryError("body_not_utf8") from exc
    if raw is None or raw == "":
        return None
    if isinstance(raw, str) and not _is_utf8_encodable(raw):
        # JSON "\ud800" escapes decode to lone surrogates that no store can hold.
        raise BadDeliveryError("field_not_utf8", f"{location} is not valid Unicode text")
    if location.format == "string":
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise BadDeliveryError("field_not_scalar", f"{location} is not a string")
        return str(raw)
    if location.format == "int":
        if isinstance(raw, bool):
            raise BadDeliveryError("sequence_invalid")
        if (
            isinstance(raw, str)
            and raw.isascii()
            and raw.isdigit()
            and len(raw) <= MAX_SEQUENCE_DIGITS
        ):
            raw = int(raw)
        if isinstance(raw, int) and abs(raw) < 10**MAX_SEQUENCE_DIGITS:
            return raw
        raise BadDeliveryError(
            "sequence_invalid",
            f"{location} is not an integer of at most {MAX_SEQUENCE_DIGITS} digits",
        )
    # iso8601
    if not isinstance(raw, str):
        raise BadDeliveryError("sequence_invalid", f"{location} is not an ISO-8601 string")
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadDeliveryError("sequence_invalid", f"{location} is not ISO-8601") from exc
    if parsed.tzinfo is None:
        raise BadDeliveryError("sequence_invalid", f"{location} has no UTC offset")
    return (parsed - _EPOCH) // timedelta(microseconds=1)


def _is_utf8_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def body_b64(body: bytes) -> str:
    """Base64 (standard alphabet, padded) of raw body bytes, as carried in envelopes."""
    return base64.b64encode(body).decode("ascii")
