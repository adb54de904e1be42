"""Resend preset: Standard Webhooks v1 under ``svix-*`` headers, cross-checked with ``svix``;
its own name and retry horizon, no default ordering."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from svix.webhooks import Webhook as SvixWebhook
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers.builtin.resend import Resend
from webhook_pipeline.providers.builtin.standard_webhooks import StandardWebhooks
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

scheme = build("resend")


def test_it_is_the_standard_webhooks_scheme_under_its_own_name() -> None:
    assert isinstance(scheme, StandardWebhooks) and Resend.name == "resend"
    assert (
        Resend.retry_horizon_seconds == 28 * 3600 and "resend.com" in Resend.retry_horizon_reference
    )


def test_svix_and_ours_agree_both_ways() -> None:
    now = int(time.time())
    secret = scheme.dev_secret
    body = scheme.sample(
        delivery_id="msg_1", resource="em_1", sequence=now, event_type=None, timestamp=now
    ).body
    svix_sig = SvixWebhook(secret).sign("msg_1", datetime.fromtimestamp(now, UTC), body.decode())
    headers = {"svix-id": "msg_1", "svix-timestamp": str(now), "svix-signature": svix_sig}
    source = resolve(Source(name="resend", provider="resend"))
    req = make_request(headers, body)
    [event] = read_events(source, req, scheme.verify(req, [secret], now))
    assert (event.delivery_id, event.event_type, event.resource_key) == (
        "msg_1",
        "email.delivered",
        None,
    )
    SvixWebhook(secret).verify(body, scheme.sign(body, secret, timestamp=now, delivery_id="m"))


def test_the_sample_uses_the_svix_headers() -> None:
    sample = scheme.sample(delivery_id="m", resource="e", sequence=1, event_type=None, timestamp=1)
    headers = scheme.sign(sample.body, scheme.dev_secret, timestamp=1, delivery_id="m")
    assert sorted(headers) == ["svix-id", "svix-signature", "svix-timestamp"]
    with pytest.raises(KeyError):
        headers["webhook-id"]
