"""What a replay from the archive reads and builds per candidate: the outcome of its delivery
record in the deliveries table (:func:`recorded_outcomes`) and the envelope rebuilt from the
archived bytes (:func:`envelope_from_record`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any, Literal

from webhook_pipeline.adapters.dynamodb_items import delivery_key
from webhook_pipeline.archive.record import ArchiveRecord
from webhook_pipeline.envelope import BodyPointer, Envelope, Reprocess, claim_check_prefix
from webhook_pipeline.fields import body_b64

#: BatchGetItem takes at most 100 keys per call.
BATCH_GET_MAX = 100
#: Rounds of ``UnprocessedKeys`` retried before giving up.
BATCH_GET_ROUNDS = 8


class RecordLookupError(RuntimeError):
    """The deliveries table could not be read (the job stops; nothing of the chunk was sent)."""


def recorded_outcomes(
    dynamodb: Any, table: str, identities: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], str | None]:
    """The ``outcome`` of the delivery record of each (source, delivery id), ``None`` when the
    delivery has no record (strongly consistent reads, ``BatchGetItem``).

    Raises
    ------
    RecordLookupError
        A call failed, or keys stayed unprocessed after :data:`BATCH_GET_ROUNDS` rounds.
    """
    wanted = list(dict.fromkeys(identities))
    found: dict[tuple[str, str], str | None] = dict.fromkeys(wanted)
    for start in range(0, len(wanted), BATCH_GET_MAX):
        keys = [delivery_key(s, d) for s, d in wanted[start : start + BATCH_GET_MAX]]
        request: dict[str, Any] = {
            table: {
                "Keys": keys,
                "ConsistentRead": True,
                "ProjectionExpression": "pk, #s, delivery_id, outcome",
                "ExpressionAttributeNames": {"#s": "source"},
            }
        }
        for attempt in range(BATCH_GET_ROUNDS):
            try:
                response = dynamodb.batch_get_item(RequestItems=request)
            except Exception as exc:  # botocore's errors: reported, the job stops
                raise RecordLookupError(f"deliveries table not readable: {exc}") from None
            for item in response.get("Responses", {}).get(table, []):
                source, delivery_id = _identity(item)
                found[(source, delivery_id)] = item.get("outcome", {}).get("S", "unknown")
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(min(1.0, 0.05 * 2**attempt))
        else:
            raise RecordLookupError("deliveries table: keys left unprocessed (throttled)")
    return found


def _identity(item: dict[str, Any]) -> tuple[str, str]:
    pk = item["pk"]["S"] if "pk" in item else ""
    if "source" in item and "delivery_id" in item:
        return item["source"]["S"], item["delivery_id"]["S"]
    _, source, delivery_id = pk.split("#", 2)
    return source, delivery_id


def envelope_from_record(
    record: ArchiveRecord,
    body: bytes,
    *,
    inline_body_max_bytes: int,
    s3: Any = None,
    payload_bucket: str | None = None,
    reprocess: Reprocess | None = None,
) -> Envelope:
    """The envelope of an archived delivery, as ingest built it, with ``gate="replayed"`` and
    ``replay_count + 1``.

    Parameters
    ----------
    record : ArchiveRecord
        The archived delivery.
    body : bytes
        Its exact bytes (``record.body_bytes()``, which checked the SHA-256).
    inline_body_max_bytes : int
        Bodies over this size (bytes) go to the payload bucket (claim check) as ingest does,
        under ``bodies/<source>/<32 hex of the id's SHA-256>/replay-<32 hex of the body's>``
        (one key per body: writing it again is harmless).
    s3, payload_bucket
        Where claim-check bodies go (needed only for a body over the threshold).
    reprocess : Reprocess | None
        Set for a reprocess job.

    Raises
    ------
    ValueError
        A body over the threshold and no payload bucket.
    botocore errors
        The claim-check body could not be stored.
    """
    pointer = None
    if len(body) > inline_body_max_bytes:
        pointer = _claim_check(record, body, s3, payload_bucket)
    return Envelope(
        source=record.source,
        delivery_id=record.delivery_id,
        received_at=record.received,
        event_type=record.event_type,
        resource_key=record.resource_key,
        sequence=record.sequence,
        headers=dict(record.headers),
        body_b64=None if pointer else body_b64(body),
        body_ref=pointer,
        body_size=len(body),
        body_sha256=record.body_sha256,
        content_sha256=(
            record.content_sha256 if record.content_sha256 != record.body_sha256 else None
        ),
        batch_index=record.batch_index,
        batch_count=record.batch_count,
        replay_count=record.replay_count + 1,
        gate="replayed",
        reprocess=reprocess,
        **_signed_metadata(record),
    )


def _signed_metadata(record: ArchiveRecord) -> dict[str, Any]:
    """What ingest recorded about the delivery's verification, for the rebuilt envelope."""
    return {
        "provider": record.provider,
        "verified_with": _verified_with(record.verified_with),
        "signed_headers": dict(record.signed_headers),
    }


def _verified_with(value: str | None) -> Literal["current", "previous", "unsigned"] | None:
    """The record's ``verified_with`` when it is one the envelope knows, else ``None``."""
    known: dict[str | None, Literal["current", "previous", "unsigned"]] = {
        "current": "current",
        "previous": "previous",
        "unsigned": "unsigned",
    }
    return known.get(value)


def _claim_check(record: ArchiveRecord, body: bytes, s3: Any, bucket: str | None) -> BodyPointer:
    if s3 is None or not bucket:
        raise ValueError("a body over the inline threshold needs the payload bucket")
    id_digest = hashlib.sha256(record.delivery_id.encode()).hexdigest()[:32]
    key = f"{claim_check_prefix(record.source)}{id_digest}/replay-{record.body_sha256[:32]}"
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    return BodyPointer(bucket=bucket, key=key)
