"""Settings of the ingest function, read from the environment once at cold start.

A missing or invalid variable fails the init with pydantic's validation error naming it; nothing
falls back to a silent default for a resource name, URL or region.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# SQS accepts 262,144-byte messages; base64 inflates a body by 4/3 and the envelope adds headers.
SQS_MESSAGE_LIMIT_BYTES = 262_144
MAX_INLINE_BODY_BYTES = 180_000


class IngestSettings(BaseSettings):
    """Environment of IngestFunction (names are the upper-case field names).

    Attributes
    ----------
    queue_url : str
        Main queue URL.
    payload_bucket : str
        S3 bucket for claim-check bodies.
    secrets_prefix : str
        Prefix of the sources' Secrets Manager names (``webhook-pipeline/<stack>/``).
    redis_url : str
        ``redis://`` or ``rediss://`` URL of the gate.
    redis_cluster_mode : bool
        Talk to Redis with the cluster client (ElastiCache Serverless is cluster-mode enabled).
    gate_fail_mode : {"open", "closed"}
        Redis unavailable: enqueue without the gate (open, default) or answer 503 (closed).
    claim_ttl_seconds : int
        TTL of a pending claim in seconds (about the ingest timeout).
    dedup_ttl_seconds : int
        TTL of a done claim in seconds: the senders' retry horizon (default 3 days, Stripe's).
    redis_connect_timeout_ms, redis_read_timeout_ms : int
        Redis socket timeouts in milliseconds.
    gate_cooldown_seconds : float
        After a Redis failure, skip the gate for this many seconds (0 disables).
    max_body_bytes : int
        Larger bodies get 413.
    inline_body_max_bytes : int
        Larger bodies go to S3 (claim check); must stay under the SQS message limit.
    retry_after_seconds : int
        ``Retry-After`` of 503 answers.
    secrets_max_age_seconds : int
        Cache lifetime of secret values.
    sources_file : Path | None
        Sources file; default ``sources.toml`` next to the package.
    redis_key_prefix : str
        Prefix of gate keys.
    """

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore", frozen=True)

    queue_url: str = Field(min_length=1)
    payload_bucket: str = Field(min_length=1)
    secrets_prefix: str
    redis_url: str = Field(pattern=r"^rediss?://")
    redis_cluster_mode: bool = False
    gate_fail_mode: Literal["open", "closed"] = "open"
    claim_ttl_seconds: int = Field(default=30, ge=1, le=900)
    dedup_ttl_seconds: int = Field(default=259_200, ge=60, le=30 * 86_400)
    redis_connect_timeout_ms: int = Field(default=200, ge=10, le=5_000)
    redis_read_timeout_ms: int = Field(default=200, ge=10, le=5_000)
    gate_cooldown_seconds: float = Field(default=2.0, ge=0, le=300)
    max_body_bytes: int = Field(default=1_048_576, ge=1, le=10_485_760)
    inline_body_max_bytes: int = Field(default=150_000, ge=0, le=MAX_INLINE_BODY_BYTES)
    retry_after_seconds: int = Field(default=5, ge=1, le=3_600)
    secrets_max_age_seconds: int = Field(default=300, ge=0, le=86_400)
    sources_file: Path | None = None
    redis_key_prefix: str = "whd:"

    @model_validator(mode="after")
    def _ttls(self) -> IngestSettings:
        if self.dedup_ttl_seconds <= self.claim_ttl_seconds:
            raise ValueError("DEDUP_TTL_SECONDS must exceed CLAIM_TTL_SECONDS")
        return self
