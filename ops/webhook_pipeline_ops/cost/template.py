"""The deployment's settings as template.yaml gives them (parameter defaults), and the number of
sources sources.toml deploys."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _default(value: Any) -> Any:
    """A parameter's default: a template ``Parameters`` entry or a literal."""
    return value.get("Default") if isinstance(value, dict) else value


def _param_or_literal(template: Mapping[str, Any], value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return _default(template.get("Parameters", {}).get(value["Ref"]))
    return value


def alarm_metrics(resources: Mapping[str, Any]) -> int:
    """Metrics the template's alarms are billed for: one per single-metric alarm; per metric
    alarm, one per ``MetricStat``, three each when the alarm has an anomaly detection band."""
    count = 0
    for r in resources.values():
        if r.get("Type") != "AWS::CloudWatch::Alarm":
            continue
        p = r["Properties"]
        if "MetricName" in p:
            count += 1
            continue
        stats = sum(1 for m in p.get("Metrics", []) if "MetricStat" in m)
        anomaly = any(
            "ANOMALY_DETECTION_BAND" in str(m.get("Expression", "")) for m in p["Metrics"]
        )
        count += stats * (3 if anomaly else 1)  # a band is billed as 3 metrics
    return count


def template_settings(template: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`~.usage.Usage` fields that come from template.yaml (parameter defaults)."""
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
    alarms = alarm_metrics(resources)
    globals_ = template.get("Globals", {}).get("Function", {})
    return {
        **archive_settings(template),
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
        "alarm_metrics": alarms,
        "dashboards": sum(
            1 for r in resources.values() if r.get("Type") == "AWS::CloudWatch::Dashboard"
        ),
        "tracing": globals_.get("Tracing") == "Active",
    }


def archive_settings(template: Mapping[str, Any]) -> dict[str, Any]:
    """The archiver's memory, batch size and window and the archive's retention (parameter
    defaults); none when the template has no archiver."""
    resources = template["Resources"]
    if "ArchiverFunction" not in resources:
        return {}
    archiver = resources["ArchiverFunction"]["Properties"]
    esm = archiver["Events"]["ArchiveQueue"]["Properties"]
    retention = template.get("Parameters", {}).get("ArchiveRetentionDays", {})
    return {
        "archiver_memory_mb": int(_param_or_literal(template, archiver["MemorySize"])),
        "archiver_batch_size": int(_param_or_literal(template, esm["BatchSize"])),
        "archiver_batching_window_s": float(
            _param_or_literal(template, esm["MaximumBatchingWindowInSeconds"])
        ),
        "archive_retention_days": float(_default(retention)),
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
