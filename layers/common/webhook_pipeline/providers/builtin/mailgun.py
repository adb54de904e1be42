"""Mailgun: an HMAC of ``timestamp + token`` carried **inside the body**; the event is not signed.

Source of the scheme: Mailgun "Securing Webhooks"
(documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks) and "Automatic
Retries" (.../webhooks/webhook-retries). No official SDK verifies webhooks in Python.

What is signed, and what is not: the signature is ``HMAC-SHA256(signing key, timestamp + token)``
in hex, where ``token`` is 50 random characters Mailgun draws per request. **``event-data`` is not
signed at all**: a body whose ``signature`` object is genuine proves only that Mailgun produced
that timestamp and token; everything next to it, including the delivery id ``event-data.id`` and
the event type, could have been rewritten on the way. The consequences, made visible:

- ``Signs(id=None, body=False)``: every source of this provider logs the unsigned-fields WARNING
  at each cold start, and ``require_signed_id = true`` refuses to load it;
- the ``token`` is a one-time value (:attr:`Verified.replay_token`): the ingest binds it to the
  delivery id it first came with, for twice the tolerance, and answers the token with any other
  delivery id 401 ``replay_detected``, so one captured signature can carry one delivery id (and
  the genuine delivery, which normally arrives first, takes it); the same request again is a
  duplicate (200), and a resend after a 503 is accepted; with Redis unavailable the request is
  503 whatever the gate's fail mode (Mailgun retries), since the token cannot be checked; a
  token whose Redis key was evicted or flushed within its window is not recognised again;
- a body changed in transit by someone who saw the genuine request is not detected: when the
  content matters, fetch the event by id from Mailgun's Events API before acting on it.

Body shapes: current webhooks POST JSON ``{"signature": {"timestamp", "token", "signature"},
"event-data": {...}}`` (the default, ``body_format = "json"``); legacy webhooks POST a form with
``timestamp``, ``token`` and ``signature`` fields, read only when the source declares
``body_format = "form"`` (never guessed from ``Content-Type``). Legacy forms carry no event id: such
a source must set ``delivery_id``. A subaccount's events also carry ``parent-signature``, made with
the primary account's key: a source storing that key verifies them.

Retries: Mailgun retries anything but 200 and 406 for 8 hours (5, 10, 15 min, 1, 2, 4 h); **406
makes it drop the event**, so it is never answered (:attr:`Mailgun.stop_statuses`). Each attempt
is assumed to be signed afresh (a new timestamp and token): the documented advice to reject
reused tokens and old timestamps would otherwise refuse every retry (UNVERIFIED).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode

from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.crypto import (
    decode_hex,
    match_hmac,
    parse_plain_int,
    utf8_hmac,
)
from webhook_pipeline.providers.inline import InlineCredentialProvider
from webhook_pipeline.providers.json_body import json_object
from webhook_pipeline.providers.model import HOUR, Defaults, LazyVectors, Signs, Verified, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

#: Longest token accepted (Mailgun's are 50 characters).
MAX_TOKEN_LENGTH = 256


def signature_fields(body: bytes, body_format: str) -> dict[str, Any]:
    """The ``timestamp``, ``token``, ``signature`` (and ``parent-signature``) of a body, read in
    the declared format: the JSON ``signature`` object, or the form's top-level fields.

    Raises
    ------
    VerificationError
        ``signature_missing``: the body does not parse as the declared format, or carries no
        signature.
    """
    try:
        text = body.decode("utf-8")
        if body_format == "form":
            found: Any = dict(parse_qsl(text, keep_blank_values=True, strict_parsing=True))
        else:
            document = json_object(text)
            found = document.get("signature") if document is not None else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        found = None
    if not isinstance(found, dict) or not found.get("signature"):
        raise VerificationError("signature_missing", f"no signature in the {body_format} body")
    return found


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.isascii():
        raise VerificationError("signature_malformed", f"{what} is not an ASCII string")
    return value


def _timestamp(value: Any) -> tuple[str, int]:
    """The signed timestamp as written (a JSON string of digits, or a JSON integer) and its
    value in seconds."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    if value is not None and not isinstance(value, str):
        raise TimestampError("timestamp_invalid")
    return str(value), parse_plain_int(value)


def signed_string(timestamp: str, token: str) -> bytes:
    """What Mailgun signs: the timestamp and the token, concatenated."""
    return timestamp.encode("ascii") + token.encode("ascii")


@register
class Mailgun(InlineCredentialProvider):
    """Mailgun's webhook signature (inside the body).

    Body shapes: JSON ``{"signature": {"timestamp": "<seconds>", "token": "<50 chars>",
    "signature": "<64 hex>"}, "event-data": {...}}``, or (declared ``form``) fields
    ``timestamp``, ``token``, ``signature``. Signed bytes: ``{timestamp}{token}``. HMAC-SHA256,
    lower-case hex. Key: the HTTP webhook signing key (UTF-8).
    Timestamp: Unix **seconds**, plain digits (a JSON integer is read as its digits); tolerance
    300 s both ways (Mailgun publishes none): enough for clock skew, and the one-time token is
    remembered for twice that, so a token cannot come back fresh once forgotten.
    """

    name = "mailgun"
    title = "Mailgun"
    reference = "documentation.mailgun.com webhooks/securing-webhooks and webhooks/webhook-retries"
    signs = Signs(
        id=None,
        timestamp="signature.timestamp in the body, seconds (with the one-time token)",
        body=False,
        note=(
            "only timestamp + token are signed: event-data (the delivery id event-data.id, the "
            "event type, the content) is NOT signed; the token is accepted once"
        ),
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="event-data.id"),
        event_type=FieldLocation(body="event-data.event"),
    )
    body_formats = frozenset({"json", "form"})
    #: The signature changes between attempts of one event: left out of the duplicate hash.
    volatile_fields = ("signature", "timestamp", "token")
    default_tolerance_seconds = 300
    retry_horizon_seconds = 8 * HOUR
    retry_horizon_reference = (
        "documentation.mailgun.com webhook-retries: 8 hours (5, 10, 15 min, 1, 2, 4 h)"
    )
    stop_statuses = frozenset({406})
    signature_field = "signature"
    dev_secret = "dev-mailgun-signing-key-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="key-test",
                headers={"content-type": "application/json"},
                body=(
                    b'{"signature":{"timestamp":"1700000000","token":"abc123","signature":'
                    b'"c0e08973c41265c4aa6c8271c75edff95b121b46a0985bbad43577cdd8f759c1"},'
                    b'"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered"}}'
                ),
                now=1_700_000_000,
                origin="self",
                reference=(
                    "no published vector and no official verifier: HMAC-SHA256 hex of the "
                    "documented recipe computed with stdlib hmac (providers-wave2.md section 6)"
                ),
            ),
        )
    )

    def field_defaults(self) -> Defaults:
        """JSON bodies carry ``event-data.id``; legacy form bodies carry no event id (the source
        sets ``delivery_id``)."""
        if self.body_format == "form":
            return Defaults(delivery_id=None, event_type=FieldLocation(body="event"))
        return self.defaults

    def validate_secret(self, secret: str) -> None:
        """A printable ASCII signing key (raises ConfigurationError)."""
        if not secret:
            raise ConfigurationError("the secret is empty")
        if not (secret.isascii() and secret.isprintable()):
            raise ConfigurationError("a Mailgun signing key is printable ASCII")

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify the signature inside a Mailgun body (read in the source's body format).

        Returns
        -------
        Verified
            ``timestamp`` (seconds) and ``replay_token`` (the token, accepted once).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no signature in the body as declared),
            ``signature_malformed`` (signature not 64 lower-case hex, token missing, too long
            or not ASCII), ``signature_invalid`` (no key matches ``signature`` or
            ``parent-signature``).
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid``, ``timestamp_stale`` /
            ``timestamp_future``.
        """
        fields = signature_fields(request.body, self.body_format)
        candidates = []
        for name in ("signature", "parent-signature"):
            if name in fields:
                digest = decode_hex(_text(fields[name], name))
                if digest is None or len(digest) != 32:
                    raise VerificationError("signature_malformed", f"{name} is not 64 hex")
                candidates.append(digest)
        raw_ts, timestamp = _timestamp(fields.get("timestamp"))
        token = _text(fields.get("token"), "token")
        if not token or len(token) > MAX_TOKEN_LENGTH:
            raise VerificationError("signature_malformed", "token missing or too long")
        signed = signed_string(raw_ts, token)
        index = match_hmac(secrets, signed, candidates)
        self.check_fresh(timestamp, now)
        return Verified(secret_index=index, timestamp=timestamp, replay_token=token)

    def sign_request(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> samples.SignedRequest:
        """``body`` with a signature written in, as Mailgun sends it: a ``signature`` object put
        first in the JSON object, or ``timestamp``/``token``/``signature`` form fields appended.

        The token is derived from the key, the timestamp and ``delivery_id`` (the same request
        is signed the same way, so ``events/`` is reproducible; Mailgun's are random).

        Raises
        ------
        ConfigurationError
            A JSON body that is not an object (the signature has nowhere to go).
        """
        ts = str(int(timestamp))
        token = hashlib.sha256(f"{secret}\n{ts}\n{delivery_id}".encode()).hexdigest()[:50]
        signature = utf8_hmac(secret, signed_string(ts, token)).hex()
        if self.body_format == "form":
            fields = urlencode({"timestamp": ts, "token": token, "signature": signature})
            return samples.SignedRequest(
                {}, (body + b"&" if body else b"") + fields.encode("ascii"), url
            )
        start = body.lstrip()
        if not start.startswith(b"{"):
            raise ConfigurationError("a Mailgun JSON body is an object")
        inner = start[1:].lstrip()
        block = json.dumps(
            {"timestamp": ts, "token": token, "signature": signature}, separators=(",", ":")
        ).encode("ascii")
        separator = b"" if inner.startswith(b"}") else b","
        return samples.SignedRequest({}, b'{"signature":' + block + separator + inner, url)

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        return samples.Sample.json(
            {
                "event-data": {
                    "id": delivery_id,
                    "event": event_type or "delivered",
                    "timestamp": float(sequence),
                    "recipient": "user@example.com",
                    "message": {"headers": {"message-id": f"{resource}@mg.example.com"}},
                }
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return random_hex[:22]
