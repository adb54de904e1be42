"""Amazon S3 (Standard), the claim checks of large bodies: a PUT at ingest, a GET in the
processor, the body kept for the payload expiration.

Prices: ``s3_put_per_thousand`` and ``s3_get_per_thousand``, USD per 1,000 requests;
``s3_storage_gb_month``, USD per GB-month; from https://aws.amazon.com/s3/pricing/
(:data:`~.prices.PRICES_REGION`, :data:`~.prices.PRICES_AS_OF`, free tier not deducted).
"""

from __future__ import annotations

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.units import DAYS_PER_MONTH, GIB
from webhook_pipeline_ops.cost.usage import Traffic, Usage


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """Requests and GB-month of the claim checks; none when no body is large."""
    large = traffic.large
    if not large:
        return []
    s3 = large / 1000 * (prices.s3_put_per_thousand + prices.s3_get_per_thousand)
    body_bytes = traffic.scenario.large_body_bytes
    s3_gb = large * body_bytes * usage.payload_expiration_days / DAYS_PER_MONTH
    s3_gb /= GIB
    return [
        Line("S3", "claim-check put + get", 2 * large, "requests", s3),
        Line("S3", "claim-check storage", s3_gb, "GB-month", s3_gb * prices.s3_storage_gb_month),
    ]
