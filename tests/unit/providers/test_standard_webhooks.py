"""Standard Webhooks / Svix scheme: the spec vector, cross-checks with ``standardwebhooks``,
svix-* aliases, signature lists and secret formats."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.providers.builtin.standard_webhooks import decode_secret
from webhook_pipeline.webhook_request import WebhookRequest

from tests.unit.providers.conftest import build as build_scheme

pytestmark = pytest.mark.unit

# Standard Webhooks spec / python library test vector.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TS = 1614265330
BODY = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
OTHER_SECRET = "whsec_" + base64.b64encode(b"another key of 24 bytes!").decode()

scheme = build_scheme("standard-webhooks")


def headers(
    msg_id: str = MSG_ID, ts: int | str = TS, signature: str = SIGNATURE, prefix: str = "webhook"
) -> dict[str, str]:
    return {
        f"{prefix}-id": msg_id,
        f"{prefix}-timestamp": str(ts),
        f"{prefix}-signature": signature,
    }


def request(hdrs: dict[str, str], body: bytes = BODY) -> WebhookRequest:
    return WebhookRequest(
        method="POST",
        source="standard-webhooks",
        headers={k.lower(): v for k, v in hdrs.items()},
        body=body,
    )


def sdk_sign(msg_id: str, ts: int, body: bytes, secret: str = SECRET) -> str:
    return Webhook(secret).sign(msg_id, datetime.fromtimestamp(ts, tz=UTC), body.decode())


def sdk_accepts(body: bytes, hdrs: dict[str, str], secret: str = SECRET) -> bool:
    try:
        Webhook(secret).verify(body, hdrs, json_parse=False)
    except WebhookVerificationError:
        return False
    return True


class TestSpecVector:
    def test_vector_verifies(self) -> None:
        result = scheme.verify(request(headers()), [SECRET], TS)
        assert result.secret_index == 0
        assert result.timestamp == TS

    def test_sign_reproduces_the_vector(self) -> None:
        assert scheme.sign(BODY, SECRET, timestamp=TS, delivery_id=MSG_ID) == headers()

    def test_sdk_agrees_on_the_vector(self) -> None:
        assert sdk_sign(MSG_ID, TS, BODY) == SIGNATURE


class TestSdkCrossCheck:
    BODIES = (BODY, b'{"type":"invoice.paid","data":{"id":"in_1"}}', "é ✓".encode(), b"x")

    @pytest.mark.parametrize("body", BODIES)
    def test_sdk_signatures_verify(self, body: bytes) -> None:
        hdrs = headers(signature=sdk_sign(MSG_ID, TS, body))
        assert scheme.verify(request(hdrs, body), [SECRET], TS).secret_index == 0

    @pytest.mark.parametrize("body", BODIES)
    def test_sdk_verifier_accepts_our_signature(self, body: bytes) -> None:
        now = int(time.time())
        ours = scheme.sign(body, SECRET, timestamp=now, delivery_id="msg_2")
        assert sdk_accepts(body, ours)

    def test_tampered_body_rejected_by_both(self) -> None:
        now = int(time.time())
        hdrs = headers(ts=now, signature=sdk_sign(MSG_ID, now, BODY))
        tampered = b'{"test": 2432232315}'
        assert not sdk_accepts(tampered, hdrs)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs, tampered), [SECRET], now)
        assert err.value.reason == "signature_invalid"

    def test_wrong_secret_rejected_by_both(self) -> None:
        now = int(time.time())
        hdrs = headers(ts=now, signature=sdk_sign(MSG_ID, now, BODY, OTHER_SECRET))
        assert not sdk_accepts(BODY, hdrs)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs), [SECRET], now)
        assert err.value.reason == "signature_invalid"

    @pytest.mark.parametrize("change", ["id", "timestamp"])
    def test_changed_signed_header_rejected_by_both(self, change: str) -> None:
        now = int(time.time())
        signature = sdk_sign(MSG_ID, now, BODY)
        hdrs = (
            headers(msg_id="msg_other", ts=now, signature=signature)
            if change == "id"
            else headers(ts=now - 1, signature=signature)
        )
        assert not sdk_accepts(BODY, hdrs)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs), [SECRET], now)
        assert err.value.reason == "signature_invalid"

    # The library reads the wall clock itself: keep a margin so that a slow test run cannot
    # move the value back inside the tolerance (the exact boundaries are tested with a fixed
    # ``now`` in test_signatures_common.py).
    @pytest.mark.parametrize(
        ("offset", "reason"), [(-360, "timestamp_stale"), (360, "timestamp_future")]
    )
    def test_outside_tolerance_rejected_by_both(self, offset: int, reason: str) -> None:
        now = int(time.time())
        hdrs = headers(ts=now + offset, signature=sdk_sign(MSG_ID, now + offset, BODY))
        assert not sdk_accepts(BODY, hdrs)
        with pytest.raises(TimestampError) as err:
            scheme.verify(request(hdrs), [SECRET], now)
        assert err.value.reason == reason


class TestSvixAliases:
    def test_svix_headers_verify(self) -> None:
        svix = scheme.verify(request(headers(prefix="svix")), [SECRET], TS)
        webhook = scheme.verify(request(headers()), [SECRET], TS)
        assert (svix.secret_index, svix.timestamp, svix.delivery_id) == (0, TS, MSG_ID)
        assert (webhook.secret_index, webhook.timestamp, webhook.delivery_id) == (0, TS, MSG_ID)
        assert (svix.family, webhook.family) == ("svix", "webhook")
        assert svix.signed_headers == {"svix-id", "svix-timestamp"}

    def test_svix_headers_any_case(self) -> None:
        hdrs = {"Svix-Id": MSG_ID, "Svix-Timestamp": str(TS), "Svix-Signature": SIGNATURE}
        assert scheme.verify(request(hdrs), [SECRET], TS).secret_index == 0

    def test_both_families_with_the_same_values_use_webhook_headers(self) -> None:
        hdrs = headers() | headers(prefix="svix")
        verified = scheme.verify(request(hdrs), [SECRET], TS)
        assert (verified.family, verified.delivery_id, verified.timestamp) == (
            "webhook",
            MSG_ID,
            TS,
        )

    def test_both_families_that_disagree_are_a_mismatch(self) -> None:
        # Case C11's neighbour: each family complete and signed, but with different ids.
        hdrs = headers() | headers(msg_id="msg_other", prefix="svix")
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs), [SECRET], TS)
        assert err.value.reason == "signature_mismatch"

    @pytest.mark.parametrize("signed_family", ["webhook", "svix"])
    @pytest.mark.parametrize("header", ["id", "timestamp"])
    def test_the_other_familys_header_that_disagrees_is_a_mismatch(
        self, signed_family: str, header: str
    ) -> None:
        # A genuine delivery signed in one family, plus the other family's id or timestamp
        # header alone (unsigned) with another value; the same value is fine.
        other = "svix" if signed_family == "webhook" else "webhook"
        hdrs = headers(prefix=signed_family)
        same = {"id": MSG_ID, "timestamp": str(TS)}[header]
        assert scheme.verify(request(hdrs | {f"{other}-{header}": same}), [SECRET], TS)
        different = {"id": "msg_other", "timestamp": str(TS + 1)}[header]
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs | {f"{other}-{header}": different}), [SECRET], TS)
        assert err.value.reason == "signature_mismatch"
        assert f"{other}-{header}" in str(err.value)

    def test_families_are_not_mixed(self) -> None:
        # The signature of one family is checked with the id and timestamp of the same family.
        hdrs = {"svix-id": MSG_ID, "svix-timestamp": str(TS), "webhook-signature": SIGNATURE}
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs), [SECRET], TS)
        assert err.value.reason == "signature_malformed"

    def test_no_signature_in_either_family(self) -> None:
        hdrs = {"svix-id": MSG_ID, "svix-timestamp": str(TS), "webhook-id": MSG_ID}
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs), [SECRET], TS)
        assert err.value.reason == "signature_missing"


class TestSignatureList:
    OTHER = sdk_sign(MSG_ID, TS, BODY, OTHER_SECRET)

    @pytest.mark.parametrize(
        "value",
        [
            f"{OTHER} {SIGNATURE}",
            f"{SIGNATURE} {OTHER}",
            f"v1a,{SIGNATURE[3:]} {SIGNATURE}",
            f"v2,abc {SIGNATURE}",
            f"v1,not-base64 {SIGNATURE}",
            f"garbage {SIGNATURE}",
            f"{SIGNATURE}  {OTHER}",
        ],
    )
    def test_a_matching_v1_anywhere_in_the_list(self, value: str) -> None:
        assert scheme.verify(request(headers(signature=value)), [SECRET], TS).secret_index == 0

    def test_both_keys_of_a_list_match(self) -> None:
        value = f"{self.OTHER} {SIGNATURE}"
        assert scheme.verify(request(headers(signature=value)), [OTHER_SECRET], TS)

    @pytest.mark.parametrize(
        "value",
        [
            SIGNATURE[3:],  # no version
            "v1a," + SIGNATURE[3:],  # asymmetric only: not supported here
            "v2," + SIGNATURE[3:],
            "v1," + SIGNATURE[3:].rstrip("="),  # unpadded
            "v1," + SIGNATURE[3:-2] + "!=",
            "v1=" + SIGNATURE[3:],
            "v1,",
            SIGNATURE.replace(",", ", "),
        ],
    )
    def test_no_usable_v1_is_malformed(self, value: str) -> None:
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(headers(signature=value)), [SECRET], TS)
        assert err.value.reason == "signature_malformed"

    def test_v1_of_another_length_is_invalid(self) -> None:
        value = "v1," + base64.b64encode(b"\x00" * 16).decode()
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(headers(signature=value)), [SECRET], TS)
        assert err.value.reason == "signature_invalid"

    def test_missing_id_is_malformed(self) -> None:
        hdrs = headers()
        del hdrs["webhook-id"]
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(hdrs), [SECRET], TS)
        assert err.value.reason == "signature_malformed"


class TestSecrets:
    RAW_KEY = base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")

    @pytest.mark.parametrize(
        "secret",
        [
            SECRET,
            SECRET.removeprefix("whsec_"),
        ],
    )
    def test_prefixed_and_bare_base64_secrets(self, secret: str) -> None:
        assert decode_secret(secret) == self.RAW_KEY
        assert scheme.verify(request(headers()), [secret], TS).secret_index == 0
        assert sdk_sign(MSG_ID, TS, BODY, secret) == SIGNATURE

    def test_unpadded_secret_like_the_library(self) -> None:
        key = b"a key of 25 bytes exactly"
        unpadded = "whsec_" + base64.b64encode(key).decode().rstrip("=")
        assert decode_secret(unpadded) == key
        ours = scheme.sign(BODY, unpadded, timestamp=TS, delivery_id=MSG_ID)
        assert ours["webhook-signature"] == sdk_sign(MSG_ID, TS, BODY, unpadded)

    def test_the_whsec_string_is_not_the_key(self) -> None:
        signed = f"{MSG_ID}.{TS}.".encode() + BODY
        as_utf8 = hmac.new(SECRET.encode(), signed, hashlib.sha256).digest()
        value = "v1," + base64.b64encode(as_utf8).decode()
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(headers(signature=value)), [SECRET], TS)
        assert err.value.reason == "signature_invalid"

    @pytest.mark.parametrize("secret", ["whsec_", "whsec_not base64!", "whsec_a", "whsec_===="])
    def test_invalid_secret_is_a_configuration_error(self, secret: str) -> None:
        with pytest.raises(ConfigurationError):
            scheme.verify(request(headers()), [secret], TS)
        with pytest.raises(ConfigurationError):
            scheme.sign(BODY, secret, timestamp=TS, delivery_id=MSG_ID)

    def test_configuration_error_does_not_show_the_secret(self) -> None:
        with pytest.raises(ConfigurationError) as err:
            decode_secret("whsec_s3cr3t-value!")
        assert "s3cr3t" not in str(err.value)

    def test_rotation(self) -> None:
        assert scheme.verify(request(headers()), [OTHER_SECRET, SECRET], TS).secret_index == 1
        with pytest.raises(VerificationError):
            scheme.verify(request(headers()), [OTHER_SECRET], TS)


class TestAsymmetricV1a:
    """``v1a`` (Ed25519, ``whsk_``/``whpk_``): the reference Go library's published vector,
    signatures cross-checked both ways with PyNaCl (the Python library has no ``v1a``)."""

    GO_SEED = base64.b64decode("VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=")
    GO_SIGNATURE = (
        "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5"
        "WqyeFiL8Ag=="
    )
    WHSK = "whsk_" + base64.b64encode(bytes(range(32))).decode()
    WHPK = "whpk_A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="

    def test_the_go_librarys_published_vector_verifies(self) -> None:
        from nacl.signing import SigningKey

        public = "whpk_" + base64.b64encode(SigningKey(self.GO_SEED).verify_key.encode()).decode()
        assert public == "whpk_ZlN4eg7dSSqi0moX9hQUk3orrOouK3QVQSlJa248c/g="
        req = request(headers(signature=self.GO_SIGNATURE))
        assert scheme.verify(req, [public], TS).delivery_id == MSG_ID
        whsk = "whsk_" + base64.b64encode(self.GO_SEED).decode()
        assert (
            scheme.sign(BODY, whsk, timestamp=TS, delivery_id=MSG_ID)["webhook-signature"]
            == self.GO_SIGNATURE
        )
        assert scheme.verification_secret(whsk) == public

    def test_pynacl_signatures_verify_with_ours_and_ours_with_pynacl(self) -> None:
        from nacl.signing import SigningKey, VerifyKey

        content = f"{MSG_ID}.{TS}.".encode() + BODY
        theirs = SigningKey(bytes(range(32))).sign(content).signature
        req = request(headers(signature="v1a," + base64.b64encode(theirs).decode()))
        assert scheme.verify(req, [self.WHPK], TS).secret_index == 0
        ours = scheme.sign(BODY, self.WHSK, timestamp=TS, delivery_id=MSG_ID)
        raw = base64.b64decode(ours["webhook-signature"].removeprefix("v1a,"))
        VerifyKey(base64.b64decode(self.WHPK[5:])).verify(content, raw)  # raises if invalid
        assert scheme.verification_secret(self.WHSK) == self.WHPK

    def test_the_python_library_has_no_v1a(self) -> None:
        # Which is why the cross-check is PyNaCl: standardwebhooks ignores v1a entries.
        signed = scheme.sign(BODY, self.WHSK, timestamp=TS, delivery_id=MSG_ID)
        assert not sdk_accepts(BODY, signed)

    def test_a_tampered_body_or_another_key_is_invalid(self) -> None:
        hdrs = scheme.sign(BODY, self.WHSK, timestamp=TS, delivery_id=MSG_ID)
        other = "whpk_" + base64.b64encode(bytes(32)).decode()
        for body, keys in ((BODY + b" ", [self.WHPK]), (BODY, [other])):
            with pytest.raises(VerificationError) as err:
                scheme.verify(request(hdrs, body), keys, TS)
            assert err.value.reason == "signature_invalid"

    def test_the_stored_key_decides_the_scheme_never_the_request(self) -> None:
        # A public key never accepts a v1 HMAC; a whsec_ secret never an Ed25519 v1a.
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(headers()), [self.WHPK], TS)
        assert err.value.reason == "signature_malformed"
        v1a = scheme.sign(BODY, self.WHSK, timestamp=TS, delivery_id=MSG_ID)
        with pytest.raises(VerificationError) as err:
            scheme.verify(request(v1a), [SECRET], TS)
        assert err.value.reason == "signature_malformed"

    def test_rotation_from_symmetric_to_asymmetric(self) -> None:
        v1a = scheme.sign(BODY, self.WHSK, timestamp=TS, delivery_id=MSG_ID)
        assert scheme.verify(request(v1a), [SECRET, self.WHPK], TS).secret_index == 1
        both = f"{SIGNATURE} {v1a['webhook-signature']}"
        assert (
            scheme.verify(request(headers(signature=both)), [self.WHPK, SECRET], TS).secret_index
            == 0
        )
        assert (
            scheme.verify(
                request(headers(signature=SIGNATURE)), [self.WHPK, SECRET], TS
            ).secret_index
            == 1
        )

    def test_freshness_applies_to_v1a(self) -> None:
        for ts, reason in ((TS - 301, "timestamp_stale"), (TS + 301, "timestamp_future")):
            hdrs = scheme.sign(BODY, self.WHSK, timestamp=ts, delivery_id=MSG_ID)
            with pytest.raises(TimestampError) as err:
                scheme.verify(request(hdrs), [self.WHPK], TS)
            assert err.value.reason == reason

    @pytest.mark.parametrize(
        ("stored", "problem"),
        [
            ("whsk_" + base64.b64encode(bytes(range(32))).decode(), "store its whpk_"),
            ("whpk_" + base64.b64encode(bytes(31)).decode(), "32-byte"),
            ("whpk_not base64", "32-byte"),
        ],
    )
    def test_key_formats(self, stored: str, problem: str) -> None:
        with pytest.raises(ConfigurationError, match=problem):
            scheme.validate_secret(stored)
        scheme.validate_secret(self.WHPK)

    def test_a_64_byte_secret_key_must_carry_its_own_public_key(self) -> None:
        from webhook_pipeline.providers.builtin.standard_webhooks import decode_secret_key

        public = base64.b64decode(self.WHPK[5:])
        good = "whsk_" + base64.b64encode(bytes(range(32)) + public).decode()
        assert scheme.verification_secret(good) == self.WHPK
        bad = "whsk_" + base64.b64encode(bytes(range(32)) + bytes(32)).decode()
        with pytest.raises(ConfigurationError, match="public half"):
            decode_secret_key(bad)


# -- timestamps as the Svix libraries read them (the whole family) -----------------------------

FAMILY = {"standard-webhooks": "webhook", "clerk": "svix", "resend": "svix"}
#: Headers both libraries accept for a signature made at ``now`` (they sign the integer part).
BOTH_ACCEPT = ["{now}", "{now}.5", "{now}.123", "{now}.999999", "{now}.0", "0{now}"]
#: Headers the Python library's ``float()`` accepts and we refuse, as every provider does (C05):
#: the JavaScript library (``parseInt``) and a sender never write them.
LIBRARY_ONLY = [" {now}", "{now} ", "+{now}", "{now}e0", "{now}.5e0", "{now}.1234567", "{now}.0_0"]
#: Headers both refuse: another second is signed, or no number at all. (``.999999999`` is
#: the next second to Python's ``float()``, this second to JavaScript's ``parseInt``: fractions
#: past microseconds are refused, where the libraries disagree.)
BOTH_REFUSE = ["{later}", "{later}.0", "nan", "inf", "", "{now}abc", "{now}.999999999"]


def family_request(name: str, raw: str, now: int) -> tuple[WebhookRequest, str, bytes]:
    """A delivery of ``name`` the library signed at ``now``, its timestamp header set to ``raw``
    (the signature is over ``now``); with the secret and body."""
    p = build_scheme(name)
    body = b'{"type":"user.updated","data":{"id":"user_1"}}'
    signature = Webhook(p.dev_secret).sign("msg_1", datetime.fromtimestamp(now, UTC), body.decode())
    prefix = FAMILY[name]
    return request(headers("msg_1", raw, signature, prefix=prefix), body), p.dev_secret, body


def library_accepts(name: str, req: WebhookRequest, secret: str) -> bool:
    """Both Python libraries' verdict (svix's for the svix-* family), which must agree."""
    from svix.webhooks import Webhook as SvixWebhook

    verdicts = []
    for verify in (
        lambda: SvixWebhook(secret).verify(req.body, dict(req.headers)),
        lambda: Webhook(secret).verify(
            req.body,
            {k.replace("svix-", "webhook-"): v for k, v in req.headers.items()},
            json_parse=False,
        ),
    ):
        try:
            verify()
        except WebhookVerificationError:
            verdicts.append(False)
        else:
            verdicts.append(True)
    assert len(set(verdicts)) == 1, (name, req.headers)
    return verdicts[0]


@pytest.mark.parametrize("name", sorted(FAMILY))
@pytest.mark.parametrize("template", BOTH_ACCEPT)
def test_a_timestamp_both_libraries_accept_verifies(name: str, template: str) -> None:
    now = int(time.time())
    req, secret, _ = family_request(name, template.format(now=now), now)
    assert library_accepts(name, req, secret)
    verified = build_scheme(name).verify(req, [secret], now)
    assert (verified.timestamp, verified.family) == (now, FAMILY[name])


@pytest.mark.parametrize("name", sorted(FAMILY))
@pytest.mark.parametrize("template", LIBRARY_ONLY)
def test_a_timestamp_only_a_lax_parse_accepts_is_invalid(name: str, template: str) -> None:
    now = int(time.time())
    req, secret, _ = family_request(name, template.format(now=now), now)
    assert library_accepts(name, req, secret)  # the documented difference
    with pytest.raises(TimestampError) as err:
        build_scheme(name).verify(req, [secret], now)
    assert err.value.reason == "timestamp_invalid"


@pytest.mark.parametrize("name", sorted(FAMILY))
@pytest.mark.parametrize("template", BOTH_REFUSE)
def test_a_timestamp_both_libraries_refuse_is_refused(name: str, template: str) -> None:
    now = int(time.time())
    req, secret, _ = family_request(name, template.format(now=now, later=now + 1), now)
    assert not library_accepts(name, req, secret)
    with pytest.raises(VerificationError):
        build_scheme(name).verify(req, [secret], now)


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_a_fractional_timestamp_is_fresh_by_its_value(name: str) -> None:
    # 300.5 s old: the Python library compares the value with its fraction, and so do we
    now = int(time.time())
    req, secret, _ = family_request(name, f"{now - 301}.5", now - 301)
    with pytest.raises(TimestampError) as err:
        build_scheme(name).verify(req, [secret], now)
    assert err.value.reason == "timestamp_stale"
    req, secret, _ = family_request(name, f"{now - 300}.5", now - 300)
    assert build_scheme(name).verify(req, [secret], now).timestamp == now - 300
    # 300.5 s ahead: too new by its value, though its integer part is inside the tolerance
    req, secret, _ = family_request(name, f"{now + 300}.5", now + 300)
    with pytest.raises(TimestampError) as err:
        build_scheme(name).verify(req, [secret], now)
    assert err.value.reason == "timestamp_future"
