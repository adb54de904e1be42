"""What the common path never needs is never built: the S3 client (only claim-checked bodies
need it), the X-Ray SDK when tracing is off, and a secret value parsed once per value."""

from __future__ import annotations

import json
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


# -- the test kit (samples, vectors, signed requests): never defined by a function's import -----

_TEST_KIT_PROBE = """
import json, sys
import app  # the ingest function's module, as its cold start imports it
from webhook_pipeline.providers.registry import all_providers
after_app = object.__getattribute__(sys.modules["webhook_pipeline.providers.samples"], "__dict__")
defined_by_app = sorted(n for n in ("Vector", "Sample", "SignedRequest", "HandshakeSample")
                        if n in after_app)
providers = all_providers()  # every built-in provider module imported, none of its vectors read
raw = object.__getattribute__(sys.modules["webhook_pipeline.providers.samples"], "__dict__")
defined_by_all = sorted(n for n in ("Vector", "Sample", "SignedRequest", "HandshakeSample")
                        if n in raw)
github = providers["github"]
print(json.dumps([len(app.SOURCES), defined_by_app, len(providers), defined_by_all,
                  github.vectors[0].origin, "Vector" in sys.modules[
                      "webhook_pipeline.providers.samples"].__dict__]))
"""


def test_a_function_import_never_defines_the_test_kit() -> None:
    """The ingest function's import (and every built-in provider module's) leaves the test-kit
    module unexecuted: no vector is built and no sample type defined until one is read."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "LAMBDA_"))}
    env = {
        **clean,
        "PYTHONPATH": str(ROOT / "layers" / "common"),
        "POWERTOOLS_TRACE_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
        "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/main",
        "PAYLOAD_BUCKET": "payloads",
        "SECRETS_PREFIX": "webhook-pipeline/test/",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
    }
    result = subprocess.run(
        [sys.executable, "-c", _TEST_KIT_PROBE],
        cwd=ROOT / "functions" / "ingest",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    sources, by_app, providers, by_all, origin, defined_after_read = json.loads(
        result.stdout.strip().splitlines()[-1]
    )
    assert sources > 0 and providers > 30
    assert by_app == [] and by_all == []
    assert origin == "published" and defined_after_read  # reading a vector loads the kit


def test_lazy_vectors_build_once_on_first_read() -> None:
    from webhook_pipeline.providers.model import LazyVectors
    from webhook_pipeline.providers.samples import Vector

    built: list[int] = []
    first = Vector(secret="s", headers={}, body=b"1", now=0, origin="self", reference="r")
    second = Vector(secret="s", headers={}, body=b"2", now=0, origin="self", reference="r")

    def build() -> tuple[Vector, ...]:
        built.append(1)
        return (first, second)

    vectors = LazyVectors(build)
    assert built == []
    assert vectors[0] is first and vectors[-1] is second
    assert vectors[1:] == (second,)
    assert len(vectors) == 2 and list(vectors) == [first, second] and bool(vectors)
    assert built == [1]
    assert not LazyVectors(tuple)


def test_the_test_kit_types_stay_importable_from_the_providers_package() -> None:
    import webhook_pipeline.providers as providers
    from webhook_pipeline.providers import HandshakeSample, Sample, SignedRequest, Vector
    from webhook_pipeline.providers import samples as kit

    assert (Sample, Vector, SignedRequest, HandshakeSample) == (
        kit.Sample,
        kit.Vector,
        kit.SignedRequest,
        kit.HandshakeSample,
    )
    with pytest.raises(AttributeError):
        _ = providers.NoSuchName  # type: ignore[attr-defined]
