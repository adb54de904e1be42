"""AWS Lambda: the requests and the duration (GB-seconds) of the ingest and processor functions.

Prices: ``lambda_request_per_million``, USD per million requests; ``lambda_gb_second_arm64`` and
``lambda_gb_second_x86_64``, USD per GB-second (memory in GB x billed seconds), by the template's
architecture; from https://aws.amazon.com/lambda/pricing/ (:data:`~.prices.PRICES_REGION`,
:data:`~.prices.PRICES_AS_OF`, free tier not deducted).
"""

from __future__ import annotations

from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.prices import Prices
from webhook_pipeline_ops.cost.usage import Traffic, Usage


def batch_records(usage: Usage, new_per_second: float) -> float:
    """Mean records per processor invocation: the first record opens the batching window and
    whatever arrives during it joins, up to the batch size."""
    return min(float(usage.batch_size), 1.0 + new_per_second * usage.batching_window_s)


def gb_second_price(usage: Usage, prices: Prices) -> float:
    """USD per GB-second for the template's architecture (arm64, else x86_64)."""
    if usage.architecture == "arm64":
        return prices.lambda_gb_second_arm64
    return prices.lambda_gb_second_x86_64


def durations_s(usage: Usage, traffic: Traffic) -> tuple[float, float]:
    """Billed seconds a month of the ingest function (per request, a duplicate's shorter) and of
    the processor (per invocation: CPU + the DynamoDB wait; per record: CPU)."""
    ingest_s = (
        traffic.new * usage.ingest_ms_accepted + traffic.duplicates * usage.ingest_ms_duplicate
    ) / 1000
    processor_s = (
        traffic.invocations * (usage.processor_ms_fixed + usage.dynamodb_ms)
        + traffic.new * usage.processor_ms_per_record
    )
    processor_s /= 1000
    return ingest_s, processor_s


def lines(usage: Usage, traffic: Traffic, prices: Prices) -> list[Line]:
    """Requests (one ingest invocation per webhook, one processor invocation per batch) and
    each function's GB-seconds."""
    gb_second = gb_second_price(usage, prices)
    ingest_s, processor_s = durations_s(usage, traffic)
    requests = traffic.requests + traffic.invocations
    ingest_gbs = ingest_s * usage.ingest_memory_mb / 1024
    processor_gbs = processor_s * usage.processor_memory_mb / 1024
    return [
        Line(
            "Lambda",
            "requests (ingest + processor)",
            requests,
            "requests",
            requests / 1e6 * prices.lambda_request_per_million,
        ),
        Line("Lambda", "ingest duration", ingest_gbs, "GB-s", ingest_gbs * gb_second),
        Line("Lambda", "processor duration", processor_gbs, "GB-s", processor_gbs * gb_second),
    ]
