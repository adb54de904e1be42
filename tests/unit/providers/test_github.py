"""GitHub scheme: the published vector from GitHub's docs, header shape, case C03 lookups."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.webhook_request import WebhookRequest, request_from_event

from tests.unit.providers.conftest import build as build_scheme

pytestmark = pytest.mark.unit

# github/docs validating-webhook-deliveries.md "Testing the webhook payload validation".
SECRET = "It's a Secret to Everybody"
BODY = b"Hello, World!"
SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

scheme = build_scheme("github")


def request(headers: dict[str, str], body: bytes = BODY) -> WebhookRequest:
    return WebhookRequest(
        method="POST",
        source="github",
        headers={k.lower(): v for k, v in headers.items()},
        body=body,
    )


class TestPublishedVector:
    def test_docs_vector_verifies(self) -> None:
        result = scheme.verify(request({"X-Hub-Signature-256": SIGNATURE}), [SECRET], 0)
        assert result.secret_index == 0
        assert result.timestamp is None

    def test_sign_reproduces_the_docs_vector(self) -> None:
        headers = scheme.sign(BODY, SECRET, timestamp=0, delivery_id="72d3162e-cc78-11e3")
        assert headers["X-Hub-Signature-256"] == SIGNATURE
        assert headers["X-GitHub-Delivery"] == "72d3162e-cc78-11e3"

    def test_independent_hmac_agrees(self) -> None:
        digest = hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
        assert f"sha256={digest}" == SIGNATURE

    def test_no_timestamp_means_now_is_irrelevant(self) -> None:
        for now in (0, 1_700_000_000, 10**12):
            scheme.verify(request({"X-Hub-Signature-256": SIGNATURE}), [SECRET], now)


class TestRejections:
    @pytest.mark.parametrize("body", [b"Hello, World", b"Hello, World!\n", b"hello, world!"])
    def test_tampered_body(self, body: bytes) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Hub-Signature-256": SIGNATURE}, body), [SECRET], 0)
        assert err.value.reason == "signature_invalid"

    def test_wrong_secret(self) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Hub-Signature-256": SIGNATURE}), ["It's a secret"], 0)
        assert err.value.reason == "signature_invalid"

    @pytest.mark.parametrize(
        "value",
        [
            SIGNATURE.removeprefix("sha256="),  # no prefix
            "sha1=" + SIGNATURE.removeprefix("sha256="),  # legacy X-Hub-Signature prefix
            "SHA256=" + SIGNATURE.removeprefix("sha256="),
            SIGNATURE.upper().replace("SHA256=", "sha256="),
            SIGNATURE[:-1],
            SIGNATURE + "0",
            SIGNATURE + " ",
            " " + SIGNATURE,
            "sha256=",
            "sha256=zz" + SIGNATURE[9:],
            f"{SIGNATURE},{SIGNATURE}",  # joined duplicate header
        ],
    )
    def test_malformed_values(self, value: str) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Hub-Signature-256": value}), [SECRET], 0)
        assert err.value.reason == "signature_malformed"

    def test_only_the_sha1_header_is_not_enough(self) -> None:
        sha1 = hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest()
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Hub-Signature": f"sha1={sha1}"}), [SECRET], 0)
        assert err.value.reason == "signature_missing"


class TestRotation:
    def test_previous_secret_gives_index_1(self) -> None:
        result = scheme.verify(
            request({"X-Hub-Signature-256": SIGNATURE}), ["new secret", SECRET], 0
        )
        assert result.secret_index == 1

    def test_neither_secret(self) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-Hub-Signature-256": SIGNATURE}), ["a", "b"], 0)
        assert err.value.status == 401


class TestCaseC03HeaderCase:
    @pytest.mark.parametrize("name", ["x-hub-signature-256", "X-Hub-Signature-256"])
    @pytest.mark.parametrize("version", ["2.0", "1.0"])
    def test_header_name_in_any_case_from_either_event_shape(self, name: str, version: str) -> None:
        event: dict[str, object] = {
            "headers": {name: SIGNATURE, "X-GitHub-Delivery": "d-1"},
            "body": BODY.decode(),
            "isBase64Encoded": False,
        }
        if version == "2.0":
            event |= {"version": "2.0", "requestContext": {"http": {"method": "POST"}}}
        else:
            event |= {"httpMethod": "POST"}
        assert scheme.verify(request_from_event(event), [SECRET], 0).secret_index == 0

    def test_missing_header_is_401_not_key_error(self) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request({"X-GitHub-Delivery": "d-1"}), [SECRET], 0)
        assert err.value.reason == "signature_missing"
        assert err.value.status == 401
