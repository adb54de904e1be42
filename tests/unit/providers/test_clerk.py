"""Clerk preset: Standard Webhooks v1 under ``svix-*`` headers, cross-checked with ``svix`` and
``standardwebhooks``; its own name, retry horizon and ordering (``data.id``, ms timestamp)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook
from svix.webhooks import Webhook as SvixWebhook
from svix.webhooks import WebhookVerificationError as SvixVerificationError
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers.builtin.clerk import Clerk
from webhook_pipeline.providers.builtin.standard_webhooks import StandardWebhooks
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

NOW = 1_700_000_000
scheme = build("clerk")


def test_it_is_the_standard_webhooks_scheme_under_its_own_name() -> None:
    assert isinstance(scheme, StandardWebhooks) and Clerk.name == "clerk"
    assert Clerk.title == "Clerk" and Clerk.retry_horizon_seconds == 28 * 3600
    assert Clerk.stop_statuses == frozenset({410})


def test_svix_signed_deliveries_verify_and_ours_verify_with_svix() -> None:
    # svix and standardwebhooks check the timestamp against the clock: sign at the present.
    now = int(time.time())
    secret = scheme.dev_secret
    body = scheme.sample(
        delivery_id="msg_1", resource="user_1", sequence=now, event_type=None, timestamp=now
    ).body
    svix_sig = SvixWebhook(secret).sign("msg_1", datetime.fromtimestamp(now, UTC), body.decode())
    headers = {"svix-id": "msg_1", "svix-timestamp": str(now), "svix-signature": svix_sig}
    assert scheme.verify(make_request(headers, body), [secret], now).family == "svix"
    ours = scheme.sign(body, secret, timestamp=now, delivery_id="msg_2")
    assert set(ours) == {"svix-id", "svix-timestamp", "svix-signature"}
    SvixWebhook(secret).verify(body, ours)  # raises WebhookVerificationError if not
    # @clerk/backend's way: the svix-* headers renamed to webhook-*, verified by standardwebhooks.
    StandardWebhook(secret).verify(
        body, {k.replace("svix-", "webhook-"): v for k, v in ours.items()}
    )
    with pytest.raises(SvixVerificationError):
        SvixWebhook(secret).verify(body + b" ", ours)


def test_an_unsigned_webhook_id_next_to_the_svix_headers_is_a_mismatch() -> None:
    body = b'{"type":"user.created","data":{"id":"user_1"},"timestamp":1}'
    headers = scheme.sign(body, scheme.dev_secret, timestamp=NOW, delivery_id="msg_1")
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request(headers | {"webhook-id": "new"}, body), [scheme.dev_secret], NOW)
    assert err.value.reason == "signature_mismatch"


def test_clerk_orders_by_the_object_id_and_the_millisecond_timestamp() -> None:
    source = resolve(Source(name="clerk", provider="clerk"))
    body = scheme.sample(
        delivery_id="msg_1", resource="user_9", sequence=NOW, event_type=None, timestamp=NOW
    ).body
    headers = scheme.sign(body, scheme.dev_secret, timestamp=NOW, delivery_id="msg_1")
    req = make_request(headers, body)
    [event] = read_events(source, req, scheme.verify(req, [scheme.dev_secret], NOW))
    assert (event.delivery_id, event.resource_key, event.sequence) == (
        "msg_1",
        "user_9",
        NOW * 1000,
    )
    assert json.loads(body)["type"] == event.event_type == "user.updated"


def test_a_fractional_svix_timestamp_verifies_as_clerks_own_tests_send_it() -> None:
    # Clerk's tests send svix-timestamp as JavaScript's (Date.now() / 1000).toString():
    # milliseconds as a decimal fraction. The Svix libraries sign its integer part.
    ms = int(time.time() * 1000) // 1000 * 1000 + 437
    raw = str(ms / 1000)
    secret = scheme.dev_secret
    body = b'{"type":"user.created","data":{"id":"user_1"},"timestamp":1}'
    signed_at = datetime.fromtimestamp(ms / 1000, UTC)
    signature = SvixWebhook(secret).sign("msg_1", signed_at, body.decode())
    headers = {"svix-id": "msg_1", "svix-timestamp": raw, "svix-signature": signature}
    SvixWebhook(secret).verify(body, headers)  # the library accepts it (raises if not)
    verified = scheme.verify(make_request(headers, body), [secret], ms / 1000)
    assert (verified.timestamp, verified.delivery_id) == (ms // 1000, "msg_1")
    assert raw.endswith(".437")
