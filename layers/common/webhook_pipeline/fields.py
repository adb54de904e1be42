"""Reading a delivery's identity and ordering fields from what was verified (invariant I8).

- The body is parsed once, as the format the provider or source **declares** (``json``,
  ``form``, ``raw``), never as the unsigned ``Content-Type`` says; a body that does not parse as
  declared is 400 ``body_not_json`` / ``body_not_form``.
- A field is read from one :class:`FieldLocation`: a header, a dotted body path, the body's
  digest, the delivery id the signature covered (``signed = "id"``), or a constant (``value``).
- A batched body (many events in one POST) is split into its events with each event's exact
  bytes (:func:`json_array_items`), so an event's body hash and the body a hook gets are the
  sender's own bytes, not a re-serialisation.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict, model_validator

from webhook_pipeline.errors import BadDeliveryError
from webhook_pipeline.webhook_request import header_value

# Sequences are stored as DynamoDB numbers: 38 significant digits at most.
MAX_SEQUENCE_DIGITS = 38
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


class FieldLocation(BaseModel):
    """Where one value of a delivery is read from: exactly one of the five ways.

    Attributes
    ----------
    header : str | None
        A header name (any case).
    body : str | list[str] | None
        A dotted path into the JSON body (``"data.object.id"``; list indexes as digits), or a
        field name of a form body; several paths make one value of all of them joined with
        ``":"`` (Adyen's ``pspReference:eventCode:success``), absent when any is absent.
    digest : Literal["sha256"] | None
        The hex SHA-256 of the raw body bytes (of the event's bytes in a batch): for senders
        that give no delivery id at all.
    signed : Literal["id"] | None
        The delivery id the signature covered (:attr:`Verified.delivery_id`).
    value : str | None
        A constant, the same for every delivery of the source: a resource key when the whole
        source is one ordered stream (a Telegram bot, whose ``update_id`` orders all its
        updates). Nothing is read from the request, so nothing can be forged.
    request : Literal["id"] | None
        The id API Gateway gave the HTTP request (``requestContext.requestId``): unique per
        request, so no retry is ever a duplicate. For senders that give no delivery identity
        at all and whose every request must reach the hook (Mollie announces each status
        change of a payment with the same body ``id=tr_...``). Never signed.
    format : Literal["int", "iso8601", "string"]
        How the value is read: ``int`` (plain integer), ``iso8601`` (converted to integer
        microseconds since the epoch), ``string`` (ids and event types).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    header: str | None = None
    body: str | list[str] | None = None
    digest: Literal["sha256"] | None = None
    signed: Literal["id"] | None = None
    value: str | None = None
    request: Literal["id"] | None = None
    format: Literal["int", "iso8601", "string"] = "string"

    @model_validator(mode="after")
    def _exactly_one(self) -> FieldLocation:
        kinds = (self.header, self.body, self.digest, self.signed, self.value, self.request)
        if len([x for x in kinds if x]) != 1:
            raise ValueError("give exactly one of header, body, digest, signed, value, request")
        return self

    def describe(self) -> str:
        """``header X-GitHub-Delivery``, ``body data.object.id``, ``digest sha256``,
        ``signed id``, ``value bot``, ``request id``."""
        for kind in ("header", "body", "digest", "signed", "value", "request"):
            value = getattr(self, kind)
            if value:
                return f"{kind} {'+'.join(value) if isinstance(value, list) else value}"
        return "nowhere"  # pragma: no cover - excluded by the validator


class FormFields(dict[str, str]):
    """The fields of a form body, each with its last value, and the names given more than once
    with different values (:attr:`repeated`).

    Which of a repeated field's values is meant is not always covered by the signature (Twilio
    signs a repeated parameter's values sorted, so swapping them verifies): such a field read as
    a delivery id, event type, resource or sequence is refused (:func:`read_value`).
    """

    repeated: frozenset[str] = frozenset()


def _form_fields(pairs: list[tuple[str, str]]) -> FormFields:
    fields = FormFields(pairs)  # the last value of each name
    fields.repeated = frozenset(name for name, value in pairs if fields[name] != value)
    return fields


def parse_body(body: bytes, body_format: Literal["json", "form", "raw"]) -> Any:
    """Parse raw body bytes as the declared format.

    Returns
    -------
    Any
        The JSON value (``json``), a :class:`FormFields` (``form``; a repeated field keeps its
        last value and is named in ``repeated``), or ``None`` (``raw``, or an empty form body).

    Raises
    ------
    BadDeliveryError
        ``body_not_utf8``, ``body_not_json`` (an empty body included, and nesting past
        Python's recursion limit) or ``body_not_form``.
    """
    if body_format == "raw" or (not body and body_format == "form"):
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadDeliveryError("body_not_utf8") from exc
    if body_format == "json":
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise BadDeliveryError("body_not_json", "body is not JSON") from exc
    try:
        return _form_fields(parse_qsl(text, keep_blank_values=True, strict_parsing=True))
    except ValueError as exc:
        raise BadDeliveryError("body_not_form", "body is not form-urlencoded") from exc


def dig(document: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``document`` (``""`` is the document), or ``None``."""
    if path == "":
        return document
    node = document
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


@dataclass(frozen=True)
class EventBody:
    """One event of a delivery: its parsed value and its exact bytes.

    For an ordinary delivery this is the whole body; for a batched one, one element of the array.
    """

    document: Any
    raw: bytes


def json_array_items(body: bytes, path: str) -> list[EventBody]:
    """Split the JSON array at dotted ``path`` of ``body`` into its elements, with each element's
    exact bytes (``""``: the body itself is the array).

    Only object keys on the way are followed (a path through array indexes is not supported).
    The caller has checked that ``body`` as a whole is valid JSON (:func:`parse_body`).

    Raises
    ------
    BadDeliveryError
        ``body_not_json`` (not JSON), ``batch_invalid`` (no array at ``path``).
    """
    try:
        text = body.decode("utf-8")
        start, end = _span(text, 0, path.split(".") if path else [])
    except UnicodeDecodeError as exc:
        raise BadDeliveryError("body_not_utf8") from exc
    except (ValueError, RecursionError) as exc:
        raise BadDeliveryError("body_not_json", "body is not JSON") from exc
    except LookupError as exc:
        raise BadDeliveryError("batch_invalid", f"no array at {path or 'the top level'}") from exc
    return [
        EventBody(value, text[a:b].encode("utf-8")) for value, a, b in _elements(text, start, end)
    ]


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def _span(text: str, i: int, path: list[str]) -> tuple[int, int]:
    """Start and end offsets of the value at ``path`` starting at ``i`` (which must be an array
    at the end of the path)."""
    i = _skip(text, i)
    if not path:
        if not text.startswith("[", i):
            raise LookupError("not an array")
        _, end = _DECODER.raw_decode(text, i)
        return i, end
    if not text.startswith("{", i):
        raise LookupError("not an object")
    i = _skip(text, i + 1)
    found: tuple[int, int] | None = None
    while not text.startswith("}", i):
        key, i = _DECODER.raw_decode(text, i)
        i = _skip(text, i)
        if not text.startswith(":", i):
            raise ValueError("expected ':'")
        value_start = _skip(text, i + 1)
        _, value_end = _DECODER.raw_decode(text, value_start)
        if key == path[0]:
            # The last duplicate key wins, as json.loads decides.
            found = _span(text, value_start, path[1:])
        i = _skip(text, value_end)
        if text.startswith(",", i):
            i = _skip(text, i + 1)
        elif not text.startswith("}", i):
            raise ValueError("expected ',' or '}'")
    if found is None:
        raise LookupError(path[0])
    return found


def _elements(text: str, start: int, end: int) -> Iterator[tuple[Any, int, int]]:
    i = _skip(text, start + 1)
    while i < end - 1:
        value, value_end = _DECODER.raw_decode(text, i)
        yield value, i, value_end
        i = _skip(text, value_end)
        if text.startswith(",", i):
            i = _skip(text, i + 1)


def body_digest(
    raw: bytes, document: Any, volatile_fields: tuple[str, ...], raw_sha256: str | None = None
) -> str:
    """The hex SHA-256 used to tell whether two copies of a delivery carry the same content.

    Without volatile fields it is the SHA-256 of the raw bytes (``raw_sha256`` when the caller
    has it already, so a body is hashed once). With them (HubSpot's ``attemptNumber`` changes on
    every retry) it is the SHA-256 of the parsed document with those dotted paths removed,
    serialised canonically (sorted keys, no spaces).
    """
    if not volatile_fields or not isinstance(document, dict):
        return raw_sha256 if raw_sha256 is not None else hashlib.sha256(raw).hexdigest()
    pruned = json.loads(json.dumps(document))
    for path in volatile_fields:
        *parents, last = path.split(".")
        node = dig(pruned, ".".join(parents)) if parents else pruned
        if isinstance(node, dict):
            node.pop(last, None)
    canonical = json.dumps(pruned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_value(
    location: FieldLocation,
    *,
    headers: Mapping[str, str],
    document: Any,
    raw: bytes,
    signed_id: str | None,
    request_id: str | None = None,
) -> str | int | None:
    """Read one value.

    Parameters
    ----------
    location : FieldLocation
        Where it is.
    headers : Mapping[str, str]
        Request headers, lower-case names.
    document : Any
        The parsed event (the body, or one element of a batch).
    raw : bytes
        The event's exact bytes (for ``digest``).
    signed_id : str | None
        The delivery id the signature covered.
    request_id : str | None
        The id API Gateway gave the request (for ``request = "id"``).

    Returns
    -------
    str | int | None
        A string for ``format="string"``, an integer for ``int``/``iso8601`` (integer
        microseconds since the epoch), or ``None`` when absent.

    Raises
    ------
    BadDeliveryError
        The value is present but of the wrong shape (an object where a string is expected, a
        sequence that is not an integer or ISO-8601 timestamp, text that is not valid Unicode);
        ``field_ambiguous``: a form field or header it reads is given more than once with
        different values (:class:`FormFields`,
        :func:`~webhook_pipeline.webhook_request.header_value`).
    """
    if location.digest:
        return hashlib.sha256(raw).hexdigest()
    raw_value = _raw_value(location, headers, document, signed_id, request_id)
    if raw_value is None or raw_value == "":
        return None
    if isinstance(raw_value, str) and not _is_utf8_encodable(raw_value):
        # JSON "\ud800" escapes decode to lone surrogates that no store can hold.
        raise BadDeliveryError("field_not_utf8", f"{location.describe()} is not valid Unicode")
    if location.format == "string":
        if isinstance(raw_value, bool) or not isinstance(raw_value, str | int):
            raise BadDeliveryError("field_not_scalar", f"{location.describe()} is not a string")
        return str(raw_value)
    if location.format == "int":
        return _integer(raw_value, location)
    return _iso8601_micros(raw_value, location)


def _raw_value(
    location: FieldLocation,
    headers: Mapping[str, str],
    document: Any,
    signed_id: str | None,
    request_id: str | None,
) -> Any:
    """The value at ``location`` as found, before its format is checked (``None``: absent)."""
    if location.signed:
        return signed_id
    if location.value:
        return location.value
    if location.request:
        return request_id
    if location.header:
        return header_value(headers, location.header)
    if isinstance(document, FormFields) and document.repeated:
        _refuse_repeated(location, document)
    if isinstance(location.body, list):
        parts = [dig(document, path) for path in location.body]
        if any(p is None or p == "" or isinstance(p, dict | list) for p in parts):
            return None
        return ":".join(str(p).lower() if isinstance(p, bool) else str(p) for p in parts)
    return dig(document, location.body or "")


def _refuse_repeated(location: FieldLocation, document: FormFields) -> None:
    paths = location.body if isinstance(location.body, list) else [location.body or ""]
    names = {path.split(".")[0] for path in paths} & document.repeated
    if names:
        message = f"form field {min(names)!r} is given twice with different values (unsigned)"
        raise BadDeliveryError("field_ambiguous", message)


def _integer(value: Any, location: FieldLocation) -> int:
    if isinstance(value, bool):
        raise BadDeliveryError("sequence_invalid")
    if (
        isinstance(value, str)
        and value.isascii()
        and value.isdigit()
        and len(value) <= MAX_SEQUENCE_DIGITS
    ):
        value = int(value)
    if isinstance(value, int) and abs(value) < 10**MAX_SEQUENCE_DIGITS:
        return value
    raise BadDeliveryError(
        "sequence_invalid",
        f"{location.describe()} is not an integer of at most {MAX_SEQUENCE_DIGITS} digits",
    )


def _iso8601_micros(value: Any, location: FieldLocation) -> int:
    if not isinstance(value, str):
        raise BadDeliveryError("sequence_invalid", f"{location.describe()} is not ISO-8601")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadDeliveryError(
            "sequence_invalid", f"{location.describe()} is not ISO-8601"
        ) from exc
    if parsed.tzinfo is None:
        raise BadDeliveryError("sequence_invalid", f"{location.describe()} has no UTC offset")
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
