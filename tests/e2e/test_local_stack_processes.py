"""The local stack as on Lambda: functions in their own processes with their own service names,
the webhook port serving webhooks only, URL-signing providers verified against the stack's own
URL by default, and a port conflict found before anything starts."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from webhook_pipeline_ops.simulator.deliveries import example_sources, signed_delivery

from tests.conftest import ROOT
from tests.e2e.conftest import LocalStack, wait_for
from tests.e2e.test_local_stack import delivery_items, recorded
from tests.helpers import pid_alive

pytestmark = pytest.mark.e2e

SOURCES = example_sources()


@pytest.mark.parametrize("source", ["twilio", "square", "hubspot"])
def test_url_signing_providers_are_accepted_without_a_public_base_url(
    local_stack: LocalStack, source: str
) -> None:
    # The fixture passes no PublicBaseUrl: the stack defaults it to its own http:// URL.
    d = signed_delivery(
        SOURCES[source], secret=local_stack.secrets[source], url=local_stack.url(source)
    )
    answer = requests.post(local_stack.url(source), data=d.body, headers=d.headers, timeout=10)
    assert answer.status_code == 202, answer.text
    assert recorded(local_stack, source, d.delivery_id)["outcome"] == "applied"


def test_each_function_runs_in_its_own_worker_process_with_its_own_service_name(
    local_stack: LocalStack,
) -> None:
    workers = local_stack.ready["worker_pids"]
    pids = [pid for group in workers.values() for pid in group]
    assert set(workers) >= {"IngestFunction", "ProcessorFunction", "ReplayFunction"}
    assert len(set(pids)) == len(pids) and local_stack.process.pid not in pids
    assert all(pid_alive(pid) for pid in pids)
    d = signed_delivery(SOURCES["stripe"], secret=local_stack.secrets["stripe"])
    assert requests.post(local_stack.url("stripe"), data=d.body, headers=d.headers, timeout=10).ok
    recorded(local_stack, "stripe", d.delivery_id)

    def services() -> set[str]:
        found = set()
        for line in local_stack.log().splitlines():
            if line.startswith("{") and d.delivery_id in line:
                found.add(json.loads(line).get("service"))
        return found

    stack_name = "webhook-pipeline-local"
    wanted = {f"{stack_name}-ingest", f"{stack_name}-processor"}
    wait_for(lambda: services() >= wanted, timeout=20, what=f"log lines of both services: {wanted}")


def test_the_webhook_port_does_not_serve_the_lambda_invoke_api(local_stack: LocalStack) -> None:
    marker = f"forged-{time.time_ns()}"
    envelope = {"source": "stripe", "delivery_id": marker, "body": "{}"}
    event = {"Records": [{"messageId": marker, "receiptHandle": "x", "body": json.dumps(envelope)}]}
    for name in ("ProcessorFunction", "webhook-pipeline-local-ProcessorFunction"):
        answer = requests.post(
            f"{local_stack.api_url}/2015-03-31/functions/{name}/invocations",
            json=event,
            timeout=10,
        )
        assert answer.status_code == 404
    assert "lambda_endpoint_url" not in local_stack.ready
    assert "LambdaEndpointUrl" not in local_stack.outputs
    # had the forged invoke reached the processor, its record would be written once the main
    # queue holds nothing (visible or in flight)
    wait_for(local_stack.main_queue_drained, 30, what="the main queue to drain")
    assert delivery_items(local_stack, marker) == []


def test_a_port_in_use_fails_before_redis_and_moto_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "webhook_pipeline_ops.cli", "local", "run",
             "--state-dir", str(tmp_path), "--port", str(port)],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "PORT=" in result.stderr  # says how to choose another
    assert "redis:" not in result.stderr and "moto server:" not in result.stderr
    assert time.monotonic() - started < 30
    assert not (tmp_path / "ready").exists()


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (["PORT=3100"], "--port 3100"),
        (["ARGS=--port 3101 --ingest-workers 2"], "--port 3101 --ingest-workers 2"),
    ],
)
def test_make_run_takes_a_port(variables: list[str], expected: str) -> None:
    import shutil

    make = shutil.which("make")
    assert make, "make is needed to check the documented `make run PORT=...`"
    out = subprocess.run(  # what `make run` would run, without running it
        [make, "-n", "run", *variables], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    (line,) = [x for x in out.splitlines() if "local run" in x]
    assert line.split("local run", 1)[1].split() == expected.split()


def test_binding_beyond_loopback_is_warned_about(tmp_path: Path) -> None:
    with socket.socket() as taken:  # the port is taken: the stack stops right after the warning
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "webhook_pipeline_ops.cli", "local", "run",
             "--state-dir", str(tmp_path), "--host", "0.0.0.0", "--port", str(port)],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert result.returncode == 1
    assert "SECURITY: the gateway binds 0.0.0.0, beyond loopback" in result.stderr
