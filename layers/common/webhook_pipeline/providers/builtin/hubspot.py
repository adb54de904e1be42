"""HubSpot (app webhooks, signature v3): ``X-HubSpot-Signature-v3`` over method + URI + body +
timestamp.

Source of the scheme: HubSpot's "Validating requests"
(developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation,
the v3 section and its table of escapes to decode in the URI) and the official SDK,
``HubSpot/hubspot-api-python`` ``hubspot/utils/signature.py`` (``Signature``; published vectors
from ``tests/spec/utils/test_signature.py``).

Header shapes: ``X-HubSpot-Signature-v3: <base64>``, ``X-HubSpot-Request-Timestamp: <Unix
milliseconds>``. Signed string: ``{method}{uri}{body}{timestamp}`` (UTF-8), where ``uri`` is the
full URL HubSpot called, query included, with ``%3A %2F %3F %40 %21 %24 %27 %28 %29 %2A %2C
%3B`` decoded as the docs ask (the Python SDK does not decode them: the URI is tried as the
docs say, then as sent). HMAC-SHA256, base64, keyed with the app's client secret (UTF-8).
HubSpot says to reject a timestamp older than 5 minutes: the tolerance is 300 s, in both
directions (the SDK checks only the past).

The legacy signatures are not accepted: v1 (``X-HubSpot-Signature`` = SHA-256 of secret + body)
and v2 (secret + method + URI + body) are plain hashes that sign no timestamp, so a captured
request could be replayed forever; a request without ``X-HubSpot-Signature-v3`` is
``signature_missing``.

The body is an array of events (``batch_path = ""``), each its own delivery: its id is
``portalId:subscriptionId:eventId`` (HubSpot documents ``eventId`` as not guaranteed unique on
its own), its type ``subscriptionType``; all signed. ``attemptNumber`` changes on every retry
(the retry is re-signed with a new timestamp), so it is left out of the duplicate body hash.
No resource key or sequence by default: ``occurredAt`` orders one object's changes, but
``propertyChange`` events of different properties of one object are independent, and marking
one stale because another property changed later would lose it; a source may set them.

Retries and statuses: HubSpot retries a batch up to 10 times when it cannot connect, times out,
or gets a status other than 400, 401, 403, 404 and 405 (older docs quoted on HubSpot's forum:
exponential from 2 minutes, about 34 h in all; current docs say over 24 h; UNVERIFIED which is
current). Those five statuses make HubSpot drop the batch without a retry, so the pipeline
answers them only where a retry could never succeed: a bad or stale signature (a forgery, or a
public URL that does not match: see the logged ``url``), a malformed body, an unknown source.
Every transient failure (queue, Redis, Secrets Manager, a claim in flight) is 503 and retried.
403 is never ours to answer (``stop_statuses``).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import (
    decode_base64,
    match_secrets_any,
    signature_header,
    timestamp_header,
    utf8_hmac,
)
from webhook_pipeline.providers.model import HOUR, Defaults, LazyVectors, Signs, Verified, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest, called_url

HEADER = "X-HubSpot-Signature-v3"
TIMESTAMP_HEADER = "X-HubSpot-Request-Timestamp"
#: The escapes HubSpot's docs say to decode in the URI before signing.
_DECODED = {
    "3A": ":",
    "2F": "/",
    "3F": "?",
    "40": "@",
    "21": "!",
    "24": "$",
    "27": "'",
    "28": "(",
    "29": ")",
    "2A": "*",
    "2C": ",",
    "3B": ";",
}
_ESCAPE = re.compile("%(" + "|".join(_DECODED) + ")", re.IGNORECASE)


def decode_uri(uri: str) -> str:
    """``uri`` with the escapes of HubSpot's table decoded (``%3A`` -> ``:``...), the others
    (``%20``, ``%25``...) kept."""
    return _ESCAPE.sub(lambda m: _DECODED[m.group(1).upper()], uri)


@register
class HubSpot(Provider):
    """HubSpot's v3 request signature (see the module docstring)."""

    name = "hubspot"
    title = "HubSpot"
    reference = (
        "developers.hubspot.com request-validation (v3); HubSpot/hubspot-api-python "
        "hubspot/utils/signature.py"
    )
    signs = Signs(
        id="body portalId:subscriptionId:eventId of each event, inside the signed body",
        timestamp="X-HubSpot-Request-Timestamp header, milliseconds",
        note="method, URI, body and timestamp are signed; the legacy v1/v2 headers are not "
        "accepted (no timestamp)",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body=["portalId", "subscriptionId", "eventId"]),
        event_type=FieldLocation(body="subscriptionType"),
    )
    default_tolerance_seconds = 300
    retry_horizon_seconds = 36 * HOUR
    retry_horizon_reference = (
        "HubSpot webhooks docs: up to 10 retries; exponential from 2 min (~34 h, older docs "
        "quoted on the forum) or over 24 h (current docs): UNVERIFIED, the longer one"
    )
    stop_statuses = frozenset({403})
    volatile_fields = ("attemptNumber",)
    # Up to 100 events per request (HubSpot webhooks docs); bounded here by MAX_BODY_BYTES.
    batch_path = ""
    signs_url = True
    signature_header = HEADER
    timestamp_header = TIMESTAMP_HEADER
    timestamp_unit = "milliseconds"
    dev_secret = "00000000-dev0-hub0-spot-local0secret"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy",
                headers={
                    HEADER: "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw=",
                    TIMESTAMP_HEADER: "15000000",
                },
                body=b"{'example_field':'example_value'}",
                now=15_000,
                origin="published",
                reference="HubSpot/hubspot-api-python tests/spec/utils/test_signature.py (v3)",
                url="https://www.example.com/webhook_uri",
            ),
        )
    )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify a HubSpot v3 request against the URL HubSpot called.

        Returns
        -------
        Verified
            ``timestamp`` in **seconds** (the header's milliseconds // 1000), ``raw_timestamp``
            the milliseconds as sent.

        Raises
        ------
        VerificationError
            ``signature_missing`` (no v3 header, even with a legacy one),
            ``signature_malformed`` (not base64 of 32 bytes), ``signature_invalid``.
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid`` (not a plain integer),
            ``timestamp_stale`` / ``timestamp_future`` (outside the tolerance).
        """
        digest = decode_base64(signature_header(request, HEADER))
        if digest is None or len(digest) != 32:
            raise VerificationError("signature_malformed", f"{HEADER} is not base64 of 32 bytes")
        raw_ts, millis = timestamp_header(request, TIMESTAMP_HEADER)
        uri = called_url(request)
        uris = list(dict.fromkeys((decode_uri(uri), uri)))
        tail = request.body + raw_ts.encode("ascii")
        messages = [(request.method + u).encode("utf-8") + tail for u in uris]
        index = match_secrets_any(
            secrets,
            lambda secret: (utf8_hmac(secret, m) for m in messages),
            [digest],
        )
        self.check_fresh(millis / 1000, now)
        return Verified(
            secret_index=index,
            timestamp=millis // 1000,
            raw_timestamp=raw_ts,
            signed_headers=frozenset({TIMESTAMP_HEADER.lower()}),
        )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The v3 headers for a ``POST`` of ``body`` to ``url`` (``timestamp`` in seconds, sent
        as milliseconds)."""
        ts = str(int(timestamp) * 1000)
        message = ("POST" + decode_uri(url)).encode("utf-8") + body + ts.encode("ascii")
        digest = utf8_hmac(secret, message)
        return {HEADER: base64.b64encode(digest).decode("ascii"), TIMESTAMP_HEADER: ts}

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        event_id: int | str = int(delivery_id) if delivery_id.isdigit() else delivery_id
        next_id: int | str = event_id * 10 + 1 if isinstance(event_id, int) else f"{event_id}-1"
        base = {
            "subscriptionId": 12345,
            "portalId": 62515,
            "appId": 54321,
            "occurredAt": sequence * 1000,
            "subscriptionType": event_type or "contact.propertyChange",
            "attemptNumber": 0,
            "objectId": resource,
            "changeSource": "CRM",
        }
        events = [
            {"eventId": event_id, **base, "propertyName": "email", "propertyValue": "a@b.example"},
            {
                "eventId": next_id,
                **base,
                "propertyName": "lifecyclestage",
                "propertyValue": "customer",
            },
        ]
        body = json.dumps(events, separators=(",", ":")).encode()
        return samples.Sample(body, {"content-type": "application/json"})

    def new_delivery_id(self, random_hex: str) -> str:
        return str(int(random_hex[:10], 16))
