"""No answer of an unauthenticated challenge verifies a delivery (invariant I2), for every
registered provider and every body format.

X's CRC and LinkedIn's ``challengeCode`` answer an unsigned ``GET`` with an HMAC of a token the
caller chooses, under the key deliveries are signed with. The providers whose unsigned handshake
answers with a keyed value are found here by behaviour (the answer changes with the signing
secret), not from a list, so a new one is covered as soon as it is registered. For each, each
body format and each signature reading: every token the challenge answers, turned into every
spelling of a signature header its digest allows, is refused as a delivery of every candidate
body (the token itself, the token without a signed prefix, JSON that is not an object, a form
body, the empty body), and a source declaring a body format the provider cannot verify fails to
load.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import pytest
from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.providers import Provider, all_providers
from webhook_pipeline.providers.model import Handshake
from webhook_pipeline.source_secrets import SourceSecret, parse_secret
from webhook_pipeline.sources import Source, resolve

from tests.unit.providers.conftest import make_request

pytestmark = pytest.mark.unit

PROVIDERS = all_providers()
FORMATS = ("json", "form", "raw")
NOW = 1_700_000_000
OTHER_SECRET = "another-signing-secret-of-32-chars"
#: Prefixes a provider may put in front of the body in its signed message, or on its header.
PREFIXES = ("", "sha256=", "hmacsha256=", "v0=")
#: Bodies a caller may want signed: JSON objects (which the challenges refuse to answer), and
#: others (which they answer, and which no delivery may be).
BODIES = (
    b'{"for_user_id":"2244994945","tweet_create_events":[{"id_str":"1"}]}',
    b' {"type":"ORGANIZATION_SOCIAL_ACTION_NOTIFICATIONS"}',
    b"crc123",
    b"890e4665-4dfe-4ab1-b689-ed553bceeed0",
    b"",
    b"[1,2]",
    b"123",
    b'"a string"',
    b"id=evt_1&type=test",
    b"null",
)


def answer_text(handshake: Handshake, secret: SourceSecret, **query: str) -> str | None:
    """The challenge's answer to ``query`` (merged into its sample), or ``None`` if refused."""
    sample = handshake.sample(secret)
    request = make_request(
        dict(sample.headers), sample.body, method=sample.method, query={**sample.query, **query}
    )
    try:
        return handshake.answer(request, secret).text()
    except VerificationError as err:
        assert err.status == 401
        return None


def keyed_unsigned_handshakes() -> list[tuple[str, Handshake]]:
    """(provider, handshake) for every unsigned handshake whose answer to its own sample changes
    with the signing secret: an HMAC under the delivery key that anyone may ask for."""
    found = []
    for name, cls in sorted(PROVIDERS.items()):
        stored = parse_secret(cls(dict(cls.example_options)).dev_secret_value())
        other = SourceSecret([OTHER_SECRET], verify_token=stored.verify_token)
        for handshake in cls.handshakes:
            if handshake.signed:
                continue
            first, second = answer_text(handshake, stored), answer_text(handshake, other)
            if first is not None and first != second:
                found.append((name, handshake))
    return found


ORACLES = keyed_unsigned_handshakes()


def digests(text: str) -> list[bytes]:
    """Every 32-byte value written in hex or base64 in the answer (after any ``xxx=`` prefix)."""
    values: list[Any] = list(json.loads(text).values())
    found = []
    for value in (v for v in values if isinstance(v, str)):
        for part in {value, value.split("=", 1)[-1]}:
            for decode in (bytes.fromhex, base64.b64decode):
                try:
                    raw = decode(part)
                except (ValueError, binascii.Error):
                    continue
                if len(raw) == 32:
                    found.append(raw)
    return found


def spellings(digest: bytes) -> set[str]:
    """The signature header values an attacker can write with ``digest``."""
    encoded = (digest.hex(), base64.b64encode(digest).decode("ascii"))
    return {prefix + text for prefix in PREFIXES for text in encoded}


def readings(cls: type[Provider]) -> list[dict[str, Any]]:
    """Every option set the provider's vectors and example source use (LinkedIn's readings)."""
    sets = [dict(cls.example_options)] + [dict(v.options) for v in cls.vectors]
    return [dict(s) for s in {json.dumps(s, sort_keys=True): s for s in sets}.values()]


def test_the_keyed_unsigned_challenges_are_found() -> None:
    # the discovery is not vacuous: X's CRC and LinkedIn's challengeCode are among them
    assert {name for name, _ in ORACLES} >= {"x", "linkedin"}


@pytest.mark.parametrize("body_format", FORMATS)
@pytest.mark.parametrize(("name", "handshake"), ORACLES, ids=[n for n, _ in ORACLES])
def test_no_challenge_answer_verifies_a_delivery(
    name: str, handshake: Handshake, body_format: str
) -> None:
    cls = PROVIDERS[name]
    stored = parse_secret(cls(dict(cls.example_options)).dev_secret_value())
    for options in readings(cls):
        # Given a source of this provider and body format: it loads only for json, the format
        # these deliveries have (the separation relies on a JSON object's "{")
        source = Source(name="s", provider=name, options=options, body_format=body_format)
        if body_format == "json":
            provider = resolve(source).provider
        else:
            with pytest.raises(ConfigurationError, match="cannot verify"):
                resolve(source)
            provider = cls(options)
        answered = 0
        for body in BODIES:
            forged_any: set[str] = set()
            for prefix in PREFIXES:
                # When the caller asks the challenge to answer prefix + body
                token = (prefix.encode() + body).decode()
                text = answer_text(handshake, stored, **{parameter(handshake): token})
                if text is None:
                    continue
                answered += 1
                forged = {s for d in digests(text) for s in spellings(d)}
                forged_any |= forged
                # Then no spelling of its answer verifies any candidate body
                for candidate in {body, prefix.encode() + body}:
                    for value in forged:
                        request = make_request({provider.signature_header: value}, candidate)
                        with pytest.raises(VerificationError) as err:
                            provider.verify(request, stored.signing, NOW)
                        assert err.value.status == 401
            # (the header the provider's own signer writes for the body was among them: the
            # answers are real signatures, refused only because of what they sign; an empty
            # token is never answered)
            real = provider.sign(body, stored.signing[0], timestamp=NOW, delivery_id="x")
            assert set(real.values()) & forged_any or not body or b"{" in body, (name, body)
        assert answered, "the challenge answered no token: nothing was tested"


def parameter(handshake: Handshake) -> str:
    """The query parameter holding the challenge's token."""
    parameter = getattr(handshake, "parameter", None)
    assert isinstance(parameter, str), handshake.name
    return parameter
