"""Vonage signed webhooks: the HS256 JWT cross-checked both ways with ``vonage-jwt`` (and PyJWT),
and what the official verifier leaves out: the ``payload_hash`` (a token minted for another body
is accepted by ``vonage_jwt.verify_signature`` and rejected here) and ``iat`` freshness."""

from __future__ import annotations

import base64
import hashlib
import json

import jwt
import pytest
from vonage_jwt import verify_signature
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.providers.builtin.vonage import (
    HEADER,
    Vonage,
    b64url_decode,
    b64url_encode,
    mint,
)

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

SECRET = "vonage-signature-secret-for-tests"
NOW = 1_700_000_000
BODY = b'{"message_uuid":"m-1","status":"delivered","timestamp":"2023-11-14T22:13:20Z"}'
OTHER = b'{"message_uuid":"m-1","status":"rejected","timestamp":"2023-11-14T22:13:20Z"}'
scheme = build("vonage")


def pyjwt_token(body: bytes, secret: str = SECRET, **claims: object) -> str:
    base = {
        "iat": NOW,
        "jti": "j-1",
        "iss": "Vonage",
        "payload_hash": hashlib.sha256(body).hexdigest(),
    }
    return jwt.encode(base | claims, secret, algorithm="HS256")


def verify(token: str, body: bytes = BODY, now: float = NOW):  # type: ignore[no-untyped-def]
    return scheme.verify(make_request({HEADER: f"Bearer {token}"}, body), [SECRET], now)


def test_the_sdk_vector_verifies_with_ours_and_with_vonage_jwt() -> None:
    vector = Vonage.vectors[0]
    token = vector.headers[HEADER].removeprefix("Bearer ")
    assert verify_signature(token, vector.secret)
    claims = jwt.decode(token, vector.secret, algorithms=["HS256"])
    assert claims["payload_hash"] == hashlib.sha256(vector.body).hexdigest()
    req = make_request(vector.headers, vector.body)
    assert scheme.verify(req, [vector.secret], vector.now).timestamp == NOW


def test_tokens_minted_by_pyjwt_verify_with_ours_and_ours_with_vonage_jwt() -> None:
    assert verify(pyjwt_token(BODY)).secret_index == 0
    ours = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="d")[HEADER].removeprefix("Bearer ")
    assert verify_signature(ours, SECRET)
    assert jwt.decode(ours, SECRET, algorithms=["HS256"])["iat"] == NOW
    assert not verify_signature(ours, "another-secret-of-enough-length!!")


def test_a_token_valid_for_another_body_is_accepted_by_vonage_jwt_and_rejected_by_us() -> None:
    # Given a genuine token minted for OTHER, replayed with BODY
    token = pyjwt_token(OTHER)
    # Then the official verifier accepts it (it checks the HS256 signature only)
    assert verify_signature(token, SECRET)
    # And ours refuses it: payload_hash is not the SHA-256 of this body
    with pytest.raises(VerificationError) as err:
        verify(token, BODY)
    assert (err.value.reason, err.value.status) == ("signature_invalid", 401)
    assert verify(token, OTHER).secret_index == 0


def test_a_stale_token_is_accepted_by_vonage_jwt_and_rejected_by_us() -> None:
    token = pyjwt_token(BODY, iat=NOW - 301)
    assert verify_signature(token, SECRET)
    with pytest.raises(TimestampError) as err:
        verify(token)
    assert err.value.reason == "timestamp_stale"
    with pytest.raises(TimestampError) as err:
        verify(pyjwt_token(BODY, iat=NOW + 301))
    assert err.value.reason == "timestamp_future"
    with pytest.raises(TimestampError) as err:
        verify(pyjwt_token(BODY, iat=NOW - 10, exp=NOW - 1))
    assert err.value.reason == "timestamp_stale"


def forged(header: dict[str, object], claims: dict[str, object], signature: bytes = b"") -> str:
    part = lambda doc: b64url_encode(json.dumps(doc).encode())  # noqa: E731
    return f"{part(header)}.{part(claims)}.{b64url_encode(signature)}"


CLAIMS = {"iat": NOW, "payload_hash": hashlib.sha256(BODY).hexdigest()}


@pytest.mark.parametrize(
    "token",
    [
        forged({"alg": "none"}, CLAIMS),
        forged({"alg": "none", "typ": "JWT"}, CLAIMS) + "x",
        forged({"alg": "HS512"}, CLAIMS, b"x" * 64),
        forged({"alg": "RS256"}, CLAIMS, b"x" * 256),
        forged({"typ": "JWT"}, CLAIMS, b"x" * 32),
        jwt.encode(CLAIMS, SECRET * 2, algorithm="HS384"),
        "a.b",
        "not-a-jwt",
        pyjwt_token(BODY) + "=",  # padding is not base64url
        pyjwt_token(BODY).replace(".", ".=", 1),
    ],
)
def test_anything_but_an_hs256_jwt_is_signature_malformed(token: str) -> None:
    with pytest.raises(VerificationError) as err:
        verify(token)
    assert (err.value.reason, err.value.status) == ("signature_malformed", 401)


def test_a_token_without_payload_hash_is_refused() -> None:
    token = jwt.encode({"iat": NOW, "jti": "x"}, SECRET, algorithm="HS256")
    assert verify_signature(token, SECRET)  # the official verifier would accept it
    with pytest.raises(VerificationError) as err:
        verify(token)
    assert err.value.reason == "signature_malformed"


@pytest.mark.parametrize(("iat", "reason"), [("1700000000", "timestamp_invalid"),
    (1.7e9, "timestamp_invalid"), (True, "timestamp_invalid"), (-1, "timestamp_invalid"),
    (None, "timestamp_missing")])  # fmt: skip
def test_iat_must_be_a_json_integer(iat: object, reason: str) -> None:
    claims = {"payload_hash": hashlib.sha256(BODY).hexdigest()}
    if iat is not None:
        claims["iat"] = iat  # type: ignore[assignment]
    with pytest.raises(TimestampError) as err:
        verify(mint(claims, SECRET))
    assert err.value.reason == reason


def test_a_wrong_secret_is_signature_invalid_and_bearer_is_case_insensitive() -> None:
    with pytest.raises(VerificationError) as err:
        verify(pyjwt_token(BODY, secret="another-secret-of-enough-length!!"))
    assert err.value.reason == "signature_invalid"
    req = make_request({HEADER: f"bearer {pyjwt_token(BODY)}"}, BODY)
    assert scheme.verify(req, [SECRET], NOW)
    with pytest.raises(VerificationError):
        scheme.verify(make_request({HEADER: f"Basic {pyjwt_token(BODY)}"}, BODY), [SECRET], NOW)


def test_base64url_is_decoded_canonically_only() -> None:
    assert b64url_decode(b64url_encode(b"\xff\xfe")) == b"\xff\xfe"
    assert b64url_decode("__8") == b"\xff\xff"
    assert b64url_decode("__9") is None  # trailing bits set: not what an encoder writes
    assert b64url_decode("_w+") is None and b64url_decode("a") is None


@pytest.mark.parametrize("secret", ["", "tab\there", "é-secret"])
def test_signature_secrets_are_printable_ascii(secret: str) -> None:
    with pytest.raises(ConfigurationError):
        scheme.validate_secret(secret)


def test_restamp_changes_only_iat() -> None:
    headers = scheme.sign(BODY, SECRET, timestamp=NOW, delivery_id="d")
    moved = scheme.restamp(headers, str(NOW + 1))
    assert moved is not None
    claims_part = moved[HEADER].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(claims_part + "=" * (-len(claims_part) % 4)))
    assert claims["iat"] == NOW + 1 and claims["payload_hash"] == hashlib.sha256(BODY).hexdigest()
