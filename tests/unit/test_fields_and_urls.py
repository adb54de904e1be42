"""Composite body fields, constant fields, the declared body format a provider reads, and the URL a
sender signed."""

from __future__ import annotations

import json

import pytest
from webhook_pipeline.errors import BadDeliveryError
from webhook_pipeline.fields import FieldLocation, json_array_items, parse_body, read_value
from webhook_pipeline.webhook_request import WebhookRequest, public_url

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


@pytest.mark.parametrize(
    "location",
    [FieldLocation(body="events.3.id"), FieldLocation(body=["events.0.id", "events.3.id"])],
)
def test_a_list_index_one_past_the_end_reads_as_absent(location: FieldLocation) -> None:
    three = {"events": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}
    assert read(location, three) is None
    four = {"events": [*three["events"], {"id": "d"}]}
    assert read(location, four) in ("d", "a:d")


def test_a_constant_is_the_same_for_every_delivery_and_counts_as_signed() -> None:
    from webhook_pipeline.sources import Source, resolve

    location = FieldLocation(value="bot")
    assert read(location, {"update_id": 1}) == read(location, None) == "bot"
    assert location.describe() == "value bot"
    with pytest.raises(ValueError, match="exactly one"):
        FieldLocation(value="bot", body="x")
    # Nothing is read from the request, so the source does not warn about it.
    source = resolve(
        Source.model_validate(
            {
                "name": "gh",
                "provider": "github",
                "resource_key": {"value": "repo"},
                "sequence": {"header": "x-github-delivery"},
            }
        )
    )
    assert source.resource_key == location.model_copy(update={"value": "repo"})
    assert "resource_key" not in source.unsigned and "sequence" in source.unsigned


def test_a_provider_reads_the_body_format_its_source_declares() -> None:
    from webhook_pipeline.errors import ConfigurationError
    from webhook_pipeline.sources import Source, resolve

    assert resolve(Source(name="s", provider="slack")).provider.body_format == "json"
    source = resolve(Source(name="s", provider="slack", body_format="form"))
    assert source.provider.body_format == source.body_format == "form"

    class JsonOnly(type(source.provider)):  # type: ignore[misc]
        body_formats = frozenset({"json"})

    provider = JsonOnly()
    with pytest.raises(ConfigurationError, match="cannot verify a 'form' body"):
        provider.use_body_format("form")
    provider.use_body_format(None)
    assert provider.body_format == "json"


def test_sign_request_is_the_body_unchanged_and_the_sign_headers_by_default() -> None:
    from webhook_pipeline.providers import provider_class

    slack = provider_class("slack")()
    sent = slack.sign_request(b"{}", "k", timestamp=1, delivery_id="d", url="https://a/x")
    assert sent.body == b"{}" and sent.url == "https://a/x"
    assert sent.headers == slack.sign(b"{}", "k", timestamp=1, delivery_id="d")


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


def test_a_request_id_location_reads_api_gateways_request_id() -> None:
    location = FieldLocation(request="id")
    assert location.describe() == "request id"
    got = read_value(location, headers={}, document=None, raw=b"", signed_id=None, request_id="r1")
    assert got == "r1"
    assert read(location, {"id": "x"}) is None  # no request id given: absent
    with pytest.raises(ValueError, match="exactly one"):
        FieldLocation(request="id", header="x")


def test_fields_a_provider_signs_inside_an_unsigned_body_count_as_signed() -> None:
    from webhook_pipeline.providers import provider_class
    from webhook_pipeline.sources import _covered

    adyen = provider_class("adyen")()
    signed = FieldLocation(body=["NotificationRequestItem.pspReference"])
    assert _covered(signed, adyen)
    assert _covered(FieldLocation(body="NotificationRequestItem.eventCode"), adyen)
    assert not _covered(FieldLocation(body="NotificationRequestItem.eventDate"), adyen)
    mixed = FieldLocation(body=["NotificationRequestItem.pspReference", "live"])
    assert not _covered(mixed, adyen)
    assert not _covered(FieldLocation(digest="sha256"), adyen)  # the bytes are not signed
    assert not _covered(FieldLocation(request="id"), adyen)


def _form_read(body: bytes, location: FieldLocation) -> str | int | None:
    return read_value(
        location, headers={}, document=parse_body(body, "form"), raw=body, signed_id=None
    )


def test_a_form_field_given_twice_with_different_values_is_not_read() -> None:
    for location in (
        FieldLocation(body="MessageStatus"),
        FieldLocation(body=["MessageSid", "MessageStatus"]),
    ):
        with pytest.raises(BadDeliveryError) as err:
            _form_read(b"MessageSid=SM1&MessageStatus=sent&MessageStatus=failed", location)
        assert err.value.reason == "field_ambiguous"


def test_a_form_field_given_twice_with_one_value_or_another_field_repeated_is_read() -> None:
    body = b"MessageSid=SM1&MessageStatus=sent&MessageStatus=sent&Digits=1&Digits=2"
    assert _form_read(body, FieldLocation(body=["MessageSid", "MessageStatus"])) == "SM1:sent"
    assert parse_body(body, "form").repeated == frozenset({"Digits"})


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (b'{"events":[{"id":"first"}],"events":[{"id":"last"}]}', "events"),
        (b'{"a":{"v":[{"id":"first"}]},"a":{"v":[{"id":"last"}]}}', "a.v"),
        (b'{"a":{"v":[{"id":"first"}],"v":[{"id":"last"}]}}', "a.v"),
    ],
)
def test_the_batch_split_reads_a_key_given_twice_as_json_loads_does(body: bytes, path: str) -> None:
    expected = json.loads(body)
    for part in path.split("."):
        expected = expected[part]
    items = json_array_items(body, path)
    assert [item.document for item in items] == expected == [{"id": "last"}]
    assert [json.loads(item.raw) for item in items] == expected
