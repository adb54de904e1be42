"""``webhook-pipeline cost``: what the pipeline costs per month, and per million webhooks.

The bill is usage x price, line by line (docs/cost.md explains each line):

- usage per delivery and per invocation is *measured* on the real functions by
  ``bench/bench_cost_inputs.py`` (durations, log bytes, envelope and item sizes, Redis bytes per
  claim, the EMF metrics emitted) and read from ``bench/results/cost_inputs.json``;
- sizes and settings come from ``template.yaml`` (memory, batch size and window, TTLs and
  retentions, interface endpoints, alarms, tracing, architecture) and the number of sources
  from ``layers/common/sources.toml``;
- prices are parameters: :data:`DEFAULT_PRICES` is a dated list-price table for one region
  (:data:`PRICES_AS_OF`, :data:`PRICES_REGION`; free tiers left out); ``--price NAME=VALUE``
  overrides one.

Variants show what a design change would do to the same traffic: ``no-redis`` (the gate as a
DynamoDB conditional put, the ingest function out of the VPC), ``unordered`` (no source orders
its events: one conditional put per delivery instead of the two-item transaction),
``lean-logs`` (no per-delivery INFO line, no Lambda platform lines) and ``no-tracing``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.aws import OpsError
from webhook_pipeline_ops.output import print_json, print_table

PRICES_AS_OF = "2025-06-01"
PRICES_REGION = "us-east-1"
HOURS_PER_MONTH = 730.0
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600
DAYS_PER_MONTH = HOURS_PER_MONTH / 24
GIB = 1024**3  # AWS bills "GB" of data as 2^30 bytes
DYNAMODB_ITEM_OVERHEAD_BYTES = 100  # DynamoDB bills each stored item 100 bytes more
SQS_CHUNK_BYTES = 64 * 1024  # each 64 KiB of a request is billed as one request
DYNAMODB_WRITE_UNIT_BYTES = 1024
ESM_LONG_POLL_SECONDS = 20
#: Default time a processor invocation waits on DynamoDB, ms (not measurable on an emulator:
#: ``--dynamodb-ms``). Single-digit milliseconds for a put, roughly twice for a transaction.
DYNAMODB_MS = 15.0


@dataclass(frozen=True)
class Prices:
    """List prices in USD (us-east-1 by default; free tiers not deducted).

    Units are in the field names: ``*_per_million`` requests or units, ``*_gb_month`` per GB
    (2^30 bytes) stored for a month, ``*_hour`` per hour.
    """

    api_http_per_million: float = 1.00  # HTTP API, first 300 million a month
    lambda_request_per_million: float = 0.20
    lambda_gb_second_arm64: float = 0.0000133334
    lambda_gb_second_x86_64: float = 0.0000166667
    sqs_request_per_million: float = 0.40  # standard queue, per 64 KiB chunk
    dynamodb_write_unit_per_million: float = 0.625  # on-demand WRU
    dynamodb_storage_gb_month: float = 0.25
    dynamodb_pitr_gb_month: float = 0.20  # continuous backups
    elasticache_ecpu_per_million: float = 0.0023  # Serverless, Valkey
    elasticache_storage_gb_hour: float = 0.084  # Serverless, Valkey
    elasticache_min_storage_gb: float = 0.1  # Valkey meters at least 100 MB
    logs_ingest_gb: float = 0.50  # CloudWatch Logs, Standard class
    logs_storage_gb_month: float = 0.03  # archived (compressed) bytes
    metric_month: float = 0.30  # custom metric, first 10,000
    alarm_metric_month: float = 0.10  # standard resolution, per metric in the alarm
    dashboard_month: float = 3.00  # beyond the account's first three
    xray_trace_per_million: float = 5.00  # traces recorded
    s3_put_per_thousand: float = 0.005
    s3_get_per_thousand: float = 0.0004
    s3_storage_gb_month: float = 0.023
    vpc_interface_endpoint_az_hour: float = 0.01
    vpc_endpoint_data_gb: float = 0.01
    secret_month: float = 0.40
    secrets_api_per_10k: float = 0.05


DEFAULT_PRICES = Prices()


@dataclass(frozen=True)
class Usage:
    """What one delivery and one invocation consume, and the deployment's settings.

    Durations are billed milliseconds per invocation; sizes are bytes.
    """

    ingest_ms_accepted: float
    ingest_ms_duplicate: float
    ingest_log_bytes_accepted: float  # the function's own lines (log + EMF) per invocation
    ingest_log_bytes_duplicate: float
    processor_ms_fixed: float  # CPU per invocation, whatever the batch (rounding included)
    processor_ms_per_record: float  # CPU per record
    processor_log_bytes_fixed: float
    processor_log_bytes_per_record: float
    envelope_bytes: float
    delivery_item_bytes: float
    resource_item_bytes: float
    unordered_delivery_item_bytes: float
    redis_bytes_per_claim: float
    emf_metrics: int  # distinct metric name + dimensions combinations
    dynamodb_ms: float = 15.0  # wait on DynamoDB per processor invocation (records concurrent)
    # from template.yaml
    ingest_memory_mb: int = 512
    processor_memory_mb: int = 512
    architecture: str = "arm64"
    batch_size: int = 10
    batching_window_s: float = 1.0
    dedup_ttl_s: float = 259_200
    delivery_retention_days: float = 30
    payload_expiration_days: float = 21
    log_retention_days: float = 30
    interface_endpoints: int = 2
    availability_zones: int = 2
    alarm_metrics: int = 0
    dashboards: int = 1
    tracing: bool = True
    sources: int = 7
    # what the design does per delivery
    redis_commands_accepted: int = 2  # SET NX EX GET, EVALSHA (confirm)
    redis_commands_duplicate: int = 1
    ecpu_per_command: float = 1.0  # simple commands on values under 1 KB
    gate_writes_accepted: int = 0  # DynamoDB writes of the gate itself (variant no-redis)
    gate_writes_duplicate: int = 0
    gate_item_bytes: float = 0.0
    in_vpc: bool = True
    uses_redis: bool = True
    platform_log_bytes: float = 0.0  # START / END / REPORT lines per invocation
    xray_log_bytes: float = 0.0  # the REPORT's XRAY line of a sampled invocation
    api_access_log_bytes: float = 0.0
    ingest_info_line_bytes: float = 0.0  # the per-delivery INFO line (part of the log bytes)
    processor_info_line_bytes: float = 0.0  # per record (part of the per-record log bytes)


@dataclass(frozen=True)
class Scenario:
    """The traffic: requests a month and their mix.

    Attributes
    ----------
    per_month : float
        Webhook requests reaching the API in a month (duplicates included).
    duplicate_share : float
        Share of requests the gate answers as duplicates (sender retries), 0-1.
    ordered_share : float
        Share of new deliveries from sources with a resource key and sequence (the two-item
        transaction); the others are one conditional put.
    large_body_share : float
        Share of new deliveries whose body goes to S3 (over the inline limit, 150 kB).
    large_body_bytes : float
        Mean size of those bodies, bytes.
    warm_containers : float
        Ingest execution environments alive on average (each reads each secret every 300 s).
    xray_reservoir_per_s, xray_rate : float
        The X-Ray sampling rule: the first request each second, then this share of the rest.
    esm_pollers : int
        Long-polling receives the event source mapping keeps open on an idle queue.
    log_compression : float
        Archived over ingested log bytes (CloudWatch bills stored bytes compressed).
    secrets_max_age_s : float
        How long a container caches a secret (``SECRETS_MAX_AGE_SECONDS``).
    """

    per_month: float
    duplicate_share: float = 0.0
    ordered_share: float = 1.0
    large_body_share: float = 0.0
    large_body_bytes: float = 300_000
    warm_containers: float = 2
    xray_reservoir_per_s: float = 1.0
    xray_rate: float = 0.05
    esm_pollers: int = 5
    log_compression: float = 0.15
    secrets_max_age_s: float = 300


@dataclass(frozen=True)
class Line:
    """One line of the bill."""

    service: str
    item: str
    quantity: float
    unit: str
    usd_month: float
    fixed: bool = False  # does not grow with the number of webhooks


@dataclass
class Bill:
    """All lines for one scenario and variant, with totals."""

    variant: str
    scenario: Scenario
    lines: list[Line] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(line.usd_month for line in self.lines)

    @property
    def variable(self) -> float:
        return sum(line.usd_month for line in self.lines if not line.fixed)

    @property
    def fixed(self) -> float:
        return sum(line.usd_month for line in self.lines if line.fixed)

    def per_million(self, *, include_fixed: bool = True) -> float:
        """USD per million requests (``include_fixed=False``: what each extra million adds)."""
        amount = self.total if include_fixed else self.variable
        return amount / self.scenario.per_month * 1e6 if self.scenario.per_month else 0.0

    def by_service(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for line in self.lines:
            out[line.service] = out.get(line.service, 0.0) + line.usd_month
        return out


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


def write_units(item_bytes: float) -> int:
    """Write units of one standard write of an item of ``item_bytes`` (1 KB each, rounded up)."""
    return max(1, math.ceil(item_bytes / DYNAMODB_WRITE_UNIT_BYTES))


def batch_records(usage: Usage, new_per_second: float) -> float:
    """Mean records per processor invocation: the first record opens the batching window and
    whatever arrives during it joins, up to the batch size."""
    return min(float(usage.batch_size), 1.0 + new_per_second * usage.batching_window_s)


def estimate(
    usage: Usage, scenario: Scenario, prices: Prices, variant: str = "as deployed"
) -> Bill:
    """The monthly bill of ``scenario`` on a deployment that consumes ``usage``.

    Returns
    -------
    Bill
        One :class:`Line` per priced quantity (USD a month), fixed lines marked.
    """
    n = scenario.per_month
    duplicates = n * scenario.duplicate_share
    new = n - duplicates
    ordered = new * scenario.ordered_share
    unordered = new - ordered
    large = new * scenario.large_body_share
    bill = Bill(variant, scenario)
    add = bill.lines.append

    # API Gateway HTTP API: one request per webhook (each up to 512 KB)
    add(
        Line(
            "API Gateway", "HTTP API requests", n, "requests", n / 1e6 * prices.api_http_per_million
        )
    )

    # Lambda
    gb_second = (
        prices.lambda_gb_second_arm64
        if usage.architecture == "arm64"
        else prices.lambda_gb_second_x86_64
    )
    batch = batch_records(usage, new / SECONDS_PER_MONTH)
    invocations = new / batch if new else 0.0
    ingest_s = (new * usage.ingest_ms_accepted + duplicates * usage.ingest_ms_duplicate) / 1000
    processor_s = (
        invocations * (usage.processor_ms_fixed + usage.dynamodb_ms)
        + new * usage.processor_ms_per_record
    )
    processor_s /= 1000
    add(
        Line(
            "Lambda",
            "requests (ingest + processor)",
            n + invocations,
            "requests",
            (n + invocations) / 1e6 * prices.lambda_request_per_million,
        )
    )
    ingest_gbs = ingest_s * usage.ingest_memory_mb / 1024
    processor_gbs = processor_s * usage.processor_memory_mb / 1024
    add(Line("Lambda", "ingest duration", ingest_gbs, "GB-s", ingest_gbs * gb_second))
    add(Line("Lambda", "processor duration", processor_gbs, "GB-s", processor_gbs * gb_second))

    # SQS: send (per 64 KiB chunk), one receive and one delete batch per invocation, and the
    # event source mapping's long polls while the queue is empty
    chunks = max(1, math.ceil(usage.envelope_bytes / SQS_CHUNK_BYTES))
    sqs_requests = new * chunks + 2 * invocations
    add(
        Line(
            "SQS",
            "send + receive + delete",
            sqs_requests,
            "requests",
            sqs_requests / 1e6 * prices.sqs_request_per_million,
        )
    )
    idle = scenario.esm_pollers * SECONDS_PER_MONTH / ESM_LONG_POLL_SECONDS
    add(
        Line(
            "SQS",
            "event source mapping long polls",
            idle,
            "requests",
            idle / 1e6 * prices.sqs_request_per_million,
            fixed=True,
        )
    )

    # DynamoDB: the processor's writes (a transaction costs 2 units per KB of each item)
    transaction = 2 * (
        write_units(usage.delivery_item_bytes) + write_units(usage.resource_item_bytes)
    )
    wru = ordered * transaction + unordered * write_units(usage.unordered_delivery_item_bytes)
    gate_wru = (new * usage.gate_writes_accepted + duplicates * usage.gate_writes_duplicate) * (
        write_units(usage.gate_item_bytes) if usage.gate_writes_accepted else 0
    )
    add(
        Line(
            "DynamoDB",
            "processor writes (delivery + watermark)",
            wru,
            "WRU",
            wru / 1e6 * prices.dynamodb_write_unit_per_million,
        )
    )
    if gate_wru:
        add(
            Line(
                "DynamoDB",
                "gate writes (claim, confirm)",
                gate_wru,
                "WRU",
                gate_wru / 1e6 * prices.dynamodb_write_unit_per_million,
            )
        )
    stored = new * usage.delivery_retention_days / DAYS_PER_MONTH
    mean_item = (
        scenario.ordered_share * usage.delivery_item_bytes
        + (1 - scenario.ordered_share) * usage.unordered_delivery_item_bytes
    )
    table_gb = stored * (mean_item + DYNAMODB_ITEM_OVERHEAD_BYTES) / GIB
    if usage.gate_writes_accepted:
        claims = new / SECONDS_PER_MONTH * usage.dedup_ttl_s
        table_gb += claims * (usage.gate_item_bytes + DYNAMODB_ITEM_OVERHEAD_BYTES) / GIB
    add(
        Line(
            "DynamoDB",
            "storage + point-in-time recovery",
            table_gb,
            "GB-month",
            table_gb * (prices.dynamodb_storage_gb_month + prices.dynamodb_pitr_gb_month),
        )
    )

    # ElastiCache Serverless (the gate)
    if usage.uses_redis:
        commands = new * usage.redis_commands_accepted + duplicates * usage.redis_commands_duplicate
        ecpu = commands * usage.ecpu_per_command
        add(
            Line(
                "ElastiCache",
                "ECPU (gate commands)",
                ecpu,
                "ECPU",
                ecpu / 1e6 * prices.elasticache_ecpu_per_million,
            )
        )
        live_gb = new / SECONDS_PER_MONTH * usage.dedup_ttl_s * usage.redis_bytes_per_claim / GIB
        floor = prices.elasticache_min_storage_gb
        add(
            Line(
                "ElastiCache",
                "storage (minimum metered)",
                floor,
                "GB",
                floor * HOURS_PER_MONTH * prices.elasticache_storage_gb_hour,
                fixed=True,
            )
        )
        above = max(0.0, live_gb - floor)
        add(
            Line(
                "ElastiCache",
                "storage above the minimum (claims within their TTL)",
                above,
                "GB",
                above * HOURS_PER_MONTH * prices.elasticache_storage_gb_hour,
            )
        )

    # CloudWatch Logs: the functions' own lines, Lambda's platform lines, API access log
    traced = sampled(n, scenario) + sampled(invocations, scenario) if usage.tracing else 0.0
    log_bytes = (
        new * usage.ingest_log_bytes_accepted
        + duplicates * usage.ingest_log_bytes_duplicate
        + invocations * usage.processor_log_bytes_fixed
        + new * usage.processor_log_bytes_per_record
        + (n + invocations) * usage.platform_log_bytes
        + traced * usage.xray_log_bytes
        + n * usage.api_access_log_bytes
    )
    log_gb = log_bytes / GIB
    add(Line("CloudWatch", "log ingestion", log_gb, "GB", log_gb * prices.logs_ingest_gb))
    archived = log_gb * scenario.log_compression * usage.log_retention_days / DAYS_PER_MONTH
    add(
        Line(
            "CloudWatch",
            "log storage (compressed, within retention)",
            archived,
            "GB-month",
            archived * prices.logs_storage_gb_month,
        )
    )
    add(
        Line(
            "CloudWatch",
            "custom metrics (EMF)",
            usage.emf_metrics,
            "metrics",
            usage.emf_metrics * prices.metric_month,
            fixed=True,
        )
    )
    add(
        Line(
            "CloudWatch",
            "alarms",
            usage.alarm_metrics,
            "alarm metrics",
            usage.alarm_metrics * prices.alarm_metric_month,
            fixed=True,
        )
    )
    add(
        Line(
            "CloudWatch",
            "dashboard",
            usage.dashboards,
            "dashboards",
            usage.dashboards * prices.dashboard_month,
            fixed=True,
        )
    )

    # X-Ray: Tracing: Active on every function, default sampling rule
    if usage.tracing:
        add(
            Line(
                "X-Ray",
                "traces recorded (ingest + processor)",
                traced,
                "traces",
                traced / 1e6 * prices.xray_trace_per_million,
            )
        )

    # S3 claim checks for large bodies: put at ingest, get in the processor, kept N days
    if large:
        s3 = large / 1000 * (prices.s3_put_per_thousand + prices.s3_get_per_thousand)
        add(Line("S3", "claim-check put + get", 2 * large, "requests", s3))
        s3_gb = large * scenario.large_body_bytes * usage.payload_expiration_days / DAYS_PER_MONTH
        s3_gb /= GIB
        add(
            Line("S3", "claim-check storage", s3_gb, "GB-month", s3_gb * prices.s3_storage_gb_month)
        )

    # VPC interface endpoints of the ingest function (SQS, Secrets Manager)
    if usage.in_vpc and usage.interface_endpoints:
        hours = usage.interface_endpoints * usage.availability_zones * HOURS_PER_MONTH
        add(
            Line(
                "VPC",
                "interface endpoints",
                hours,
                "endpoint-AZ hours",
                hours * prices.vpc_interface_endpoint_az_hour,
                fixed=True,
            )
        )
        through = (new * usage.envelope_bytes + large * scenario.large_body_bytes) / GIB
        add(
            Line(
                "VPC",
                "data through the endpoints",
                through,
                "GB",
                through * prices.vpc_endpoint_data_gb,
            )
        )

    # Secrets Manager: one secret per source, read by each warm container every max age
    add(
        Line(
            "Secrets Manager",
            "secrets",
            usage.sources,
            "secrets",
            usage.sources * prices.secret_month,
            fixed=True,
        )
    )
    reads = (
        scenario.warm_containers * usage.sources * SECONDS_PER_MONTH / scenario.secrets_max_age_s
    )
    add(
        Line(
            "Secrets Manager",
            "GetSecretValue",
            reads,
            "calls",
            reads / 1e4 * prices.secrets_api_per_10k,
            fixed=True,
        )
    )
    return bill


# ------------------------------------------------------------------------------ variants


def _no_redis(usage: Usage) -> Usage:
    """The gate as a DynamoDB conditional put (claim) and update (confirm); a duplicate's
    failed conditional put still consumes its write unit. No cache, so no VPC either; the
    ingest function waits on DynamoDB (about ``dynamodb_ms`` for the two writes)."""
    return replace(
        usage,
        uses_redis=False,
        in_vpc=False,
        gate_writes_accepted=2,
        gate_writes_duplicate=1,
        gate_item_bytes=usage.redis_bytes_per_claim,
        # two single-item writes instead of two sub-millisecond Redis commands
        ingest_ms_accepted=usage.ingest_ms_accepted + usage.dynamodb_ms,
        ingest_ms_duplicate=usage.ingest_ms_duplicate + usage.dynamodb_ms / 2,
    )


def _lean_logs(usage: Usage) -> Usage:
    """``POWERTOOLS_LOG_LEVEL: WARNING`` (no per-delivery INFO line; warnings, errors and EMF
    stay) and ``LoggingConfig: {LogFormat: JSON, SystemLogLevel: WARN}`` (no START, END,
    REPORT lines)."""
    return replace(
        usage,
        ingest_log_bytes_accepted=usage.ingest_log_bytes_accepted - usage.ingest_info_line_bytes,
        ingest_log_bytes_duplicate=max(
            0.0, usage.ingest_log_bytes_duplicate - usage.ingest_info_line_bytes
        ),
        processor_log_bytes_per_record=max(
            0.0, usage.processor_log_bytes_per_record - usage.processor_info_line_bytes
        ),
        platform_log_bytes=0.0,
        xray_log_bytes=0.0,
    )


VARIANTS: dict[str, Callable[[Usage, Scenario], tuple[Usage, Scenario]]] = {
    "as deployed": lambda u, s: (u, s),
    "no-redis": lambda u, s: (_no_redis(u), s),
    "unordered": lambda u, s: (u, replace(s, ordered_share=0.0)),
    "lean-logs": lambda u, s: (_lean_logs(u), s),
    "no-tracing": lambda u, s: (replace(u, tracing=False), s),
}


# ------------------------------------------------------------------------------ inputs


def _default(value: Any) -> Any:
    """A parameter's default: a template ``Parameters`` entry or a literal."""
    return value.get("Default") if isinstance(value, dict) else value


def _param_or_literal(template: Mapping[str, Any], value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return _default(template.get("Parameters", {}).get(value["Ref"]))
    return value


def template_settings(template: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`Usage` fields that come from template.yaml (parameter defaults)."""
    resources = template["Resources"]
    params = template.get("Parameters", {})

    def prop(resource: str, name: str) -> Any:
        return _param_or_literal(template, resources[resource]["Properties"][name])

    esm = resources["ProcessorFunction"]["Properties"]["Events"]["MainQueue"]["Properties"]
    interface = [
        r
        for r in resources.values()
        if r.get("Type") == "AWS::EC2::VPCEndpoint"
        and r.get("Properties", {}).get("VpcEndpointType") == "Interface"
    ]
    subnets = [r for r in resources.values() if r.get("Type") == "AWS::EC2::Subnet"]
    alarm_metrics = 0
    for r in resources.values():
        if r.get("Type") != "AWS::CloudWatch::Alarm":
            continue
        p = r["Properties"]
        if "MetricName" in p:
            alarm_metrics += 1
            continue
        stats = sum(1 for m in p.get("Metrics", []) if "MetricStat" in m)
        anomaly = any(
            "ANOMALY_DETECTION_BAND" in str(m.get("Expression", "")) for m in p["Metrics"]
        )
        alarm_metrics += stats * (3 if anomaly else 1)  # a band is billed as 3 metrics
    globals_ = template.get("Globals", {}).get("Function", {})
    return {
        "ingest_memory_mb": int(prop("IngestFunction", "MemorySize")),
        "processor_memory_mb": int(prop("ProcessorFunction", "MemorySize")),
        "architecture": str(_default(params.get("Architecture", {"Default": "arm64"}))),
        "batch_size": int(_param_or_literal(template, esm["BatchSize"])),
        "batching_window_s": float(
            _param_or_literal(template, esm.get("MaximumBatchingWindowInSeconds", 0))
        ),
        "dedup_ttl_s": mean_dedup_ttl(float(_default(params["DedupTtlMaxSeconds"]))),
        "delivery_retention_days": float(_default(params["DeliveryRetentionDays"])),
        "payload_expiration_days": float(_default(params["PayloadExpirationDays"])),
        "log_retention_days": float(_default(params["LogRetentionDays"])),
        "interface_endpoints": len(interface),
        "availability_zones": max(1, len(subnets)),
        "alarm_metrics": alarm_metrics,
        "dashboards": sum(
            1 for r in resources.values() if r.get("Type") == "AWS::CloudWatch::Dashboard"
        ),
        "tracing": globals_.get("Tracing") == "Active",
    }


def mean_dedup_ttl(cap_seconds: float, path: Path | None = None) -> float:
    """The mean done-claim TTL of the deployed sources (seconds): each source keeps its claims
    for its provider's retry horizon or its own ``dedup_ttl_seconds``, capped by
    ``DedupTtlMaxSeconds``."""
    from webhook_pipeline.sources import load_sources

    ttls = [min(s.dedup_ttl_seconds, cap_seconds) for s in load_sources(path).values() if s.enabled]
    return sum(ttls) / len(ttls) if ttls else cap_seconds


def count_sources(path: Path) -> int:
    """Enabled sources in sources.toml (each has its own secret)."""
    doc = tomllib.loads(path.read_text())
    return sum(1 for s in doc.get("sources", {}).values() if s.get("enabled", True))


def platform_log_bytes(memory_mb: int) -> tuple[int, int]:
    """Bytes of Lambda's own lines per invocation (text log format): START, END and REPORT,
    and the XRAY line a sampled invocation adds to REPORT. Written out from their formats."""
    request_id = "6f1c8b5e-1d2a-4c3b-9f8e-7a6b5c4d3e2f"
    lines = [
        f"START RequestId: {request_id} Version: $LATEST",
        f"END RequestId: {request_id}",
        f"REPORT RequestId: {request_id}\tDuration: 12.34 ms\tBilled Duration: 13 ms\t"
        f"Memory Size: {memory_mb} MB\tMax Memory Used: 98 MB\t",
    ]
    xray = (
        "XRAY TraceId: 1-5e3b0b8e-1c7a5e3f2d9b4a6c8e0f1a2b\tSegmentId: 1a2b3c4d5e6f7a8b\t"
        "Sampled: true\t"
    )
    return sum(len(x) + 1 for x in lines), len(xray) + 1


def access_log_bytes(template: Mapping[str, Any]) -> int:
    """Bytes of one API access log line: the template's format with typical values."""
    fmt = template["Resources"]["WebhookApi"]["Properties"]["AccessLogSettings"]["Format"]
    values = {
        "$context.requestId": "AbCdEfGhIjKlMnO=",
        "$context.requestTime": "01/Dec/2026:10:51:36 +0000",
        "$context.identity.sourceIp": "203.0.113.10",
        "$context.routeKey": "POST /webhooks/{source}",
        "$context.path": "/webhooks/stripe",
        "$context.status": "202",
        "$context.responseLength": "64",
        "$context.responseLatency": "25",
        "$context.integrationLatency": "23",
        "$context.integrationStatus": "202",
        "$context.integrationErrorMessage": "-",
    }
    line = str(fmt)
    for key in sorted(values, key=len, reverse=True):
        line = line.replace(key, values[key])
    return len(line.encode()) + 1


def usage_from(
    inputs: Mapping[str, Any],
    template: Mapping[str, Any],
    sources: int,
    dynamodb_ms: float = DYNAMODB_MS,
) -> Usage:
    """:class:`Usage` from bench/results/cost_inputs.json, the template and the source count.

    The ingest duration is the measured wall time (SQS's latency stood in for by the moto
    server). The processor's is its measured CPU time plus ``dynamodb_ms`` per invocation, the
    time a batch waits on DynamoDB (the records of a batch are written concurrently; the
    emulator's own transaction time says nothing about DynamoDB's), plus half a millisecond of
    rounding up to the billed millisecond.
    """
    phases = inputs["phases"]

    def billed(phase: str) -> float:
        return float(phases[phase]["duration"]["billed_mean_ms"])

    def cpu(phase: str) -> float:
        return float(phases[phase]["cpu"]["mean_ms"])

    def log(phase: str) -> float:
        return float(phases[phase]["log_bytes_per_invocation"])

    def fixed_and_per_record(value: Callable[[str], float], kind: str) -> tuple[float, float]:
        one = value(f"processor_batch_1_{kind}")
        ten = value(f"processor_batch_10_{kind}")
        per = max(0.0, (ten - one) / 9)
        return max(0.0, one - per), per

    fixed_ms, per_ms = fixed_and_per_record(cpu, "stripe")
    fixed_ms += 0.5  # billed in whole milliseconds
    fixed_log, per_log = fixed_and_per_record(log, "stripe")
    settings = template_settings(template)
    platform, xray = platform_log_bytes(settings["ingest_memory_mb"])
    items = inputs["dynamodb_item_bytes"]
    accepted = phases["ingest_accepted_stripe"]
    processor_lines = phases["processor_batch_10_stripe"]
    return Usage(
        ingest_ms_accepted=billed("ingest_accepted_stripe"),
        ingest_ms_duplicate=billed("ingest_duplicate_stripe"),
        ingest_log_bytes_accepted=log("ingest_accepted_stripe"),
        ingest_log_bytes_duplicate=log("ingest_duplicate_stripe"),
        processor_ms_fixed=fixed_ms,
        processor_ms_per_record=per_ms,
        processor_log_bytes_fixed=fixed_log,
        processor_log_bytes_per_record=per_log,
        envelope_bytes=float(inputs["envelope_bytes_mean"]["stripe"]),
        delivery_item_bytes=float(items["delivery_stripe"]["max"]),
        resource_item_bytes=float(items["resource"]["max"]),
        unordered_delivery_item_bytes=float(items["delivery_github"]["max"]),
        redis_bytes_per_claim=float(inputs["redis"]["memory_usage_bytes_mean"]),
        emf_metrics=len(inputs["emf_metrics_seen"]),
        dynamodb_ms=dynamodb_ms,
        platform_log_bytes=float(platform),
        xray_log_bytes=float(xray),
        api_access_log_bytes=float(access_log_bytes(template)),
        ingest_info_line_bytes=float(accepted["log_line_bytes_per_invocation"]),
        processor_info_line_bytes=float(processor_lines["log_line_bytes_per_invocation"]) / 10,
        sources=sources,
        **settings,
    )


# ------------------------------------------------------------------------------ the command


#: Webhook requests a month when ``--per-month`` is not given.
DEFAULT_PER_MONTH = 1e6


def register(subparsers: Any) -> None:
    """Add ``cost``."""
    parser = subparsers.add_parser(
        "cost",
        help="monthly cost and cost per million webhooks, line by line, with design variants",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--per-month",
        type=float,
        default=DEFAULT_PER_MONTH,
        metavar="N",
        help="webhook requests a month (default 1e6, the README's figure; e.g. 1e8)",
    )
    parser.add_argument(
        "--duplicate-share",
        type=float,
        default=0.0,
        metavar="F",
        help="share of requests that are sender retries of a delivery (0-1)",
    )
    parser.add_argument(
        "--ordered-share",
        type=float,
        default=1.0,
        metavar="F",
        help="share of deliveries from sources with resource key + sequence",
    )
    parser.add_argument(
        "--large-body-share",
        type=float,
        default=0.0,
        metavar="F",
        help="share of deliveries whose body goes to S3 (over 150 kB)",
    )
    parser.add_argument(
        "--variant",
        choices=[*VARIANTS, "all"],
        default="all",
        help="print this variant's breakdown (default: as deployed, then all)",
    )
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="NAME=USD",
        help="override one price (names: --list-prices)",
    )
    parser.add_argument("--list-prices", action="store_true", help="print the price table")
    parser.add_argument("--inputs", type=Path, help="cost_inputs.json (bench/bench_cost_inputs.py)")
    parser.add_argument("--template", type=Path, help="template.yaml (default: the repository's)")
    parser.add_argument("--sources", type=int, help="sources (secrets); default: sources.toml")
    parser.add_argument("--ingest-ms", type=float, help="override the measured ingest duration")
    parser.add_argument(
        "--processor-ms-per-record",
        type=float,
        help="override the measured processor duration per record",
    )
    parser.add_argument(
        "--dynamodb-ms",
        type=float,
        default=DYNAMODB_MS,
        help=f"DynamoDB wait per processor invocation, ms (default {DYNAMODB_MS:g})",
    )
    parser.add_argument("--json", action="store_true", help="JSON instead of tables")
    parser.set_defaults(func=run)


def parse_prices(overrides: Sequence[str], base: Prices = DEFAULT_PRICES) -> Prices:
    """``base`` with ``NAME=USD`` overrides applied.

    Raises
    ------
    OpsError
        Unknown price name or a value that is not a non-negative number (exit code 2).
    """
    names = {f.name for f in dataclasses.fields(Prices)}
    changes: dict[str, float] = {}
    for item in overrides:
        name, _, value = item.partition("=")
        if name not in names:
            raise OpsError(f"unknown price {name!r} (see --list-prices)", exit_code=2)
        try:
            changes[name] = float(value)
        except ValueError:
            raise OpsError(f"price {name} must be a number, got {value!r}", exit_code=2) from None
        if changes[name] < 0:
            raise OpsError(f"price {name} must not be negative", exit_code=2)
    return replace(base, **changes)


def _root() -> Path:
    from webhook_pipeline_ops.local import project_root

    return project_root()


def load_usage(args: argparse.Namespace) -> Usage:
    """The :class:`Usage` for the command's arguments.

    Raises
    ------
    OpsError
        The inputs file or the template is missing or unreadable.
    """
    from webhook_pipeline_ops.local.provision import load_template

    root = _root()
    inputs_path = args.inputs or root / "bench" / "results" / "cost_inputs.json"
    template_path = args.template or root / "template.yaml"
    try:
        inputs = json.loads(Path(inputs_path).read_text())
    except FileNotFoundError:
        raise OpsError(
            f"no measured inputs at {inputs_path}: run bench/bench_cost_inputs.py (or --inputs)"
        ) from None
    except ValueError as exc:
        raise OpsError(f"{inputs_path} is not JSON: {exc}") from None
    try:
        template = load_template(template_path)
    except FileNotFoundError:
        raise OpsError(f"no template at {template_path} (use --template)") from None
    sources = args.sources
    if sources is None:
        sources_file = root / "layers" / "common" / "sources.toml"
        sources = count_sources(sources_file) if sources_file.is_file() else 1
    try:
        usage = usage_from(inputs, template, sources, args.dynamodb_ms)
    except (KeyError, TypeError, ValueError) as exc:
        raise OpsError(f"{inputs_path} lacks a measured input: {exc!r}") from None
    if args.ingest_ms is not None:
        usage = replace(usage, ingest_ms_accepted=args.ingest_ms)
    if args.processor_ms_per_record is not None:
        usage = replace(usage, processor_ms_per_record=args.processor_ms_per_record)
    return usage


def _check_share(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise OpsError(f"--{name} must be between 0 and 1, got {value}", exit_code=2)


def bills(usage: Usage, scenario: Scenario, prices: Prices) -> dict[str, Bill]:
    """The bill of every variant for the same traffic."""
    out = {}
    for name, change in VARIANTS.items():
        u, s = change(usage, scenario)
        out[name] = estimate(u, s, prices, name)
    return out


def _money(value: float) -> str:
    return f"{value:,.2f}" if abs(value) >= 0.995 or value == 0 else f"{value:.4f}"


def bill_json(bill: Bill) -> dict[str, Any]:
    return {
        "variant": bill.variant,
        "usd_month": round(bill.total, 4),
        "usd_month_fixed": round(bill.fixed, 4),
        "usd_per_million": round(bill.per_million(), 4),
        "usd_per_additional_million": round(bill.per_million(include_fixed=False), 4),
        "lines": [
            {**dataclasses.asdict(line), "usd_month": round(line.usd_month, 6)}
            for line in bill.lines
        ],
    }


def run(args: argparse.Namespace) -> int:
    prices = parse_prices(args.price)
    if args.list_prices:
        print(f"list prices, {PRICES_REGION}, as of {PRICES_AS_OF} (USD, free tiers excluded)")
        for f in dataclasses.fields(Prices):
            print(f"  {f.name} = {getattr(prices, f.name)}")
        return 0
    if args.per_month <= 0:
        raise OpsError("--per-month must be positive", exit_code=2)
    for name in ("duplicate_share", "ordered_share", "large_body_share"):
        _check_share(name.replace("_", "-"), getattr(args, name))
    usage = load_usage(args)
    scenario = Scenario(
        per_month=args.per_month,
        duplicate_share=args.duplicate_share,
        ordered_share=args.ordered_share,
        large_body_share=args.large_body_share,
    )
    all_bills = bills(usage, scenario, prices)
    shown = "as deployed" if args.variant == "all" else args.variant
    if args.json:
        print_json(
            {
                "prices": {
                    "region": PRICES_REGION,
                    "as_of": PRICES_AS_OF,
                    **dataclasses.asdict(prices),
                },
                "scenario": dataclasses.asdict(scenario),
                "usage": dataclasses.asdict(usage),
                "bills": [bill_json(b) for b in all_bills.values()],
            }
        )
        return 0
    bill = all_bills[shown]
    total = bill.total
    print(
        f"{shown}: {scenario.per_month:,.0f} webhooks a month, prices {PRICES_REGION} "
        f"{PRICES_AS_OF} (USD)"
    )
    rows = [
        {
            "service": line.service,
            "item": line.item + (" (fixed)" if line.fixed else ""),
            "quantity": f"{line.quantity:,.4g} {line.unit}",
            "usd_month": _money(line.usd_month),
            "share": f"{100 * line.usd_month / total:.1f}%" if total else "-",
        }
        for line in bill.lines
    ]
    print_table(rows, ["service", "item", "quantity", "usd_month", "share"])
    print(
        f"total {_money(total)} a month ({_money(bill.fixed)} fixed); "
        f"{_money(bill.per_million())} per million, "
        f"{_money(bill.per_million(include_fixed=False))} per additional million"
    )
    if args.variant == "all":
        print()
        print_table(
            [
                {
                    "variant": b.variant,
                    "usd_month": _money(b.total),
                    "per_million": _money(b.per_million()),
                    "per_additional_million": _money(b.per_million(include_fixed=False)),
                }
                for b in all_bills.values()
            ],
            ["variant", "usd_month", "per_million", "per_additional_million"],
        )
    return 0
