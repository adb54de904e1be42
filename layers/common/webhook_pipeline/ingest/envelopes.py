"""Building the envelope of one delivery: forwarded headers, the body inline or as an S3 claim
check, the content digest, the gate state and, for one event of a batch, its position."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

from webhook_pipeline.envelope import Envelope, claim_check_prefix, utcnow
from webhook_pipeline.fields import body_b64
from webhook_pipeline.ingest.events import DeliveryEvent
from webhook_pipeline.ingest.ports import PayloadStore
from webhook_pipeline.providers.model import Verified
from webhook_pipeline.redaction import redact_headers
from webhook_pipeline.sources import ResolvedSource
from webhook_pipeline.webhook_request import WebhookRequest

VerifiedWith = Literal["current", "previous", "unsigned"]

# Headers copied into every envelope when present (never signature headers).
BASE_FORWARDED_HEADERS = ("content-type", "user-agent")


@dataclass(frozen=True)
class EnvelopeFactory:
    """Envelopes of the deliveries of one request.

    Attributes
    ----------
    source : ResolvedSource
        The source the request came for.
    request : WebhookRequest
        The verified request (for the forwarded headers).
    payloads : PayloadStore
        Where bodies over ``inline_body_max_bytes`` go (S3), under
        ``bodies/<source>/<first 32 hex of the id's SHA-256>/<claim token>``: at most 7 + 64 +
        1 + 32 + 1 + 32 = 137 bytes whatever the delivery id (S3 allows 1,024).
    inline_body_max_bytes : int
        Bodies up to this size (bytes) travel inside the envelope.
    verified_with : VerifiedWith | None
        Which secret verified the request (:func:`verified_with`), copied into each envelope.
    signed_headers : dict[str, str]
        The signed headers of the request (:func:`signed_headers`), copied into each envelope.
    """

    source: ResolvedSource
    request: WebhookRequest
    payloads: PayloadStore
    inline_body_max_bytes: int
    verified_with: VerifiedWith | None = None
    signed_headers: dict[str, str] = field(default_factory=dict)

    def build(
        self,
        event: DeliveryEvent,
        token: str,
        holds_claim: bool,
        batch: tuple[int, int] | None = None,
    ) -> Envelope:
        """The envelope of ``event``; ``batch`` is ``(index, count)`` for one event of many.

        Raises
        ------
        PayloadUnavailableError
            The claim-check body could not be stored.
        """
        wanted = (*BASE_FORWARDED_HEADERS, *self.source.forward_headers)
        headers = {n: v for n in wanted if (v := self.request.header(n)) is not None}
        size = len(event.body)
        inline = size <= self.inline_body_max_bytes
        pointer = None
        if not inline:
            id_digest = hashlib.sha256(event.delivery_id.encode()).hexdigest()[:32]
            pointer = self.payloads.put(
                f"{claim_check_prefix(self.source.name)}{id_digest}/{token}", event.body
            )
        return Envelope(
            source=self.source.name,
            delivery_id=event.delivery_id,
            received_at=utcnow(),
            event_type=event.event_type,
            resource_key=event.resource_key,
            sequence=event.sequence,
            headers=headers,
            body_b64=body_b64(event.body) if inline else None,
            body_ref=pointer,
            body_size=size,
            body_sha256=event.body_sha256,
            content_sha256=event.digest if event.digest != event.body_sha256 else None,
            batch_index=batch[0] if batch else None,
            batch_count=batch[1] if batch else None,
            gate="claimed" if holds_claim else "bypassed",
            provider=self.source.provider.name,
            verified_with=self.verified_with,
            signed_headers=self.signed_headers,
        )


def verified_with(source: ResolvedSource, verified: Verified) -> VerifiedWith:
    """``"unsigned"`` when the source's provider signs nothing (no id, timestamp, body or body
    field: a shared token only admitted the request), else which secret matched:
    ``"current"`` (index 0) or ``"previous"``."""
    signs = source.provider.signs
    if not (signs.body or signs.id or signs.timestamp or signs.body_fields):
        return "unsigned"
    return "current" if verified.secret_index == 0 else "previous"


def signed_headers(
    source: ResolvedSource, request: WebhookRequest, verified: Verified
) -> dict[str, str]:
    """The headers of ``request`` named in ``verified.signed_headers`` (lower case), the
    provider's signature header and every credential header redacted (a token scheme lists the
    token's own header as covered). A dict of at most a few entries: built once per request."""
    present = {n: v for n in verified.signed_headers if (v := request.header(n)) is not None}
    if not present:
        return {}
    return redact_headers(present, (source.provider.signature_header.lower(),))
