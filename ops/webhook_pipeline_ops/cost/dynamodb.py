"""Amazon DynamoDB (on-demand): the processor's writes, the gate's writes (variant ``no-redis``),
and the table's storage with point-in-time recovery.

Prices: ``dynamodb_write_unit_per_million``, USD per million write request units (1 unit per KB of
a standard write, 2 in a transaction); ``dynamodb_storage_gb_month`` and
``dynamodb_pitr_gb_month``, USD per GB-month stored and continuously backed up; from
https://aws.amazon.com/dynamodb/pricing/on-demand/ (:data:`~.prices.PRICES_REGION`,
:data:`~.prices.PRICES_AS_OF`, free tier not deducted).
"""

from __future__ import annotations

import math

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.units import DAYS_PER_MONTH, GIB, SECONDS_PER_MONTH
from webhook_pipeline_ops.cost.usage import Traffic, Usage

DYNAMODB_ITEM_OVERHEAD_BYTES = 100  # DynamoDB bills each stored item 100 bytes more
DYNAMODB_WRITE_UNIT_BYTES = 1024


def write_units(item_bytes: float) -> int:
    """Write units of one standard write of an item of ``item_bytes`` (1 KB each, rounded up)."""
    return max(1, math.ceil(item_bytes / DYNAMODB_WRITE_UNIT_BYTES))


def transaction_units(usage: Usage) -> int:
    """Write units of an ordered delivery: the delivery and the watermark (resource) items in
    one transaction, which costs 2 units per KB of each item."""
    return 2 * (write_units(usage.delivery_item_bytes) + write_units(usage.resource_item_bytes))


def gate_write_units(usage: Usage, traffic: Traffic) -> float:
    """Write units a month of the gate as DynamoDB writes (claim and confirm per new delivery,
    a failed conditional put per duplicate); 0 when the gate is Redis."""
    writes = (
        traffic.new * usage.gate_writes_accepted + traffic.duplicates * usage.gate_writes_duplicate
    )
    return writes * (write_units(usage.gate_item_bytes) if usage.gate_writes_accepted else 0)


def table_gb(usage: Usage, traffic: Traffic) -> float:
    """GB stored on average: the deliveries within their retention (each item billed
    :data:`DYNAMODB_ITEM_OVERHEAD_BYTES` more), and the gate's claims within their TTL."""
    ordered_share = traffic.scenario.ordered_share
    stored = traffic.new * usage.delivery_retention_days / DAYS_PER_MONTH
    mean_item = (
        ordered_share * usage.delivery_item_bytes
        + (1 - ordered_share) * usage.unordered_delivery_item_bytes
    )
    gb = stored * (mean_item + DYNAMODB_ITEM_OVERHEAD_BYTES) / GIB
    if usage.gate_writes_accepted:
        claims = traffic.new / SECONDS_PER_MONTH * usage.dedup_ttl_s
        gb += claims * (usage.gate_item_bytes + DYNAMODB_ITEM_OVERHEAD_BYTES) / GIB
    return gb


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """The processor's write units (a transaction per ordered delivery, a conditional put per
    unordered one), the gate's when it writes, and the table's GB-month."""
    wru_price = prices.dynamodb_write_unit_per_million
    wru = traffic.ordered * transaction_units(usage) + traffic.unordered * write_units(
        usage.unordered_delivery_item_bytes
    )
    out = [
        Line(
            "DynamoDB",
            "processor writes (delivery + watermark)",
            wru,
            "WRU",
            wru / 1e6 * wru_price,
        )
    ]
    if gate_wru := gate_write_units(usage, traffic):
        out.append(
            Line(
                "DynamoDB",
                "gate writes (claim, confirm)",
                gate_wru,
                "WRU",
                gate_wru / 1e6 * wru_price,
            )
        )
    gb = table_gb(usage, traffic)
    out.append(
        Line(
            "DynamoDB",
            "storage + point-in-time recovery",
            gb,
            "GB-month",
            gb * (prices.dynamodb_storage_gb_month + prices.dynamodb_pitr_gb_month),
        )
    )
    return out
