"""Mollie classic webhooks: unsigned, and represented so: an explicit option to accept them, the
loud unsigned warning at load, a URL token as the only check, the body never "verified", and a
delivery id per request so the same ``id=tr_...`` announcing another status is never lost."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.sources import Source, resolve, warn_unsigned
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build

pytestmark = pytest.mark.unit

TOKEN = "s3cr3t-url-token-of-at-least-32-characters"
OPTIONS = {"accept_unsigned": True}

mollie = build("mollie", OPTIONS)


def request(query: dict[str, str], body: bytes = b"id=tr_d0b0E3EA3v", **kw: Any) -> WebhookRequest:
    return WebhookRequest(
        "POST",
        "mollie",
        {"content-type": "application/x-www-form-urlencoded"},
        body,
        query=query,
        **kw,
    )


def source(**kw: Any):
    return resolve(Source(name="mollie", provider="mollie", options=dict(OPTIONS), **kw))


class TestUnsignedIsSaidOutLoud:
    @pytest.mark.parametrize("options", [{}, {"accept_unsigned": False}, {"accept_unsigned": 1}])
    def test_a_source_must_accept_unsigned_traffic_explicitly(self, options: dict) -> None:
        with pytest.raises(ConfigurationError, match="unsigned"):
            resolve(Source(name="mollie", provider="mollie", options=options))

    def test_nothing_is_declared_signed(self) -> None:
        assert (mollie.signs.id, mollie.signs.timestamp, mollie.signs.body) == (None, None, False)
        assert mollie.signs.body_fields == () and mollie.default_tolerance_seconds is None

    def test_the_source_loads_with_the_unsigned_warning(self, log_lines) -> None:
        resolved = source()
        assert resolved.unsigned == ("delivery_id",)
        warn_unsigned({"mollie": resolved})
        [line] = [x for x in log_lines if "signature does not cover" in x["message"]]
        assert line["level"] == "WARNING" and line["provider"] == "mollie"
        assert "fetch every id" in line["provider_note"]

    def test_require_signed_id_refuses_the_source(self) -> None:
        with pytest.raises(ConfigurationError, match="require_signed_id"):
            source(require_signed_id=True)


class TestTheUrlToken:
    def test_the_token_admits_the_request_and_nothing_else_is_checked(self) -> None:
        for body in (b"id=tr_d0b0E3EA3v", b"id=tr_forged&status=paid", b"anything at all"):
            assert mollie.verify(request({"token": TOKEN}, body), [TOKEN], 0).secret_index == 0

    @pytest.mark.parametrize(
        ("query", "reason"),
        [
            ({}, "signature_missing"),
            ({"token": ""}, "signature_missing"),
            ({"other": TOKEN}, "signature_missing"),
            ({"token": TOKEN[:-1]}, "signature_invalid"),
            ({"token": TOKEN + "x"}, "signature_invalid"),
            ({"token": TOKEN.upper()}, "signature_invalid"),
            ({"token": TOKEN[:-1] + "é"}, "signature_malformed"),
        ],
    )
    def test_a_missing_or_wrong_token_is_401(self, query: dict, reason: str) -> None:
        with pytest.raises(VerificationError) as err:
            mollie.verify(request(query), [TOKEN], 0)
        assert (err.value.status, err.value.reason) == (401, reason)

    def test_a_token_in_a_header_is_not_the_token(self) -> None:
        req = WebhookRequest("POST", "mollie", {"token": TOKEN}, b"id=tr_1")
        with pytest.raises(VerificationError):
            mollie.verify(req, [TOKEN], 0)

    def test_the_previous_token_matches_with_index_1(self) -> None:
        other = "another-url-token-of-32-characters-or-more"
        assert mollie.verify(request({"token": TOKEN}), [other, TOKEN], 0).secret_index == 1

    def test_the_parameter_name_is_an_option(self) -> None:
        named = build("mollie", {**OPTIONS, "token_parameter": "k"})
        assert named.verify(request({"k": TOKEN}), [TOKEN], 0).secret_index == 0
        with pytest.raises(VerificationError):
            named.verify(request({"token": TOKEN}), [TOKEN], 0)
        for bad in ("", "a b", "x" * 65, 7):
            with pytest.raises(ConfigurationError, match="token_parameter"):
                build("mollie", {**OPTIONS, "token_parameter": bad})

    def test_sign_request_puts_the_token_in_the_url(self) -> None:
        url = "https://hooks.example.com/webhooks/mollie"
        assert mollie.sign(b"id=tr_1", TOKEN, timestamp=0, delivery_id="") == {}
        assert mollie.sign_request(b"id=tr_1", TOKEN, timestamp=0, delivery_id="", url=url).url == (
            f"{url}?token={TOKEN}"
        )
        signed = mollie.sign_request(b"", TOKEN, timestamp=0, delivery_id="", url=url + "?a=1")
        assert signed.url == f"{url}?a=1&token={TOKEN}"

    @pytest.mark.parametrize(
        "bad", ["short-token", "a" * 31, "with space" * 4, "é" * 40, "a" * 257]
    )
    def test_the_token_is_long_and_url_safe(self, bad: str) -> None:
        with pytest.raises(ConfigurationError) as err:
            mollie.validate_secret(bad)
        assert bad not in str(err.value)
        mollie.validate_secret(TOKEN)


class TestEveryRequestIsItsOwnDelivery:
    def test_the_same_body_in_two_requests_is_two_deliveries(self) -> None:
        resolved = source()
        ids = []
        for request_id in ("req-paid", "req-refunded"):  # one payment, two status changes
            req = request({"token": TOKEN}, request_id=request_id)
            [event] = read_events(resolved, req, mollie.verify(req, [TOKEN], 0))
            ids.append(event.delivery_id)
            assert event.event_type is None and event.resource_key is None
        assert ids == ["req-paid", "req-refunded"]

    def test_without_a_request_id_there_is_no_delivery_id(self) -> None:
        from webhook_pipeline.errors import BadDeliveryError

        req = request({"token": TOKEN})
        with pytest.raises(BadDeliveryError, match="delivery_id_missing"):
            read_events(source(), req, mollie.verify(req, [TOKEN], 0))

    def test_the_request_id_comes_from_api_gateway(self) -> None:
        from webhook_pipeline.webhook_request import request_from_event

        event = {
            "version": "2.0",
            "rawPath": "/webhooks/mollie",
            "rawQueryString": f"token={TOKEN}",
            "queryStringParameters": {"token": TOKEN},
            "headers": {"content-type": "application/x-www-form-urlencoded"},
            "requestContext": {
                "http": {"method": "POST"},
                "requestId": "Abc123=",
                "domainName": "x",
            },
            "pathParameters": {"source": "mollie"},
            "body": "id=tr_1",
            "isBase64Encoded": False,
        }
        assert request_from_event(event).request_id == "Abc123="
