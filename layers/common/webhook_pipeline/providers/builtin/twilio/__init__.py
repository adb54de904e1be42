"""Twilio: ``X-Twilio-Signature: <base64>``, HMAC-SHA1 of the URL Twilio called + the sorted POST
parameters (or, for JSON callbacks, of the URL carrying ``bodySHA256``).

Source of the scheme: Twilio's "Webhooks security" (twilio.com/docs/usage/webhooks/webhooks-
security) and the official SDK, ``twilio/twilio-python`` ``twilio/request_validator.py``
(``RequestValidator``; published vectors from ``tests/unit/test_request_validator.py``).

Signed string, form POST (Messaging and Voice webhooks and status callbacks): the full URL as
configured in Twilio (scheme, host, port, path, query), then for each POST parameter sorted by
name its name and value with no separator; a repeated parameter's values are sorted and
de-duplicated, as the SDK does (``Digits=5678&Digits=1234`` -> ``Digits1234Digits5678``).
Signed string, JSON body (Event Streams, some callbacks): the URL alone, whose query carries
``bodySHA256=<hex SHA-256 of the raw body>``, and the body must hash to it. HMAC-SHA1, base64,
keyed with the account's Auth Token (UTF-8; the primary and the secondary while rotating).
Twilio is inconsistent about default ports, so the URL is tried as reconstructed, with the
default port added and with any port removed, as the SDK tries it. The URL is the one Twilio
called (``request.public_url``: the source's ``public_url``, the deployment's
``PUBLIC_BASE_URL``, or the request's own host and path): behind a custom domain or a proxy set
one of the first two; a mismatch is logged with the URL reconstructed.

What is **not** signed: every header (the delivery-id candidate ``I-Twilio-Idempotency-Token``
included: it is forwarded to the hook, and Twilio's documentation of it was not retrieved,
UNVERIFIED), the raw body bytes as such (a reordered or re-encoded body with the same parameters
verifies: the parameters are read with the same parser the signature was checked with), and
there is no timestamp: a captured request can be resent at any time. The signed string joins
names and values with no separator, so a captured body can be re-cut at a boundary without
changing the signature (``MessageStatus=sent&To=x`` and ``MessageStatus=sentTo=x`` sign the
same string): :meth:`Twilio.refuse_recut` refuses a field read that is not of Twilio's format
(400 ``field_invalid``) and a signed string that reads the fields two ways (400
``field_ambiguous``), so a re-cut reads the same identity or none
(:mod:`~webhook_pipeline.providers.builtin.twilio.params`).

Delivery id: ``MessageSid:MessageStatus`` (Messaging status callbacks, the queue-first use:
each status of a message is reported once, retries repeat it), from signed parameters rather
than the unsigned idempotency header. Voice status callbacks set
``delivery_id = { body = ["CallSid", "CallStatus"] }``; a source trusting Twilio's token sets
``delivery_id = { header = "I-Twilio-Idempotency-Token" }`` (it then loads with the
unsigned-id warning). JSON callbacks set ``body_format = "json"`` and their own fields.

Acknowledgement: Twilio expects TwiML from Messaging and Voice webhooks, so an accepted or
duplicate delivery is answered with an empty ``<Response/>`` as ``text/xml`` (nothing is sent
to the caller; the work happens after the queue). The SDK's shared-key HMAC-SHA256 mode
(``X-Twilio-Webhooks-Signature-Settings``) is not documented by Twilio (UNVERIFIED) and is not
accepted. Retries: Messaging and Voice retry once by default (up to 5 with the ``#rc=``
connection override) within a 15 s total timeout; Event Streams retries for up to 4 h
(twilio.com/docs/usage/webhooks/webhooks-connection-overrides, /docs/events).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlparse

from webhook_pipeline.errors import BadDeliveryError, ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation, FormFields
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.builtin.twilio.params import check_format, readings, value_lengths
from webhook_pipeline.providers.crypto import (
    constant_time_equal,
    decode_base64,
    hmac_digest,
    match_secrets_any,
    signature_header,
)
from webhook_pipeline.providers.model import (
    HOUR,
    Answer,
    Defaults,
    LazyVectors,
    Signs,
    Verified,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest, called_url

HEADER = "X-Twilio-Signature"
IDEMPOTENCY_HEADER = "I-Twilio-Idempotency-Token"
BODY_HASH = "bodySHA256"
#: The empty TwiML document Twilio gets for an accepted delivery.
EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>'
_AUTH_TOKEN = re.compile(r"[0-9a-f]{32}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def url_variants(url: str) -> list[str]:
    """``url`` as given, with any port removed and with the default port added
    (twilio-python ``remove_port`` / ``add_port``), without repeats."""
    parsed = urlparse(url)
    try:
        port = parsed.port
    except ValueError:  # a port that is not a number: only the URL as given
        return [url]
    without = parsed._replace(netloc=parsed.netloc.split(":")[0]).geturl() if port else url
    default = 443 if parsed.scheme == "https" else 80
    with_port = url if port else parsed._replace(netloc=f"{parsed.netloc}:{default}").geturl()
    return list(dict.fromkeys((url, without, with_port)))


def form_parameters(body: bytes) -> str:
    """The parameters of a form body as Twilio signs them: names sorted, each name followed by
    each of its distinct values, sorted, no separators.

    Raises
    ------
    VerificationError
        ``signature_malformed``: the body is not UTF-8 text.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VerificationError("signature_malformed", "the form body is not UTF-8") from exc
    values: dict[str, set[str]] = {}
    for name, value in parse_qsl(text, keep_blank_values=True):
        values.setdefault(name, set()).add(value)
    return "".join(name + value for name in sorted(values) for value in sorted(values[name]))


@register
class Twilio(Provider):
    """Twilio's ``X-Twilio-Signature`` (see the module docstring)."""

    name = "twilio"
    title = "Twilio"
    reference = (
        "twilio.com/docs/usage/webhooks/webhooks-security; twilio/twilio-python "
        "twilio/request_validator.py"
    )
    signs = Signs(
        id="body MessageSid:MessageStatus, signed parameters",
        timestamp=None,
        note="the URL and the decoded parameters are signed, not the raw bytes; no header "
        "(I-Twilio-Idempotency-Token included) and no timestamp",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body=["MessageSid", "MessageStatus"]),
        event_type=FieldLocation(body="MessageStatus"),
        body_format="form",
        forward_headers=(IDEMPOTENCY_HEADER.lower(),),
    )
    retry_horizon_seconds = 4 * HOUR
    retry_horizon_reference = (
        "Messaging/Voice: 1 retry by default (max 5) within 15 s; Event Streams: up to 4 h "
        "(twilio.com/docs/usage/webhooks/webhooks-connection-overrides, /docs/events)"
    )
    signs_url = True
    signature_header = HEADER
    dev_secret = "0123456789abcdef0123456789abcdef"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="12345",
                headers={HEADER: "RSOYDt4T1cUTdK1PDd93/VVr8B8="},
                body=b"CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234"
                b"&From=%2B14158675309&To=%2B18005551212",
                now=0,
                origin="published",
                reference="twilio/twilio-python tests/unit/test_request_validator.py (form)",
                url="https://mycompany.com/myapp.php?foo=1&bar=2",
            ),
            samples.Vector(
                secret="12345",
                headers={HEADER: "kvajT1Ptam85bY51eRf/AJRuM3w="},
                body=b"CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234"
                b"&From=%2B14158675309&To=%2B18005551212",
                now=0,
                origin="published",
                reference="twilio/twilio-python tests/unit/test_request_validator.py (signed "
                "with :443, received without it)",
                url="https://mycompany.com/myapp.php?foo=1&bar=2",
            ),
            samples.Vector(
                secret="12345",
                headers={HEADER: "IK+Dwps556ElfBT0I3Rgjkr1wJU="},
                body=b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234",
                now=0,
                origin="published",
                reference="twilio/twilio-python tests/unit/test_request_validator.py (repeated "
                "parameters)",
                url="https://mycompany.com/myapp.php?foo=1&bar=2",
            ),
            samples.Vector(
                secret="12345",
                headers={HEADER: "a9nBmqA0ju/hNViExpshrM61xv4="},
                body=b'{"property": "value", "boolean": true}',
                now=0,
                origin="published",
                reference="twilio/twilio-python tests/unit/test_request_validator.py (JSON body, "
                "bodySHA256)",
                url="https://mycompany.com/myapp.php?foo=1&bar=2&bodySHA256="
                "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620",
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """An Auth Token: 32 lower-case hex digits.

        Raises
        ------
        ConfigurationError
            Anything else (an Account SID, an API key secret, a token with a typo).
        """
        super().validate_secret(secret)
        if not _AUTH_TOKEN.fullmatch(secret):
            raise ConfigurationError("the Twilio Auth Token is not 32 lower-case hex digits")

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify a Twilio request against the URL Twilio called (``now`` is unused).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no header), ``signature_malformed`` (not base64 of 20
            bytes; a ``bodySHA256`` that is not one lower-case hex SHA-256; a form body that
            is not UTF-8), ``signature_invalid`` (no secret matches any URL variant, or the
            body does not hash to ``bodySHA256``).
        """
        digest = decode_base64(signature_header(request, HEADER))
        if digest is None or len(digest) != 20:
            raise VerificationError("signature_malformed", f"{HEADER} is not base64 of 20 bytes")
        url = called_url(request)
        body_hash = parse_qs(urlparse(url).query, keep_blank_values=True).get(BODY_HASH)
        if body_hash is not None:
            if len(body_hash) != 1 or not _SHA256_HEX.fullmatch(body_hash[0]):
                raise VerificationError("signature_malformed", f"{BODY_HASH} is malformed")
            parameters = ""
        else:
            parameters = form_parameters(request.body)
        messages = [(u + parameters).encode("utf-8") for u in url_variants(url)]
        index = match_secrets_any(
            secrets,
            lambda secret: (hmac_digest(secret.encode("utf-8"), m, "sha1") for m in messages),
            [digest],
        )
        if body_hash is not None and not constant_time_equal(
            hashlib.sha256(request.body).hexdigest(), body_hash[0]
        ):
            raise VerificationError("signature_invalid", f"the body does not match {BODY_HASH}")
        return Verified(secret_index=index)

    def refuse_recut(
        self, request: WebhookRequest, document: Any, fields: Mapping[str, FieldLocation]
    ) -> None:
        """Refuse a form request whose signed parameters, split another way, read another
        identity (:mod:`~webhook_pipeline.providers.builtin.twilio.params`): each form field read
        must have Twilio's format, and the signed string exactly one reading of those fields.

        Raises
        ------
        BadDeliveryError
            ``field_invalid`` (a field read is not a SID, a documented status, or digits where
            an integer is read), ``field_ambiguous`` (the signed string reads them two ways).
        """
        url = called_url(request)
        if not isinstance(document, FormFields) or BODY_HASH in parse_qs(urlparse(url).query):
            return  # a JSON body is bound by bodySHA256; a raw one is read as a whole
        integer: dict[str, bool] = {}
        for location in fields.values():
            paths = [location.body] if isinstance(location.body, str) else location.body or []
            for name in paths:
                integer[name] = integer.get(name, False) or location.format == "int"
        for name, is_int in integer.items():
            if document.get(name):
                check_format(name, document[name], integer=is_int)
        names = [(n, value_lengths(n, integer=integer[n])) for n in sorted(integer)]
        found = readings(url + form_parameters(request.body), names)
        if len(found) > 1:
            names_read = sorted(integer)
            a, b = (
                {
                    n: v[:40] + ("..." if len(v) > 40 else "")
                    for n, v in zip(names_read, r, strict=True)
                }
                for r in found
            )
            raise BadDeliveryError(
                "field_ambiguous", f"the signed parameters read as {a} and as {b} (a re-cut)"
            )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``X-Twilio-Signature`` for a POST of ``body`` to ``url`` (form parameters, or none
        when ``url`` carries ``bodySHA256``); no id or timestamp header."""
        has_hash = BODY_HASH in parse_qs(urlparse(url).query)
        message = url + ("" if has_hash else form_parameters(body))
        digest = hmac_digest(secret.encode("utf-8"), message.encode("utf-8"), "sha1")
        return {HEADER: base64.b64encode(digest).decode("ascii")}

    def acknowledgement(self, status: int, body: dict[str, Any]) -> Answer:
        """An empty TwiML ``<Response/>`` as ``text/xml`` (accepted and duplicate alike)."""
        return Answer(status, EMPTY_TWIML, "text/xml")

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        status = event_type or "delivered"
        params = {
            "AccountSid": "AC" + "0" * 32,
            "ApiVersion": "2010-04-01",
            "From": "+14155550100",
            "MessageSid": delivery_id,
            "MessageStatus": status,
            "MessagingServiceSid": "MG" + "0" * 32,
            "SmsSid": delivery_id,
            "SmsStatus": status,
            "To": "+14155550199",
        }
        return samples.Sample(
            urlencode(params).encode("ascii"),
            {
                "content-type": "application/x-www-form-urlencoded",
                IDEMPOTENCY_HEADER: f"{delivery_id}-{status}",
            },
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return f"SM{random_hex[:32]}"

    def random_secret(self, entropy: bytes) -> str:
        return entropy.hex()[:32]
