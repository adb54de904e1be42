"""The processor's batch planning: body loading and checks, grouping by resource, order within a
group, attempt tokens (pure functions; the claim-check reader is injected)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence

from webhook_pipeline.envelope import Envelope, claim_check_prefix, sha256_hex
from webhook_pipeline.errors import MalformedEnvelopeError, PayloadIntegrityError
from webhook_pipeline.process.model import Message, Outcome, RecordResult
from webhook_pipeline.process.ports import PayloadReader


def load_body(envelope: Envelope, payloads: PayloadReader) -> bytes:
    """The raw body of ``envelope`` (inline or claim check), integrity-checked.

    Returns
    -------
    bytes
        Exactly ``envelope.body_size`` bytes whose SHA-256 is ``envelope.body_sha256``.

    Raises
    ------
    PayloadIntegrityError
        Not valid base64, wrong size or hash, the claim-check object is missing, or the pointer
        is not one of ours: a key outside ``bodies/<source>/`` (here) or another bucket than
        the payload bucket (the reader) (poison).
    PayloadUnavailableError
        S3 failed transiently (retry).
    """
    if envelope.body_ref is not None:
        if not envelope.body_ref.key.startswith(claim_check_prefix(envelope.source)):
            raise PayloadIntegrityError(
                f"claim-check key is not under {claim_check_prefix(envelope.source)}"
            )
        body = payloads.get(envelope.body_ref)
    else:
        try:
            body = base64.b64decode(envelope.body_b64 or "", validate=True)
        except (binascii.Error, ValueError) as exc:
            raise PayloadIntegrityError("body_b64 is not valid base64") from exc
    if len(body) != envelope.body_size:
        raise PayloadIntegrityError(
            f"body size mismatch: envelope says {envelope.body_size} bytes, got {len(body)}"
        )
    if sha256_hex(body) != envelope.body_sha256:
        raise PayloadIntegrityError("body sha256 mismatch")
    return body


def group_key(envelope: Envelope) -> tuple[str, str, str]:
    """Records with the same key are applied one after the other, in sequence order."""
    if envelope.resource_key is not None:
        return (envelope.source, "resource", envelope.resource_key)
    return (envelope.source, "delivery", envelope.delivery_id)


def plan(
    messages: Sequence[Message],
) -> tuple[list[RecordResult], list[list[tuple[Message, Envelope]]]]:
    """Parse every message and order the valid ones.

    Returns
    -------
    malformed : list[RecordResult]
        One ``MALFORMED`` result per message whose body is not a valid envelope.
    groups : list[list[tuple[Message, Envelope]]]
        Groups in first-arrival order; within a group, ascending sequence (stable for ties and
        for records without a sequence).
    """
    malformed: list[RecordResult] = []
    groups: dict[tuple[str, str, str], list[tuple[Message, Envelope]]] = {}
    for message in messages:
        try:
            envelope = Envelope.from_json(message.body)
        except MalformedEnvelopeError as exc:
            malformed.append(
                RecordResult(message.message_id, Outcome.MALFORMED, reason=str(exc), error=exc)
            )
            continue
        groups.setdefault(group_key(envelope), []).append((message, envelope))
    ordered = [
        sorted(members, key=lambda pair: pair[1].sequence if pair[1].sequence is not None else 0)
        for members in groups.values()
    ]
    return malformed, ordered


def attempt_token(message: Message) -> str:
    """A 36-character token per (message id, receive count): an SDK retry of one attempt reuses
    it, a redelivery gets a new one."""
    return hashlib.sha256(f"{message.message_id}:{message.receive_count}".encode()).hexdigest()[:36]
