"""Amazon CloudWatch metrics, alarms and dashboard: fixed monthly lines, whatever the traffic.

Prices: ``metric_month``, USD per custom metric (name + dimensions) a month, the first 10,000;
``alarm_metric_month``, USD per metric in a standard-resolution alarm a month (an anomaly band
counts 3); ``dashboard_month``, USD per dashboard a month beyond the account's first three; from
https://aws.amazon.com/cloudwatch/pricing/ (:data:`~.prices.PRICES_REGION`,
:data:`~.prices.PRICES_AS_OF`).
"""

from __future__ import annotations

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.usage import Traffic, Usage


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """The EMF metrics the functions emit, the template's alarm metrics and dashboards."""
    return [
        Line(
            "CloudWatch",
            "custom metrics (EMF)",
            usage.emf_metrics,
            "metrics",
            usage.emf_metrics * prices.metric_month,
            fixed=True,
        ),
        Line(
            "CloudWatch",
            "alarms",
            usage.alarm_metrics,
            "alarm metrics",
            usage.alarm_metrics * prices.alarm_metric_month,
            fixed=True,
        ),
        Line(
            "CloudWatch",
            "dashboard",
            usage.dashboards,
            "dashboards",
            usage.dashboards * prices.dashboard_month,
            fixed=True,
        ),
    ]
