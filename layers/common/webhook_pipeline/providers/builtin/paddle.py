"""Paddle Billing: ``Paddle-Signature: ts=<seconds>;h1=<hex>[;h1=<hex>...]`` over ``{ts}:{body}``.

Source of the scheme: Paddle's "Verify webhook signatures"
(developer.paddle.com/webhooks/signature-verification) and the official SDK,
``PaddleHQ/paddle-python-sdk`` ``paddle_billing/Notifications/PaddleSignature.py`` and
``Verifier.py`` (published vector from ``tests/Unit/Notification/test_Verifier.py``). Retries:
live notifications are retried up to 60 times over 3 days (sandbox fewer); the endpoint must
answer within 5 seconds (developer.paddle.com/webhooks/respond-to-webhooks).

What is signed: the timestamp ``ts`` and the raw body, so the event id (body ``event_id``,
``evt_...``), the event type, ``occurred_at`` and the entity are all signed. Paddle sends no
delivery id header. Not signed: every other header.

Tolerance: the SDK's ``Verifier(maximum_variance=5)`` rejects a ``ts`` more than 5 s old or
ahead. We verify at the edge (the ingest function, before the queue), so 5 s would be usable,
but it leaves no room for a cold start behind a slow TLS handshake or a few seconds of clock
skew, and each refusal costs the sender a retry. We choose **60 s** in both directions: a replay
inside that minute carries the same signed ``event_id`` and is a duplicate at the gate (the done
claim lives for the 3-day retry horizon), so the wider window buys robustness without opening a
replay. A source may narrow it (``tolerance_seconds = 5`` restores the SDK's figure).
"""

from __future__ import annotations

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.crypto import check_printable_key
from webhook_pipeline.providers.model import DAY, Defaults, LazyVectors, Signs, iso_utc, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.providers.schemes import TimestampedHmacProvider

HEADER = "Paddle-Signature"


def parse_header(value: str) -> tuple[str | None, list[str]]:
    """Split a ``Paddle-Signature`` value into its raw ``ts`` and its ``h1`` values.

    Items are separated by ``";"`` and written ``key=value``; items without ``=`` are ignored,
    as the SDK ignores them. Whitespace is not stripped (the SDK would read ``" h1"`` as an
    unknown key).

    Raises
    ------
    VerificationError
        ``signature_malformed``: an unknown key (the SDK raises ``ValueError`` on one), a value
        holding ``=``, or ``ts`` given twice with different values (two headers joined).
    """
    timestamps: set[str] = set()
    signatures: list[str] = []
    for item in value.split(";"):
        if "=" not in item:
            continue
        key, _, val = item.partition("=")
        if "=" in val:
            raise VerificationError("signature_malformed", f"{HEADER} item has two '='")
        if key == "ts":
            timestamps.add(val)
        elif key == "h1":
            signatures.append(val)
        else:
            raise VerificationError("signature_malformed", f"{HEADER} has an unknown key")
    if len(timestamps) > 1:
        raise VerificationError("signature_malformed", f"{HEADER} carries several ts values")
    return (timestamps.pop() if timestamps else None), signatures


@register
class Paddle(TimestampedHmacProvider):
    """Paddle Billing's ``Paddle-Signature`` scheme.

    Header shape: ``Paddle-Signature: ts=1696195954;h1=<64 hex>[;h1=<64 hex>]`` (several ``h1``
    while a secret is rotated). Signed bytes: ``{ts}:{body}`` with ``ts`` exactly as sent and
    the raw received body. HMAC-SHA256, lower-case hex. Key: the whole endpoint secret key
    (``pdl_ntfset_...``) as UTF-8, not decoded.
    Timestamp: Unix **seconds**, a plain integer; tolerance 60 s by default, both directions
    (see the module docstring for why not the SDK's 5 s).
    """

    name = "paddle"
    title = "Paddle Billing"
    reference = (
        "developer.paddle.com/webhooks/signature-verification; PaddleHQ/paddle-python-sdk "
        "paddle_billing/Notifications/PaddleSignature.py, Verifier.py"
    )
    signs = Signs(
        id="body event_id (evt_...), inside the signed body",
        timestamp="ts in Paddle-Signature, seconds",
        note="headers other than Paddle-Signature are not signed; everything in the body is",
    )
    defaults = Defaults(
        delivery_id=FieldLocation(body="event_id"),
        event_type=FieldLocation(body="event_type"),
        resource_key=FieldLocation(body="data.id"),
        sequence=FieldLocation(body="occurred_at", format="iso8601"),
    )
    default_tolerance_seconds = 60
    retry_horizon_seconds = 3 * DAY
    retry_horizon_reference = (
        "developer.paddle.com/webhooks/respond-to-webhooks: live retries up to 60 times over 3 days"
    )
    signature_header = HEADER
    timestamp_header = HEADER
    timestamp_key = "ts"
    signature_key = "h1"
    item_separator = ";"
    signed_separator = b":"
    dev_secret = "pdl_ntfset_01dev0local0only0paddle0secret_DevLocalOnlyNotForProduction0"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh",
                headers={
                    HEADER: "ts=1696195954;"
                    "h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02;h1=dummy"
                },
                body=b"hello-world",
                now=1_696_195_954,
                origin="published",
                reference="PaddleHQ/paddle-python-sdk tests/Unit/Notification/test_Verifier.py "
                "(with its second h1=dummy)",
            ),
        )
    )

    def validate_secret(self, secret: str) -> None:
        """An endpoint secret key, as :func:`check_printable_key` checks it."""
        super().validate_secret(secret)
        check_printable_key(secret, "Paddle secret key")

    def parse_signature(self, value: str) -> tuple[str | None, list[str]]:
        """:func:`parse_header` (stricter than Stripe's: unknown keys are refused)."""
        return parse_header(value)

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        doc = {
            "event_id": delivery_id,
            "event_type": event_type or "subscription.updated",
            "occurred_at": iso_utc(sequence).replace("Z", ".000000Z"),
            "notification_id": "ntf_" + delivery_id.removeprefix("evt_"),
            "data": {"id": resource, "status": "active", "customer_id": "ctm_01hv8wt8nffez"},
        }
        return samples.Sample.json(doc)

    def new_delivery_id(self, random_hex: str) -> str:
        # Paddle ids: a prefix and 26 lower-case base32 characters (ULID-like).
        return "evt_01" + random_hex[:24]

    def random_secret(self, entropy: bytes) -> str:
        return "pdl_ntfset_01" + entropy.hex()[:24] + "_" + entropy.hex()[24:56]
