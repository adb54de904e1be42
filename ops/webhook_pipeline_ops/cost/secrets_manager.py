"""AWS Secrets Manager: one secret per source, read by each warm ingest container once per cache
age (``SECRETS_MAX_AGE_SECONDS``): both fixed, whatever the traffic.

Prices: ``secret_month``, USD per secret a month; ``secrets_api_per_10k``, USD per 10,000 API
calls; from https://aws.amazon.com/secrets-manager/pricing/ (:data:`~.prices.PRICES_REGION`,
:data:`~.prices.PRICES_AS_OF`).
"""

from __future__ import annotations

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.units import SECONDS_PER_MONTH
from webhook_pipeline_ops.cost.usage import Traffic, Usage


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """The secrets, and the ``GetSecretValue`` calls a month: warm containers x secrets x the
    refreshes a month."""
    scenario = traffic.scenario
    reads = (
        scenario.warm_containers * usage.sources * SECONDS_PER_MONTH / scenario.secrets_max_age_s
    )
    return [
        Line(
            "Secrets Manager",
            "secrets",
            usage.sources,
            "secrets",
            usage.sources * prices.secret_month,
            fixed=True,
        ),
        Line(
            "Secrets Manager",
            "GetSecretValue",
            reads,
            "calls",
            reads / 1e4 * prices.secrets_api_per_10k,
            fixed=True,
        ),
    ]
