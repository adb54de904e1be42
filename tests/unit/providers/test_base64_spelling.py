"""Base64 signatures: one spelling per signature, as each provider's SDK decides.

Base64 spells each byte string once when the unused low bits of the last character before
``=`` are zero; a decoder that ignores those bits (``base64.b64decode``) reads other spellings of
the same bytes too (``...fp4=`` and ``...fp5=``). An SDK that compares the encoded strings (Adyen,
Twilio, Square, LINE, HubSpot, and the documented recipes of X, Shopify, Typeform, Zendesk)
refuses every other spelling, and so must we; an SDK that decodes first (SendGrid's, the
``standardwebhooks`` / ``svix`` libraries) accepts them, and so do we. For every registered
provider whose signed request holds a padded base64 value (found, not listed), a re-spelled
signature is refused or accepted as declared here, and the SDKs are asked the same question.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable
from urllib.parse import parse_qsl

import pytest
from Adyen.util import is_valid_hmac_notification
from hubspot.utils.signature import Signature
from linebot.v3.webhook import SignatureValidator
from sendgrid.helpers.eventwebhook import EventWebhook
from square.utils.webhooks_helper import verify_signature as square_verifies
from standardwebhooks.webhooks import Webhook as StandardWebhook
from svix.webhooks import Webhook as SvixWebhook
from twilio.request_validator import RequestValidator
from webhook_pipeline.errors import VerificationError
from webhook_pipeline.providers import Provider, all_providers
from webhook_pipeline.providers.crypto import decode_base64
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.test_shared import request_to

pytestmark = pytest.mark.unit

PROVIDERS = all_providers()
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
#: A padded base64 value of at least 16 bytes (a digest, a DER or Ed25519 signature).
PADDED = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{20,}={1,2}")
#: Providers whose SDK decodes before comparing: another spelling verifies there, and here
#: (Postmark's is a Basic credential, not a signature: HTTP servers decode it).
RESPELLING_ACCEPTED = {"sendgrid", "standard-webhooks", "clerk", "resend", "postmark"}
#: Providers whose signed request carries a padded base64 value (generic HMAC with
#: ``encoding = "base64"``).
BASE64_SIGNED = {
    "adyen", "adyen-banking", "clerk", "generic-hmac", "hubspot", "line", "postmark", "resend",
    "sendgrid", "shopify", "square", "standard-webhooks", "twilio", "typeform", "x", "zendesk",
}  # fmt: skip
GENERIC_BASE64 = {
    "header": "X-Signature",
    "timestamp_header": "X-Timestamp",
    "signed_template": "{timestamp}.{body}",
    "encoding": "base64",
}
URL = "https://webhooks.example.com/webhooks/{name}?a=1"
BODY = b'{"id":"evt_1","amount":1.50}'


def respell(value: str) -> str:
    """``value`` with the lowest unused bit of its last character set: the same bytes."""
    data = value.rstrip("=")
    last = ALPHABET[ALPHABET.index(data[-1]) ^ 1]
    respelled = data[:-1] + last + value[len(data) :]
    assert respelled != value and base64.b64decode(respelled) == base64.b64decode(value)
    return respelled


def build(name: str) -> Provider:
    cls = PROVIDERS[name]
    options = GENERIC_BASE64 if name == "generic-hmac" else dict(cls.example_options)
    return cls(options)


def body_for(p: Provider) -> bytes:
    """The provider's own sample body (a form body for Twilio, items for Adyen...)."""
    return p.sample(
        delivery_id=p.new_delivery_id("cd" * 16), resource="r", sequence=1, event_type=None,
        timestamp=1,
    ).body  # fmt: skip


def signed(name: str, now: int) -> tuple[Provider, WebhookRequest, str]:
    """The provider, a request it signed at about ``now``, and the signing secret. SendGrid's
    ECDSA signature is a DER of 70 to 72 bytes, so padded or not, and the same for one body and
    timestamp: it is signed a second earlier until it is padded (a last character to re-spell).
    """
    p = build(name)
    url = URL.format(name=name)
    for earlier in range(60):
        sent = p.sign_request(
            body_for(p), p.dev_secret, timestamp=now - earlier, delivery_id="m_1", url=url
        )
        req = request_to(sent.url or url, dict(sent.headers), sent.body)
        if respelled_variants(req):
            break
    return p, req, p.dev_secret


def respelled_variants(req: WebhookRequest) -> list[WebhookRequest]:
    """``req`` with one padded base64 value (in a header or the body) re-spelled, per value."""
    out = []
    for key, value in req.headers.items():
        for token in PADDED.findall(value):
            headers = {**req.headers, key: value.replace(token, respell(token))}
            out.append(request_like(req, headers, req.body))
    for token in PADDED.findall(req.body.decode("utf-8", "replace")):
        body = req.body.replace(token.encode(), respell(token).encode())
        out.append(request_like(req, dict(req.headers), body))
    return out


def request_like(req: WebhookRequest, headers: dict[str, str], body: bytes) -> WebhookRequest:
    return request_to(req.public_url or "", headers, body)


def providers_with_base64() -> list[str]:
    now = int(time.time())
    return sorted(n for n in PROVIDERS if respelled_variants(signed(n, now)[1]))


def test_the_base64_signed_providers_are_found() -> None:
    assert set(providers_with_base64()) == BASE64_SIGNED


@pytest.mark.parametrize("name", sorted(BASE64_SIGNED))
def test_a_respelled_signature_is_handled_as_the_providers_sdk_does(name: str) -> None:
    now = int(time.time())
    p, req, secret = signed(name, now)
    stored = [p.verification_secret(secret)]
    assert p.verify(req, stored, now).secret_index == 0
    variants = respelled_variants(req)
    assert variants
    for variant in variants:
        if name in RESPELLING_ACCEPTED:
            assert p.verify(variant, stored, now).secret_index == 0
        else:
            with pytest.raises(VerificationError) as err:
                p.verify(variant, stored, now)
            assert err.value.reason == "signature_malformed"


# -- the SDKs asked the same question -------------------------------------------------------


def header(req: WebhookRequest, name: str) -> str:
    value = req.header(name)
    assert value is not None, name
    return value


def adyen_sdk(req: WebhookRequest, secret: str) -> bool:
    items = json.loads(req.body)["notificationItems"]
    return all(is_valid_hmac_notification(i["NotificationRequestItem"], secret) for i in items)


def twilio_sdk(req: WebhookRequest, secret: str) -> bool:
    params = dict(parse_qsl(req.body.decode()))
    return bool(
        RequestValidator(secret).validate(req.public_url, params, header(req, "x-twilio-signature"))
    )


def square_sdk(req: WebhookRequest, secret: str) -> bool:
    return square_verifies(
        request_body=req.body.decode(),
        signature_header=header(req, "x-square-hmacsha256-signature"),
        signature_key=secret,
        notification_url=req.public_url or "",
    )


def line_sdk(req: WebhookRequest, secret: str) -> bool:
    return bool(
        SignatureValidator(secret).validate(req.body.decode(), header(req, "x-line-signature"))
    )


def hubspot_sdk(req: WebhookRequest, secret: str) -> bool:
    return Signature.is_valid(
        signature=header(req, "x-hubspot-signature-v3"),
        client_secret=secret,
        request_body=req.body.decode(),
        http_uri=req.public_url,
        http_method="POST",
        signature_version="v3",
        timestamp=header(req, "x-hubspot-request-timestamp"),
    )


def sendgrid_sdk(req: WebhookRequest, secret: str) -> bool:
    public = build("sendgrid").verification_secret(secret)
    return bool(
        EventWebhook(public).verify_signature(
            req.body.decode(),
            header(req, "x-twilio-email-event-webhook-signature"),
            header(req, "x-twilio-email-event-webhook-timestamp"),
        )
    )


def standard_sdk(req: WebhookRequest, secret: str) -> bool:
    try:
        StandardWebhook(secret).verify(req.body, dict(req.headers), json_parse=False)
    except Exception:  # the library raises its own error types
        return False
    return True


def svix_sdk(req: WebhookRequest, secret: str) -> bool:
    try:
        SvixWebhook(secret).verify(req.body, dict(req.headers))
    except Exception:
        return False
    return True


SDKS: dict[str, Callable[[WebhookRequest, str], bool]] = {
    "adyen": adyen_sdk,
    "twilio": twilio_sdk,
    "square": square_sdk,
    "line": line_sdk,
    "hubspot": hubspot_sdk,
    "sendgrid": sendgrid_sdk,
    "standard-webhooks": standard_sdk,
    "clerk": svix_sdk,
    "resend": svix_sdk,
}


@pytest.mark.parametrize("name", sorted(SDKS))
def test_we_and_the_sdk_agree_on_a_respelled_signature(name: str) -> None:
    now = int(time.time())
    p, req, secret = signed(name, now)
    stored = [p.verification_secret(secret)]
    sdk = SDKS[name]
    assert sdk(req, secret), "the SDK refuses the canonical spelling"
    for variant in respelled_variants(req):
        try:
            ours = p.verify(variant, stored, now).secret_index == 0
        except VerificationError:
            ours = False
        assert ours == sdk(variant, secret) == (name in RESPELLING_ACCEPTED)


def test_decode_base64_is_canonical_unless_told() -> None:
    canonical = base64.b64encode(b"\x00" * 32).decode()
    assert decode_base64(canonical) == b"\x00" * 32
    assert decode_base64(respell(canonical)) is None
    assert decode_base64(respell(canonical), canonical=False) == b"\x00" * 32
