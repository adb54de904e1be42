"""Microsoft Graph change notifications: ``clientState`` per notification and the
``validationToken`` echo. There is NO signature (no HMAC).

Source of the scheme: microsoftgraph/microsoft-graph-docs-contrib
``concepts/change-notifications-delivery-webhooks.md`` (the notification URL is validated by a
POST ``?validationToken=<token>``, answered within 10 s with 200, ``text/plain`` and the token
URL-decoded; each notification of the ``value`` array carries the ``clientState`` given at
subscription creation, which the receiver must compare; deliveries must be answered 2xx within
3 s, otherwise they are retried for up to 4 hours, and an endpoint that is often slow is first
delayed, then its notifications dropped) and ``resources/changenotification.md`` (``id`` is
optional).

What is NOT signed: everything. ``clientState`` is a shared value inside each notification,
compared in constant time; it proves the sender knows it, not that anything else is unaltered,
and nothing says when it was sent. Rich notifications (with ``encryptedContent``) also carry
``validationTokens``, JWTs signed by Microsoft whose validation needs Microsoft's published keys
(fetched online, rotated): out of scope here, so a source that needs their guarantee must check
them in its hook. Every notification of a POST must carry a matching ``clientState`` or the POST
is 401 (one source = one ``clientState``: subscriptions with different values need different
notification URLs).

One POST carries many notifications: each is its own delivery (``batch_path = "value"``). Graph
gives no usable id (``id`` is optional): the delivery id is the SHA-256 of the notification's
exact bytes, the same on Graph's retries of it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.challenges import MAX_CHALLENGE_CHARS, query_value
from webhook_pipeline.providers.crypto import match_token
from webhook_pipeline.providers.json_body import json_object
from webhook_pipeline.providers.model import (
    HOUR,
    Answer,
    Defaults,
    Handshake,
    LazyVectors,
    Signs,
    Verified,
    iso_utc,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

FIELD = "clientState"
PARAMETER = "validationToken"


class ValidationToken(Handshake):
    """``POST ?validationToken=<token>``: answered 200 ``text/plain`` with the token, decoded
    once. Unsigned: answering proves only that the endpoint exists and is ours to configure."""

    name = "validationToken"
    method = "POST"
    signed = False

    def matches(self, request: WebhookRequest) -> bool:
        return query_value(request, PARAMETER) is not None

    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        """The decoded token as ``text/plain``.

        Raises
        ------
        VerificationError
            ``handshake_invalid``: an empty token or one over 1,024 characters.
        """
        token = query_value(request, PARAMETER)
        if not token or len(token) > MAX_CHALLENGE_CHARS:
            raise VerificationError("handshake_invalid", f"no usable {PARAMETER}")
        return Answer(200, token, "text/plain")

    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        token = "Validation: Testing client application reachability for subscription"
        return samples.HandshakeSample(
            "POST", query={PARAMETER: token}, headers={"content-type": "text/plain; charset=utf-8"}
        )


def notifications(body: bytes) -> list[Any] | None:
    """The ``value`` array of a JSON object body, or ``None``."""
    doc = json_object(body)
    value = doc.get("value") if doc is not None else None
    return value if isinstance(value, list) else None


@register
class MicrosoftGraph(Provider):
    """Microsoft Graph change notifications: each ``value[].clientState`` equals the source's
    secret (compared as UTF-8 bytes in constant time, current or previous). No header, no
    signature, no timestamp."""

    name = "microsoft-graph"
    title = "Microsoft Graph change notifications"
    reference = (
        "microsoftgraph/microsoft-graph-docs-contrib "
        "concepts/change-notifications-delivery-webhooks.md"
    )
    signs = Signs(
        id=None,
        timestamp=None,
        body=False,
        note="no signature (no HMAC): clientState is a shared value in each notification; the "
        "notifications are not signed; rich notifications' validationTokens (JWT) are not checked",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(digest="sha256"),
        event_type=FieldLocation(body="changeType"),
    )
    # No documented maximum of notifications per POST; bounded by MAX_BODY_BYTES.
    batch_path = "value"
    retry_horizon_seconds = 4 * HOUR
    retry_horizon_reference = (
        "change-notifications-delivery-webhooks.md: retried for up to 4 hours (providers-wave2 "
        "section 17)"
    )
    handshakes = (ValidationToken(),)
    signature_field = "clientState"  # in each item of ``value``
    credential_fields = (FIELD,)
    dev_secret = "dev-graph-client-state-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="secretClientValue",
                headers={"content-type": "application/json"},
                body=b'{"value":[{"id":"lsgTZMr9KwAAA","subscriptionId":"{subscription_guid}",'
                b'"subscriptionExpirationDateTime":"2016-03-19T22:11:09.952Z",'
                b'"clientState":"secretClientValue","changeType":"created",'
                b'"resource":"users/{user_guid}@{tenant_guid}/messages/{long_id_string}",'
                b'"resourceData":{"@odata.type":"#Microsoft.Graph.Message","id":"{long_id_string}"}}]}',
                now=0,
                origin="published",
                reference="the change notification example of change-notifications-delivery-"
                "webhooks.md (a shared value: equality, no computation)",
            ),
        )
    )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Check every notification's ``clientState`` (``now`` unused).

        Returns
        -------
        Verified
            ``secret_index`` is the highest index any notification needed (1 when one matched
            only the previous value).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no ``value`` array, an empty one, a notification without
            ``clientState``), ``signature_malformed`` (a notification that is not an object, a
            ``clientState`` that is not a string), ``signature_invalid`` (a ``clientState``
            equal to no secret).
        """
        items = notifications(request.body)
        if not items:
            raise VerificationError("signature_missing", "no value array of notifications")
        index = 0
        for item in items:
            if not isinstance(item, dict):
                raise VerificationError("signature_malformed", "a notification is not an object")
            state = item.get(FIELD)
            if state is None or state == "":
                raise VerificationError("signature_missing", f"a notification has no {FIELD}")
            if not isinstance(state, str):
                raise VerificationError("signature_malformed", f"{FIELD} is not a string")
            try:
                index = max(index, match_token(secrets, state))
            except UnicodeEncodeError as exc:  # a lone surrogate from a "\ud800" escape
                raise VerificationError("signature_malformed", f"{FIELD} is not Unicode") from exc
        return Verified(secret_index=index)

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """No headers: ``clientState`` is in each notification (:meth:`sign_body`)."""
        return {}

    def sign_body(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> bytes:
        """``body`` with ``clientState`` = ``secret`` in every notification; a JSON object that
        is not a ``{"value": [...]}`` collection is sent as its only notification."""
        doc = json_object(body)
        if doc is None:
            return body
        if not isinstance(doc.get("value"), list):
            doc = {"value": [doc]}
        for item in doc["value"]:
            if isinstance(item, dict):
                item[FIELD] = secret
        return json.dumps(doc, separators=(",", ":")).encode()

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        notification = {
            "id": delivery_id,
            "subscriptionId": "4f3c4a4e-1b0e-4a4f-9c1e-5f2f8f0c7d11",
            "subscriptionExpirationDateTime": iso_utc(timestamp + 3 * 86_400),
            "changeType": event_type or "updated",
            "resource": f"Users/{resource}/Messages/AAMkAGUwNjQ4ZjIx",
            "tenantId": "84bd8158-6d4d-4958-8b9f-9d6445542f95",
            "resourceData": {
                "@odata.type": "#Microsoft.Graph.Message",
                "@odata.id": f"Users/{resource}/Messages/AAMkAGUwNjQ4ZjIx",
                "@odata.etag": f'W/"CQAAABYAAAD{sequence}"',
                "id": "AAMkAGUwNjQ4ZjIx",
            },
        }
        return samples.Sample.json({"value": [notification]})

    def new_delivery_id(self, random_hex: str) -> str:
        return random_hex[:13]
