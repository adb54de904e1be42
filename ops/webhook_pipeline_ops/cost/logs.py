"""Amazon CloudWatch Logs (Standard class): the functions' own lines (log + EMF), Lambda's platform
lines (START, END, REPORT, and REPORT's XRAY line when sampled) and the API's access log, ingested
and then stored compressed within their retention.

Prices: ``logs_ingest_gb``, USD per GB ingested; ``logs_storage_gb_month``, USD per GB-month of
archived (compressed) bytes; from https://aws.amazon.com/cloudwatch/pricing/
(:data:`~.prices.PRICES_REGION`, :data:`~.prices.PRICES_AS_OF`, free tier not deducted).
"""

from __future__ import annotations

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.units import DAYS_PER_MONTH, GIB
from webhook_pipeline_ops.cost.usage import Traffic, Usage


def log_bytes(usage: Usage, traffic: Traffic) -> float:
    """Bytes written to the log groups in a month."""
    n, new, invocations = traffic.requests, traffic.new, traffic.invocations
    return (
        new * usage.ingest_log_bytes_accepted
        + traffic.duplicates * usage.ingest_log_bytes_duplicate
        + invocations * usage.processor_log_bytes_fixed
        + new * usage.processor_log_bytes_per_record
        + (n + invocations) * usage.platform_log_bytes
        + traffic.traced * usage.xray_log_bytes
        + n * usage.api_access_log_bytes
    )


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """GB ingested a month, and GB-month archived: the month's bytes x the compression ratio x
    the retention in months (a steady state)."""
    log_gb = log_bytes(usage, traffic) / GIB
    archived = log_gb * traffic.scenario.log_compression * usage.log_retention_days / DAYS_PER_MONTH
    return [
        Line("CloudWatch", "log ingestion", log_gb, "GB", log_gb * prices.logs_ingest_gb),
        Line(
            "CloudWatch",
            "log storage (compressed, within retention)",
            archived,
            "GB-month",
            archived * prices.logs_storage_gb_month,
        ),
    ]
