"""Amazon ElastiCache Serverless (Valkey), the gate: ECPU per command and the storage the claims
take within their TTL, metered at least at a floor.

Prices: ``elasticache_ecpu_per_million``, USD per million ECPU (a simple command on a value under
1 KB is one); ``elasticache_storage_gb_hour``, USD per GB-hour, with at least
``elasticache_min_storage_gb`` GB metered; from https://aws.amazon.com/elasticache/pricing/
(:data:`~.prices.PRICES_REGION`, :data:`~.prices.PRICES_AS_OF`).
"""

from __future__ import annotations

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.units import GIB, HOURS_PER_MONTH, SECONDS_PER_MONTH
from webhook_pipeline_ops.cost.usage import Traffic, Usage


def live_claims_gb(usage: Usage, traffic: Traffic) -> float:
    """GB of claims held on average: new deliveries a second x the TTL x bytes per claim."""
    return traffic.new / SECONDS_PER_MONTH * usage.dedup_ttl_s * usage.redis_bytes_per_claim / GIB


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """ECPU of the gate's commands (claim + confirm per new delivery, one per duplicate), the
    metered minimum (fixed) and the claims' GB above it; none without the cache."""
    if not usage.uses_redis:
        return []
    commands = (
        traffic.new * usage.redis_commands_accepted
        + traffic.duplicates * usage.redis_commands_duplicate
    )
    ecpu = commands * usage.ecpu_per_command
    floor = prices.elasticache_min_storage_gb
    above = max(0.0, live_claims_gb(usage, traffic) - floor)
    return [
        Line(
            "ElastiCache",
            "ECPU (gate commands)",
            ecpu,
            "ECPU",
            ecpu / 1e6 * prices.elasticache_ecpu_per_million,
        ),
        Line(
            "ElastiCache",
            "storage (minimum metered)",
            floor,
            "GB",
            floor * HOURS_PER_MONTH * prices.elasticache_storage_gb_hour,
            fixed=True,
        ),
        Line(
            "ElastiCache",
            "storage above the minimum (claims within their TTL)",
            above,
            "GB",
            above * HOURS_PER_MONTH * prices.elasticache_storage_gb_hour,
        ),
    ]
