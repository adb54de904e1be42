"""From a verified request to its deliveries: parse the body as declared, split a batch, read each
event's identity and ordering fields from verified material only (invariant I8), check bounds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from webhook_pipeline.bounds import (
    MAX_DELIVERY_ID_BYTES,
    MAX_EVENT_TYPE_BYTES,
    MAX_RESOURCE_KEY_BYTES,
    utf8_size,
)
from webhook_pipeline.errors import BadDeliveryError
from webhook_pipeline.fields import (
    EventBody,
    FieldLocation,
    body_digest,
    json_array_items,
    parse_body,
    read_value,
)
from webhook_pipeline.providers.model import Verified
from webhook_pipeline.sources import ResolvedSource
from webhook_pipeline.webhook_request import WebhookRequest


@dataclass(frozen=True)
class DeliveryEvent:
    """One delivery read from a verified request.

    Attributes
    ----------
    delivery_id : str
        At most 256 UTF-8 bytes (:data:`~webhook_pipeline.bounds.MAX_DELIVERY_ID_BYTES`).
    event_type, resource_key : str | None
        At most 256 and 1,024 UTF-8 bytes (the bounds of ``webhook_pipeline.bounds``).
    sequence : int | None
        Ordering value (with ``resource_key``: both or neither).
    body : bytes
        The event's exact bytes (the whole body, or one element of a batch).
    digest : str
        Content digest for the duplicate body-consistency check.
    body_sha256 : str
        Hex SHA-256 of ``body`` (the envelope's ``body_sha256``; ``digest`` is the same string
        unless the provider has volatile fields).
    """

    delivery_id: str
    event_type: str | None
    resource_key: str | None
    sequence: int | None
    body: bytes
    digest: str
    body_sha256: str


def read_events(
    source: ResolvedSource, request: WebhookRequest, verified: Verified
) -> list[DeliveryEvent]:
    """The deliveries of a verified request: one, or one per element of a batched body.

    A batch is bounded by its bytes (``MAX_BODY_BYTES``, checked before verification: 413
    ``payload_too_large``), never by a count of events, so every batch a provider documents is
    accepted at the default 1 MiB:

    - SendGrid Event Webhook: a POST when the batch reaches 768 KB or after about 30 s,
      whichever comes first (Twilio SendGrid, "Getting started with the Event Webhook"), with
      no count: 1,900 small events are about 700 KB;
    - HubSpot webhooks: up to 100 events per request (HubSpot developer docs, Webhooks API);
    - Adyen standard webhooks, LINE Messaging API, Microsoft Graph change notifications: an
      array (``notificationItems``, ``events``, ``value``) with no documented maximum.

    The time one batch takes is bounded by the request's time budget instead
    (:mod:`webhook_pipeline.ingest.batch`): what does not fit is left to the sender's retry.

    Raises
    ------
    BadDeliveryError
        The body does not parse as the source's declared format (``body_not_json``...), a
        batch is not an array (``batch_invalid``), or a field is missing, malformed or over its
        bound in UTF-8 bytes (``delivery_id_missing``, ``delivery_id_too_long``,
        ``delivery_id_invalid``,
        ``sequence_invalid``, ``event_type_too_long``, ``resource_key_too_long``,
        ``ordering_fields_incomplete``, ``field_ambiguous``), or the provider finds the signed
        string can be split into another identity (``field_ambiguous``, ``field_invalid``:
        :meth:`~webhook_pipeline.providers.base.Provider.refuse_recut`).
    """
    document = parse_body(request.body, source.body_format)
    provider = source.provider
    roles = {
        "delivery_id": source.delivery_id,
        "event_type": source.event_type,
        "resource_key": source.resource_key,
        "sequence": source.sequence,
    }
    provider.refuse_recut(request, document, {k: v for k, v in roles.items() if v is not None})
    if provider.batch_path is None:
        bodies = [EventBody(document, request.body)]
    else:
        bodies = json_array_items(request.body, provider.batch_path)
    return [_event(source, request, verified, body) for body in bodies]


def _event(
    source: ResolvedSource, request: WebhookRequest, verified: Verified, body: EventBody
) -> DeliveryEvent:
    def read(location: FieldLocation | None) -> str | int | None:
        if location is None:
            return None
        return read_value(
            location,
            headers=request.headers,
            document=body.document,
            raw=body.raw,
            signed_id=verified.delivery_id,
            request_id=request.request_id,
        )

    delivery_id = read(source.delivery_id)
    if delivery_id is None:
        raise BadDeliveryError("delivery_id_missing")
    delivery_id = str(delivery_id)
    if utf8_size(delivery_id) > MAX_DELIVERY_ID_BYTES:
        raise BadDeliveryError(
            "delivery_id_too_long", f"more than {MAX_DELIVERY_ID_BYTES} UTF-8 bytes"
        )
    if not delivery_id.strip() or not delivery_id.isprintable():
        # blank, or holding control or separator characters (a NUL, a tab, U+2028): no
        # provider's ids look like that, and an operator could not look such an id up
        raise BadDeliveryError("delivery_id_invalid", "blank or not printable")
    event_type = _text(read(source.event_type))
    if event_type is not None and utf8_size(event_type) > MAX_EVENT_TYPE_BYTES:
        raise BadDeliveryError("event_type_too_long", f"more than {MAX_EVENT_TYPE_BYTES} bytes")
    resource_key = _text(read(source.resource_key))
    sequence = read(source.sequence)
    if sequence is not None and not isinstance(sequence, int):
        raise BadDeliveryError("sequence_invalid")
    if (resource_key is None) != (sequence is None):
        raise BadDeliveryError(
            "ordering_fields_incomplete",
            "resource key and sequence must both be present or both absent",
        )
    if resource_key is not None and utf8_size(resource_key) > MAX_RESOURCE_KEY_BYTES:
        raise BadDeliveryError(
            "resource_key_too_long", f"more than {MAX_RESOURCE_KEY_BYTES} UTF-8 bytes"
        )
    raw_sha256 = hashlib.sha256(body.raw).hexdigest()
    digest = body_digest(body.raw, body.document, source.provider.volatile_fields, raw_sha256)
    return DeliveryEvent(
        delivery_id, event_type, resource_key, sequence, body.raw, digest, raw_sha256
    )


def _text(value: str | int | None) -> str | None:
    return None if value is None else str(value)
