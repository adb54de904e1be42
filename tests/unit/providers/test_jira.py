"""Jira Cloud: ``X-Hub-Signature: sha256=<hex>`` of the raw body; ``X-Atlassian-Webhook-Identifier``
is the (unsigned) delivery id, stable across retries."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "jira-secret"
BODY = b'{"timestamp":1700000000000,"webhookEvent":"jira:issue_created","issue":{"key":"P-1"}}'
scheme = build("jira")


def test_a_signature_computed_independently_verifies_and_reads_the_retry_stable_id() -> None:
    sig = "sha256=" + hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    headers = {
        "X-Hub-Signature": sig,
        "X-Atlassian-Webhook-Identifier": "48612",
        "X-Atlassian-Webhook-Retry": "2",
    }
    request = make_request(headers, BODY)
    source = resolve(Source(name="jira", provider="jira"))
    [event] = read_events(source, request, scheme.verify(request, [SECRET], 0))
    assert (event.delivery_id, event.event_type) == ("48612", "jira:issue_created")
    assert source.unsigned == ("delivery_id",)
    assert "x-atlassian-webhook-retry" in source.forward_headers


def test_the_published_github_vector_is_the_same_computation() -> None:
    [vector] = scheme.vectors
    assert vector.origin == "published"
    assert scheme.verify(make_request(vector.headers, vector.body), [vector.secret], 0)


def test_a_webhook_without_a_secret_sends_no_signature_and_is_refused() -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({"X-Atlassian-Webhook-Identifier": "1"}, BODY), [SECRET], 0)
    assert err.value.reason == "signature_missing"


def test_a_tampered_byte_and_a_wrong_key_are_rejected() -> None:
    sig = "sha256=" + hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    for body, key in ((BODY.replace(b"P-1", b"P-2"), SECRET), (BODY, "jira-secreT")):
        with pytest.raises(VerificationError) as err:
            scheme.verify(make_request({"X-Hub-Signature": sig}, body), [key], 0)
        assert err.value.reason == "signature_invalid"
