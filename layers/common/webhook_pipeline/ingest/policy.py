"""The numbers the ingest use case works with (:class:`IngestPolicy`, from the ingest settings)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IngestPolicy:
    """The numbers the ingest use case works with (all from :class:`IngestSettings`).

    Attributes
    ----------
    claim_ttl_seconds : int
        Pending-claim TTL, seconds.
    dedup_ttl_max_seconds : int
        Cap of every source's done-claim TTL, seconds.
    max_body_bytes, inline_body_max_bytes : int
        413 above the first; S3 claim check above the second (bytes).
    fail_open : bool
        Enqueue without the gate when Redis is unavailable.
    redis_key_prefix : str
        Prefix of gate keys.
    retry_after_seconds : int
        ``Retry-After`` of 503 answers, seconds.
    public_base_url : str
        The base URL senders call, for providers that sign the URL (empty: the request's own).
    batch_chunk_reserve_ms : int
        Milliseconds a batched POST must still have before it sends one more
        ``SendMessageBatch`` chunk: the worst case of that call, of the chunk's confirm and of
        the release of the claims left (see :meth:`IngestSettings.batch_chunk_reserve_ms`).
    batch_claim_reserve_ms : int
        Milliseconds more it must have before it claims one more window of events: the worst
        case of that Redis command (see :meth:`IngestSettings.batch_claim_reserve_ms`).
    """

    claim_ttl_seconds: int = 30
    dedup_ttl_max_seconds: int = 30 * 86_400
    max_body_bytes: int = 1_048_576
    inline_body_max_bytes: int = 150_000
    fail_open: bool = True
    redis_key_prefix: str = "whd:"
    retry_after_seconds: int = 5
    public_base_url: str = ""
    batch_chunk_reserve_ms: int = 1_800
    batch_claim_reserve_ms: int = 400
