"""Shared fixtures: a real redis-server on its own port, moto for AWS, events/ loaders.

Redis: every test session starts its own ``redis-server`` on a free port (never the machine's
6379, which tests must not flush or stop); tests that stop Redis start a private one of their own
(``redis_factory``). AWS: in-process moto (``mock_aws``) with fake credentials, no network.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"
REGION = "us-east-1"

# No test may reach a real AWS endpoint: fake credentials and a fixed region for everything.
os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_SESSION_TOKEN="testing",
    AWS_DEFAULT_REGION=REGION,
    AWS_REGION=REGION,
    POWERTOOLS_METRICS_NAMESPACE="WebhookPipeline",
    POWERTOOLS_SERVICE_NAME="webhook-pipeline-tests",
    POWERTOOLS_TRACE_DISABLED="true",
    POWERTOOLS_DEV="false",
)
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    """A redis-server process this test session started (and alone may stop)."""

    port: int
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    binary: str | None = None  # another redis-server than the one on PATH (an older version)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=1)

    def start(self) -> None:
        binary = self.binary or shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed (.ci/run installs it with apt-get)")
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if redis.Redis(port=self.port, socket_timeout=0.2).ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
        self.stop()
        pytest.fail(f"redis-server on port {self.port} did not answer")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A redis-server on a free port for the whole session; flushed by ``redis_url``."""
    server = RedisServer(port=free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """URL of the session Redis, emptied before the test."""
    redis_server.client().flushdb()
    yield redis_server.url


@pytest.fixture
def redis_factory() -> Iterator[Callable[[], RedisServer]]:
    """Start private redis-servers (own ports) that a test may stop; all stopped at teardown."""
    started: list[RedisServer] = []

    def make() -> RedisServer:
        server = RedisServer(port=free_port())
        server.start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def aws() -> Iterator[None]:
    """In-process moto for every AWS service, reset after the test."""
    from moto import mock_aws

    with mock_aws():
        yield


def load_event(name: str) -> dict[str, Any]:
    """Load ``events/<name>`` (``.json`` optional) as a dict."""
    path = EVENTS / (name if name.endswith(".json") else f"{name}.json")
    return json.loads(path.read_text())


@pytest.fixture
def event() -> Callable[[str], dict[str, Any]]:
    """Loader of ``events/*.json`` files, the same ones ``sam local invoke -e`` uses."""
    return load_event


@pytest.fixture
def log_lines() -> Iterator[list[dict[str, Any]]]:
    """Every line the pipeline's Powertools logger writes during the test, as parsed JSON.

    The logger's own handler keeps the stream it was created with (pytest's capture of the
    first import), so a handler of the test reads the same formatted lines.
    """
    import logging

    from webhook_pipeline.observability import logger

    lines: list[dict[str, Any]] = []
    formatter = logger.registered_formatter

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(json.loads(formatter.format(record)))

    handler = Collect()
    logger._logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger._logger.removeHandler(handler)


@pytest.fixture(autouse=True)
def _provider_registry_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Providers a test registers (its own throw-away modules) are forgotten after it."""
    from webhook_pipeline.providers import registry

    registry.all_providers()  # the built-in ones stay imported and registered
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


@pytest.fixture(autouse=True)
def _hook_registry_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks a test registers, or a module it imports registers (the ledger hook, imported for
    its reading helpers), are forgotten after it: a later test's processor runs only its own."""
    from webhook_pipeline.hooks import registry

    monkeypatch.setattr(registry, "_hooks", dict(registry._hooks))
    monkeypatch.setattr(registry, "_providers", dict(registry._providers))
