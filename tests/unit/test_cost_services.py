"""The cost model's service models, one at a time: each module's lines from a hand-built month.

Every expected value is written out from the inputs below (quantity x list price), not taken
from the implementation. The inputs are chosen so that a plausible wrong formula shows: the two
functions have different memory sizes, the items of a transaction round to different write
units, the gate writes a claim and a confirm but a duplicate only one, the requests include
duplicates while new deliveries do not.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from webhook_pipeline_ops.cost import (
    api_gateway,
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
from webhook_pipeline_ops.cost.bill import Line
from webhook_pipeline_ops.cost.estimate import traffic
from webhook_pipeline_ops.cost.prices import DEFAULT_PRICES as PRICES
from webhook_pipeline_ops.cost.usage import Scenario, Traffic, Usage

pytestmark = pytest.mark.unit

S = 730 * 3600  # seconds in the model's month
DAYS = 730 / 24  # days in the model's month
GIB = 1024**3

USAGE = Usage(
    ingest_ms_accepted=10,
    ingest_ms_duplicate=2,
    ingest_log_bytes_accepted=1000,
    ingest_log_bytes_duplicate=500,
    processor_ms_fixed=20,
    processor_ms_per_record=3,
    processor_log_bytes_fixed=200,
    processor_log_bytes_per_record=400,
    envelope_bytes=1000,
    delivery_item_bytes=500,  # 1 write unit
    resource_item_bytes=1500,  # 2 write units
    unordered_delivery_item_bytes=2100,  # 3 write units
    redis_bytes_per_claim=1000,
    emf_metrics=4,
    dynamodb_ms=10,
    ingest_memory_mb=1024,
    processor_memory_mb=512,
    dedup_ttl_s=S,  # a claim lives a month: live claims = the month's new deliveries
    delivery_retention_days=DAYS,  # stored deliveries = the month's new deliveries
    payload_expiration_days=DAYS / 2,
    log_retention_days=2 * DAYS,
    interface_endpoints=2,
    availability_zones=3,
    alarm_metrics=3,
    dashboards=1,
    sources=3,
    platform_log_bytes=100,
    xray_log_bytes=80,
    api_access_log_bytes=300,
)
SCENARIO = Scenario(
    per_month=1_000_000,
    duplicate_share=0.1,
    ordered_share=0.5,
    large_body_bytes=300_000,
    warm_containers=2,
    secrets_max_age_s=S / 1000,  # 1,000 reads of each secret a month
    esm_pollers=3,
    log_compression=0.1,
)
#: 1,000,000 requests: 100,000 duplicates, 900,000 new (half ordered), 90,000 batches.
TRAFFIC = Traffic(
    scenario=SCENARIO,
    requests=1_000_000,
    duplicates=100_000,
    new=900_000,
    ordered=450_000,
    unordered=450_000,
    large=10_000,
    invocations=90_000,
    traced=50_000,
)


def rows(lines: list[Line]) -> list[tuple[str, float, float, bool]]:
    return [(line.item, line.quantity, line.usd_month, line.fixed) for line in lines]


def expect(*items: tuple[str, float, float, bool]) -> list[Any]:
    return [(name, pytest.approx(q), pytest.approx(usd), fixed) for name, q, usd, fixed in items]


def test_api_gateway_bills_every_request_duplicates_included() -> None:
    got = api_gateway.lines(USAGE, TRAFFIC, replace(PRICES, api_http_per_million=3.5))
    assert rows(got) == expect(("HTTP API requests", 1e6, 3.5, False))


def test_lambda_bills_both_functions_at_their_own_memory() -> None:
    got = aws_lambda.lines(USAGE, TRAFFIC, PRICES)
    assert rows(got) == expect(
        # 1,000,000 ingest + 90,000 processor invocations
        ("requests (ingest + processor)", 1_090_000, 1.09 * 0.20, False),
        # (900,000 x 10 ms + 100,000 x 2 ms) = 9,200 s at 1 GB
        ("ingest duration", 9_200, 9_200 * 0.0000133334, False),
        # 90,000 x (20 + 10) ms + 900,000 x 3 ms = 5,400 s at 0.5 GB
        ("processor duration", 2_700, 2_700 * 0.0000133334, False),
    )
    x86 = aws_lambda.lines(replace(USAGE, architecture="x86_64"), TRAFFIC, PRICES)
    assert x86[1].usd_month == pytest.approx(9_200 * 0.0000166667)


def test_sqs_bills_each_64_kib_chunk_and_the_idle_long_polls() -> None:
    usage = replace(USAGE, envelope_bytes=150_000)  # 3 chunks
    got = sqs.lines(usage, TRAFFIC, PRICES)
    assert rows(got) == expect(
        # 900,000 x 3 sends + 90,000 receives + 90,000 delete batches
        ("send + receive + delete", 2_880_000, 2.88 * 0.40, False),
        # 3 pollers, one 20 s receive each
        ("event source mapping long polls", 3 * S / 20, 3 * S / 20 / 1e6 * 0.40, True),
    )


def test_dynamodb_bills_the_transaction_per_item_and_the_stored_items() -> None:
    got = dynamodb.lines(USAGE, TRAFFIC, PRICES)
    # 450,000 x 2 x (1 + 2) + 450,000 x 3 units
    wru = 450_000 * 6 + 450_000 * 3
    # 900,000 items of (0.5 x 500 + 0.5 x 2,100 + 100 overhead) bytes
    gb = 900_000 * 1400 / GIB
    assert rows(got) == expect(
        ("processor writes (delivery + watermark)", wru, wru / 1e6 * 0.625, False),
        ("storage + point-in-time recovery", gb, gb * (0.25 + 0.20), False),
    )


def test_dynamodb_as_the_gate_bills_claim_and_confirm_and_holds_the_claims() -> None:
    usage = replace(
        USAGE, gate_writes_accepted=2, gate_writes_duplicate=1, gate_item_bytes=1500
    )  # 2 units each
    got = {line.item: line for line in dynamodb.lines(usage, TRAFFIC, PRICES)}
    # (900,000 x 2 + 100,000 x 1) writes of 2 units
    assert got["gate writes (claim, confirm)"].quantity == pytest.approx(3_800_000)
    assert got["gate writes (claim, confirm)"].usd_month == pytest.approx(3.8 * 0.625)
    # plus 900,000 live claims of 1,600 bytes
    gb = (900_000 * 1400 + 900_000 * 1600) / GIB
    assert got["storage + point-in-time recovery"].quantity == pytest.approx(gb)


def test_elasticache_bills_commands_the_floor_and_the_claims_above_it() -> None:
    got = elasticache.lines(USAGE, TRAFFIC, PRICES)
    # 900,000 claims x 1,000 bytes held all month, above the 0.1 GB floor
    above = 900_000 * 1000 / GIB - 0.1
    assert rows(got) == expect(
        # 900,000 x 2 + 100,000 x 1 commands
        ("ECPU (gate commands)", 1_900_000, 1.9 * 0.0023, False),
        ("storage (minimum metered)", 0.1, 0.1 * 730 * 0.084, True),
        ("storage above the minimum (claims within their TTL)", above, above * 730 * 0.084, False),
    )
    assert elasticache.lines(replace(USAGE, uses_redis=False), TRAFFIC, PRICES) == []


def test_logs_bill_every_writer_ingested_then_stored_compressed() -> None:
    got = logs.lines(USAGE, TRAFFIC, PRICES)
    written = (
        900_000 * 1000  # ingest, accepted
        + 100_000 * 500  # ingest, duplicate
        + 90_000 * 200  # processor, per invocation
        + 900_000 * 400  # processor, per record
        + 1_090_000 * 100  # START / END / REPORT of both functions
        + 50_000 * 80  # REPORT's XRAY line of a sampled invocation
        + 1_000_000 * 300  # the access log
    )
    gb = written / GIB
    assert rows(got) == expect(
        ("log ingestion", gb, gb * 0.50, False),
        # compressed to 10 %, kept two months
        ("log storage (compressed, within retention)", gb * 0.2, gb * 0.2 * 0.03, False),
    )


def test_cloudwatch_metrics_alarms_and_dashboard_are_fixed() -> None:
    got = cloudwatch.lines(USAGE, replace(TRAFFIC, requests=1e9), PRICES)
    assert rows(got) == expect(
        ("custom metrics (EMF)", 4, 4 * 0.30, True),
        ("alarms", 3, 3 * 0.10, True),
        ("dashboard", 1, 3.00, True),
    )


def test_xray_bills_the_traces_recorded() -> None:
    got = xray.lines(USAGE, TRAFFIC, PRICES)
    assert rows(got) == expect(("traces recorded (ingest + processor)", 50_000, 0.05 * 5, False))
    assert xray.lines(replace(USAGE, tracing=False), TRAFFIC, PRICES) == []


def test_s3_bills_a_put_and_a_get_per_large_body_and_its_storage() -> None:
    got = s3.lines(USAGE, TRAFFIC, PRICES)
    # 10,000 bodies of 300,000 bytes, kept half a month
    gb_month = 10_000 * 300_000 / GIB / 2
    assert rows(got) == expect(
        ("claim-check put + get", 20_000, 10 * (0.005 + 0.0004), False),
        ("claim-check storage", gb_month, gb_month * 0.023, False),
    )
    assert s3.lines(USAGE, replace(TRAFFIC, large=0.0), PRICES) == []


def test_vpc_bills_each_endpoint_in_each_az_and_the_data_through_them() -> None:
    got = vpc.lines(USAGE, TRAFFIC, PRICES)
    # 900,000 envelopes of 1,000 bytes and 10,000 large bodies of 300,000
    through = (900_000 * 1000 + 10_000 * 300_000) / GIB
    assert rows(got) == expect(
        ("interface endpoints", 2 * 3 * 730, 2 * 3 * 730 * 0.01, True),
        ("data through the endpoints", through, through * 0.01, False),
    )
    assert vpc.lines(replace(USAGE, in_vpc=False), TRAFFIC, PRICES) == []


def test_secrets_manager_bills_each_secret_and_each_containers_refreshes() -> None:
    got = secrets_manager.lines(USAGE, TRAFFIC, PRICES)
    # 2 warm containers x 3 secrets x 1,000 refreshes
    assert rows(got) == expect(
        ("secrets", 3, 3 * 0.40, True),
        ("GetSecretValue", 6_000, 6_000 / 10_000 * 0.05, True),
    )


def test_traffic_splits_the_requests_and_fills_the_batches() -> None:
    # 1 new delivery a second with a 4 s window: batches of 5
    scenario = replace(SCENARIO, per_month=S / 0.9, large_body_share=0.01)
    usage = replace(USAGE, batching_window_s=4.0, batch_size=10, tracing=False)
    got = traffic(usage, scenario)
    assert (got.requests, got.duplicates, got.new) == pytest.approx((S / 0.9, S / 9, S))
    assert (got.ordered, got.unordered, got.large) == pytest.approx((S / 2, S / 2, S / 100))
    assert got.invocations == pytest.approx(S / 5)
    assert got.traced == 0.0
