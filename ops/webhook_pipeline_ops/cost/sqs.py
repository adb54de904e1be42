"""Amazon SQS (standard queue): the envelope sent per delivery, one receive and one delete batch
per processor invocation, and the event source mapping's long polls on an idle queue.

Price: ``sqs_request_per_million``, USD per million requests, each 64 KiB chunk of a request
counted as one request; from https://aws.amazon.com/sqs/pricing/ (:data:`~.prices.PRICES_REGION`,
:data:`~.prices.PRICES_AS_OF`, free tier not deducted).
"""

from __future__ import annotations

import math

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.units import SECONDS_PER_MONTH
from webhook_pipeline_ops.cost.usage import Traffic, Usage

SQS_CHUNK_BYTES = 64 * 1024  # each 64 KiB of a request is billed as one request
ESM_LONG_POLL_SECONDS = 20


def chunks(envelope_bytes: float) -> int:
    """Billed requests of one send of ``envelope_bytes`` (one per 64 KiB, at least one)."""
    return max(1, math.ceil(envelope_bytes / SQS_CHUNK_BYTES))


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """Requests a month: sends + receives + deletes, and the long polls (fixed: each poller
    receives once every :data:`ESM_LONG_POLL_SECONDS` whatever the traffic)."""
    sqs_requests = traffic.new * chunks(usage.envelope_bytes) + 2 * traffic.invocations
    idle = traffic.scenario.esm_pollers * SECONDS_PER_MONTH / ESM_LONG_POLL_SECONDS
    price = prices.sqs_request_per_million
    return [
        Line(
            "SQS", "send + receive + delete", sqs_requests, "requests", sqs_requests / 1e6 * price
        ),
        Line(
            "SQS",
            "event source mapping long polls",
            idle,
            "requests",
            idle / 1e6 * price,
            fixed=True,
        ),
    ]
