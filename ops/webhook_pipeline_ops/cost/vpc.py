"""Amazon VPC interface endpoints (AWS PrivateLink) of the ingest function in the VPC (SQS,
Secrets Manager): the hours of each endpoint in each AZ, and the data through them.

Prices: ``vpc_interface_endpoint_az_hour``, USD per endpoint per AZ per hour;
``vpc_endpoint_data_gb``, USD per GB processed; from https://aws.amazon.com/privatelink/pricing/
(:data:`~.prices.PRICES_REGION`, :data:`~.prices.PRICES_AS_OF`).
"""

from __future__ import annotations

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.units import GIB, HOURS_PER_MONTH
from webhook_pipeline_ops.cost.usage import Traffic, Usage


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """Endpoint-AZ hours (fixed) and GB through the endpoints (every envelope sent to SQS, every
    large body); none out of the VPC or without interface endpoints."""
    if not (usage.in_vpc and usage.interface_endpoints):
        return []
    hours = usage.interface_endpoints * usage.availability_zones * HOURS_PER_MONTH
    large_bytes = traffic.large * traffic.scenario.large_body_bytes
    through = (traffic.new * usage.envelope_bytes + large_bytes) / GIB
    return [
        Line(
            "VPC",
            "interface endpoints",
            hours,
            "endpoint-AZ hours",
            hours * prices.vpc_interface_endpoint_az_hour,
            fixed=True,
        ),
        Line(
            "VPC",
            "data through the endpoints",
            through,
            "GB",
            through * prices.vpc_endpoint_data_gb,
        ),
    ]
