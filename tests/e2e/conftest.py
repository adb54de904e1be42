"""The local stack as a subprocess for end-to-end tests.

``local_stack`` starts ``webhook-pipeline local run`` on free ports with its own redis-server
(``REDIS_URL`` unset), a 2-second visibility timeout and ``MaxReceiveCount=2`` so a poison message
reaches the DLQ in seconds, and the ledger hook (:mod:`webhook_pipeline_ops.ledger`) as the
processor's hooks module, so tests count side effects per delivery (:meth:`LocalStack.ledger`);
it waits for readiness by polling (``/health`` and the ``ready`` file) and stops the process by
its PID at teardown (and checks that its redis-server is gone).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from webhook_pipeline_ops.local.functions import LOCAL_HOOKS_VARIABLE

from tests.conftest import ROOT, free_port
from tests.helpers import pid_alive

READY_TIMEOUT = 90.0


def wait_for(
    predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition"
) -> Any:
    """Poll ``predicate`` until truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


@dataclass
class LocalStack:
    """The running stack: its URLs, outputs, secrets, and the operator CLI against it."""

    process: subprocess.Popen[bytes]
    state_dir: Path
    ready: dict[str, Any]
    outputs: dict[str, Any]
    secrets: dict[str, str]

    @property
    def api_url(self) -> str:
        return str(self.outputs["ApiUrl"])

    def url(self, source: str) -> str:
        return f"{self.api_url}/webhooks/{source}"

    def cli(self, *argv: str) -> tuple[int, str]:
        """Run the operator CLI in-process against this stack; returns (exit code, stdout)."""
        from webhook_pipeline_ops import cli

        buffer = io.StringIO()
        saved = os.environ.get("WEBHOOK_PIPELINE_LOCAL_DIR")
        os.environ["WEBHOOK_PIPELINE_LOCAL_DIR"] = str(self.state_dir)
        try:
            with contextlib.redirect_stdout(buffer):
                code = cli.main(list(argv))
        finally:
            if saved is None:
                os.environ.pop("WEBHOOK_PIPELINE_LOCAL_DIR", None)
            else:
                os.environ["WEBHOOK_PIPELINE_LOCAL_DIR"] = saved
        return code, buffer.getvalue()

    def delivery(self, source: str, delivery_id: str) -> dict[str, Any] | None:
        """``webhook-pipeline deliveries get --local --json SOURCE ID`` (None when absent)."""
        # "--": a delivery id may start with "-" (SendGrid's random ids do)
        code, out = self.cli("deliveries", "get", "--local", "--json", "--", source, delivery_id)
        return json.loads(out) if code == 0 and out.strip() else None

    def resource(self, source: str, key: str) -> dict[str, Any] | None:
        """``webhook-pipeline resources get --local --json SOURCE KEY`` (None when absent)."""
        code, out = self.cli("resources", "get", "--local", "--json", "--", source, key)
        return json.loads(out) if code == 0 and out.strip() else None

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.outputs["EndpointUrl"],
            region_name=self.outputs["Region"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def ledger(self, source: str, delivery_id: str) -> int:
        """How many times the processor's hook ran for this delivery (the ledger hook's items:
        each run appends one with a fresh key, so an overwrite cannot hide a second run)."""
        from webhook_pipeline_ops.ledger import entries

        table = self.outputs["DeliveriesTableName"]
        return len(entries(self.client("dynamodb"), table, source, delivery_id))

    def main_queue_drained(self) -> bool:
        """Whether the main queue holds no message, visible or in flight."""
        attrs = self.client("sqs").get_queue_attributes(
            QueueUrl=self.outputs["MainQueueUrl"],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return all(v == "0" for v in attrs.values())

    def settled_ledger(self, source: str, delivery_id: str, timeout: float = 30.0) -> int:
        """The ledger count of a delivery once it has one entry and the main queue is drained
        (so a second run, if the pipeline made one, has had its chance to be counted)."""
        wait_for(lambda: self.ledger(source, delivery_id) >= 1, timeout, what="a ledger entry")
        wait_for(self.main_queue_drained, timeout, what="the main queue to drain")
        return self.ledger(source, delivery_id)

    def log(self) -> str:
        path = self.state_dir / "stack.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _health(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def running_local_stack(state: Path, *options: str) -> Iterator[LocalStack]:
    """Run ``webhook-pipeline local run --state-dir STATE OPTIONS`` as a subprocess.

    Waits for readiness by polling (``/health`` and the ``ready`` file), yields the stack, then
    stops the process by its PID and checks that the redis-server it started is gone and its
    ``ready`` file removed. ``REDIS_URL`` and ``AWS_ENDPOINT_URL`` are not passed on, so the
    stack starts its own Redis (unless ``--redis-url`` is among the options).
    """
    script = Path(sys.executable).parent / "webhook-pipeline"
    command = (
        [str(script)] if script.exists() else [sys.executable, "-m", "webhook_pipeline_ops.cli"]
    )
    command += ["local", "run", "--state-dir", str(state), *options]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AWS_ENDPOINT_URL")}
    env["WEBHOOK_PIPELINE_LOCAL_DIR"] = str(state)
    # The processor runs the ledger hook: one item per hook run, counted by the tests.
    env.setdefault(LOCAL_HOOKS_VARIABLE, "webhook_pipeline_ops.ledger")
    log_path = state / "stack.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(  # the stack writes its log file itself from here on
            command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    stack: LocalStack | None = None
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        ready: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(
                    f"local stack exited with {process.returncode}:\n"
                    f"{log_path.read_text(errors='replace')[-4000:]}"
                )
            with contextlib.suppress(OSError, ValueError):
                ready = json.loads((state / "ready").read_text())
            if ready and _health(ready["health_url"]):
                break
            time.sleep(0.1)
        else:
            pytest.fail(
                f"local stack not ready within {READY_TIMEOUT:.0f} s:\n"
                f"{log_path.read_text(errors='replace')[-4000:]}"
            )
        assert ready is not None and ready["pid"] == process.pid
        stack = LocalStack(
            process=process,
            state_dir=state,
            ready=ready,
            outputs=json.loads((state / "outputs.json").read_text()),
            secrets={
                name: entry["secret"]
                for name, entry in json.loads((state / "secrets.json").read_text())[
                    "sources"
                ].items()
            },
        )
        yield stack
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    # Clean stop: the redis-server it started is gone and the ready file removed.
    redis_pid = stack.ready.get("redis_pid") if stack is not None else None
    if redis_pid:
        wait_for(lambda: not pid_alive(int(redis_pid)), timeout=30, what="its redis-server to stop")
    assert not (state / "ready").exists(), log_path.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """``webhook-pipeline local run`` in a subprocess for the session; stopped by PID.

    No ``PublicBaseUrl`` is passed: the stack defaults it to its own plain-HTTP address, which
    is the URL the URL-signing providers (Twilio, Square, HubSpot) sign here, as a deployment
    behind a custom domain sets its ``https://`` one.
    """
    port = free_port()
    options = ["--port", str(port), "--moto-port", str(free_port()),
               "--visibility-timeout", "2", "--parameter", "MaxReceiveCount=2"]  # fmt: skip
    with running_local_stack(tmp_path_factory.mktemp("local-stack"), *options) as stack:
        yield stack
