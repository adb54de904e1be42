"""Shared observability: one Powertools Logger, Metrics (EMF) and Tracer for every function.

Service name comes from ``POWERTOOLS_SERVICE_NAME`` (one per function in the template); all
metrics go to the one namespace ``POWERTOOLS_METRICS_NAMESPACE`` (default ``WebhookPipeline``).
Handlers append ``source`` and ``delivery_id`` as logger keys so every line carries them.
Never log a secret, a full signature or a body.
"""

from __future__ import annotations

import contextlib
import json
import logging
import numbers
import os
from collections import defaultdict
from collections.abc import AsyncGenerator, Generator, Sequence
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.formatter import (
    RESERVED_LOG_ATTRS,
    LambdaPowertoolsFormatter,
    _get_context,
)
from aws_lambda_powertools.metrics import MetricResolution, MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import (
    extract_cloudwatch_metric_resolution_value,
    extract_cloudwatch_metric_unit_value,
)
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.constants import MAX_METRICS
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "WebhookPipeline")

_RESERVED = frozenset(RESERVED_LOG_ATTRS)
# The first character of every text Python's json module decodes (whitespace aside).
_JSON_START = frozenset('{["-0123456789tfnNI')


class _Formatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter, line for line the same output, without two costs of its own
    on every line: its reserved-attribute checks scan a tuple (a set here), and it tries to
    decode every plain-text message as JSON (here only text that can start a JSON value)."""

    def _extract_log_message(self, log_record: logging.LogRecord) -> Any:
        message = log_record.msg
        if type(message) is str and not log_record.args:
            first = message[:1]
            if first not in _JSON_START and not first.isspace():
                return message
        return super()._extract_log_message(log_record)

    def _extract_log_keys(self, log_record: logging.LogRecord) -> dict[str, Any]:
        record_dict = log_record.__dict__.copy()
        record_dict["asctime"] = self.formatTime(record=log_record)
        formatted_log: dict[str, Any] = {}
        for keys in (self.log_format, _get_context().get()):
            for key, value in keys.items():
                if value and key in _RESERVED:
                    if not isinstance(value, str):  # as Powertools refuses it
                        return super()._extract_log_keys(log_record)
                    formatted_log[key] = value % record_dict
                else:
                    formatted_log[key] = value
        formatted_log.update({k: v for k, v in record_dict.items() if k not in _RESERVED})
        return formatted_log


class _EMFProvider(AmazonCloudWatchEMFProvider):
    """Powertools' EMF provider, the same output, with each (name, unit, resolution) validated
    once per container instead of on every call (and without formatting a debug message that
    is not logged)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._validated: dict[tuple[str, Any, Any], tuple[str, str, int]] = {}

    def add_metric(
        self,
        name: str,
        unit: MetricUnit | str,
        value: float,
        resolution: MetricResolution | int = 60,
    ) -> None:
        known = self._validated.get((name, unit, resolution))
        if known is None or not isinstance(value, numbers.Number):
            super().add_metric(name=name, unit=unit, value=value, resolution=resolution)
            self._validated[(name, unit, resolution)] = (
                name.strip(),
                extract_cloudwatch_metric_unit_value(
                    self._metric_units, self._metric_unit_valid_options, unit
                ),
                extract_cloudwatch_metric_resolution_value(self._metric_resolutions, resolution),
            )
            return
        metric_name, unit_value, resolution_value = known
        metric = self.metric_set.get(metric_name)
        if metric is None:
            metric = self.metric_set[metric_name] = defaultdict(list)
        metric["Unit"] = unit_value
        metric["StorageResolution"] = resolution_value
        metric["Value"].append(float(value))
        if len(self.metric_set) == MAX_METRICS or len(metric["Value"]) == MAX_METRICS:
            print(json.dumps(self.serialize_metric_set()))  # as Powertools publishes 100
            self.metric_set.clear()


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


logger = Logger(logger_formatter=_Formatter())
metrics = Metrics(
    namespace=NAMESPACE,
    provider=_EMFProvider(
        namespace=NAMESPACE,
        metric_set=Metrics._metrics,
        dimension_set=Metrics._dimensions,
        metadata_set=Metrics._metadata,
        default_dimensions=Metrics._default_dimensions,
    ),
)
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
