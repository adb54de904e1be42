"""What the common path never needs is never built: the S3 client (only claim-checked bodies
need it), the X-Ray SDK when tracing is off, and a secret value parsed once per value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from webhook_pipeline.adapters import secrets_manager
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.adapters.secrets_manager import SecretsManagerStore

ROOT = Path(__file__).resolve().parents[2]


class RecordingS3:
    def __init__(self) -> None:
        self.puts: list[str] = []

    def put_object(self, **kwargs: Any) -> dict[str, Any]:
        self.puts.append(kwargs["Key"])
        return {}


def test_s3_store_builds_its_client_on_first_put_only() -> None:
    built: list[RecordingS3] = []

    def factory() -> RecordingS3:
        built.append(RecordingS3())
        return built[-1]

    store = S3PayloadStore(None, "payloads", client_factory=factory)
    assert built == []
    store.put("bodies/a", b"x")
    store.put("bodies/b", b"y")
    assert len(built) == 1
    assert built[0].puts == ["bodies/a", "bodies/b"]


def test_s3_store_takes_exactly_one_of_client_and_factory() -> None:
    with pytest.raises(ValueError):
        S3PayloadStore(None, "payloads")
    with pytest.raises(ValueError):
        S3PayloadStore(RecordingS3(), "payloads", client_factory=RecordingS3)


class FakeSecrets:
    def __init__(self, value: str) -> None:
        self.value = value

    def get(self, name: str, max_age: int) -> str:
        return self.value


def test_a_secret_value_is_parsed_once_and_again_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed: list[str] = []
    real = secrets_manager.parse_secret

    def counting(value: str) -> Any:
        parsed.append(value)
        return real(value)

    monkeypatch.setattr(secrets_manager, "parse_secret", counting)
    provider = FakeSecrets('{"current": "one"}')
    store = SecretsManagerStore(prefix="p/", provider=provider)
    assert store.get("github").signing == ["one"]
    assert store.get("github").signing == ["one"]
    assert len(parsed) == 1
    provider.value = '{"current": "two", "previous": "one"}'  # rotated
    assert store.get("github").signing == ["two", "one"]
    assert len(parsed) == 2


def _observability(env: dict[str, str]) -> str:
    code = (
        "import sys; import webhook_pipeline.observability as o; "
        "print(type(o.tracer.provider).__name__, 'aws_xray_sdk.core' in sys.modules)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "LAMBDA_"))}
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "PYTHONPATH": str(ROOT / "layers" / "common"), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_tracing_off_never_imports_the_xray_sdk() -> None:
    assert _observability({"POWERTOOLS_TRACE_DISABLED": "true"}) == "NoTracing False"
    # outside Lambda (no LAMBDA_TASK_ROOT) Powertools disables tracing as well
    assert _observability({}) == "NoTracing False"


def test_tracing_on_uses_the_xray_recorder() -> None:
    env = {"LAMBDA_TASK_ROOT": str(ROOT), "POWERTOOLS_TRACE_DISABLED": "false"}
    assert _observability(env) in ("AWSXRayRecorder True", "AsyncAWSXRayRecorder True")
