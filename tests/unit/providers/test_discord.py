"""Discord interactions: Ed25519 cross-checked both ways with ``discord-interactions``'
``verify_key`` and PyNaCl, the PING answered PONG, invalid probes refused with 401, our 15 s
tolerance (Discord's verifier has none), the deferred answer to every other interaction."""

from __future__ import annotations

import json

import pytest
from discord_interactions import verify_key
from nacl.signing import SigningKey
from webhook_pipeline.errors import ConfigurationError, TimestampError, VerificationError
from webhook_pipeline.providers.builtin.discord import HEADER, TIMESTAMP_HEADER, Discord, Ping
from webhook_pipeline.source_secrets import SourceSecret

from tests.unit.providers.conftest import build, make_request

pytestmark = pytest.mark.unit

NOW = 1_700_000_000
SEED = bytes(range(32))
PUBLIC = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
BODY = b'{"id":"1200000000000000002","type":2,"token":"t","data":{"name":"status"}}'
scheme = build("discord")


def nacl_headers(body: bytes, ts: int = NOW, seed: bytes = SEED) -> dict[str, str]:
    signature = SigningKey(seed).sign(str(ts).encode() + body).signature
    return {HEADER: signature.hex(), TIMESTAMP_HEADER: str(ts)}


def test_the_self_vector_is_what_pynacl_signs_and_discord_interactions_accepts() -> None:
    vector = Discord.vectors[0]
    assert nacl_headers(vector.body) == dict(vector.headers)
    assert SigningKey(SEED).verify_key.encode().hex() == PUBLIC == vector.secret
    assert verify_key(vector.body, vector.headers[HEADER], "1700000000", PUBLIC)


def test_pynacl_signatures_verify_with_ours_and_ours_with_discord_interactions() -> None:
    seed = bytes(range(100, 132))
    public = SigningKey(seed).verify_key.encode().hex()
    assert scheme.verify(make_request(nacl_headers(BODY, seed=seed), BODY), [public], NOW)
    ours = scheme.sign(BODY, seed.hex(), timestamp=NOW, delivery_id="x")
    assert verify_key(BODY, ours[HEADER], ours[TIMESTAMP_HEADER], public)
    assert scheme.verification_secret(seed.hex()) == public
    # Both refuse a changed byte and a changed timestamp.
    tampered = BODY.replace(b"status", b"statuS")
    assert not verify_key(tampered, ours[HEADER], ours[TIMESTAMP_HEADER], public)
    assert not verify_key(BODY, ours[HEADER], str(NOW + 1), public)
    for headers, body in (
        (ours, tampered),
        ({**ours, TIMESTAMP_HEADER: str(NOW + 1)}, BODY),
    ):
        with pytest.raises(VerificationError) as err:
            scheme.verify(make_request(headers, body), [public], NOW)
        assert (err.value.reason, err.value.status) == ("signature_invalid", 401)


@pytest.mark.parametrize(
    "signature",
    [
        "0" * 128,  # Discord's routine probe: a well-formed but invalid signature
        nacl_headers(BODY, seed=bytes(32))[HEADER],  # another application's key
    ],
)
def test_invalid_signatures_are_401_as_discord_requires(signature: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({HEADER: signature, TIMESTAMP_HEADER: str(NOW)}, BODY),
                      [PUBLIC], NOW)  # fmt: skip
    assert (err.value.reason, err.value.status) == ("signature_invalid", 401)


@pytest.mark.parametrize("signature", ["zz" * 64, "ab" * 63, "ab" * 65, ""])
def test_malformed_signatures_are_401_too(signature: str) -> None:
    with pytest.raises(VerificationError) as err:
        scheme.verify(make_request({HEADER: signature, TIMESTAMP_HEADER: str(NOW)}, BODY),
                      [PUBLIC], NOW)  # fmt: skip
    assert err.value.status == 401


def test_upper_case_hex_is_read_as_the_official_verifier_reads_it() -> None:
    headers = nacl_headers(BODY)
    upper = {**headers, HEADER: headers[HEADER].upper()}
    assert verify_key(BODY, upper[HEADER], str(NOW), PUBLIC.upper())
    assert scheme.verify(make_request(upper, BODY), [PUBLIC.upper()], NOW)


def test_our_tolerance_is_15_seconds_either_way_where_the_sdk_checks_none() -> None:
    for offset, reason in ((-16, "timestamp_stale"), (16, "timestamp_future")):
        headers = nacl_headers(BODY, NOW + offset)
        assert verify_key(BODY, headers[HEADER], headers[TIMESTAMP_HEADER], PUBLIC)
        with pytest.raises(TimestampError) as err:
            scheme.verify(make_request(headers, BODY), [PUBLIC], NOW)
        assert err.value.reason == reason
    assert scheme.verify(make_request(nacl_headers(BODY, NOW - 15), BODY), [PUBLIC], NOW)


def test_ping_is_a_signed_handshake_answered_pong() -> None:
    handshake = scheme.handshakes[0]
    assert isinstance(handshake, Ping) and handshake.signed
    sample = handshake.sample(SourceSecret([PUBLIC]))
    req = make_request(sample.headers | nacl_headers(sample.body), sample.body)
    assert handshake.matches(req)
    scheme.verify(req, [PUBLIC], NOW)
    answer = handshake.answer(req, SourceSecret([PUBLIC]))
    assert (answer.status, answer.text(), answer.content_type) == (
        200,
        '{"type":1}',
        "application/json",
    )
    for other in (b'{"type":2}', b'{"type":true}', b'{"type":"1"}', b"[1]", b"type 1"):
        assert not handshake.matches(make_request({}, other))


def test_every_other_interaction_is_answered_deferred_with_200() -> None:
    for status in (202, 200):
        answer = scheme.acknowledgement(status, {"status": "accepted", "delivery_id": "1"})
        assert (answer.status, json.loads(answer.text())) == (200, {"type": 5})


@pytest.mark.parametrize("key", ["", "ab" * 31, "zz" * 32, "ab" * 32 + "\n", "0x" + "ab" * 31])
def test_the_stored_public_key_is_64_hex(key: str) -> None:
    with pytest.raises(ConfigurationError):
        scheme.validate_secret(key)
    scheme.validate_secret(PUBLIC)
