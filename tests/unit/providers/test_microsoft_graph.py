"""Microsoft Graph change notifications: the ``validationToken`` POST echoed as text/plain
(decoded once), ``clientState`` compared per notification in constant time, the ``value`` array
split into one delivery per notification. No HMAC exists; rich notifications' JWT validation
tokens are out of scope."""

from __future__ import annotations

import json

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.sources import Source, resolve
from webhook_pipeline.webhook_request import WebhookRequest, request_from_event

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

scheme = build("microsoft-graph")
[validation] = scheme.handshakes
STATE = "secretClientValue"


def notification(n: int, state: object = STATE) -> dict[str, object]:
    item: dict[str, object] = {"subscriptionId": "s", "changeType": "created", "resource": f"r/{n}"}
    if state is not None:
        item["clientState"] = state
    return item


def post(items: list[object]) -> WebhookRequest:
    return make_request({"content-type": "application/json"}, json.dumps({"value": items}).encode())


def test_the_published_example_verifies() -> None:
    [vector] = scheme.vectors
    assert scheme.verify(make_request(vector.headers, vector.body), [STATE], 0).secret_index == 0


def test_every_notification_must_carry_a_matching_client_state() -> None:
    assert scheme.verify(post([notification(1), notification(2)]), [STATE], 0).secret_index == 0
    cases = [
        ([notification(1), notification(2, "rogue")], "signature_invalid"),
        ([notification(1), notification(2, None)], "signature_missing"),
        ([notification(1), notification(2, 7)], "signature_malformed"),
        ([notification(1), "not an object"], "signature_malformed"),
        ([], "signature_missing"),
    ]
    for items, reason in cases:
        with pytest.raises(VerificationError) as err:
            scheme.verify(post(items), [STATE], 0)
        assert err.value.reason == reason
    for body in (b'{"value":{}}', b"{}", b"[]", b"nope"):
        with pytest.raises(VerificationError) as err:
            scheme.verify(make_request({}, body), [STATE], 0)
        assert err.value.reason == "signature_missing"


def test_a_notification_matching_only_the_previous_state_is_reported_as_index_1() -> None:
    items = [notification(1, "new"), notification(2, "old")]
    assert scheme.verify(post(items), ["new", "old"], 0).secret_index == 1


def test_the_value_array_is_split_into_one_delivery_per_notification() -> None:
    source = resolve(Source(name="graph", provider="microsoft-graph"))
    body = scheme.sign_body(
        json.dumps({"value": [notification(1), notification(2)]}).encode(),
        STATE,
        timestamp=0,
        delivery_id="x",
    )
    request = make_request({}, body)
    events = read_events(source, request, scheme.verify(request, [STATE], 0))
    assert len(events) == 2 and len({e.delivery_id for e in events}) == 2
    assert [json.loads(e.body)["resource"] for e in events] == ["r/1", "r/2"]
    assert all(e.event_type == "created" for e in events)


def test_validation_token_is_echoed_as_text_plain_decoded_once() -> None:
    token = "Validation: Testing client application reachability for subscription Request-Id: 1"
    event = {
        "version": "2.0",
        "requestContext": {"http": {"method": "POST"}},
        "rawPath": "/webhooks/graph",
        "rawQueryString": "validationToken=Validation%3A+Testing+client+application+"
        "reachability+for+subscription+Request-Id%3A+1",
        "queryStringParameters": {"validationToken": token},
        "headers": {"content-type": "text/plain; charset=utf-8"},
        "pathParameters": {"source": "graph"},
    }
    request = request_from_event(event)
    assert validation.method == "POST" and not validation.signed and validation.matches(request)
    answer = validation.answer(request, SourceSecret([STATE]))
    assert (answer.status, answer.content_type, answer.text()) == (200, "text/plain", token)
    # a literal percent sign is decoded once, not twice
    double = WebhookRequest("POST", "g", {}, b"", raw_query="validationToken=100%2541")
    assert validation.answer(double, SourceSecret([STATE])).text() == "100%41"


def test_a_post_without_a_validation_token_is_a_notification() -> None:
    assert not validation.matches(post([notification(1)]))
    for query in ("validationToken=", "validationToken=" + "x" * 1025):
        request = WebhookRequest("POST", "g", {}, b"", raw_query=query)
        with pytest.raises(VerificationError) as err:
            validation.answer(request, SourceSecret([STATE]))
        assert err.value.reason == "handshake_invalid"


def test_no_hmac_and_the_jwt_validation_tokens_are_said_to_be_unchecked() -> None:
    assert scheme.signs.body is False and scheme.signature_header == ""
    assert "no signature (no HMAC)" in scheme.signs.note and "validationTokens" in scheme.signs.note
