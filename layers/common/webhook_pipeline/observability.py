"""Shared observability: one Powertools Logger, Metrics (EMF) and Tracer for every function.

Service name comes from ``POWERTOOLS_SERVICE_NAME`` (one per function in the template); all
metrics go to the one namespace ``POWERTOOLS_METRICS_NAMESPACE`` (default ``WebhookPipeline``).
Handlers append ``source`` and ``delivery_id`` as logger keys so every line carries them.
Never log a secret, a full signature or a body.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, Generator, Sequence
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "WebhookPipeline")


class _Segment(BaseSegment):
    """The segment of :class:`NoTracing`: every call does nothing."""

    def close(self, end_time: int | None = None) -> None:
        return None

    def add_subsegment(self, subsegment: Any) -> None:
        return None

    def remove_subsegment(self, subsegment: Any) -> None:
        return None

    def put_annotation(self, key: str, value: Any) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        return None


class NoTracing(BaseProvider):
    """The tracing provider when tracing is off: nothing recorded, nothing patched.

    Powertools' own provider is the X-Ray recorder, whose import (``aws_xray_sdk.core``, about
    30 ms warm and 250 ms from a cold disk) and per-invocation dummy segments are paid even
    when tracing is disabled; with this provider a function with tracing off pays neither.
    """

    _segment = _Segment()

    @contextlib.contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Generator[BaseSegment]:
        yield self._segment

    @contextlib.asynccontextmanager
    async def in_subsegment_async(
        self, name: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[BaseSegment]:
        yield self._segment

    def put_annotation(self, key: str, value: Any) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def patch(self, modules: Sequence[str]) -> None:
        return None

    def patch_all(self) -> None:
        return None


def tracing_enabled() -> bool:
    """Whether this process traces to X-Ray: Powertools' own rule (in Lambda, and not disabled
    by ``POWERTOOLS_TRACE_DISABLED``, SAM local or Chalice local)."""
    return not Tracer._is_tracer_disabled()


def build_tracer() -> Tracer:
    """The X-Ray tracer when tracing is on (botocore patched), else one on :class:`NoTracing`
    (the X-Ray SDK is never imported)."""
    if tracing_enabled():
        # Only botocore is patched: X-Ray has no redis-py patcher, and patching everything it
        # knows imports libraries (requests, httplib, sqlite3...) the functions never use.
        return Tracer(patch_modules=["botocore"])
    return Tracer(provider=NoTracing(), disabled=False, auto_patch=False)


logger = Logger()
metrics = Metrics(namespace=NAMESPACE)
tracer = build_tracer()


class MetricName:
    """Metric names of the pipeline (one namespace). Alarms in template.yaml refer to these."""

    ACCEPTED = "Accepted"
    DUPLICATE_DISCARDED = "DuplicateDiscarded"
    SIGNATURE_INVALID = "SignatureInvalid"
    TIMESTAMP_REJECTED = "TimestampRejected"
    GATE_UNAVAILABLE = "GateUnavailable"
    ENQUEUE_FAILED = "EnqueueFailed"
    VERIFIED_WITH_PREVIOUS_SECRET = "VerifiedWithPreviousSecret"  # noqa: S105 - a metric name
    CLAIM_RELEASED = "ClaimReleased"
    ACK_LATENCY = "AckLatency"
    APPLIED = "Applied"
    DUPLICATE = "Duplicate"
    STALE = "Stale"
    RETRY = "Retry"
    MALFORMED = "Malformed"
    REPLAYED = "Replayed"
    PROCESSOR_BUG = "ProcessorBug"
    HOOK_FAILED = "HookFailed"
    HOOK_COMPLETED = "HookCompleted"
    SECRET_INVALID = "SecretInvalid"  # noqa: S105 - a metric name
    DUPLICATE_BODY_MISMATCH = "DuplicateBodyMismatch"
    HANDSHAKE_ANSWERED = "HandshakeAnswered"


def count(name: str, value: float = 1) -> None:
    """Add ``value`` to the count metric ``name`` (flushed by ``@metrics.log_metrics``)."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def count_by(name: str, value: float = 1, **dimensions: str) -> None:
    """Emit the count metric ``name`` with its own ``dimensions`` right away (one EMF line), so
    the other metrics of the invocation keep theirs."""
    with single_metric(
        name=name, unit=MetricUnit.Count, value=value, namespace=NAMESPACE
    ) as metric:
        for key, dimension in dimensions.items():
            metric.add_dimension(name=key, value=dimension)


__all__ = [
    "NAMESPACE",
    "MetricName",
    "MetricUnit",
    "NoTracing",
    "build_tracer",
    "count",
    "count_by",
    "logger",
    "metrics",
    "tracer",
    "tracing_enabled",
]
