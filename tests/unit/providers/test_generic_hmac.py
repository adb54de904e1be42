"""Generic HMAC scheme: every algorithm and encoding, with and without a timestamp (seconds and
milliseconds), delivery-id templates, and option validation at construction."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path
from typing import Any

import pytest
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.providers.builtin.generic_hmac import GenericHmac as GenericHmacScheme
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build as build_scheme

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SECRET = "generic-secret"
BODY = b'{"type":"thing.updated","resource":{"id":"r1","version":7}}'
NOW = 1_700_000_000
NOW_MS = NOW * 1000


def request(headers: dict[str, str], body: bytes = BODY) -> WebhookRequest:
    return WebhookRequest(
        method="POST",
        source="generic-hmac",
        headers={k.lower(): v for k, v in headers.items()},
        body=body,
    )


def reference(algorithm: str, encoding: str, message: bytes, secret: str = SECRET) -> str:
    digest = hmac.new(secret.encode(), message, getattr(hashlib, algorithm)).digest()
    return digest.hex() if encoding == "hex" else base64.b64encode(digest).decode()


class TestWithoutTimestamp:
    @pytest.mark.parametrize("algorithm", ["sha1", "sha256", "sha512"])
    @pytest.mark.parametrize("encoding", ["hex", "base64"])
    def test_each_algorithm_and_encoding(self, algorithm: str, encoding: str) -> None:
        scheme = build_scheme(
            "generic-hmac",
            {
                "header": "X-Sig",
                "prefix": f"{algorithm}=",
                "algorithm": algorithm,
                "encoding": encoding,
            },
        )
        value = f"{algorithm}=" + reference(algorithm, encoding, BODY)
        result = scheme.verify(request({"X-Sig": value}), [SECRET], NOW)
        assert result.secret_index == 0
        assert result.timestamp is None
        assert scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="d1") == {"X-Sig": value}
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Sig": value}, BODY + b" "), [SECRET], NOW)
        assert err.value.reason == "signature_invalid"

    @pytest.mark.parametrize(
        ("signed_with", "configured"),
        [
            ("sha1", "sha256"),
            ("sha256", "sha512"),
            ("sha512", "sha1"),
        ],
    )
    def test_other_algorithm_does_not_verify(self, signed_with: str, configured: str) -> None:
        scheme = build_scheme("generic-hmac", {"header": "X-Sig", "algorithm": configured})
        value = reference(signed_with, "hex", BODY)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Sig": value}), [SECRET], NOW)
        assert err.value.reason == "signature_invalid"

    def test_defaults_are_sha256_hex_of_the_body_without_prefix(self) -> None:
        scheme = build_scheme("generic-hmac", {"header": "X-Sig"})
        value = reference("sha256", "hex", BODY)
        assert scheme.verify(request({"x-sig": value}), [SECRET], NOW).secret_index == 0

    def test_upper_case_hex_is_accepted(self) -> None:
        scheme = build_scheme("generic-hmac", {"header": "X-Sig"})
        value = reference("sha256", "hex", BODY).upper()
        assert scheme.verify(request({"X-Sig": value}), [SECRET], NOW).secret_index == 0

    @pytest.mark.parametrize("encoding", ["hex", "base64"])
    def test_wrong_encoding_is_rejected(self, encoding: str) -> None:
        scheme = build_scheme("generic-hmac", {"header": "X-Sig", "encoding": encoding})
        other = "base64" if encoding == "hex" else "hex"
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Sig": reference("sha256", other, BODY)}), [SECRET], NOW)
        assert err.value.status == 401

    @pytest.mark.parametrize(
        "value",
        [
            "sha256:" + "ab" * 32,
            "SHA256=" + "ab" * 32,
            "ab" * 32,
            "sha256=",
            "sha256=xyz",
            "sha256=" + "ab" * 32 + " ",
        ],
    )
    def test_malformed_values(self, value: str) -> None:
        scheme = build_scheme("generic-hmac", {"header": "X-Sig", "prefix": "sha256="})
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Sig": value}), [SECRET], NOW)
        assert err.value.reason == "signature_malformed"

    def test_missing_header(self) -> None:
        scheme = build_scheme("generic-hmac", {"header": "X-Sig"})
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Signature": "ab" * 32}), [SECRET], NOW)
        assert err.value.reason == "signature_missing"

    def test_rotation(self) -> None:
        scheme = build_scheme("generic-hmac", {"header": "X-Sig"})
        value = reference("sha256", "hex", BODY, secret="old")
        assert scheme.verify(request({"X-Sig": value}), [SECRET, "old"], NOW).secret_index == 1
        with pytest.raises(VerificationError):
            scheme.verify(request({"X-Sig": value}), [SECRET, "older"], NOW)


class TestTimestampSeconds:
    """A ``{timestamp}.{body}`` template with a seconds timestamp header (no signed id)."""

    OPTIONS: dict[str, Any] = {  # noqa: RUF012 - read-only in tests
        "header": "X-Signature",
        "prefix": "sha256=",
        "algorithm": "sha256",
        "encoding": "hex",
        "timestamp_header": "X-Timestamp",
        "timestamp_unit": "seconds",
        "signed_template": "{timestamp}.{body}",
    }

    @pytest.fixture
    def scheme(self) -> GenericHmacScheme:
        built = build_scheme("generic-hmac", self.OPTIONS, 300)
        assert isinstance(built, GenericHmacScheme)
        return built

    def test_signed_string_is_timestamp_dot_body(self, scheme: GenericHmacScheme) -> None:
        value = "sha256=" + reference("sha256", "hex", f"{NOW}.".encode() + BODY)
        hdrs = {"X-Signature": value, "X-Timestamp": str(NOW)}
        result = scheme.verify(request(hdrs), [SECRET], NOW)
        assert result.timestamp == NOW
        assert scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="d1") == hdrs

    @pytest.mark.parametrize(
        ("offset", "reason"),
        [
            (-301, "timestamp_stale"),
            (301, "timestamp_future"),
        ],
    )
    def test_both_directions(self, scheme: GenericHmacScheme, offset: int, reason: str) -> None:
        hdrs = scheme.sign(BODY, SECRET, timestamp=NOW + offset, delivery_id="d1")
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(hdrs), [SECRET], NOW)
        assert err.value.reason == reason

    def test_c05_milliseconds_where_seconds_expected(self, scheme: GenericHmacScheme) -> None:
        value = "sha256=" + reference("sha256", "hex", b"1767267099257." + BODY)
        hdrs = {"X-Signature": value, "X-Timestamp": "1767267099257"}
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(hdrs), [SECRET], 1767267099.257)
        assert err.value.reason == "timestamp_future"

    def test_unsigned_timestamp_change_is_detected(self, scheme: GenericHmacScheme) -> None:
        hdrs = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="d1")
        hdrs["X-Timestamp"] = str(NOW - 10)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs), [SECRET], NOW)
        assert err.value.reason == "signature_invalid"


class TestTimestampMilliseconds:
    OPTIONS: dict[str, Any] = {  # noqa: RUF012 - read-only in tests
        "header": "X-Sig",
        "algorithm": "sha256",
        "encoding": "base64",
        "timestamp_header": "X-Ts",
        "timestamp_unit": "milliseconds",
        "signed_template": "{timestamp}:{body}",
    }

    def test_milliseconds_are_signed_and_returned_as_sent(self) -> None:
        scheme = build_scheme("generic-hmac", self.OPTIONS)
        hdrs = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="d1")
        assert hdrs["X-Ts"] == str(NOW_MS)
        assert hdrs["X-Sig"] == reference("sha256", "base64", f"{NOW_MS}:".encode() + BODY)
        verified = scheme.verify(request(hdrs), [SECRET], NOW)
        assert (verified.raw_timestamp, verified.timestamp) == (str(NOW_MS), NOW)

    @pytest.mark.parametrize(
        ("ts_ms", "ok"),
        [
            (NOW_MS - 300_000, True),
            (NOW_MS + 300_000, True),
            (NOW_MS + 300_001, False),
            (NOW_MS - 300_001, False),
            (NOW_MS + 123, True),
        ],
    )
    def test_tolerance_at_millisecond_precision(self, ts_ms: int, ok: bool) -> None:
        scheme = build_scheme("generic-hmac", self.OPTIONS)
        value = reference("sha256", "base64", f"{ts_ms}:".encode() + BODY)
        req = request({"X-Sig": value, "X-Ts": str(ts_ms)})
        if ok:
            verified = scheme.verify(req, [SECRET], NOW)
            assert (verified.raw_timestamp, verified.timestamp) == (str(ts_ms), ts_ms // 1000)
        else:
            with pytest.raises(TimestampError):
                scheme.verify(req, [SECRET], NOW)

    def test_seconds_where_milliseconds_expected_are_stale(self) -> None:
        scheme = build_scheme("generic-hmac", self.OPTIONS)
        value = reference("sha256", "base64", f"{NOW}:".encode() + BODY)
        with pytest.raises(TimestampError) as err:
            scheme.verify(request({"X-Sig": value, "X-Ts": str(NOW)}), [SECRET], NOW)
        assert err.value.reason == "timestamp_stale"

    @pytest.mark.parametrize("raw", ["nan", "1.7e12", "1700000000000.0", " 1700000000000", ""])
    def test_c05_values(self, raw: str) -> None:
        scheme = build_scheme("generic-hmac", self.OPTIONS)
        value = reference("sha256", "base64", f"{raw}:".encode() + BODY)
        with pytest.raises(TimestampError):
            scheme.verify(request({"X-Sig": value, "X-Ts": raw}), [SECRET], NOW)


class TestTemplates:
    def test_delivery_id_in_the_template(self) -> None:
        options = {
            "header": "X-Sig",
            "timestamp_header": "X-Ts",
            "delivery_id_header": "X-Delivery-Id",
            "signed_template": "v1|{delivery_id}|{timestamp}|{body}",
        }
        scheme = build_scheme("generic-hmac", options)
        hdrs = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="dlv-42")
        message = f"v1|dlv-42|{NOW}|".encode() + BODY
        assert hdrs == {
            "X-Ts": str(NOW),
            "X-Delivery-Id": "dlv-42",
            "X-Sig": reference("sha256", "hex", message),
        }
        assert scheme.verify(request(hdrs), [SECRET], NOW).timestamp == NOW
        moved = {**hdrs, "X-Delivery-Id": "dlv-43"}
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(moved), [SECRET], NOW)
        assert err.value.reason == "signature_invalid"
        missing = {k: v for k, v in hdrs.items() if k != "X-Delivery-Id"}
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(missing), [SECRET], NOW)
        assert err.value.reason == "signature_malformed"

    def test_a_delivery_id_holding_a_separator_of_the_template_is_refused(self) -> None:
        # {delivery_id}.{body}: id "ord.1" + body "2.{..}" signs what id "ord" + "1.2.{..}" signs
        template = {"signed_template": "{delivery_id}.{body}", "delivery_id_header": "X-Id"}
        scheme = build_scheme("generic-hmac", {"header": "X-Sig", **template})
        hdrs = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="ord.1")
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs), [SECRET], NOW)
        assert err.value.reason == "signature_malformed"
        plain = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="ord-1")
        assert scheme.verify(request(plain), [SECRET], NOW).delivery_id == "ord-1"

    def test_delivery_id_header_without_placeholder_is_only_sent(self) -> None:
        scheme = build_scheme("generic-hmac", {"header": "X-Sig", "delivery_id_header": "X-Id"})
        hdrs = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="d1")
        assert hdrs["X-Id"] == "d1"
        assert hdrs["X-Sig"] == reference("sha256", "hex", BODY)
        hdrs.pop("X-Id")
        assert scheme.verify(request(hdrs), [SECRET], NOW).secret_index == 0

    @pytest.mark.parametrize(
        "body",
        [
            b"{timestamp}{body}{delivery_id}",
            b"\xff\xfe not utf-8 \x00",
            b"{",
            b"}}{{",
            b"%s %d",
        ],
    )
    def test_body_bytes_are_never_formatted_or_decoded(self, body: bytes) -> None:
        options = {
            "header": "X-Sig",
            "timestamp_header": "X-Ts",
            "signed_template": "{timestamp}.{body}",
        }
        scheme = build_scheme("generic-hmac", options)
        hdrs = scheme.sign(body, SECRET, timestamp=NOW, delivery_id="d1")
        assert hdrs["X-Sig"] == reference("sha256", "hex", f"{NOW}.".encode() + body)
        assert scheme.verify(request(hdrs, body), [SECRET], NOW).secret_index == 0

    def test_literal_braces_in_the_template(self) -> None:
        scheme = build_scheme("generic-hmac", {"header": "X-Sig", "signed_template": "{{{body}}}"})
        hdrs = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="d1")
        assert hdrs["X-Sig"] == reference("sha256", "hex", b"{" + BODY + b"}")


class TestOptionValidation:
    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({}, "'header'"),
            ({"header": ""}, "'header'"),
            ({"header": "X", "algorithm": "md5"}, "algorithm 'md5'"),
            ({"header": "X", "algorithm": "SHA256"}, "algorithm 'SHA256'"),
            ({"header": "X", "encoding": "base32"}, "encoding 'base32'"),
            ({"header": "X", "encoding": "base64url"}, "encoding 'base64url'"),
            ({"header": "X", "timestamp_unit": "microseconds"}, "timestamp_unit"),
            ({"header": "X", "tolerance": "300"}, "unknown option"),
            ({"header": "X", "signed_template": "{timestamp}"}, "{body} exactly once"),
            ({"header": "X", "signed_template": "{body}{body}"}, "{body} exactly once"),
            ({"header": "X", "signed_template": "{foo}.{body}"}, "{foo}"),
            ({"header": "X", "signed_template": "{}.{body}"}, "placeholder"),
            ({"header": "X", "signed_template": "{body!r}"}, "format specs"),
            ({"header": "X", "signed_template": "{body:>10}"}, "format specs"),
            ({"header": "X", "signed_template": "{body"}, "signed_template is invalid"),
            ({"header": "X", "signed_template": "{timestamp}.{body}"}, "timestamp_header"),
            ({"header": "X", "timestamp_header": "X-Ts"}, "timestamp_header"),
            ({"header": "X", "signed_template": "{delivery_id}.{body}"}, "delivery_id_header"),
            ({"header": "X", "algorithm": 256}, "must be a string"),
        ],
    )
    def test_invalid_options_fail_construction(self, options: dict[str, Any], message: str) -> None:
        with pytest.raises(ConfigurationError) as err:
            build_scheme("generic-hmac", options)
        assert message in str(err.value)
