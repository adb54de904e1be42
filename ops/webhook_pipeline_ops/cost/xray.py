"""AWS X-Ray: the traces the default sampling rule records (``Tracing: Active`` on every
function).

Price: ``xray_trace_per_million``, USD per million traces recorded, from
https://aws.amazon.com/xray/pricing/ (:data:`~.prices.PRICES_REGION`,
:data:`~.prices.PRICES_AS_OF`, free tier not deducted).
"""

from __future__ import annotations

import math

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.units import SECONDS_PER_MONTH
from webhook_pipeline_ops.cost.usage import Scenario, Traffic, Usage


def sampled(invocations: float, scenario: Scenario) -> float:
    """Traces X-Ray records in a month for ``invocations`` spread evenly (Poisson arrivals).

    The default rule keeps the first request of each second (the reservoir) and
    ``xray_rate`` of the others: a second with at least one request fills the reservoir
    with probability ``1 - exp(-rate)``.
    """
    rate = invocations / SECONDS_PER_MONTH
    reservoir = scenario.xray_reservoir_per_s
    in_reservoir = SECONDS_PER_MONTH * reservoir * (1 - math.exp(-rate / reservoir))
    in_reservoir = min(in_reservoir, invocations)
    return in_reservoir + scenario.xray_rate * (invocations - in_reservoir)


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """The traces of both functions a month (:attr:`~.usage.Traffic.traced`); none untraced."""
    if not usage.tracing:
        return []
    traced = traffic.traced
    return [
        Line(
            "X-Ray",
            "traces recorded (ingest + processor)",
            traced,
            "traces",
            traced / 1e6 * prices.xray_trace_per_million,
        )
    ]
