"""Twilio: the published vectors (form, ports, repeated parameters, JSON ``bodySHA256``), what is
and is not signed, the TwiML acknowledgement, and cross-checks both ways with the ``twilio``
SDK's ``RequestValidator``."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qsl, urlencode

import pytest
from twilio.request_validator import RequestValidator
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.ingest.events import read_events
from webhook_pipeline.providers import provider_class
from webhook_pipeline.providers.builtin.twilio import EMPTY_TWIML, url_variants
from webhook_pipeline.sources import Source, resolve
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build

pytestmark = pytest.mark.unit

TOKEN = "12345"
URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
PARAMS = {
    "CallSid": "CA1234567890ABCDE",
    "Caller": "+14158675309",
    "Digits": "1234",
    "From": "+14158675309",
    "To": "+18005551212",
}
FORM = urlencode(PARAMS).encode()
JSON_BODY = b'{"property": "value", "boolean": true}'
BODY_HASH = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"

twilio = build("twilio")
sdk = RequestValidator(TOKEN)


class MultiDict(dict[str, list[str]]):
    """What Flask gives the SDK for repeated parameters (``getall``)."""

    def getall(self, name: str) -> list[str]:
        return self[name]


def multidict(body: bytes) -> MultiDict:
    out = MultiDict()
    for k, v in parse_qsl(body.decode(), keep_blank_values=True):
        out.setdefault(k, []).append(v)
    return out


def request(signature: str | None, body: bytes = FORM, url: str = URL) -> WebhookRequest:
    headers = {} if signature is None else {"x-twilio-signature": signature}
    return WebhookRequest("POST", "twilio", headers, body, public_url=url)


def ours_accepts(signature: str, body: bytes = FORM, url: str = URL, token: str = TOKEN) -> bool:
    try:
        twilio.verify(request(signature, body, url), [token], 0)
    except VerificationError:
        return False
    return True


class TestPublishedVectors:
    @pytest.mark.parametrize(
        "vector", provider_class("twilio").vectors, ids=["form", "port-443", "repeated", "json"]
    )
    def test_each_is_what_the_sdk_computes_and_verifies(self, vector) -> None:
        signature = vector.headers["X-Twilio-Signature"]
        assert ours_accepts(signature, vector.body, vector.url)
        params = vector.body.decode() if b"{" in vector.body else multidict(vector.body)
        assert sdk.validate(vector.url, params, signature)

    @pytest.mark.parametrize(
        ("signed_as", "signature"),
        [
            ("https://mycompany.com:443/myapp.php?foo=1&bar=2", "kvajT1Ptam85bY51eRf/AJRuM3w="),
            ("http://mycompany.com:80/myapp.php?foo=1&bar=2", "0ZXoZLH/DfblKGATFgpif+LLRf4="),
        ],
    )
    def test_default_ports_are_tried_both_ways(self, signed_as: str, signature: str) -> None:
        assert sdk.compute_signature(signed_as, PARAMS) == signature
        assert ours_accepts(signature, url=signed_as)  # received with the port
        assert ours_accepts(signature, url=signed_as.replace(":443", "").replace(":80", ""))

    def test_sign_reproduces_the_form_and_json_vectors(self) -> None:
        form = twilio.sign(FORM, TOKEN, timestamp=0, delivery_id="", url=URL)
        assert form == {"X-Twilio-Signature": "RSOYDt4T1cUTdK1PDd93/VVr8B8="}
        json_url = f"{URL}&bodySHA256={BODY_HASH}"
        assert twilio.sign(JSON_BODY, TOKEN, timestamp=0, delivery_id="", url=json_url) == {
            "X-Twilio-Signature": "a9nBmqA0ju/hNViExpshrM61xv4="
        }


class TestUrls:
    def test_variants_mirror_the_sdks_add_and_remove_port(self) -> None:
        assert url_variants("https://a.example/x?q=1") == [
            "https://a.example/x?q=1",
            "https://a.example:443/x?q=1",
        ]
        assert url_variants("http://a.example:8080/x") == [
            "http://a.example:8080/x",
            "http://a.example/x",
        ]
        assert url_variants("https://a.example:x/") == ["https://a.example:x/"]

    def test_another_url_path_scheme_or_query_is_invalid(self) -> None:
        signature = sdk.compute_signature(URL, PARAMS)
        for url in (
            URL.replace("myapp", "other"),
            URL.replace("https", "http"),
            URL + "&baz=3",
            URL.split("?")[0],
            "https://other.example/myapp.php?foo=1&bar=2",
        ):
            assert not ours_accepts(signature, url=url), url

    def test_any_port_is_removed_as_the_sdk_removes_it(self) -> None:
        signature = sdk.compute_signature(URL, PARAMS)
        odd_port = "https://mycompany.com:8443/myapp.php?foo=1&bar=2"
        assert ours_accepts(signature, url=odd_port) and sdk.validate(odd_port, PARAMS, signature)

    def test_without_public_url_the_request_itself_is_the_url(self) -> None:
        req = WebhookRequest(
            "POST",
            "twilio",
            {"x-twilio-signature": sdk.compute_signature(URL, PARAMS)},
            FORM,
            host="mycompany.com",
            path="/myapp.php",
            raw_query="foo=1&bar=2",
        )
        assert twilio.verify(req, [TOKEN], 0).secret_index == 0


class TestWhatIsSigned:
    def test_every_parameter_is_signed(self) -> None:
        signature = sdk.compute_signature(URL, PARAMS)
        for name in PARAMS:
            changed = urlencode({**PARAMS, name: PARAMS[name] + "0"}).encode()
            assert not ours_accepts(signature, changed), name
        assert not ours_accepts(signature, FORM + b"&Extra=1")
        assert not ours_accepts(signature, urlencode(dict(list(PARAMS.items())[1:])).encode())

    def test_the_raw_bytes_are_not_signed_only_the_decoded_parameters(self) -> None:
        signature = sdk.compute_signature(URL, PARAMS)
        reordered = urlencode(dict(reversed(PARAMS.items()))).encode()
        reencoded = FORM.replace(b"%2B", b"%2b").replace(b"CallSid=CA", b"CallSid=%43A")
        assert reordered != FORM and ours_accepts(signature, reordered)
        assert ours_accepts(signature, reencoded)

    def test_a_body_recut_at_a_name_value_boundary_keeps_the_signature(self) -> None:
        # A documented weakness of the scheme (no separators): both cuts sign the same string.
        honest = {"MessageSid": "SM1", "MessageStatus": "sent", "To": "+1"}
        signature = sdk.compute_signature(URL, honest)
        recut = b"MessageSid=SM1&MessageStatus=sentTo%2B1"
        assert ours_accepts(signature, recut)

    def test_the_idempotency_header_is_not_signed(self) -> None:
        source = resolve(
            Source(
                name="tw", provider="twilio", delivery_id={"header": "I-Twilio-Idempotency-Token"}
            )  # type: ignore[arg-type]
        )
        assert source.unsigned == ("delivery_id",)
        default = resolve(Source(name="tw", provider="twilio"))
        assert default.unsigned == () and default.body_format == "form"

    def test_the_default_delivery_id_is_message_sid_and_status(self) -> None:
        source = resolve(Source(name="tw", provider="twilio"))
        sample = twilio.sample(
            delivery_id="SM" + "a" * 32, resource="r", sequence=1, event_type="sent", timestamp=1
        )
        url = "https://hooks.example.com/webhooks/tw"
        headers = sample.headers | twilio.sign(
            sample.body, TOKEN, timestamp=0, delivery_id="", url=url
        )
        req = WebhookRequest(
            "POST", "tw", {k.lower(): v for k, v in headers.items()}, sample.body, public_url=url
        )
        [event] = read_events(source, req, twilio.verify(req, [TOKEN], 0))
        assert (event.delivery_id, event.event_type) == ("SM" + "a" * 32 + ":sent", "sent")


class TestJsonBodies:
    URL = f"{URL}&bodySHA256={BODY_HASH}"
    SIGNATURE = "a9nBmqA0ju/hNViExpshrM61xv4="

    def test_a_changed_body_does_not_hash_to_body_sha256(self) -> None:
        with pytest.raises(VerificationError) as err:
            twilio.verify(request(self.SIGNATURE, JSON_BODY + b" ", self.URL), [TOKEN], 0)
        assert err.value.reason == "signature_invalid"

    @pytest.mark.parametrize(
        "url",
        [
            f"{URL}&bodySHA256={BODY_HASH.upper()}",
            f"{URL}&bodySHA256={BODY_HASH}&bodySHA256={BODY_HASH}",
            f"{URL}&bodySHA256=",
        ],
    )
    def test_a_malformed_body_hash_is_malformed(self, url: str) -> None:
        with pytest.raises(VerificationError) as err:
            twilio.verify(request(self.SIGNATURE, JSON_BODY, url), [TOKEN], 0)
        assert err.value.reason == "signature_malformed"

    def test_the_sdk_and_we_agree_on_json_bodies_both_ways(self) -> None:
        body = '{"n":"Zoë ✓","amount":1.50}'
        url = f"{URL}&bodySHA256={hashlib.sha256(body.encode()).hexdigest()}"
        theirs = sdk.compute_signature(url, {})
        assert ours_accepts(theirs, body.encode(), url)
        ours = twilio.sign(body.encode(), TOKEN, timestamp=0, delivery_id="", url=url)
        assert sdk.validate(url, body, ours["X-Twilio-Signature"])


class TestSdkCrossCheck:
    FORMS = (
        FORM,
        b"Body=Zo%C3%AB+%E2%9C%93&From=%2B1&MessageSid=SM1&MessageStatus=received",
        b"Digits=5678&Digits=1234&Digits=5678&Sid=CA1",
        b"Empty=&Plus=a%2Bb&Space=a+b&Amp=a%26b",
    )

    @pytest.mark.parametrize("body", FORMS)
    def test_sdk_signed_verifies_with_ours(self, body: bytes) -> None:
        assert ours_accepts(sdk.compute_signature(URL, multidict(body)), body)

    @pytest.mark.parametrize("body", FORMS)
    def test_ours_verifies_with_the_sdk(self, body: bytes) -> None:
        ours = twilio.sign(body, TOKEN, timestamp=0, delivery_id="", url=URL)["X-Twilio-Signature"]
        assert sdk.validate(URL, multidict(body), ours)
        assert not sdk.validate(URL + "&x=1", multidict(body), ours)


class TestRejectionsAndSecrets:
    @pytest.mark.parametrize(
        ("signature", "reason"),
        [
            ("", "signature_missing"),
            (base64.b64encode(b"\x00" * 32).decode(), "signature_malformed"),  # SHA-256 size
            ("RSOYDt4T1cUTdK1PDd93/VVr8B8", "signature_malformed"),  # unpadded
            (base64.b64encode(b"\x00" * 20).decode(), "signature_invalid"),
        ],
    )
    def test_malformed_and_wrong_signatures(self, signature: str, reason: str) -> None:
        with pytest.raises(VerificationError) as err:
            twilio.verify(request(signature), [TOKEN], 0)
        assert err.value.reason == reason

    def test_a_non_utf8_form_body_is_malformed(self) -> None:
        with pytest.raises(VerificationError) as err:
            twilio.verify(request("RSOYDt4T1cUTdK1PDd93/VVr8B8=", b"Body=\xff"), [TOKEN], 0)
        assert err.value.reason == "signature_malformed"

    def test_the_secondary_token_matches_with_index_1(self) -> None:
        signature = sdk.compute_signature(URL, PARAMS)
        assert twilio.verify(request(signature), ["f" * 32, TOKEN], 0).secret_index == 1
        assert not ours_accepts(signature, token="1234")

    @pytest.mark.parametrize("bad", ["12345", "AC" + "0" * 32, "0123456789ABCDEF" * 2, "g" * 32])
    def test_only_an_auth_token_is_a_secret(self, bad: str) -> None:
        with pytest.raises(ConfigurationError):
            twilio.validate_secret(bad)
        twilio.validate_secret("0123456789abcdef" * 2)

    def test_the_acknowledgement_is_empty_twiml(self) -> None:
        for status in (202, 200):
            answer = twilio.acknowledgement(status, {"status": "accepted"})
            assert (answer.status, answer.text(), answer.content_type) == (
                status,
                EMPTY_TWIML,
                "text/xml",
            )
