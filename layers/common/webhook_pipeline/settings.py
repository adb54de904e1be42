"""Settings of the four functions, read from the environment once at cold start.

One pattern for all: a pydantic-settings class per function (:class:`IngestSettings`,
:class:`ProcessorSettings`, :class:`ArchiverSettings`, :class:`ReplaySettings`) sharing
:class:`AwsClientSettings` (botocore timeouts and retries), each read with ``load()``, which
raises :class:`ConfigurationError` naming every invalid or missing variable. Nothing falls back
to a silent default for a resource name, URL or region. AWS clients are built from these
settings only, by :func:`webhook_pipeline.adapters.clients.aws_client`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar, Literal, Self

from botocore.config import Config
from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from webhook_pipeline.config_errors import describe_settings_error
from webhook_pipeline.errors import ConfigurationError

MAX_INLINE_BODY_BYTES = 180_000
#: botocore ``standard`` retry mode: the n-th retry waits at most ``min(2 ** (n - 1), 20)``
#: seconds for a throttling error (``botocore/retries/standard.py``, ``ExponentialBackoff``).
BOTOCORE_MAX_BACKOFF_SECONDS = 20.0


def worst_backoff_seconds(max_attempts: int) -> float:
    """Longest total sleep of botocore's ``standard`` retries over ``max_attempts`` attempts."""
    return sum(min(2.0 ** (n - 1), BOTOCORE_MAX_BACKOFF_SECONDS) for n in range(1, max_attempts))


class _Settings(BaseSettings):
    # Built on first use (``load()``): each function reads one of these classes, not all four.
    model_config = SettingsConfigDict(
        case_sensitive=False, extra="ignore", frozen=True, defer_build=True
    )

    @classmethod
    def load(cls) -> Self:
        """Read and validate the environment.

        Raises
        ------
        ConfigurationError
            A required variable is missing or a value is out of range (pydantic's message
            names each one).
        """
        try:
            return cls()
        except ValidationError as exc:
            raise ConfigurationError(describe_settings_error(exc, cls)) from None


class AwsClientSettings(_Settings):
    """botocore client settings shared by every function.

    Attributes
    ----------
    aws_connect_timeout_seconds, aws_read_timeout_seconds : float
        ``AWS_CONNECT_TIMEOUT_SECONDS``, ``AWS_READ_TIMEOUT_SECONDS``: socket timeouts, seconds.
    aws_max_attempts : int
        ``AWS_MAX_ATTEMPTS``: total attempts per request in botocore's ``standard`` retry mode
        (not ``adaptive``: no client-side rate limiting).
    """

    aws_connect_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    aws_read_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    aws_max_attempts: int = Field(default=3, ge=1, le=10)

    def botocore_config(self, max_pool_connections: int = 10) -> Config:
        """The botocore configuration of every client of this function.

        ``total_max_attempts``, not ``max_attempts``: botocore reads the latter as retries
        after the first attempt, which would make ``AWS_MAX_ATTEMPTS=1`` two attempts and break
        the time budget :meth:`worst_call_seconds` promises.
        """
        return Config(
            connect_timeout=self.aws_connect_timeout_seconds,
            read_timeout=self.aws_read_timeout_seconds,
            retries={"mode": "standard", "total_max_attempts": self.aws_max_attempts},
            max_pool_connections=max_pool_connections,
        )

    def worst_call_seconds(self) -> float:
        """Longest one AWS call can take: every attempt times out on read, with the longest
        backoffs between them (seconds)."""
        per_attempt = self.aws_connect_timeout_seconds + self.aws_read_timeout_seconds
        return self.aws_max_attempts * per_attempt + worst_backoff_seconds(self.aws_max_attempts)


class IngestSettings(AwsClientSettings):
    """Environment of IngestFunction (names are the upper-case field names).

    Attributes
    ----------
    queue_url : str
        Main queue URL.
    payload_bucket : str
        S3 bucket for claim-check bodies.
    secrets_prefix : str
        Prefix of the sources' Secrets Manager names (``webhook-pipeline/<stack>/``); must end
        with ``/`` (a prefix without it would also match another stack's secrets).
    redis_url : str
        ``redis://`` or ``rediss://`` URL of the gate.
    redis_cluster_mode : bool
        Talk to Redis with the cluster client (ElastiCache Serverless is cluster-mode enabled).
    gate_fail_mode : {"open", "closed"}
        Redis unavailable: enqueue without the gate (open, default) or answer 503 (closed).
    claim_ttl_seconds : int
        TTL of a pending claim in seconds (about the ingest timeout).
    dedup_ttl_max_seconds : int
        Upper bound of a done claim's TTL in seconds. Each source keeps its done claims for its
        provider's retry horizon (or its own ``dedup_ttl_seconds``), capped by this.
    redis_connect_timeout_ms, redis_read_timeout_ms : int
        Redis socket timeouts in milliseconds.
    gate_cooldown_seconds : float
        After a Redis failure, skip the gate for this many seconds (0 disables).
    max_body_bytes : int
        Larger bodies get 413.
    inline_body_max_bytes : int
        Larger bodies go to S3 (claim check); must stay under the SQS message limit.
    retry_after_seconds : int
        ``Retry-After`` of 503 answers, seconds.
    secrets_max_age_seconds : int
        Cache lifetime of secret values, seconds.
    sources_file : Path | None
        Sources file; default ``sources.toml`` next to the package.
    public_base_url : str
        ``PUBLIC_BASE_URL``: the base URL senders call (a custom domain or proxy), for providers
        that sign the URL; empty: the API's own URL as each request arrives.
    sources_catalogue : bool
        ``SOURCES_CATALOGUE``: also serve every registered provider that no source uses, under
        its own name (local development only; see :func:`webhook_pipeline.sources.load_sources`).
    local_min_tolerance_seconds : int
        ``LOCAL_MIN_TOLERANCE_SECONDS`` (seconds, 0..86400, default 0: off): every source whose
        provider checks a signed timestamp accepts one at least this old. Only with
        ``SOURCES_CATALOGUE=true`` (local development: ``local run --for-containers`` sets 300,
        so a container start does not outlast Discord's 15 s).
    provider_modules : str
        Comma-separated dotted names of extra provider modules to import (your own providers).
    redis_key_prefix : str
        Prefix of gate keys.
    ingest_time_budget_ms : int
        ``INGEST_TIME_BUDGET_MS``: the longest one request may take, below the function's
        timeout (the template passes ``Timeout`` minus one second). The worst case of the AWS
        and Redis calls on a request's path (:meth:`worst_case_seconds`) must fit in it, so
        the function answers 503 and releases its claim before Lambda stops it.
    aws_connect_timeout_seconds, aws_read_timeout_seconds, aws_max_attempts
        As :class:`AwsClientSettings`, with tighter defaults (0.25 s, 0.75 s, 1 attempt): the
        sender is waiting and retries a 503 itself.
    """

    queue_url: str = Field(min_length=1)
    payload_bucket: str = Field(min_length=1)
    secrets_prefix: str = Field(pattern=r"^$|/$")
    redis_url: str = Field(pattern=r"^rediss?://")
    redis_cluster_mode: bool = False
    gate_fail_mode: Literal["open", "closed"] = "open"
    claim_ttl_seconds: int = Field(default=30, ge=1, le=900)
    dedup_ttl_max_seconds: int = Field(default=30 * 86_400, ge=60, le=90 * 86_400)
    redis_connect_timeout_ms: int = Field(default=200, ge=10, le=5_000)
    redis_read_timeout_ms: int = Field(default=200, ge=10, le=5_000)
    gate_cooldown_seconds: float = Field(default=2.0, ge=0, le=300)
    max_body_bytes: int = Field(default=1_048_576, ge=1, le=10_485_760)
    inline_body_max_bytes: int = Field(default=150_000, ge=0, le=MAX_INLINE_BODY_BYTES)
    retry_after_seconds: int = Field(default=5, ge=1, le=3_600)
    secrets_max_age_seconds: int = Field(default=300, ge=0, le=86_400)
    sources_file: Path | None = None
    sources_catalogue: bool = False
    local_min_tolerance_seconds: int = Field(default=0, ge=0, le=86_400)
    public_base_url: str = Field(default="", pattern=r"^$|^https?://[^\s]+$")
    provider_modules: str = ""
    redis_key_prefix: str = "whd:"
    ingest_time_budget_ms: int = Field(default=4_000, ge=100, le=29_000)
    aws_connect_timeout_seconds: float = Field(default=0.25, gt=0, le=30)
    aws_read_timeout_seconds: float = Field(default=0.75, gt=0, le=60)
    aws_max_attempts: int = Field(default=1, ge=1, le=10)

    #: AWS calls one request can make one after the other: the secret (on a cache miss), the
    #: claim-check body (S3, large bodies only) and the envelope (SQS).
    SEQUENTIAL_AWS_CALLS: ClassVar[int] = 3
    #: Redis commands one request can make one after the other: the claim, then the confirm or
    #: the release.
    SEQUENTIAL_REDIS_COMMANDS: ClassVar[int] = 2

    @model_validator(mode="after")
    def _consistent(self) -> IngestSettings:
        if self.dedup_ttl_max_seconds <= self.claim_ttl_seconds:
            raise ValueError("DEDUP_TTL_MAX_SECONDS must exceed CLAIM_TTL_SECONDS")
        if self.local_min_tolerance_seconds and not self.sources_catalogue:
            raise ValueError(
                "LOCAL_MIN_TOLERANCE_SECONDS widens every source's replay window: it is for "
                "the local stack only (SOURCES_CATALOGUE=true)"
            )
        worst = self.worst_case_seconds()
        if worst * 1000 > self.ingest_time_budget_ms:
            raise ValueError(
                f"the worst case of one request ({worst:.2f} s: {self.SEQUENTIAL_AWS_CALLS} AWS "
                f"calls of {self.aws_max_attempts} attempt(s) x (connect "
                f"{self.aws_connect_timeout_seconds} s + read {self.aws_read_timeout_seconds} s) "
                f"plus backoff, and {self.SEQUENTIAL_REDIS_COMMANDS} Redis commands) exceeds "
                f"INGEST_TIME_BUDGET_MS={self.ingest_time_budget_ms}: lower the timeouts or "
                "attempts"
            )
        return self

    def worst_case_seconds(self) -> float:
        """Longest one ingest request can take on its AWS and Redis calls (seconds)."""
        redis = (self.redis_connect_timeout_ms + self.redis_read_timeout_ms) / 1000
        return (
            self.SEQUENTIAL_AWS_CALLS * self.worst_call_seconds()
            + self.SEQUENTIAL_REDIS_COMMANDS * redis
        )

    def batch_chunk_reserve_ms(self) -> int:
        """Milliseconds a batched POST must still have before one more ``SendMessageBatch``
        chunk: the worst case of that call, of the Redis command confirming its claims and of
        the one releasing the claims left, so the handler answers 503 within
        ``INGEST_TIME_BUDGET_MS`` whatever the batch's size."""
        redis = (self.redis_connect_timeout_ms + self.redis_read_timeout_ms) / 1000
        worst = self.worst_call_seconds() + self.SEQUENTIAL_REDIS_COMMANDS * redis
        return math.ceil(worst * 1000)

    def batch_claim_reserve_ms(self) -> int:
        """Milliseconds a batched POST must have, beyond :meth:`batch_chunk_reserve_ms`, before
        it claims one more window of events: the worst case of that Redis command."""
        return self.redis_connect_timeout_ms + self.redis_read_timeout_ms

    def extra_provider_modules(self) -> list[str]:
        """``PROVIDER_MODULES`` as a list of dotted module names."""
        return [m.strip() for m in self.provider_modules.split(",") if m.strip()]


class ProcessorSettings(AwsClientSettings):
    """Environment of the processor function.

    Attributes
    ----------
    table_name : str
        ``TABLE_NAME``: the DynamoDB table of delivery records and resource watermarks.
    payload_bucket : str
        ``PAYLOAD_BUCKET``: the S3 bucket of claim-check bodies.
    delivery_retention_days : int
        ``DELIVERY_RETENTION_DAYS`` (days, 1..3650, default 30): delivery records expire by TTL
        this long after they are written. Must exceed how long a delivery can still arrive
        (sender retries, queue + DLQ retention, replay window), or an expired delivery could be
        recorded again.
    max_workers : int
        ``MAX_WORKERS`` (1..64, default 10): threads writing the records of one batch.
    hooks_module : str | None
        ``HOOKS_MODULE``: dotted name of a module that registers user hooks on import
        (see :mod:`webhook_pipeline.hooks`); unset means no hooks. The template's
        ``HooksModule`` parameter.
    sources_file : Path | None
        ``SOURCES_FILE``: as the ingest function's; read only when a hook is registered by
        provider (which source is which provider's).
    sources_catalogue : bool
        ``SOURCES_CATALOGUE``: as the ingest function's (local development only).
    archive_queue_url : str
        ``ARCHIVE_QUEUE_URL``: the archive queue each processed envelope is sent to
        (:mod:`webhook_pipeline.process.archiving`). The template always sets it; empty (the
        default, for a processor run without the archive: older local stacks and tests)
        disables archiving, and the cold start logs a WARNING saying so.
    """

    table_name: str = Field(min_length=3, max_length=255)
    payload_bucket: str = Field(min_length=3, max_length=63)
    archive_queue_url: str = ""
    delivery_retention_days: int = Field(default=30, ge=1, le=3650)
    max_workers: int = Field(default=10, ge=1, le=64)
    hooks_module: str | None = None
    sources_file: Path | None = None
    sources_catalogue: bool = False

    def botocore_config(self, max_pool_connections: int = 0) -> Config:
        """As :meth:`AwsClientSettings.botocore_config`, with a connection pool at least as large
        as the worker pool."""
        return super().botocore_config(max(10, self.max_workers, max_pool_connections))


class ArchiverSettings(AwsClientSettings):
    """Environment of ArchiverFunction (archive queue -> archive bucket).

    Attributes
    ----------
    archive_bucket : str
        ``ARCHIVE_BUCKET``: where the gzip JSON Lines objects are written.
    payload_bucket : str
        ``PAYLOAD_BUCKET``: the claim-check bodies are read from (only under
        ``bodies/<source>/``).
    max_workers : int
        ``MAX_WORKERS`` (1..64, default 8): threads reading claim-check bodies and writing the
        objects of one batch.
    """

    archive_bucket: str = Field(min_length=3, max_length=63)
    payload_bucket: str = Field(min_length=3, max_length=63)
    max_workers: int = Field(default=8, ge=1, le=64)

    def botocore_config(self, max_pool_connections: int = 0) -> Config:
        """As :meth:`AwsClientSettings.botocore_config`, a pool as large as the worker pool."""
        return super().botocore_config(max(10, self.max_workers, max_pool_connections))


class ReplaySettings(AwsClientSettings):
    """Environment of ReplayFunction.

    Attributes
    ----------
    queue_url : str
        ``QUEUE_URL``: the main queue replays are sent to.
    dlq_url : str
        ``DLQ_URL``: the dead-letter queue replays are read from.
    safety_margin_ms : int
        Milliseconds kept before the function timeout (1000..300000, default 10000).
    receive_wait_seconds : int
        Long-poll wait of each DLQ receive in seconds (0..20, default 1).
    aws_read_timeout_seconds : float
        Default 30 s; must exceed ``receive_wait_seconds``.
    archive_bucket : str
        ``ARCHIVE_BUCKET``: the archive replays from the archive read (and keep job state in);
        empty = replay from the archive refused.
    table_name : str
        ``TABLE_NAME``: the deliveries table (read only: which deliveries have a record);
        needed by replay from the archive.
    payload_bucket : str
        ``PAYLOAD_BUCKET``: where a replayed body over ``inline_body_max_bytes`` is stored
        (claim check, as ingest does).
    inline_body_max_bytes : int
        ``INLINE_BODY_MAX_BYTES``: as the ingest's (default 150000).
    """

    queue_url: str = Field(min_length=1)
    dlq_url: str = Field(min_length=1)
    safety_margin_ms: int = Field(default=10_000, ge=1_000, le=300_000)
    receive_wait_seconds: int = Field(default=1, ge=0, le=20)
    archive_bucket: str = ""
    table_name: str = ""
    payload_bucket: str = ""
    inline_body_max_bytes: int = Field(default=150_000, ge=0, le=MAX_INLINE_BODY_BYTES)
    aws_read_timeout_seconds: float = Field(default=30.0, gt=0, le=60)

    @model_validator(mode="after")
    def _read_outlasts_poll(self) -> ReplaySettings:
        if self.aws_read_timeout_seconds <= self.receive_wait_seconds:
            raise ValueError("AWS_READ_TIMEOUT_SECONDS must exceed RECEIVE_WAIT_SECONDS")
        return self
