"""Behaviour every signature scheme shares: registry, rotation, missing and non-ASCII headers,
timestamp parsing (case C05) and freshness in both directions."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.signatures import SCHEMES, SignatureScheme, build_scheme
from webhook_pipeline.signatures.base import decode_base64, decode_hex

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SOURCES = tomllib.loads((ROOT / "layers/common/sources.toml").read_text())["sources"]

NOW = 1_700_000_000
BODY = b'{"id":"evt_1","amount":1.50}'
SECRETS = {
    "stripe": "whsec_test_secret",
    "github": "It's a Secret to Everybody",
    "standard-webhooks": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "slack": "8f742231b10e8888abcd99yyyzzz85a5",
    "shopify": "shpss_client_secret",
    "generic-hmac": "generic-secret",
}
PREVIOUS = {
    "stripe": "whsec_previous",
    "github": "previous secret",
    "standard-webhooks": "whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB",
    "slack": "previous-signing-secret",
    "shopify": "shpss_previous",
    "generic-hmac": "previous-generic",
}
OTHER = {name: secret for name, secret in PREVIOUS.items()}
OTHER["standard-webhooks"] = "whsec_QkJCQkJCQkJCQkJCQkJCQkJCQkJC"
for _name in OTHER:
    if _name != "standard-webhooks":
        OTHER[_name] += "-other"
TIMESTAMPED = ["stripe", "standard-webhooks", "slack", "generic-hmac"]
# Where each timestamped scheme reads its timestamp from, and how to replace it in headers
# that the scheme's own sign() produced (the signature stays the one for NOW).
VERIFIED_HEADERS = {
    "stripe": ["stripe-signature"],
    "github": ["x-hub-signature-256"],
    "standard-webhooks": ["webhook-id", "webhook-timestamp", "webhook-signature"],
    "slack": ["x-slack-signature", "x-slack-request-timestamp"],
    "shopify": ["x-shopify-hmac-sha256"],
    "generic-hmac": ["x-signature", "x-timestamp"],
}
TIMESTAMP_HEADER = {
    "standard-webhooks": "webhook-timestamp",
    "slack": "x-slack-request-timestamp",
    "generic-hmac": "x-timestamp",
}
# The exact C05 inputs plus neighbours of their class.
BAD_TIMESTAMPS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "1e9",
    "1E9",
    " 1700000000 ",
    " 1700000000",
    "1700000000 ",
    "-1",
    "+1700000000",
    "1700000000.0",
    "1.7e9",
    "0x10",
    "0b1",
    "1_700_000_000",
    "\u0661\u0667\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660",  # Arabic-Indic digits
    "\uff11\uff17" + "\uff10" * 8,  # full-width digits
    "1" * 20,
    "9" * 400,
    "17000000OO",
    "\t1700000000",
]


def scheme_for(name: str) -> SignatureScheme:
    source = SOURCES[name]
    return build_scheme(name, source.get("scheme_options"), source.get("tolerance_seconds"))


def request(headers: dict[str, str], body: bytes = BODY) -> WebhookRequest:
    """A request as ``http.request_from_event`` builds it: header names lower-cased."""
    return WebhookRequest(
        method="POST", source="s", headers={k.lower(): v for k, v in headers.items()}, body=body
    )


def signed(
    name: str, *, secret: str | None = None, timestamp: int = NOW, body: bytes = BODY
) -> WebhookRequest:
    headers = scheme_for(name).sign(
        body, secret or SECRETS[name], timestamp=timestamp, delivery_id="dlv_1"
    )
    return request(headers, body)


def with_timestamp(name: str, raw: str) -> WebhookRequest:
    """A request signed by ``sign`` whose timestamp is then replaced by ``raw`` as sent."""
    req = signed(name)
    headers = dict(req.headers)
    if name == "stripe":
        v1 = headers["stripe-signature"].split(",v1=")[1]
        headers["stripe-signature"] = f"t={raw},v1={v1}"
    else:
        headers[TIMESTAMP_HEADER[name]] = raw
    return request(headers)


class TestRegistry:
    def test_every_scheme_is_registered_under_its_name(self) -> None:
        assert set(SCHEMES) == {
            "stripe",
            "github",
            "standard-webhooks",
            "slack",
            "shopify",
            "generic-hmac",
            "meta",
        }
        for name, cls in SCHEMES.items():
            assert cls.name == name
            assert issubclass(cls, SignatureScheme)

    def test_every_source_in_the_sources_file_builds(self) -> None:
        for name in SOURCES:
            assert scheme_for(name).name == SOURCES[name]["scheme"]

    def test_unknown_scheme_is_a_configuration_error(self) -> None:
        with pytest.raises(ConfigurationError, match="unknown signature scheme"):
            build_scheme("paddle")

    @pytest.mark.parametrize("name", ["stripe", "github", "standard-webhooks", "slack", "shopify"])
    def test_fixed_schemes_reject_options(self, name: str) -> None:
        with pytest.raises(ConfigurationError, match="unknown option"):
            build_scheme(name, {"header": "X-Other"})

    @pytest.mark.parametrize("tolerance", [0, -5, True, "300"])
    def test_tolerance_must_be_a_positive_integer(self, tolerance: object) -> None:
        with pytest.raises(ConfigurationError, match="tolerance_seconds"):
            build_scheme("stripe", None, tolerance)  # type: ignore[arg-type]

    def test_default_tolerance_is_300_seconds_for_timestamped_schemes(self) -> None:
        for name in TIMESTAMPED:
            assert SCHEMES[name].default_tolerance_seconds == 300


@pytest.mark.parametrize("name", sorted(SECRETS))
class TestEveryScheme:
    def test_own_signature_verifies_with_secret_index_0(self, name: str) -> None:
        result = scheme_for(name).verify(signed(name), [SECRETS[name]], NOW)
        assert result.secret_index == 0
        assert result.timestamp == (NOW if name in TIMESTAMPED else None)

    def test_previous_secret_matches_with_secret_index_1(self, name: str) -> None:
        req = signed(name, secret=PREVIOUS[name])
        result = scheme_for(name).verify(req, [SECRETS[name], PREVIOUS[name]], NOW)
        assert result.secret_index == 1

    def test_current_secret_wins_when_listed_first(self, name: str) -> None:
        result = scheme_for(name).verify(signed(name), [SECRETS[name], PREVIOUS[name]], NOW)
        assert result.secret_index == 0

    def test_neither_secret_matches(self, name: str) -> None:
        req = signed(name, secret=OTHER[name])
        with pytest.raises(VerificationError) as err:
            scheme_for(name).verify(req, [SECRETS[name], PREVIOUS[name]], NOW)
        assert err.value.reason == "signature_invalid"
        assert err.value.status == 401

    def test_any_body_byte_change_is_rejected(self, name: str) -> None:
        req = signed(name)
        for body in (BODY + b" ", BODY[:-1], b'{"id": "evt_1", "amount": 1.5}', b""):
            tampered = request(dict(req.headers), body)
            with pytest.raises(VerificationError) as err:
                scheme_for(name).verify(tampered, [SECRETS[name]], NOW)
            assert err.value.reason == "signature_invalid"

    def test_no_headers_is_signature_missing_not_key_error(self, name: str) -> None:
        with pytest.raises(VerificationError) as err:
            scheme_for(name).verify(request({}), [SECRETS[name]], NOW)
        assert err.value.reason == "signature_missing"
        assert not isinstance(err.value, TimestampError)

    def test_non_ascii_header_values_are_401_not_500(self, name: str) -> None:
        scheme = scheme_for(name)
        assert set(VERIFIED_HEADERS[name]) <= set(signed(name).headers)
        for header_name in VERIFIED_HEADERS[name]:
            value = signed(name).headers[header_name]
            for bad in (value[:-1] + "é", "é" + value, value + "\u200b", "٣"):
                headers = {**signed(name).headers, header_name: bad}
                with pytest.raises(VerificationError) as err:
                    scheme.verify(request(headers), [SECRETS[name]], NOW)
                assert err.value.status == 401, (header_name, bad)

    def test_error_messages_carry_no_secret_or_signature(self, name: str) -> None:
        req = signed(name, secret=OTHER[name])
        signature_values = list(req.headers.values())
        with pytest.raises(VerificationError) as err:
            scheme_for(name).verify(req, [SECRETS[name]], NOW)
        text = f"{err.value} {err.value.detail} {err.value.reason}"
        assert SECRETS[name] not in text
        assert OTHER[name] not in text
        for value in signature_values:
            if len(value) > 20:
                assert value not in text

    def test_no_secret_configured_is_a_configuration_error(self, name: str) -> None:
        for secrets in ([], [""]):
            with pytest.raises(ConfigurationError):
                scheme_for(name).verify(signed(name), secrets, NOW)


@pytest.mark.parametrize("name", TIMESTAMPED)
class TestTimestamps:
    @pytest.mark.parametrize("raw", BAD_TIMESTAMPS)
    def test_c05_not_a_plain_integer_is_timestamp_invalid(self, name: str, raw: str) -> None:
        with pytest.raises(VerificationError) as err:
            scheme_for(name).verify(with_timestamp(name, raw), [SECRETS[name]], NOW)
        assert err.value.status == 401
        if name == "stripe" and not raw.isascii():
            # Stripe's timestamp is inside its signature header: the whole header is malformed.
            assert err.value.reason == "signature_malformed"
        else:
            assert isinstance(err.value, TimestampError)
            assert err.value.reason == "timestamp_invalid"

    def test_c05_empty_timestamp_is_timestamp_missing(self, name: str) -> None:
        with pytest.raises(TimestampError) as err:
            scheme_for(name).verify(with_timestamp(name, ""), [SECRETS[name]], NOW)
        assert err.value.reason == "timestamp_missing"

    def test_absent_timestamp_is_timestamp_missing(self, name: str) -> None:
        req = signed(name)
        headers = dict(req.headers)
        if name == "stripe":
            headers["stripe-signature"] = "v1=" + headers["stripe-signature"].split(",v1=")[1]
        else:
            del headers[TIMESTAMP_HEADER[name]]
        with pytest.raises(TimestampError) as err:
            scheme_for(name).verify(request(headers), [SECRETS[name]], NOW)
        assert err.value.reason == "timestamp_missing"

    def test_c05_milliseconds_where_seconds_expected_is_rejected(self, name: str) -> None:
        # 1767267099257 ms is 2026-01-01; read as seconds it lies ~55,000 years ahead.
        ms = 1767267099257
        req = signed(name, timestamp=ms)
        now = ms / 1000
        with pytest.raises(TimestampError) as err:
            scheme_for(name).verify(req, [SECRETS[name]], now)
        assert err.value.reason == "timestamp_future"

    def test_changed_timestamp_breaks_the_signature(self, name: str) -> None:
        # The timestamp checked is the signed one: moving it (even to a fresh value) fails.
        with pytest.raises(VerificationError) as err:
            scheme_for(name).verify(with_timestamp(name, str(NOW + 1)), [SECRETS[name]], NOW)
        assert err.value.reason == "signature_invalid"

    @pytest.mark.parametrize("offset", [-300, -1, 0, 1, 300])
    def test_inside_the_tolerance_is_accepted(self, name: str, offset: int) -> None:
        req = signed(name, timestamp=NOW + offset)
        assert scheme_for(name).verify(req, [SECRETS[name]], NOW).timestamp is not None

    @pytest.mark.parametrize("offset", [-301, -3600, -NOW])
    def test_too_old_is_stale(self, name: str, offset: int) -> None:
        req = signed(name, timestamp=NOW + offset)
        with pytest.raises(TimestampError) as err:
            scheme_for(name).verify(req, [SECRETS[name]], NOW)
        assert err.value.reason == "timestamp_stale"

    @pytest.mark.parametrize("offset", [301, 3600, 10**9])
    def test_too_far_ahead_is_future(self, name: str, offset: int) -> None:
        req = signed(name, timestamp=NOW + offset)
        with pytest.raises(TimestampError) as err:
            scheme_for(name).verify(req, [SECRETS[name]], NOW)
        assert err.value.reason == "timestamp_future"

    def test_source_tolerance_overrides_the_default(self, name: str) -> None:
        source = SOURCES[name]
        scheme = build_scheme(name, source.get("scheme_options"), 60)
        scheme.verify(signed(name, timestamp=NOW - 60), [SECRETS[name]], NOW)
        with pytest.raises(TimestampError):
            scheme.verify(signed(name, timestamp=NOW - 61), [SECRETS[name]], NOW)

    def test_fractional_now_is_compared_exactly(self, name: str) -> None:
        req = signed(name, timestamp=NOW - 300)
        scheme_for(name).verify(req, [SECRETS[name]], NOW + 0.0)
        with pytest.raises(TimestampError):
            scheme_for(name).verify(req, [SECRETS[name]], NOW + 0.5)


class TestDecoders:
    @pytest.mark.parametrize("text", ["", "abc", "zz", "ab cd", " abcd", "abcd\n", "0x12", "é1"])
    def test_decode_hex_rejects(self, text: str) -> None:
        if text:
            assert decode_hex(text) is None

    def test_decode_hex_accepts_lower_case_and_upper_case_on_request(self) -> None:
        assert decode_hex("abcd") == b"\xab\xcd"
        assert decode_hex("aBcD") is None
        assert decode_hex("aBcD", uppercase=True) == b"\xab\xcd"

    @pytest.mark.parametrize(
        "text", ["abc", "ab=c", "a b=", "ab\n==", "-_ab", "abcd===", "é123", "YWJj\n"]
    )
    def test_decode_base64_rejects(self, text: str) -> None:
        assert decode_base64(text) is None

    def test_decode_base64_accepts_padded_standard_alphabet(self) -> None:
        assert decode_base64("YWI+/w==") == b"ab>\xff"
