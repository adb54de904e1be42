"""Design variants: what a change would do to the same traffic's bill.

``no-redis`` (the gate as a DynamoDB conditional put, the ingest function out of the VPC),
``unordered`` (no source orders its events: one conditional put per delivery instead of the
two-item transaction), ``lean-logs`` (no per-delivery INFO line, no Lambda platform lines) and
``no-tracing``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from webhook_pipeline_ops.cost.usage import Scenario, Usage


def _no_redis(usage: Usage) -> Usage:
    """The gate as a DynamoDB conditional put (claim) and update (confirm); a duplicate's
    failed conditional put still consumes its write unit. No cache, so no VPC either; the
    ingest function waits on DynamoDB (about ``dynamodb_ms`` for the two writes)."""
    return replace(
        usage,
        uses_redis=False,
        in_vpc=False,
        gate_writes_accepted=2,
        gate_writes_duplicate=1,
        gate_item_bytes=usage.redis_bytes_per_claim,
        # two single-item writes instead of two sub-millisecond Redis commands
        ingest_ms_accepted=usage.ingest_ms_accepted + usage.dynamodb_ms,
        ingest_ms_duplicate=usage.ingest_ms_duplicate + usage.dynamodb_ms / 2,
    )


def _lean_logs(usage: Usage) -> Usage:
    """``POWERTOOLS_LOG_LEVEL: WARNING`` (no per-delivery INFO line; warnings, errors and EMF
    stay) and ``LoggingConfig: {LogFormat: JSON, SystemLogLevel: WARN}`` (no START, END,
    REPORT lines)."""
    return replace(
        usage,
        ingest_log_bytes_accepted=usage.ingest_log_bytes_accepted - usage.ingest_info_line_bytes,
        ingest_log_bytes_duplicate=max(
            0.0, usage.ingest_log_bytes_duplicate - usage.ingest_info_line_bytes
        ),
        processor_log_bytes_per_record=max(
            0.0, usage.processor_log_bytes_per_record - usage.processor_info_line_bytes
        ),
        platform_log_bytes=0.0,
        xray_log_bytes=0.0,
    )


VARIANTS: dict[str, Callable[[Usage, Scenario], tuple[Usage, Scenario]]] = {
    "as deployed": lambda u, s: (u, s),
    "no-redis": lambda u, s: (_no_redis(u), s),
    "unordered": lambda u, s: (u, replace(s, ordered_share=0.0)),
    "lean-logs": lambda u, s: (_lean_logs(u), s),
    "no-tracing": lambda u, s: (replace(u, tracing=False), s),
}
