"""Telegram Bot API webhooks: a shared secret token in ``X-Telegram-Bot-Api-Secret-Token``.

Source of the scheme: Telegram Bot API ``setWebhook`` (core.telegram.org/bots/api#setwebhook):
"secret_token: a secret token to be sent in a header X-Telegram-Bot-Api-Secret-Token in every
webhook request, 1-256 characters. Only characters A-Z, a-z, 0-9, _ and - are allowed", and
``Update`` ("update_id: the update's unique identifier. Update identifiers start from a certain
positive number and increase sequentially").

What is signed: nothing. The header proves the sender knows the token (compared in constant
time); the body is unsigned and a captured request can be replayed at any time (the gate and the
update_id watermark answer it).

Identity and order: ``update_id`` is the delivery id and the sequence. It orders all updates of
one bot, so the resource key is a constant (``"bot"``) and each bot is its own source (its own
secret token). Telegram sends up to ``max_connections`` (default 40) requests at once, so
updates can arrive out of order: an update that arrives after a newer one is recorded ``stale``
and not applied. A bot whose every update must reach the hook sets ``max_connections=1`` at
``setWebhook`` (Telegram then waits for each answer before the next update), or its source
drops the ordering (``resource_key`` and ``sequence`` set to other fields).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.crypto import match_secrets, signature_header
from webhook_pipeline.providers.model import HOUR, Defaults, LazyVectors, Signs, Verified, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

HEADER = "X-Telegram-Bot-Api-Secret-Token"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()


@register
class Telegram(Provider):
    """Telegram's webhook secret token.

    Header shape: ``X-Telegram-Bot-Api-Secret-Token: <1-256 of A-Z a-z 0-9 _ ->``, equal to the
    ``secret_token`` given to ``setWebhook``. No signature, no timestamp.
    """

    name = "telegram"
    title = "Telegram Bot API"
    reference = "core.telegram.org/bots/api#setwebhook and #update"
    signs = Signs(
        id=None,
        timestamp=None,
        body=False,
        note=(
            "nothing is signed: the secret token header proves the sender knows it; update_id "
            "and the update are unsigned"
        ),
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="update_id"),
        resource_key=FieldLocation(value="bot"),
        sequence=FieldLocation(body="update_id", format="int"),
    )
    retry_horizon_seconds = 24 * HOUR
    retry_horizon_reference = (
        "setWebhook: 'give up after a reasonable number of attempts' (no number published); "
        "unconfirmed updates are kept 24 h (recalled from getUpdates, UNVERIFIED)"
    )
    signature_header = HEADER
    dev_secret = "dev-telegram-secret-token-local"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="tg_secret_123",
                headers={HEADER: "tg_secret_123", "content-type": "application/json"},
                body=b'{"update_id":10000,"message":{"message_id":1,"date":1700000000,'
                b'"chat":{"id":1111,"type":"private"},"text":"hi"}}',
                now=1_700_000_000,
                origin="self",
                reference=(
                    "no vector exists: Telegram signs nothing and compares the header with the "
                    "secret_token of setWebhook (providers-wave2.md section 13)"
                ),
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """1-256 characters of ``A-Za-z0-9_-``, as ``setWebhook`` accepts (raises
        ConfigurationError)."""
        if not _TOKEN.fullmatch(secret):
            raise ConfigurationError(
                "a Telegram secret_token is 1-256 characters of A-Z, a-z, 0-9, _ and -"
            )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Compare the secret token header with the stored token(s) in constant time (SHA-256
        digests of both, so the length does not leak either).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no header), ``signature_malformed`` (not ASCII),
            ``signature_invalid`` (no stored token matches).
        """
        received = signature_header(request, HEADER)
        index = match_secrets(secrets, _digest, [_digest(received)])
        return Verified(secret_index=index, signed_headers=frozenset({HEADER.lower()}))

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The secret token header (the token itself)."""
        return {HEADER: secret}

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        chat = int(hashlib.sha256(resource.encode()).hexdigest()[:8], 16)
        message = {
            "message_id": sequence % 100_000,
            "from": {"id": chat, "is_bot": False, "first_name": "Ada"},
            "chat": {"id": chat, "type": "private"},
            "date": timestamp,
            "text": "/start",
        }
        return samples.Sample.json(
            {"update_id": int(delivery_id), event_type or "message": message}
        )

    def new_delivery_id(self, random_hex: str) -> str:
        """An ``update_id``: a positive integer (the simulator's are random, Telegram's rise)."""
        return str(int(random_hex[:9], 16) + 1)
