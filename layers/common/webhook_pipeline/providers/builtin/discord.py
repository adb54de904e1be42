"""Discord interactions (HTTP interactions endpoint): Ed25519 over ``{timestamp}{body}``.

Source of the scheme: Discord Developer docs "Interactions overview", section "Setting up an
endpoint" (acknowledge ``PING`` with a 200 ``{"type": 1}``; validate ``X-Signature-Ed25519`` and
``X-Signature-Timestamp`` on every request and answer a failure 401: Discord sends deliberately
invalid signatures as routine checks and removes the endpoint URL of an app that accepts them),
and "Receiving and responding" (interaction callback types; an initial response within 3
seconds; a deferred response gives 15 minutes for follow-ups with the interaction token).
Official verifier: ``discord/discord-interactions-python`` ``discord_interactions/__init__.py``
(``verify_key``), built on PyNaCl; it checks no timestamp freshness at all.

What is signed: the timestamp header and the raw body. The delivery id is the interaction's
``id`` (a snowflake, inside the signed body).

What the pipeline answers, and its limits (Discord's contract is synchronous; ours is
queue-first):

- ``PING`` (``{"type": 1}``, signed) is a handshake: verified, answered 200 ``{"type": 1}``
  without touching the gate.
- Every other interaction is verified, claimed, enqueued and answered 200 ``{"type": 5}``
  (``DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE``: the user sees "thinking..."). The hook then has 15
  minutes to edit the original response or send follow-ups with the interaction ``token`` from
  the body (``PATCH /webhooks/{application_id}/{token}/messages/@original``); Discord gives the
  token no longer.
- It cannot answer what must be answered inline: an autocomplete interaction (type 4) needs
  its choices (callback type 8) and a modal (type 9) must be opened in the first response; type
  5 is not valid for autocomplete, so do not route autocomplete options to this endpoint. For
  components, type 5 posts a new message where type 6 would update the clicked one in place.
- The answer must reach Discord within 3 seconds: a warm ingest answers in milliseconds, but a
  cold start is not free. ``bench/results/cold_start.json`` measured the ingest function in a
  Lambda container at 1.03 s median (1.65 s max) with shipped bytecode and 2.64 s median (4.18 s
  max) without: deploy with bytecode, and expect an occasional "interaction failed" on a cold
  start otherwise (provisioned concurrency removes it).
- Discord does not retry interactions (third-party, UNVERIFIED), so a lost answer is a failed
  interaction for the user, never a duplicate; the done claim guards against a replayed
  request only.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.crypto import (
    decode_hex,
    signature_header,
    timestamp_header,
)
from webhook_pipeline.providers.json_body import json_object
from webhook_pipeline.providers.key_pairs import KeyPairProvider
from webhook_pipeline.providers.model import (
    Answer,
    Defaults,
    Handshake,
    LazyVectors,
    Signs,
    Verified,
    samples,
)
from webhook_pipeline.providers.registry import register
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "X-Signature-Ed25519"
TIMESTAMP_HEADER = "X-Signature-Timestamp"
#: Interaction type PING, and the callback types answered.
PING, PONG, DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE = 1, 1, 5


def _hex_key(text: str, problem: str) -> bytes:
    """The 32 bytes of a key in 64 hex characters (either case).

    Raises
    ------
    ConfigurationError
        ``problem``: not 64 hex characters.
    """
    raw = decode_hex(text, uppercase=True)
    if raw is None or len(raw) != 32:
        raise ConfigurationError(problem)
    return raw


@functools.lru_cache(maxsize=64)
def load_public_key(stored: str) -> Ed25519PublicKey:
    """The Ed25519 public key of an application public key (64 hex characters; else
    ``ConfigurationError``)."""
    raw = _hex_key(stored, "a Discord public key is 64 hex characters (32 bytes)")
    return Ed25519PublicKey.from_public_bytes(raw)


@functools.lru_cache(maxsize=16)
def load_private_key(secret: str) -> Ed25519PrivateKey:
    """The Ed25519 signing key of a development secret: the 32-byte seed in 64 hex characters
    (else ``ConfigurationError``)."""
    seed = _hex_key(secret, "a Discord signing key is a 32-byte Ed25519 seed in hex")
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_hex(key: Ed25519PrivateKey) -> str:
    """The public key of ``key`` as Discord shows it (64 lower-case hex)."""
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        .hex()
    )


class Ping(Handshake):
    """``{"type": 1}`` (signed): answered 200 ``{"type": 1}`` (PONG)."""

    name = "ping"
    method = "POST"
    signed = True

    def matches(self, request: WebhookRequest) -> bool:
        doc = json_object(request.body)
        return doc is not None and doc.get("type") == PING and not isinstance(doc["type"], bool)

    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        return Answer(200, {"type": PONG})

    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        body = {
            "app_permissions": "562949953601536",
            "application_id": "1112223334445556667",
            "id": "1200000000000000001",
            "token": "aW50ZXJhY3Rpb246MTIwMDAwMDAwMDAwMDAwMDAwMTpwaW5n",
            "type": PING,
            "user": {"id": "53908232506183680", "username": "discord"},
            "version": 1,
        }
        return samples.HandshakeSample.json(body, **{"user-agent": "Discord-Interactions/1.0"})


@register
class Discord(KeyPairProvider[Ed25519PublicKey, Ed25519PrivateKey]):
    """Discord's interaction signature (Ed25519).

    Header shapes: ``X-Signature-Ed25519: <128 hex>``, ``X-Signature-Timestamp: <seconds>``.
    Signed bytes: ``{timestamp}{body}`` (no separator). Ed25519; key: the application's public
    key (64 hex, from the Developer Portal). Hex is read in either case, as the official
    verifier (``bytes.fromhex``) does.
    Timestamp: Unix **seconds**, a plain integer. Discord's verifier checks none; ours is 15 s
    both ways: an interaction must be answered within 3 s of being sent, so a request older
    than that plus clock skew can only be a replay, and Discord never retries one.
    """

    name = "discord"
    title = "Discord interactions"
    reference = (
        "discord.com/developers/docs interactions/overview (setting up an endpoint) and "
        "interactions/receiving-and-responding; discord-interactions-python verify_key"
    )
    signs = Signs(
        id="body id (the interaction snowflake), inside the signed body",
        timestamp="X-Signature-Timestamp header, seconds",
        note="timestamp and body are signed; answers are synchronous (we defer: type 5)",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="id"),
        event_type=FieldLocation(body="type"),
    )
    body_formats = frozenset({"json"})
    default_tolerance_seconds = 15
    retry_horizon_seconds = 15 * 60
    retry_horizon_reference = (
        "Discord does not retry interactions (third-party, UNVERIFIED); an interaction token "
        "lives 15 minutes, after which the interaction is dead"
    )
    handshakes = (Ping(),)
    signature_header = HEADER
    # the interaction token: follow-up messages for 15 minutes to whoever holds it
    credential_fields = ("token",)
    timestamp_header = TIMESTAMP_HEADER
    #: The 32-byte seed ``00 01 .. 1f`` of providers-wave2.md section 7 (local use only).
    dev_secret = bytes(range(32)).hex()
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8",
                headers={
                    HEADER: (
                        "e7c810390ae2091f24b9493e8412894fd8c2d1f8174d81e3b01c0c5f900818c1"
                        "665ca4717630708db6bd34b1dc1b8ab0153432f16fc7796df415b1e7e94fd80d"
                    ),
                    TIMESTAMP_HEADER: "1700000000",
                },
                body=b'{"id":"evt_1","type":"test"}',
                now=1_700_000_000,
                origin="self",
                reference=(
                    "no published vector: Ed25519 (deterministic) with seed 00..1f computed with "
                    "PyNaCl (providers-wave2.md section 7); test_discord cross-checks it with "
                    "discord-interactions' verify_key"
                ),
            ),
        )
    )

    def public_key(self, stored: str) -> Ed25519PublicKey:
        """The application public key: 64 hex characters (raises ConfigurationError)."""
        return load_public_key(stored)

    def private_key(self, secret: str) -> Ed25519PrivateKey:
        """A development signing key: the 32-byte Ed25519 seed in 64 hex characters."""
        return load_private_key(secret)

    def public_key_text(self, key: Ed25519PrivateKey) -> str:
        """The public key of ``key`` as Discord shows it (64 lower-case hex)."""
        return public_hex(key)

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify a Discord interaction against the application public key(s).

        Raises
        ------
        VerificationError
            ``signature_missing``, ``signature_malformed`` (not 128 hex), ``signature_invalid``
            (Discord's deliberately invalid probes end here: 401).
        TimestampError
            ``timestamp_missing``, ``timestamp_invalid``, ``timestamp_stale`` /
            ``timestamp_future``.
        """
        signature = decode_hex(signature_header(request, HEADER), uppercase=True)
        if signature is None or len(signature) != 64:
            raise VerificationError("signature_malformed", f"{HEADER} is not 128 hex")
        raw_ts, timestamp = timestamp_header(request, TIMESTAMP_HEADER)
        signed = raw_ts.encode("ascii") + request.body
        index = self.match_keys(secrets, lambda key: key.verify(signature, signed))
        self.check_fresh(timestamp, now)
        return Verified(
            secret_index=index,
            timestamp=timestamp,
            signed_headers=frozenset({TIMESTAMP_HEADER.lower()}),
        )

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The two Discord headers, signed with the seed ``secret`` (64 hex)."""
        ts = str(int(timestamp))
        signature = load_private_key(secret).sign(ts.encode("ascii") + body)
        return {HEADER: signature.hex(), TIMESTAMP_HEADER: ts}

    def acknowledgement(self, status: int, body: dict[str, Any]) -> Answer:
        """200 ``{"type": 5}`` for an accepted interaction and for its duplicate: a deferred
        response (the hook follows up with the interaction token within 15 minutes)."""
        return Answer(200, {"type": DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE})

    def random_secret(self, entropy: bytes) -> str:
        return hashlib.sha256(entropy).hexdigest()

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        return samples.Sample.json(
            {
                "app_permissions": "562949953601536",
                "application_id": "1112223334445556667",
                "channel_id": resource,
                "data": {"id": "1200000000000000100", "name": event_type or "status", "type": 1},
                "guild_id": "1100000000000000001",
                "id": delivery_id,
                "member": {"user": {"id": "53908232506183680", "username": "ada"}},
                "token": f"aW50ZXJhY3Rpb246{delivery_id}",
                "type": 2,
                "version": 1,
            }
        )

    def new_delivery_id(self, random_hex: str) -> str:
        """A snowflake-shaped id (19 digits)."""
        return str(10**18 + int(random_hex[:15], 16) % (9 * 10**18))
