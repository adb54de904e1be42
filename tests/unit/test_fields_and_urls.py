"""Composite body fields, and the URL a sender signed."""

from __future__ import annotations

import pytest
from webhook_pipeline.fields import FieldLocation, read_value
from webhook_pipeline.http import WebhookRequest, public_url

pytestmark = pytest.mark.unit


def read(location: FieldLocation, document: object) -> object:
    return read_value(location, headers={}, document=document, raw=b"", signed_id=None)


def test_several_body_paths_make_one_value_joined_with_colons() -> None:
    location = FieldLocation(body=["item.psp", "item.code", "item.success"])
    doc = {"item": {"psp": "7914073381342284", "code": "AUTHORISATION", "success": True}}
    assert read(location, doc) == "7914073381342284:AUTHORISATION:true"
    assert location.describe() == "body item.psp+item.code+item.success"


@pytest.mark.parametrize("missing", [None, "", {"x": 1}, [1]])
def test_a_composite_value_is_absent_when_any_part_is(missing: object) -> None:
    location = FieldLocation(body=["a", "b"])
    assert read(location, {"a": "1", "b": missing}) is None


def request(
    path: str = "/webhooks/twilio", query: str = "", host: str = "x.example"
) -> WebhookRequest:
    return WebhookRequest("POST", "twilio", {}, b"", path=path, raw_query=query, host=host)


def test_public_url_prefers_the_source_then_the_base_then_the_request() -> None:
    req = request(query="foo=1&bar=2")
    assert public_url(req, None, None) == "https://x.example/webhooks/twilio?foo=1&bar=2"
    assert public_url(req, None, "https://hooks.example.com/") == (
        "https://hooks.example.com/webhooks/twilio?foo=1&bar=2"
    )
    assert public_url(req, "https://p.example/tw", "https://hooks.example.com") == (
        "https://p.example/tw?foo=1&bar=2"
    )
    # A source URL with a query of its own is taken exactly as configured.
    assert public_url(req, "https://p.example/tw?a=1", None) == "https://p.example/tw?a=1"
    assert public_url(request(), None, None) == "https://x.example/webhooks/twilio"
