"""LinkedIn (Marketing / Community Management webhooks): ``X-LI-Signature`` and the GET challenge.

Source of the scheme: learn.microsoft.com "LinkedIn: Webhook validation"
(linkedin/shared/api-guide/webhook-validation): the endpoint is validated by a ``GET
?challengeCode=<uuid>[&applicationId=..]`` answered within 3 s with JSON ``{"challengeCode":
<same>, "challengeResponse": <hex HMAC-SHA256 of the code keyed with the client secret>}``,
re-validated every 2 hours (blocked after 3 failures); each notification POST carries
``X-LI-Signature``, described as an HMAC-SHA256 hex with the client secret "of the POST body
prefixed by ``hmacsha256=``". That sentence has two readings, and implementations differ:

- ``prefix_in_hmac``: the header is ``<hex>`` of HMAC(``"hmacsha256=" + body``);
- ``prefix_on_header``: the header is ``hmacsha256=<hex>`` of HMAC(``body``).

Option ``signature_reading`` picks one (``either``, the default, accepts both: the header's own
shape says which reading applies, and :attr:`Verified.family` names the reading that matched, so
it is logged and an operator can pin it). LinkedIn publishes no vector and no signer: the vectors
are computed from the recipe (self-consistency only; UNVERIFIED which reading LinkedIn sends).

What is signed: the body only; no timestamp, no delivery id header. The default delivery id is
the SHA-256 of the signed body (a retried POST has the same bytes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.challenges import HmacQueryChallenge
from webhook_pipeline.providers.crypto import decode_hex, match_hmac, signature_header, utf8_hmac
from webhook_pipeline.providers.model import (
    DAY,
    Defaults,
    LazyVectors,
    Signs,
    Verified,
    refuse_challenge_message,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "X-LI-Signature"
PREFIX = "hmacsha256="
#: The two readings of LinkedIn's sentence, and ``either``.
READINGS = ("either", "prefix_in_hmac", "prefix_on_header")


class ChallengeCode(HmacQueryChallenge):
    """``GET ?challengeCode=<code>`` -> 200 JSON ``{"challengeCode", "challengeResponse"}``."""

    name = "challengeCode"
    parameter = "challengeCode"

    def body(self, token: str, digest: bytes) -> dict[str, Any]:
        return {"challengeCode": token, "challengeResponse": digest.hex()}

    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        query = {"challengeCode": "890e4665-4dfe-4ab1-b689-ed553bceeed0", "applicationId": "77"}
        return samples.HandshakeSample("GET", query=query)


@register
class LinkedIn(Provider):
    """LinkedIn's ``X-LI-Signature`` (both readings) and ``challengeCode`` validation.

    Header shapes: ``X-LI-Signature: <64 hex>`` (``prefix_in_hmac``) or
    ``X-LI-Signature: hmacsha256=<64 hex>`` (``prefix_on_header``). HMAC-SHA256, lower-case hex.
    Key: the application's client secret as UTF-8. No timestamp.
    """

    name = "linkedin"
    title = "LinkedIn"
    reference = "learn.microsoft.com linkedin/shared/api-guide/webhook-validation"
    signs = Signs(
        id="none sent; the default id is the SHA-256 of the signed body",
        timestamp=None,
        note="no delivery id and no timestamp; which of the two documented signature readings "
        "LinkedIn sends is UNVERIFIED (option signature_reading)",
    )
    defaults = Defaults(delivery_id=FieldLocation(digest="sha256"))
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "LinkedIn documents no retry schedule for notifications (providers-wave2 section 17: "
        "none; UNVERIFIED): one day"
    )
    handshakes = (ChallengeCode(),)
    # LinkedIn's notifications are JSON objects: a form or raw source makes no sense (and the
    # challenge's separation relies on a JSON object's "{").
    body_formats = frozenset({"json"})
    option_names = frozenset({"signature_reading"})
    example_options: ClassVar[Mapping[str, Any]] = {"signature_reading": "either"}
    signature_header = HEADER
    dev_secret = "dev-linkedin-client-secret-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="li_secret",
                headers={
                    HEADER: "a0b1f2a63803a2e4b8fe2a7d225bb9b1b0d51f5a3bcce216d308bcae252ec529"
                },
                body=b'{"id":"evt_1","type":"test"}',
                now=0,
                origin="self",
                reference="prefix_in_hmac reading, computed with stdlib hmac (providers-wave2 "
                "section 15); self-consistency only: LinkedIn publishes no vector and no signer",
                options={"signature_reading": "prefix_in_hmac"},
            ),
            samples.Vector(
                secret="li_secret",
                headers={
                    HEADER: PREFIX
                    + "6ef8d2c17c7c44148d6ee320d17326b40b262f55bf3f9e98af6498852bf81081"
                },
                body=b'{"id":"evt_1","type":"test"}',
                now=0,
                origin="self",
                reference="prefix_on_header reading, computed with stdlib hmac (providers-wave2 "
                "section 15); self-consistency only",
                options={"signature_reading": "prefix_on_header"},
            ),
        )
    )

    def __init__(
        self, options: Mapping[str, Any] | None = None, tolerance_seconds: int | None = None
    ) -> None:
        super().__init__(options, tolerance_seconds)
        reading = self.options.get("signature_reading", "either")
        if reading not in READINGS:
            raise ConfigurationError(f"linkedin: signature_reading must be one of {list(READINGS)}")
        self.reading: str = reading

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify ``X-LI-Signature`` under the configured reading (``now`` unused).

        Returns
        -------
        Verified
            ``family`` is the reading that matched (``prefix_in_hmac`` or
            ``prefix_on_header``).

        Raises
        ------
        VerificationError
            ``signature_missing``; ``signature_malformed`` (not hex, or a shape the configured
            reading does not allow); ``signature_invalid`` (no secret matches, or the signed
            message is one the unsigned ``challengeCode`` answers).
        """
        value = signature_header(request, HEADER)
        on_header = value.startswith(PREFIX)
        reading = "prefix_on_header" if on_header else "prefix_in_hmac"
        digest = decode_hex(value.removeprefix(PREFIX) if on_header else value)
        if digest is None or self.reading not in ("either", reading):
            raise VerificationError(
                "signature_malformed", f"{HEADER} is not the {self.reading} reading's <hex>"
            )
        message = request.body if on_header else PREFIX.encode("ascii") + request.body
        refuse_challenge_message(self.handshakes, message)
        index = match_hmac(secrets, message, [digest])
        return Verified(secret_index=index, family=reading)

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """``X-LI-Signature`` in the configured reading (``either`` signs ``prefix_on_header``)."""
        if self.reading == "prefix_in_hmac":
            return {HEADER: utf8_hmac(secret, PREFIX.encode("ascii") + body).hex()}
        return {HEADER: PREFIX + utf8_hmac(secret, body).hex()}

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
                "type": event_type or "ORGANIZATION_SOCIAL_ACTION_NOTIFICATIONS",
                "notifications": [
                    {
                        "notificationId": delivery_id,
                        "action": "COMMENT",
                        "organizationalEntity": f"urn:li:organization:{resource}",
                        "lastModifiedAt": sequence * 1000,
                    }
                ],
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return str(int(random_hex[:12], 16))
