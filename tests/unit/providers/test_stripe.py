"""Stripe scheme: the SDK vector, cross-checks with the ``stripe`` SDK, cases C01 and C03."""

from __future__ import annotations

import json
import time

import pytest
import stripe
from webhook_pipeline.errors import TimestampError, VerificationError
from webhook_pipeline.webhook_request import WebhookRequest, request_from_event

from tests.unit.providers.conftest import build as build_scheme

pytestmark = pytest.mark.unit

SECRET = "whsec_test_secret"
T = 1700000000
VECTOR_BODY = b'{"id":"evt_1"}'
VECTOR_V1 = "248a374f50f943a28b0f6ab50faf9a7e7e29b710fa26df9fb1618b9bf8ea9c9a"
C01_BODY = b'{"id":"evt_1","amount":1.50}'

scheme = build_scheme("stripe")


def request(header: str | None, body: bytes = VECTOR_BODY) -> WebhookRequest:
    headers = {} if header is None else {"stripe-signature": header}
    return WebhookRequest(method="POST", source="stripe", headers=headers, body=body)


def sdk_header(body: bytes, secret: str = SECRET, timestamp: int = T) -> str:
    return stripe.WebhookSignature.generate_signature_header(
        body.decode("utf-8"), secret, timestamp=timestamp
    )


def v1_of(header: str) -> str:
    return header.split(",v1=")[1]


def sdk_accepts(body: bytes, header: str, secret: str = SECRET) -> bool:
    try:
        stripe.WebhookSignature.verify_header(body, header, secret, tolerance=300)
    except stripe.SignatureVerificationError:
        return False
    return True


class TestVector:
    def test_sdk_vector_verifies(self) -> None:
        result = scheme.verify(request(f"t={T},v1={VECTOR_V1}"), [SECRET], T)
        assert result.secret_index == 0
        assert result.timestamp == T

    def test_sign_reproduces_the_sdk_vector(self) -> None:
        headers = scheme.sign(VECTOR_BODY, SECRET, timestamp=T, delivery_id="evt_1")
        assert headers == {"Stripe-Signature": f"t={T},v1={VECTOR_V1}"}

    def test_key_is_the_whole_whsec_string_not_base64_decoded(self) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(f"t={T},v1={VECTOR_V1}"), ["test_secret"], T)
        assert err.value.reason == "signature_invalid"


class TestSdkCrossCheck:
    BODIES = (VECTOR_BODY, C01_BODY, '{"name":"Zoë ✓"}'.encode(), b"", b"{}\n")

    @pytest.mark.parametrize("body", BODIES)
    def test_sdk_generated_headers_verify(self, body: bytes) -> None:
        assert scheme.verify(request(sdk_header(body), body), [SECRET], T).secret_index == 0

    @pytest.mark.parametrize("body", BODIES)
    def test_our_signature_is_what_the_sdk_generates(self, body: bytes) -> None:
        ours = scheme.sign(body, SECRET, timestamp=T, delivery_id="evt_1")["Stripe-Signature"]
        assert ours == sdk_header(body)

    @pytest.mark.parametrize("body", BODIES)
    def test_sdk_verifier_accepts_our_signature(self, body: bytes) -> None:
        now = int(time.time())
        ours = scheme.sign(body, SECRET, timestamp=now, delivery_id="evt_1")["Stripe-Signature"]
        assert sdk_accepts(body, ours)

    def test_tampered_body_rejected_by_both(self) -> None:
        header = sdk_header(VECTOR_BODY, timestamp=int(time.time()))
        tampered = b'{"id":"evt_2"}'
        assert not sdk_accepts(tampered, header)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(header, tampered), [SECRET], time.time())
        assert err.value.reason == "signature_invalid"

    def test_wrong_secret_rejected_by_both(self) -> None:
        header = sdk_header(VECTOR_BODY, secret="whsec_other", timestamp=int(time.time()))
        assert not sdk_accepts(VECTOR_BODY, header)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(header), [SECRET], time.time())
        assert err.value.reason == "signature_invalid"

    def test_changed_timestamp_rejected_by_both(self) -> None:
        now = int(time.time())
        header = sdk_header(VECTOR_BODY, timestamp=now)
        moved = f"t={now - 1},v1={v1_of(header)}"
        assert not sdk_accepts(VECTOR_BODY, moved)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(moved), [SECRET], now)
        assert err.value.reason == "signature_invalid"

    def test_old_timestamp_rejected_by_both(self) -> None:
        now = int(time.time())
        header = sdk_header(VECTOR_BODY, timestamp=now - 360)
        assert not sdk_accepts(VECTOR_BODY, header)
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(header), [SECRET], now)
        assert err.value.reason == "timestamp_stale"

    def test_future_timestamp_rejected_by_us_though_the_sdk_allows_it(self) -> None:
        # Our policy is stricter than the SDK: freshness is checked in both directions.
        now = int(time.time())
        header = sdk_header(VECTOR_BODY, timestamp=now + 360)
        assert sdk_accepts(VECTOR_BODY, header)
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(header), [SECRET], now)
        assert err.value.reason == "timestamp_future"

    def test_upper_case_hex_rejected_by_both(self) -> None:
        now = int(time.time())
        header = sdk_header(VECTOR_BODY, timestamp=now)
        upper = f"t={now},v1={v1_of(header).upper()}"
        assert not sdk_accepts(VECTOR_BODY, upper)
        with pytest.raises(VerificationError):
            scheme.verify(request(upper), [SECRET], now)


class TestHeaderShape:
    def test_v0_and_unknown_keys_are_ignored(self) -> None:
        header = f"t={T},v0={'0' * 64},foo=bar,v1={VECTOR_V1},v2=x"
        assert scheme.verify(request(header), [SECRET], T).secret_index == 0

    def test_v0_alone_is_not_accepted_even_if_it_holds_the_right_digest(self) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(f"t={T},v0={VECTOR_V1}"), [SECRET], T)
        assert err.value.reason == "signature_malformed"

    def test_several_v1_during_a_secret_roll(self) -> None:
        other = v1_of(sdk_header(VECTOR_BODY, secret="whsec_new"))
        for header in (f"t={T},v1={other},v1={VECTOR_V1}", f"t={T},v1={VECTOR_V1},v1={other}"):
            assert scheme.verify(request(header), [SECRET], T).secret_index == 0
            assert scheme.verify(request(header), ["whsec_new"], T).secret_index == 0

    def test_a_garbage_v1_next_to_a_good_one_does_not_hide_it(self) -> None:
        header = f"t={T},v1=not-hex,v1={VECTOR_V1}"
        assert scheme.verify(request(header), [SECRET], T).secret_index == 0

    @pytest.mark.parametrize(
        "header",
        [
            f"t={T}",
            f"t={T},v1=",
            f"t={T},v1=xyz",
            f"t={T},v1={VECTOR_V1[:-1]}",
            f"t={T},v1= {VECTOR_V1}",
            f"t={T},v1={VECTOR_V1} ",
            f"t={T},V1={VECTOR_V1}",
        ],
    )
    def test_no_usable_v1_is_malformed(self, header: str) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(header), [SECRET], T)
        assert err.value.reason == "signature_malformed"
        assert err.value.status == 401

    @pytest.mark.parametrize("header", ["garbage", ",,,", f"T={T},v1={VECTOR_V1}"])
    def test_no_t_item_is_timestamp_missing(self, header: str) -> None:
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(header), [SECRET], T)
        assert err.value.reason == "timestamp_missing"

    @pytest.mark.parametrize(
        "header",
        [
            f"t={T};v1={VECTOR_V1}",
            f"t={T} ,v1={VECTOR_V1}",
            f"t=={T},v1={VECTOR_V1}",
        ],
    )
    def test_t_with_trailing_junk_is_timestamp_invalid(self, header: str) -> None:
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(header), [SECRET], T)
        assert err.value.reason == "timestamp_invalid"

    def test_no_t_is_timestamp_missing(self) -> None:
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(f"v1={VECTOR_V1}"), [SECRET], T)
        assert err.value.reason == "timestamp_missing"

    def test_space_after_comma_between_items_is_tolerated(self) -> None:
        assert scheme.verify(request(f"t={T}, v1={VECTOR_V1}"), [SECRET], T).timestamp == T

    def test_a_timestamp_with_a_leading_zero_is_refused(self) -> None:
        # The same integer spelled another way changes the signed bytes; no sender writes it,
        # and it is refused before the signature (parse_plain_int: another spelling of one time
        # could take a digit from a body signed right before it, docs/providers.md).
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(f"t=0{T},v1={VECTOR_V1}"), [SECRET], T)
        assert err.value.reason == "timestamp_invalid"


class TestCaseC01ExactBytes:
    def test_exact_received_bytes_verify(self) -> None:
        header = sdk_header(C01_BODY)
        assert scheme.verify(request(header, C01_BODY), [SECRET], T).secret_index == 0

    def test_re_serialized_body_does_not_verify(self) -> None:
        header = sdk_header(C01_BODY)
        reserialized = json.dumps(json.loads(C01_BODY)).encode()
        assert reserialized == b'{"id": "evt_1", "amount": 1.5}'
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(header, reserialized), [SECRET], T)
        assert err.value.reason == "signature_invalid"


class TestCaseC03JoinedHeaders:
    def test_exact_c03_value_is_401_not_a_crash(self) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request("t=1700000000,v1=aaa,t=1700000000,v1=bbb"), [SECRET], T)
        assert err.value.status == 401

    def test_same_t_twice_merges_the_v1_lists(self) -> None:
        other = sdk_header(VECTOR_BODY, secret="whsec_other")
        joined = f"{sdk_header(VECTOR_BODY)},{other}"
        assert joined.count(f"t={T}") == 2
        assert scheme.verify(request(joined), [SECRET], T).secret_index == 0
        reversed_order = f"{other},{sdk_header(VECTOR_BODY)}"
        assert scheme.verify(request(reversed_order), [SECRET], T).timestamp == T

    @pytest.mark.parametrize("first_valid", [True, False])
    def test_two_different_t_values_are_rejected_either_order(self, first_valid: bool) -> None:
        valid = sdk_header(VECTOR_BODY, timestamp=T)
        other = sdk_header(VECTOR_BODY, timestamp=T + 1)  # also valid on its own
        joined = f"{valid},{other}" if first_valid else f"{other},{valid}"
        assert scheme.verify(request(valid), [SECRET], T).timestamp == T
        assert scheme.verify(request(other), [SECRET], T).timestamp == T + 1
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(joined), [SECRET], T)
        assert err.value.reason == "signature_malformed"

    def test_exact_c03_shape_with_different_t_is_malformed(self) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request("t=1700000000,v1=aaa,t=1700000001,v1=bbb"), [SECRET], T)
        assert err.value.reason == "signature_malformed"

    def test_missing_header_is_signature_missing_not_key_error(self) -> None:
        for header in (None, ""):
            with pytest.raises(VerificationError) as err:
                scheme.verify(request(header), [SECRET], T)
            assert err.value.reason == "signature_missing"

    @pytest.mark.parametrize("name", ["Stripe-Signature", "stripe-signature", "STRIPE-SIGNATURE"])
    def test_header_name_any_case_through_the_event_parser(self, name: str) -> None:
        event = {
            "version": "2.0",
            "requestContext": {"http": {"method": "POST"}},
            "headers": {name: sdk_header(VECTOR_BODY)},
            "body": VECTOR_BODY.decode(),
            "isBase64Encoded": False,
        }
        assert scheme.verify(request_from_event(event), [SECRET], T).secret_index == 0

    def test_rest_api_repeated_headers_with_different_t_are_rejected(self) -> None:
        event = {
            "httpMethod": "POST",
            "multiValueHeaders": {
                "Stripe-Signature": [
                    sdk_header(VECTOR_BODY),
                    sdk_header(VECTOR_BODY, timestamp=T + 5),
                ]
            },
            "body": VECTOR_BODY.decode(),
            "isBase64Encoded": False,
        }
        with pytest.raises(VerificationError) as err:
            scheme.verify(request_from_event(event), [SECRET], T)
        assert err.value.reason == "signature_malformed"
