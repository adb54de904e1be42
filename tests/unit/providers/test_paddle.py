"""Paddle Billing: the published vector, header parsing as the SDK reads it, the tolerance we
chose against the SDK's 5 s, and cross-checks both ways with ``paddle-python-sdk``."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from paddle_billing.Notifications import Secret, Verifier
from paddle_billing.Notifications.PaddleSignature import PaddleSignature
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build

pytestmark = pytest.mark.unit

SECRET = "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh"
TS = 1_696_195_954
H1 = "d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02"
OTHER = "pdl_ntfset_01hv000000000000000000000_OtherSecretForRotationTests00"

paddle = build("paddle")


def request(header: str | None, body: bytes = b"hello-world") -> WebhookRequest:
    headers = {} if header is None else {"paddle-signature": header}
    return WebhookRequest(method="POST", source="paddle", headers=headers, body=body)


@dataclass
class SdkRequest:
    """What the SDK's Verifier reads: ``headers`` and ``body`` bytes."""

    headers: dict[str, str]
    body: bytes


def sdk_h1(body: bytes, ts: int, secret: str = SECRET) -> str:
    """The SDK's own HMAC (PaddleSignature.calculate_hmac over ``{ts}:{body}``)."""
    return PaddleSignature.calculate_hmac(secret, f"{ts}:".encode() + body).hexdigest()


def sdk_accepts(header: str, body: bytes, variance: int = 5) -> bool:
    req = SdkRequest({"Paddle-Signature": header}, body)
    try:
        return bool(Verifier(maximum_variance=variance).verify(req, Secret(SECRET)))
    except ConnectionRefusedError:
        return False


class TestVector:
    def test_the_published_vector_with_its_dummy_h1_verifies(self) -> None:
        verified = paddle.verify(request(f"ts={TS};h1={H1};h1=dummy"), [SECRET], TS)
        assert (verified.secret_index, verified.timestamp) == (0, TS)

    def test_sign_reproduces_the_published_h1(self) -> None:
        assert paddle.sign(b"hello-world", SECRET, timestamp=TS, delivery_id="x") == {
            "Paddle-Signature": f"ts={TS};h1={H1}"
        }

    def test_the_key_is_the_whole_secret_string(self) -> None:
        with pytest.raises(VerificationError) as err:
            paddle.verify(request(f"ts={TS};h1={H1}"), [SECRET.split("_", 3)[-1]], TS)
        assert err.value.reason == "signature_invalid"


class TestHeaderShapes:
    def test_several_h1_during_rotation_match_the_previous_secret(self) -> None:
        body = b'{"event_id":"evt_1"}'
        header = f"ts={TS};h1={sdk_h1(body, TS, OTHER)};h1={sdk_h1(body, TS)}"
        assert paddle.verify(request(header, body), [OTHER, SECRET], TS).secret_index == 0
        assert paddle.verify(request(header, body), ["pdl_x" * 4, SECRET], TS).secret_index == 1

    @pytest.mark.parametrize(
        ("header", "reason"),
        [
            (f"ts={TS};h1={H1};v2=abc", "signature_malformed"),  # the SDK raises on it
            (f"ts={TS}; h1={H1}", "signature_malformed"),  # " h1" is an unknown key
            (f"ts={TS};h1={H1.upper()}", "signature_malformed"),
            (f"ts={TS};h1={H1}=", "signature_malformed"),
            (f"ts={TS};h1={H1},ts={TS + 1};h1={H1}", "signature_malformed"),  # two joined
            (f"ts={TS};ts={TS + 1};h1={H1}", "signature_malformed"),
            (f"h1={H1}", "timestamp_missing"),
            (f"ts=;h1={H1}", "timestamp_missing"),
            (f"ts=0x10;h1={H1}", "timestamp_invalid"),
            (f"ts={TS}", "signature_malformed"),
            (f"ts={TS};h1={'0' * 64}", "signature_invalid"),
        ],
    )
    def test_malformed_headers_are_401_with_their_reason(self, header: str, reason: str) -> None:
        with pytest.raises(VerificationError) as err:
            paddle.verify(request(header), [SECRET], TS)
        assert (err.value.status, err.value.reason) == (401, reason)

    def test_items_without_equals_are_ignored_as_the_sdk_ignores_them(self) -> None:
        assert paddle.verify(request(f"ts={TS};;h1={H1};junk"), [SECRET], TS).timestamp == TS

    def test_a_tampered_byte_and_a_wrong_key_are_rejected(self) -> None:
        for req, key in (
            (request(f"ts={TS};h1={H1}", b"hello-worlD"), SECRET),
            (request(f"ts={TS};h1={H1}"), OTHER),
        ):
            with pytest.raises(VerificationError) as err:
                paddle.verify(req, [key], TS)
            assert err.value.reason == "signature_invalid"


class TestTolerance:
    def test_default_is_60_seconds_both_ways(self) -> None:
        assert paddle.tolerance_seconds == 60
        for now, reason in ((TS + 61, "timestamp_stale"), (TS - 61, "timestamp_future")):
            with pytest.raises(TimestampError) as err:
                paddle.verify(request(f"ts={TS};h1={H1}"), [SECRET], now)
            assert err.value.reason == reason
        for now in (TS + 60, TS - 60):
            paddle.verify(request(f"ts={TS};h1={H1}"), [SECRET], now)

    def test_a_source_can_restore_the_sdks_5_seconds_and_agrees_with_the_sdk(self) -> None:
        strict = build("paddle", tolerance=5)
        body = b'{"event_id":"evt_2"}'
        now = int(time.time())
        for offset in (-6, -5, 0, 5, 6):
            ts = now + offset
            header = f"ts={ts};h1={sdk_h1(body, ts)}"
            try:
                strict.verify(request(header, body), [SECRET], now)
                ours = True
            except TimestampError:
                ours = False
            # The SDK reads the clock itself: compare only where a second's drift cannot matter.
            if abs(offset) != 5:
                assert ours is sdk_accepts(header, body) is (abs(offset) <= 5), offset


class TestSdkCrossCheck:
    BODIES = (b"hello-world", b'{"event_id":"evt_1","amount":1.50}', "Zoë ✓".encode(), b"{}\n")

    @pytest.mark.parametrize("body", BODIES)
    def test_the_sdks_hmac_verifies_with_ours(self, body: bytes) -> None:
        header = f"ts={TS};h1={sdk_h1(body, TS)}"
        assert paddle.verify(request(header, body), [SECRET], TS).secret_index == 0

    @pytest.mark.parametrize("body", BODIES)
    def test_ours_verifies_with_the_sdk(self, body: bytes) -> None:
        now = int(time.time())
        header = paddle.sign(body, SECRET, timestamp=now, delivery_id="x")["Paddle-Signature"]
        assert sdk_accepts(header, body, variance=60)
        assert not sdk_accepts(header, body + b" ", variance=60)


class TestSecretFormat:
    @pytest.mark.parametrize("bad", ["short_secret", "pdl_ntfset_ with space_0000", "pdl_é" * 5])
    def test_unusable_secrets_are_refused_without_echoing_them(self, bad: str) -> None:
        with pytest.raises(ConfigurationError) as err:
            paddle.validate_secret(bad)
        assert bad not in str(err.value)

    def test_the_published_secret_is_accepted(self) -> None:
        paddle.validate_secret(SECRET)
