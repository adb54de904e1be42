"""``webhook-pipeline cost``: the arithmetic, checked against figures worked out by hand.

Every expected value below is written out from the scenario (quantity x list price), not taken
from the implementation: a change to how a line is computed must show up here.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from webhook_pipeline_ops.aws import OpsError
from webhook_pipeline_ops.cli import main
from webhook_pipeline_ops.cost.aws_lambda import batch_records
from webhook_pipeline_ops.cost.bill import Bill
from webhook_pipeline_ops.cost.dynamodb import write_units
from webhook_pipeline_ops.cost.estimate import bills, estimate
from webhook_pipeline_ops.cost.inputs import platform_log_bytes, usage_from
from webhook_pipeline_ops.cost.prices import DEFAULT_PRICES, parse_prices
from webhook_pipeline_ops.cost.template import access_log_bytes, template_settings
from webhook_pipeline_ops.cost.usage import Scenario, Usage
from webhook_pipeline_ops.cost.variants import VARIANTS
from webhook_pipeline_ops.cost.xray import sampled
from webhook_pipeline_ops.local.template import load_template

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
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
    delivery_item_bytes=500,
    resource_item_bytes=300,
    unordered_delivery_item_bytes=1500,  # 2 write units
    redis_bytes_per_claim=100,
    emf_metrics=4,
    dynamodb_ms=10,
    ingest_memory_mb=1024,
    processor_memory_mb=512,
    architecture="arm64",
    batch_size=10,
    batching_window_s=30,  # full batches
    dedup_ttl_s=S,  # a claim lives a month: live claims = new deliveries of a month
    delivery_retention_days=DAYS,  # stored deliveries = new deliveries of a month
    payload_expiration_days=DAYS,
    log_retention_days=DAYS,
    interface_endpoints=0,
    alarm_metrics=3,
    dashboards=1,
    tracing=False,
    sources=2,
    ingest_info_line_bytes=600,
    processor_info_line_bytes=300,
)
SCENARIO = Scenario(
    per_month=1_000_000,
    duplicate_share=0.1,
    ordered_share=0.5,
    warm_containers=1,
    secrets_max_age_s=S / 1000,  # 1,000 reads of each secret a month
    log_compression=0.1,
)
PRICES = DEFAULT_PRICES


def lines(bill: Bill) -> dict[str, float]:
    return {f"{line.service}: {line.item}": line.usd_month for line in bill.lines}


def test_a_worked_month_line_by_line() -> None:
    # Given 1,000,000 requests: 100,000 duplicates, 900,000 new (450,000 ordered), batches of 10
    bill = estimate(USAGE, SCENARIO, PRICES)
    got = lines(bill)
    expected = {
        "API Gateway: HTTP API requests": 1.00,
        # 1,000,000 ingest + 90,000 processor invocations
        "Lambda: requests (ingest + processor)": 1.09 * 0.20,
        # (900,000 x 10 ms + 100,000 x 2 ms) = 9,200 s at 1 GB
        "Lambda: ingest duration": 9_200 * 0.0000133334,
        # 90,000 x (20 + 10) ms + 900,000 x 3 ms = 5,400 s at 0.5 GB
        "Lambda: processor duration": 2_700 * 0.0000133334,
        # 900,000 sends + 90,000 receives + 90,000 delete batches
        "SQS: send + receive + delete": 1.08 * 0.40,
        # 5 pollers, one 20 s long poll each
        "SQS: event source mapping long polls": 5 * S / 20 / 1e6 * 0.40,
        # 450,000 x 2 x (1 + 1) + 450,000 x 2
        "DynamoDB: processor writes (delivery + watermark)": 2.7 * 0.625,
        # 900,000 items of (0.5 x 500 + 0.5 x 1500 + 100 overhead) bytes
        "DynamoDB: storage + point-in-time recovery": 900_000 * 1100 / GIB * (0.25 + 0.20),
        # 900,000 x 2 + 100,000 x 1 commands
        "ElastiCache: ECPU (gate commands)": 1.9 * 0.0023,
        "ElastiCache: storage (minimum metered)": 0.1 * 730 * 0.084,
        # 900,000 claims x 100 bytes = 0.084 GB: under the minimum
        "ElastiCache: storage above the minimum (claims within their TTL)": 0.0,
        # 900,000 x 1000 + 100,000 x 500 + 90,000 x 200 + 900,000 x 400 bytes
        "CloudWatch: log ingestion": 1_328_000_000 / GIB * 0.50,
        "CloudWatch: log storage (compressed, within retention)": (
            1_328_000_000 / GIB * 0.1 * 0.03
        ),
        "CloudWatch: custom metrics (EMF)": 4 * 0.30,
        "CloudWatch: alarms": 3 * 0.10,
        "CloudWatch: dashboard": 3.00,
        "Secrets Manager: secrets": 2 * 0.40,
        "Secrets Manager: GetSecretValue": 2_000 / 10_000 * 0.05,
    }
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    # And the totals: fixed lines are the ones that do not grow with the traffic
    assert bill.total == pytest.approx(sum(expected.values()))
    fixed = 5 * S / 20 / 1e6 * 0.40 + 0.1 * 730 * 0.084 + 1.2 + 0.3 + 3.0 + 0.8 + 0.01
    assert bill.fixed == pytest.approx(fixed)
    assert bill.per_million() == pytest.approx(sum(expected.values()))
    assert bill.per_million(include_fixed=False) == pytest.approx(sum(expected.values()) - fixed)


def test_x_ray_vpc_endpoints_and_claim_checks_when_present() -> None:
    usage = replace(USAGE, tracing=True, interface_endpoints=2, availability_zones=2)
    scenario = replace(SCENARIO, duplicate_share=0.0, large_body_share=0.01)
    got = lines(estimate(usage, scenario, PRICES))
    # 1,000,000 ingest + 100,000 processor invocations, both sampled by the default rule
    ingest, processor = 1_000_000, 100_000
    traced = sum(
        S * (1 - math.exp(-x / S)) + 0.05 * (x - S * (1 - math.exp(-x / S)))
        for x in (ingest, processor)
    )
    assert got["X-Ray: traces recorded (ingest + processor)"] == pytest.approx(traced / 1e6 * 5)
    assert got["VPC: interface endpoints"] == pytest.approx(2 * 2 * 730 * 0.01)
    # 10,000 large bodies of 300,000 bytes, plus 1,000,000 envelopes of 1,000 bytes
    through = (1_000_000 * 1000 + 10_000 * 300_000) / GIB
    assert got["VPC: data through the endpoints"] == pytest.approx(through * 0.01)
    assert got["S3: claim-check put + get"] == pytest.approx(10 * (0.005 + 0.0004))
    assert got["S3: claim-check storage"] == pytest.approx(10_000 * 300_000 / GIB * 0.023)


def test_sampling_keeps_one_request_a_second_and_five_percent_of_the_rest() -> None:
    # One request a second on average: a second holds at least one with probability 1 - 1/e
    one = sampled(S, SCENARIO)
    assert one == pytest.approx(S * (1 - math.exp(-1)) + 0.05 * S * math.exp(-1))
    # A hundred a second: the reservoir is always full
    assert sampled(100 * S, SCENARIO) == pytest.approx(S + 0.05 * 99 * S)
    # Fewer requests than seconds: nearly all of them
    assert sampled(1000, SCENARIO) == pytest.approx(1000, rel=1e-3)


def test_write_units_round_up_per_kilobyte() -> None:
    assert [write_units(b) for b in (0, 1, 1024, 1025, 2048, 2049)] == [1, 1, 1, 2, 2, 3]


def test_batches_fill_with_what_arrives_during_the_window() -> None:
    usage = replace(USAGE, batching_window_s=1.0, batch_size=10)
    assert batch_records(usage, 0.0) == 1.0
    assert batch_records(usage, 2.5) == 3.5
    assert batch_records(usage, 100.0) == 10.0


def test_sqs_bills_each_64_kib_of_an_envelope() -> None:
    usage = replace(USAGE, envelope_bytes=150_000)  # 3 chunks
    got = lines(estimate(usage, SCENARIO, PRICES))
    assert got["SQS: send + receive + delete"] == pytest.approx((900_000 * 3 + 180_000) / 1e6 * 0.4)


def test_claims_above_the_minimum_storage_are_billed() -> None:
    scenario = replace(SCENARIO, per_month=10_000_000, duplicate_share=0.0)
    got = lines(estimate(USAGE, scenario, PRICES))
    above = 10_000_000 * 100 / GIB - 0.1
    assert got["ElastiCache: storage above the minimum (claims within their TTL)"] == (
        pytest.approx(above * 730 * 0.084)
    )


def test_variants_change_only_what_they_say() -> None:
    by_variant = bills(USAGE, SCENARIO, PRICES)
    base = lines(by_variant["as deployed"])
    # unordered: 900,000 conditional puts of a 1,500-byte item (2 units each)
    unordered = lines(by_variant["unordered"])
    assert unordered["DynamoDB: processor writes (delivery + watermark)"] == pytest.approx(
        1.8 * 0.625
    )
    # no-redis: no cache, no VPC; claim + confirm per new delivery, a failed put per duplicate
    no_redis = lines(by_variant["no-redis"])
    assert not [k for k in no_redis if k.startswith(("ElastiCache", "VPC"))]
    assert no_redis["DynamoDB: gate writes (claim, confirm)"] == pytest.approx(1.9 * 0.625)
    assert no_redis["Lambda: ingest duration"] == pytest.approx(
        (900_000 * 20 + 100_000 * 7) / 1000 * 0.0000133334
    )
    # lean-logs: the INFO lines and the platform lines go, EMF stays
    lean = lines(by_variant["lean-logs"])
    kept = 900_000 * 400 + 100_000 * 0 + 90_000 * 200 + 900_000 * 100
    assert lean["CloudWatch: log ingestion"] == pytest.approx(kept / GIB * 0.5)
    # no-tracing: the same bill as this (already untraced) deployment
    assert lines(by_variant["no-tracing"]) == base


def test_prices_are_parameters() -> None:
    prices = parse_prices(["api_http_per_million=3.5", "dynamodb_write_unit_per_million=1.25"])
    got = lines(estimate(USAGE, SCENARIO, prices))
    assert got["API Gateway: HTTP API requests"] == pytest.approx(3.5)
    assert got["DynamoDB: processor writes (delivery + watermark)"] == pytest.approx(2.7 * 1.25)
    for bad in (["nope=1"], ["api_http_per_million=x"], ["api_http_per_million=-1"]):
        with pytest.raises(OpsError) as raised:
            parse_prices(bad)
        assert raised.value.exit_code == 2


# ------------------------------------------------------------------------------ inputs


def test_settings_come_from_the_template() -> None:
    settings = template_settings(load_template(ROOT / "template.yaml"))
    assert settings["ingest_memory_mb"] == 512 and settings["processor_memory_mb"] == 512
    assert settings["architecture"] == "arm64"
    assert (settings["batch_size"], settings["batching_window_s"]) == (10, 1.0)
    # each deployed source keeps its claims for its provider's retry horizon (capped at 30 days)
    from webhook_pipeline.sources import load_sources

    horizons = [min(s.dedup_ttl_seconds, 2_592_000) for s in load_sources().values()]
    assert settings["dedup_ttl_s"] == sum(horizons) / len(horizons)
    assert (settings["interface_endpoints"], settings["availability_zones"]) == (2, 2)
    # 9 single-metric alarms, DLQ growth (1 metric), failed records (3), anomaly band (1 x 3),
    # body mismatches at the gate and in the processor (2), archive write failures (3)
    assert settings["alarm_metrics"] == 9 + 1 + 3 + 3 + 2 + 3
    assert (settings["archiver_batch_size"], settings["archiver_batching_window_s"]) == (1000, 60)
    assert settings["archiver_memory_mb"] == 1024
    assert settings["archive_retention_days"] == 90
    assert settings["dashboards"] == 1 and settings["tracing"] is True


def test_lambda_platform_lines_are_counted_from_their_formats() -> None:
    # START (17 + 36 + 17) + END (15 + 36) + REPORT (18 + 36 + 19 + 23 + 20 + 23 + 1), newlines
    assert platform_log_bytes(512) == (71 + 52 + 141, 93)


def test_access_log_line_is_the_template_format_filled_in() -> None:
    template = load_template(ROOT / "template.yaml")
    fmt = template["Resources"]["WebhookApi"]["Properties"]["AccessLogSettings"]["Format"]
    size = access_log_bytes(template)
    assert "$context" in fmt and size > 200
    # every variable is replaced by a value no longer than 26 characters
    assert size < len(fmt)


def inputs_doc(**over: Any) -> dict[str, Any]:
    def phase(cpu: float, billed: float, log: float, lines_bytes: float) -> dict[str, Any]:
        return {
            "duration": {"billed_mean_ms": billed},
            "cpu": {"mean_ms": cpu},
            "log_bytes_per_invocation": log,
            "log_line_bytes_per_invocation": lines_bytes,
        }

    doc: dict[str, Any] = {
        "phases": {
            "ingest_accepted_stripe": phase(4, 13, 800, 500),
            "ingest_duplicate_stripe": phase(1, 2, 750, 450),
            "processor_batch_1_stripe": phase(5, 50, 770, 550),
            "processor_batch_10_stripe": phase(32, 540, 5780, 5500),
        },
        "envelope_bytes_mean": {"stripe": 650},
        "dynamodb_item_bytes": {
            "delivery_stripe": {"max": 440},
            "resource": {"max": 256},
            "delivery_github": {"max": 415},
        },
        "redis": {"memory_usage_bytes_mean": 144},
        "emf_metrics_seen": ["a", "b", "c"],
    }
    doc.update(over)
    return doc


def test_usage_takes_the_processor_cpu_and_adds_the_dynamodb_wait() -> None:
    template = load_template(ROOT / "template.yaml")
    usage = usage_from(inputs_doc(), template, sources=3, dynamodb_ms=12)
    # batch of 1: 5 ms, batch of 10: 32 ms -> 3 ms a record, 2 ms (+0.5 rounding) per invocation
    assert usage.processor_ms_per_record == pytest.approx(3)
    assert usage.processor_ms_fixed == pytest.approx(2.5)
    assert usage.dynamodb_ms == 12
    # the ingest function's wall time as measured; logs per invocation as measured
    assert (usage.ingest_ms_accepted, usage.ingest_ms_duplicate) == (13, 2)
    assert usage.processor_log_bytes_per_record == pytest.approx((5780 - 770) / 9)
    assert usage.processor_info_line_bytes == pytest.approx(550)
    assert (usage.delivery_item_bytes, usage.resource_item_bytes) == (440, 256)
    assert (usage.emf_metrics, usage.sources) == (3, 3)


# ------------------------------------------------------------------------------ the command


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["cost", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def inputs_file(tmp_path: Path) -> Path:
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps(inputs_doc()))
    return path


def test_command_prints_the_breakdown_and_the_variants(
    capsys: pytest.CaptureFixture[str], inputs_file: Path
) -> None:
    code, out, _ = run_cli(capsys, "--per-month", "1e6", "--inputs", str(inputs_file))
    assert code == 0
    assert "as deployed: 1,000,000 webhooks a month" in out
    for name in ("API Gateway", "DynamoDB", "ElastiCache", "X-Ray", "no-redis", "lean-logs"):
        assert name in out


def test_command_json_totals_are_the_sum_of_their_lines(
    capsys: pytest.CaptureFixture[str], inputs_file: Path
) -> None:
    code, out, _ = run_cli(
        capsys, "--per-month", "2e6", "--inputs", str(inputs_file), "--json",
        "--price", "api_http_per_million=2",
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert doc["prices"]["region"] == "us-east-1" and doc["prices"]["as_of"]
    assert [b["variant"] for b in doc["bills"]] == list(VARIANTS)
    for bill in doc["bills"]:
        total = sum(line["usd_month"] for line in bill["lines"])
        assert bill["usd_month"] == pytest.approx(total, abs=1e-3)
        assert bill["usd_per_million"] == pytest.approx(total / 2, abs=1e-3)
        api = next(x for x in bill["lines"] if x["service"] == "API Gateway")
        assert api["usd_month"] == pytest.approx(4.0)


def test_command_errors(
    capsys: pytest.CaptureFixture[str], inputs_file: Path, tmp_path: Path
) -> None:
    code, _, err = run_cli(capsys, "--per-month", "1e6", "--inputs", str(tmp_path / "missing"))
    assert code == 1 and "bench/bench_cost_inputs.py" in err
    code, _, err = run_cli(
        capsys, "--per-month", "1e6", "--inputs", str(inputs_file), "--ordered-share", "1.5"
    )
    assert code == 2 and "ordered-share" in err
    code, _, err = run_cli(
        capsys, "--per-month", "1e6", "--inputs", str(inputs_file), "--price", "nope=1"
    )
    assert code == 2 and "unknown price" in err
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(inputs_doc(phases={})))
    code, _, err = run_cli(capsys, "--per-month", "1e6", "--inputs", str(broken))
    assert code == 1 and "lacks a measured input" in err


def test_the_committed_measurement_is_usable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--per-month", "1e8", "--json")
    assert code == 0
    deployed = json.loads(out)["bills"][0]
    writes = next(x for x in deployed["lines"] if x["item"].startswith("processor writes"))
    # every delivery ordered by default: a two-item transaction of items under 1 KB = 4 units
    assert writes["quantity"] == pytest.approx(4e8)
