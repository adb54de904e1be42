"""Helpers shared by the test tiers: loading a function as a cold start, a Lambda context, and
the deliveries table created from template.yaml's own definition (no second copy to drift)."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class FakeContext:
    """The attributes of a Lambda context object the Powertools decorators and handlers read."""

    function_name: str = "IngestFunction"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    remaining_ms: Callable[[], int] = lambda: 300_000

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms()


def load_function(name: str, env: dict[str, str], monkeypatch: Any) -> Any:
    """Import ``functions/<name>/app.py`` afresh with ``env`` set (its cold start)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    module_name = f"_fn_{name}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "functions" / name / "app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(module_name, None)
    return module


@functools.cache
def deliveries_table_properties() -> dict[str, Any]:
    """``DeliveriesTable``'s Properties in template.yaml (intrinsics left as written)."""
    from cfnlint.decode import cfn_yaml

    table = cfn_yaml.load(str(ROOT / "template.yaml"))["Resources"]["DeliveriesTable"]
    return json.loads(json.dumps(table["Properties"]))


def create_deliveries_table(client: Any, name: str) -> None:
    """Create the deliveries table with the template's key schema, indexes and TTL attribute."""
    props = deliveries_table_properties()
    client.create_table(
        TableName=name,
        KeySchema=props["KeySchema"],
        AttributeDefinitions=props["AttributeDefinitions"],
        GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
        BillingMode="PAY_PER_REQUEST",
    )
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        client.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
        )


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie counts as gone)."""
    import contextlib
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def envelope_json(
    delivery_id: str,
    resource: str | None = "cus_1",
    seq: int | None = 1,
    *,
    body: bytes | None = None,
    event_type: str = "customer.updated",
    **over: Any,
) -> str:
    """A valid Stripe envelope (inline body) as its SQS message body; ``over`` replaces fields."""
    import base64
    import hashlib

    from webhook_pipeline.envelope import Envelope

    raw = body if body is not None else json.dumps({"id": delivery_id}).encode()
    data: dict[str, Any] = {
        "source": "stripe",
        "delivery_id": delivery_id,
        "received_at": "2026-01-15T09:59:59Z",
        "event_type": event_type,
        "resource_key": resource,
        "sequence": seq if resource is not None else None,
        "body_b64": base64.b64encode(raw).decode(),
        "body_size": len(raw),
        "body_sha256": hashlib.sha256(raw).hexdigest(),
    }
    data.update(over)
    return Envelope.model_validate(data).to_json()


def data_commands(stats: dict) -> dict[str, int]:
    """Calls per command from INFO commandstats, without the test's own CONFIG/INFO."""
    return {
        k: v["calls"]
        for k, v in stats.items()
        if not k.startswith(("cmdstat_config", "cmdstat_info"))
    }


def metric_total(stdout: str, name: str) -> float:
    total = 0.0
    for line in stdout.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            value = json.loads(line).get(name, 0)
            total += sum(value) if isinstance(value, list) else value
    return total
