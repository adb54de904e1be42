"""The body of an envelope as the processor reads it: inline or from the claim check, its size and
SHA-256 checked against the envelope (the claim-check reader is injected)."""

from __future__ import annotations

import base64
import binascii

from webhook_pipeline.envelope import Envelope, claim_check_prefix, sha256_hex
from webhook_pipeline.errors import PayloadIntegrityError
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
