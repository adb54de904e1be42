"""The measured usage: bench/results/cost_inputs.json (``bench/bench_cost_inputs.py``) read into
a :class:`~.usage.Usage` with the template's settings and the number of sources, plus the Lambda
platform lines and the access log line written out from their formats."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.aws import OpsError
from webhook_pipeline_ops.cost.template import access_log_bytes, count_sources, template_settings
from webhook_pipeline_ops.cost.usage import DYNAMODB_MS, Usage


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


def _fixed_and_per_record(value: Callable[[str], float], kind: str) -> tuple[float, float]:
    """A processor figure split into per invocation and per record, from its batches of 1
    and of 10 (``processor_batch_{1,10}_{kind}``)."""
    one = value(f"processor_batch_1_{kind}")
    ten = value(f"processor_batch_10_{kind}")
    per = max(0.0, (ten - one) / 9)
    return max(0.0, one - per), per


def usage_from(
    inputs: Mapping[str, Any],
    template: Mapping[str, Any],
    sources: int,
    dynamodb_ms: float = DYNAMODB_MS,
    archive: Mapping[str, Any] | None = None,
) -> Usage:
    """:class:`~.usage.Usage` from bench/results/cost_inputs.json, the template, the source
    count and bench/results/archive_size.json (``archive``; without it, no archive lines).

    The ingest duration is the measured wall time (SQS's latency stood in for by the moto
    server). The processor's is its measured CPU time plus ``dynamodb_ms`` per invocation, the
    time a batch waits on DynamoDB (the records of a batch are written concurrently; the
    emulator's own transaction time says nothing about DynamoDB's), plus half a millisecond of
    rounding up to the billed millisecond. Raises ``KeyError``, ``TypeError`` or ``ValueError``
    when a measured input is missing or not a number.
    """
    phases = inputs["phases"]

    def billed(phase: str) -> float:
        return float(phases[phase]["duration"]["billed_mean_ms"])

    def log(phase: str) -> float:
        return float(phases[phase]["log_bytes_per_invocation"])

    fixed_ms, per_ms = _fixed_and_per_record(
        lambda phase: float(phases[phase]["cpu"]["mean_ms"]), "stripe"
    )
    fixed_ms += 0.5  # billed in whole milliseconds
    fixed_log, per_log = _fixed_and_per_record(log, "stripe")
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
        **archive_sizes(archive),
    )


def archive_sizes(archive: Mapping[str, Any] | None) -> dict[str, Any]:
    """The :class:`~.usage.Usage` archive sizes of bench/results/archive_size.json: the gzip
    bytes per record and the encoding time of its case ``batch over all sources``, the mean
    archive line."""
    if archive is None:
        return {}
    (case,) = (c for c in archive["cases"] if c["case"] == "batch over all sources")
    return {
        "archive_bytes_per_record": float(case["bytes_per_record"]),
        "archive_encode_ms_per_record": float(case["encode_cpu_ms_per_record"]),
        "archive_message_bytes": float(archive["line_bytes_mean"]),
    }


def root() -> Path:
    """The repository (bench/results/, template.yaml and layers/common/sources.toml)."""
    from webhook_pipeline_ops.local import project_root

    return project_root()


def load_usage(
    inputs_path: Path | None,
    template_path: Path | None,
    sources: int | None,
    dynamodb_ms: float = DYNAMODB_MS,
) -> Usage:
    """The :class:`~.usage.Usage` of the measured inputs at ``inputs_path`` (default
    bench/results/cost_inputs.json), the template at ``template_path`` (default template.yaml)
    and ``sources`` (default: the enabled sources of sources.toml, 1 without it).

    Raises
    ------
    OpsError
        The inputs file or the template is missing or unreadable, or an input is missing.
    """
    from webhook_pipeline_ops.local.template import load_template

    base = root()
    inputs_path = inputs_path or base / "bench" / "results" / "cost_inputs.json"
    template_path = template_path or base / "template.yaml"
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
    if sources is None:
        sources_file = base / "layers" / "common" / "sources.toml"
        sources = count_sources(sources_file) if sources_file.is_file() else 1
    archive_path = Path(inputs_path).with_name("archive_size.json")
    try:
        archive = json.loads(archive_path.read_text()) if archive_path.is_file() else None
    except ValueError as exc:
        raise OpsError(f"{archive_path} is not JSON: {exc}") from None
    try:
        return usage_from(inputs, template, sources, dynamodb_ms, archive)
    except (KeyError, TypeError, ValueError) as exc:
        raise OpsError(f"{inputs_path} lacks a measured input: {exc!r}") from None
