"""The monthly bill: the traffic's counts once (:func:`traffic`), then each service model's lines
in the bill's order (:data:`SERVICES`)."""

from __future__ import annotations

from collections.abc import Callable

from webhook_pipeline_ops.cost import (
    api_gateway,
    archive,
    aws_lambda,
    cloudwatch,
    dynamodb,
    elasticache,
    logs,
    s3,
    secrets_manager,
    sqs,
    vpc,
    xray,
)
from webhook_pipeline_ops.cost.bill import Bill, Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.units import SECONDS_PER_MONTH
from webhook_pipeline_ops.cost.usage import Scenario, Traffic, Usage
from webhook_pipeline_ops.cost.variants import VARIANTS

#: A service model: its lines of the bill (USD a month) from the usage, the traffic and prices.
ServiceModel = Callable[[Usage, Traffic, Prices], list[Line]]
#: The service models, in the bill's order.
SERVICES: tuple[ServiceModel, ...] = (
    api_gateway.lines,
    aws_lambda.lines,
    sqs.lines,
    dynamodb.lines,
    elasticache.lines,
    logs.lines,
    cloudwatch.lines,
    xray.lines,
    s3.lines,
    archive.lines,
    vpc.lines,
    secrets_manager.lines,
)


def traffic(usage: Usage, scenario: Scenario) -> Traffic:
    """The month's counts of ``scenario`` on a deployment that consumes ``usage``: requests
    split into duplicates and new deliveries (ordered or not, large or not), the processor's
    invocations (batches filled over the batching window) and the traces sampled."""
    n = scenario.per_month
    duplicates = n * scenario.duplicate_share
    new = n - duplicates
    ordered = new * scenario.ordered_share
    batch = aws_lambda.batch_records(usage, new / SECONDS_PER_MONTH)
    invocations = new / batch if new else 0.0
    traced = (
        xray.sampled(n, scenario) + xray.sampled(invocations, scenario) if usage.tracing else 0.0
    )
    return Traffic(
        scenario=scenario,
        requests=n,
        duplicates=duplicates,
        new=new,
        ordered=ordered,
        unordered=new - ordered,
        large=new * scenario.large_body_share,
        invocations=invocations,
        traced=traced,
    )


def estimate(
    usage: Usage, scenario: Scenario, prices: Prices, variant: str = "as deployed"
) -> Bill:
    """The monthly bill of ``scenario`` on a deployment that consumes ``usage``.

    Returns
    -------
    Bill
        One :class:`~.bill.Line` per priced quantity (USD a month), fixed lines marked, service
        by service in the order of :data:`SERVICES`.
    """
    counts = traffic(usage, scenario)
    bill = Bill(variant, scenario)
    for service in SERVICES:
        bill.lines.extend(service(usage, counts, prices))
    return bill


def bills(usage: Usage, scenario: Scenario, prices: Prices) -> dict[str, Bill]:
    """The bill of every variant (:data:`~.variants.VARIANTS`) for the same traffic."""
    out = {}
    for name, change in VARIANTS.items():
        u, s = change(usage, scenario)
        out[name] = estimate(u, s, prices, name)
    return out
