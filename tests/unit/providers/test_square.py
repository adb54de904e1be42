"""Square: the published vectors, the notification URL inside the signature (the URL the sender
called, from ``public_url`` or the request itself), and a cross-check with the ``squareup``
SDK's ``verify_signature`` (it has no signer: it accepts ours, and we agree with it on every
candidate)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from square.utils.webhooks_helper import verify_signature
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.providers import provider_class
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build

pytestmark = pytest.mark.unit

VECTORS = provider_class("square").vectors
KEY, URL = "Ibxx_5AKakO-3qeNVR61Dw", "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"
BODY = VECTORS[0].body
SIGNATURE = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="

square = build("square")


def request(
    signature: str | None,
    body: bytes = BODY,
    *,
    public_url: str = URL,
    host: str = "",
    path: str = "",
    query: str = "",
) -> WebhookRequest:
    headers = {} if signature is None else {"x-square-hmacsha256-signature": signature}
    return WebhookRequest(
        "POST",
        "square",
        headers,
        body,
        public_url=public_url,
        host=host,
        path=path,
        raw_query=query,
    )


def ours_accepts(body: bytes, signature: str, url: str = URL, key: str = KEY) -> bool:
    try:
        square.verify(request(signature, body, public_url=url), [key], 0)
    except VerificationError:
        return False
    return True


def sdk_accepts(body: bytes, signature: str, url: str = URL, key: str = KEY) -> bool:
    return verify_signature(
        request_body=body.decode("utf-8"),
        signature_header=signature,
        signature_key=key,
        notification_url=url,
    )


class TestPublishedVectors:
    @pytest.mark.parametrize("vector", VECTORS, ids=["test_notification", "raw-angle-brackets"])
    def test_each_verifies_and_sign_reproduces_it(self, vector) -> None:
        signature = vector.headers["x-square-hmacsha256-signature"]
        req = request(signature, vector.body, public_url=vector.url)
        assert square.verify(req, [vector.secret], 0).secret_index == 0
        signed = square.sign(
            vector.body, vector.secret, timestamp=0, delivery_id="", url=vector.url
        )
        assert signed == {"x-square-hmacsha256-signature": signature}

    def test_escaped_angle_brackets_are_other_bytes(self) -> None:
        vector = VECTORS[1]
        escaped = vector.body.replace(b">", b"\\u003e").replace(b"<", b"\\u003c")
        sig = vector.headers["x-square-hmacsha256-signature"]
        assert not ours_accepts(escaped, sig, vector.url, vector.secret)


class TestTheUrlIsSigned:
    def test_another_url_is_signature_invalid(self) -> None:
        for url in (URL + "/", URL.replace("https", "http"), URL + "?x=1", URL.upper()):
            assert not ours_accepts(BODY, SIGNATURE, url)

    def test_without_a_public_url_the_request_itself_is_the_url(self) -> None:
        # What API Gateway saw: host webhook.site, path /679a...; the sender called https.
        req = request(
            SIGNATURE, public_url="", host="webhook.site", path=URL.split("webhook.site")[1]
        )
        assert square.verify(req, [KEY], 0).secret_index == 0
        with pytest.raises(VerificationError):  # the query string is part of the URL
            square.verify(
                request(
                    SIGNATURE,
                    public_url="",
                    host="webhook.site",
                    path=URL.split("webhook.site")[1],
                    query="a=1",
                ),
                [KEY],
                0,
            )

    def test_a_notification_url_with_a_query_string_is_signed_with_it(self) -> None:
        url = "https://hooks.example.com/webhooks/square?tenant=7"
        sig = square.sign(BODY, KEY, timestamp=0, delivery_id="", url=url)
        header = sig["x-square-hmacsha256-signature"]
        assert ours_accepts(BODY, header, url) and sdk_accepts(BODY, header, url)
        assert not ours_accepts(BODY, header, url.split("?")[0])


class TestRejections:
    @pytest.mark.parametrize(
        ("signature", "reason"),
        [
            ("", "signature_missing"),
            (SIGNATURE.rstrip("="), "signature_malformed"),  # unpadded
            (base64.b64encode(b"\x00" * 20).decode(), "signature_malformed"),  # a SHA-1 length
            (SIGNATURE.replace("/", "_"), "signature_malformed"),  # url-safe alphabet
            (base64.b64encode(b"\x00" * 32).decode(), "signature_invalid"),
        ],
    )
    def test_malformed_and_wrong_signatures(self, signature: str, reason: str) -> None:
        with pytest.raises(VerificationError) as err:
            square.verify(request(signature), [KEY], 0)
        assert err.value.reason == reason

    def test_a_tampered_byte_and_a_wrong_key(self) -> None:
        assert not ours_accepts(BODY.replace(b"MLEF", b"MLEG"), SIGNATURE)
        assert not ours_accepts(BODY, SIGNATURE, key="Ibxx_5AKakO-3qeNVR61Dx")

    def test_the_previous_signature_key_matches_with_index_1(self) -> None:
        assert square.verify(request(SIGNATURE), ["other-signature-key", KEY], 0).secret_index == 1

    @pytest.mark.parametrize("bad", ["short", "key with spaces here", "signaturé-key-0000"])
    def test_unusable_keys_are_refused(self, bad: str) -> None:
        with pytest.raises(ConfigurationError):
            square.validate_secret(bad)


BODIES = (BODY, b'{"amount":1.50}', '{"n":"Zoë ✓"}'.encode(), b"{}\n")


@pytest.mark.parametrize("body", BODIES)
def test_the_sdk_accepts_our_signature(body: bytes) -> None:
    header = square.sign(body, KEY, timestamp=0, delivery_id="", url=URL)
    assert sdk_accepts(body, header["x-square-hmacsha256-signature"])


@pytest.mark.parametrize("body", BODIES)
def test_we_accept_and_reject_exactly_what_the_sdk_does(body: bytes) -> None:
    good = base64.b64encode(
        hmac.new(KEY.encode(), URL.encode() + body, hashlib.sha256).digest()
    ).decode()
    candidates = [good, SIGNATURE, base64.b64encode(b"\x01" * 32).decode()]
    for url in (URL, URL + "/"):
        for signature in candidates:
            assert ours_accepts(body, signature, url) is sdk_accepts(body, signature, url)
    assert ours_accepts(body, good)
