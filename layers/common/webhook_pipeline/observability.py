"""Shared observability: one Powertools Logger, Metrics (EMF) and Tracer for every function.

Service name comes from ``POWERTOOLS_SERVICE_NAME`` (one per function in the template); all
metrics go to the one namespace ``POWERTOOLS_METRICS_NAMESPACE`` (default ``WebhookPipeline``).
Handlers append ``source`` and ``delivery_id`` as logger keys so every line carries them.
Never log a secret, a full signature or a body.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.shared.functions import strtobool
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


#: What a JSON value can start with (after whitespace): ``{ [ "``, a digit or ``-``, and the
#: first letters of ``true false null NaN Infinity``.
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


def message_deserializer(message: dict[str, Any] | str | bool | int | float) -> Any:
    """Powertools' reading of a log message, without its cost for plain sentences.

    Powertools' formatter passes every ``str`` message to its deserializer and keeps the string
    when that raises (so ``logger.info('{"a": 1}')`` logs an object). ``json.loads`` of a string
    whose first non-blank character cannot start a JSON value always raises, and building that
    exception was the costliest step of an INFO line; such a message is returned as it is.
    Every other message goes to ``json.loads`` as before, so the lines are the same.
    """
    if not isinstance(message, str) or message.lstrip()[:1] in _JSON_STARTS:
        return json.loads(message)  # type: ignore[arg-type]  # raises TypeError as before
    return message


def _log_serializer() -> Callable[[Any], str] | None:
    """One encoder for every log line, with Powertools' own settings (``default=str``, compact
    separators, ``ensure_ascii=False``): ``json.dumps`` with those arguments built a new
    encoder per line. ``None`` (Powertools' default, indented) when ``POWERTOOLS_DEV`` is set."""
    if strtobool(os.environ.get("POWERTOOLS_DEV", "0")):  # Powertools' own reading of it
        return None
    encoder = json.JSONEncoder(default=str, separators=(",", ":"), ensure_ascii=False)
    return encoder.encode


logger = Logger(json_deserializer=message_deserializer, json_serializer=_log_serializer())
metrics = Metrics(namespace=NAMESPACE)
tracer = build_tracer()
#: Whether ``tracer`` records to X-Ray (read once, when this module is imported).
TRACING = not isinstance(tracer.provider, NoTracing)

Handler = TypeVar("Handler", bound=Callable[..., Any])


def capture_lambda_handler(capture_response: bool | None = None) -> Callable[[Handler], Handler]:
    """``tracer.capture_lambda_handler`` where tracing is on; where it is off the handler is
    left as it is (the decorator's segment, annotations and cold-start bookkeeping would all go
    to :class:`NoTracing`). ``capture_response=None`` leaves the choice to Powertools
    (``POWERTOOLS_TRACER_CAPTURE_RESPONSE``, default true), as the bare decorator does."""
    if TRACING:
        return tracer.capture_lambda_handler(capture_response=capture_response)

    def untraced(handler: Handler) -> Handler:
        return handler

    return untraced


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
    REPROCESSED = "Reprocessed"
    REPROCESS_SKIPPED = "ReprocessSkipped"
    SECRET_INVALID = "SecretInvalid"  # noqa: S105 - a metric name
    DUPLICATE_BODY_MISMATCH = "DuplicateBodyMismatch"
    HANDSHAKE_ANSWERED = "HandshakeAnswered"
    #: The processor could not send an envelope's archive message (the record is retried).
    ARCHIVE_SEND_FAILED = "ArchiveSendFailed"
    ARCHIVED = "Archived"
    ARCHIVE_WRITE_FAILED = "ArchiveWriteFailed"
    ARCHIVE_BODY_FAILED = "ArchiveBodyFailed"


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
    "TRACING",
    "MetricName",
    "MetricUnit",
    "NoTracing",
    "build_tracer",
    "capture_lambda_handler",
    "count",
    "count_by",
    "logger",
    "message_deserializer",
    "metrics",
    "tracer",
    "tracing_enabled",
]
