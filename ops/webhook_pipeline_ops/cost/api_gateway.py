"""API Gateway HTTP API: one request per webhook (each up to 512 KB counts as one).

Price: ``api_http_per_million``, USD per million requests (the first 300 million a month), from
https://aws.amazon.com/api-gateway/pricing/ (:data:`~.prices.PRICES_REGION`,
:data:`~.prices.PRICES_AS_OF`).
"""

from __future__ import annotations

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.usage import Traffic, Usage


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """The HTTP API's requests a month (every webhook, duplicates included)."""
    n = traffic.requests
    return [
        Line(
            "API Gateway", "HTTP API requests", n, "requests", n / 1e6 * prices.api_http_per_million
        )
    ]
