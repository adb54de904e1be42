"""Settings of the processor function, read from the environment and validated once at cold start.

Required: ``TABLE_NAME`` (the DeliveriesTable), ``PAYLOAD_BUCKET`` (claim-check bodies).
Tuning (defaults below): ``DELIVERY_RETENTION_DAYS``, ``MAX_WORKERS``, ``HOOKS_MODULE``,
``AWS_CONNECT_TIMEOUT_SECONDS``, ``AWS_READ_TIMEOUT_SECONDS``, ``AWS_MAX_ATTEMPTS``.
A missing or invalid value fails the init with :class:`ConfigurationError`; nothing falls back to
a silent default for the required names.
"""

from __future__ import annotations

from botocore.config import Config
from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from webhook_pipeline.errors import ConfigurationError


class ProcessorSettings(BaseSettings):
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
        (see :mod:`webhook_pipeline.hooks`); unset means no hooks.
    aws_connect_timeout_seconds, aws_read_timeout_seconds : float
        botocore connect/read timeouts in seconds (defaults 2 and 5).
    aws_max_attempts : int
        botocore ``standard`` retry mode total attempts per request (default 3).
    """

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore", frozen=True)

    table_name: str = Field(min_length=3, max_length=255)
    payload_bucket: str = Field(min_length=3, max_length=63)
    delivery_retention_days: int = Field(default=30, ge=1, le=3650)
    max_workers: int = Field(default=10, ge=1, le=64)
    hooks_module: str | None = None
    aws_connect_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    aws_read_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    aws_max_attempts: int = Field(default=3, ge=1, le=10)

    @classmethod
    def load(cls) -> ProcessorSettings:
        """Read and validate the environment.

        Raises
        ------
        ConfigurationError
            A required variable is missing or a value is out of range.
        """
        try:
            return cls()  # type: ignore[call-arg]
        except ValidationError as exc:
            raise ConfigurationError(f"processor settings are invalid:\n{exc}") from exc

    def botocore_config(self) -> Config:
        """The botocore client configuration: explicit timeouts, ``standard`` retries (not
        ``adaptive``: no client-side rate limiting), a connection pool as large as the worker
        pool."""
        return Config(
            connect_timeout=self.aws_connect_timeout_seconds,
            read_timeout=self.aws_read_timeout_seconds,
            retries={"mode": "standard", "max_attempts": self.aws_max_attempts},
            max_pool_connections=max(10, self.max_workers),
        )
