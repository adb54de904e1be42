"""X (Twitter) Account Activity: ``x-twitter-webhooks-signature: sha256=<base64>`` and the CRC.

Source of the scheme: docs.x.com "Webhooks: Securing webhooks" / Account Activity API "Securing
webhooks" (every POST carries ``x-twitter-webhooks-signature: sha256=<base64 HMAC-SHA256 of the
body keyed with the app's consumer secret>``; the challenge-response check is a ``GET
?crc_token=<token>`` answered within a few seconds with JSON ``{"response_token":
"sha256=<base64 HMAC-SHA256 of the token>"}``, sent at registration, on a PUT of the webhook and
periodically; a webhook whose CRC keeps failing is marked invalid). X publishes no numeric vector
and no Python signer for it (the official ``xdk`` has no webhook helper): the vectors below are
computed from the recipe (self-consistency only).

What is signed: the body only; no timestamp and no delivery id (the events inside carry their own
ids). The default delivery id is the SHA-256 of the signed body, as for Meta: a retried POST of the
same events has the same bytes.
"""

from __future__ import annotations

import base64
from typing import Any

from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.challenges import HmacQueryChallenge
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import BodyHmacProvider
from webhook_pipeline.providers.vectors import recipe_vector
from webhook_pipeline.source_secrets import SourceSecret

HEADER = "x-twitter-webhooks-signature"
PREFIX = "sha256="


class CrcChallenge(HmacQueryChallenge):
    """``GET ?crc_token=<token>`` -> 200 ``{"response_token": "sha256=<base64 HMAC>"}``."""

    name = "crc"
    parameter = "crc_token"

    def body(self, token: str, digest: bytes) -> dict[str, Any]:
        return {"response_token": PREFIX + base64.b64encode(digest).decode("ascii")}

    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        return samples.HandshakeSample("GET", query={"crc_token": "bXktY3JjLXRva2VuLWZvci1kZXY"})


@register
class X(BodyHmacProvider):
    """X's Account Activity signature and CRC.

    Header shape: ``x-twitter-webhooks-signature: sha256=<44 characters of padded base64>``.
    Signed bytes: the raw body. HMAC-SHA256, **base64**. Key: the consumer (API) secret as
    UTF-8. No timestamp.
    """

    name = "x"
    title = "X / Twitter Account Activity"
    reference = "docs.x.com webhooks: securing webhooks (CRC and signature header)"
    signs = Signs(
        id="none sent; the default id is the SHA-256 of the signed body",
        timestamp=None,
        note="no delivery id and no timestamp: a captured body can be resent at any time",
    )
    # The event type is the name of the array the events are in (``tweet_create_events``...),
    # not a field: no default.
    defaults = Defaults(delivery_id=FieldLocation(digest="sha256"))
    retry_horizon_seconds = 1 * DAY
    retry_horizon_reference = (
        "X documents no retry schedule for a failed POST (missed events come back through the "
        "replay API; providers-wave2 section 17: not found): one day"
    )
    handshakes = (CrcChallenge(),)
    # X's activity events are JSON objects: a form or raw source makes no sense (and the CRC's
    # separation relies on a JSON object's "{").
    body_formats = frozenset({"json"})
    signature_header = HEADER
    hmac_prefix = PREFIX
    hmac_encoding = "base64"
    dev_secret = "dev-x-consumer-secret-local"
    vectors = LazyVectors(
        lambda: (
            recipe_vector(
                "cs_test",
                {HEADER: "sha256=f23rFHLEnblz2bAh4AvvpVm7+3J7xDEqo/suNihTMyI="},
                publisher="X",
                lacking="no vector and no Python signer",
            ),
        )
    )

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
                "for_user_id": resource,
                "tweet_create_events": [
                    {
                        "id_str": delivery_id,
                        "created_at": "Wed Oct 10 20:19:24 +0000 2018",
                        "text": "hello",
                        "timestamp_ms": str(timestamp * 1000),
                    }
                ],
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        return str(int(random_hex[:15], 16))
