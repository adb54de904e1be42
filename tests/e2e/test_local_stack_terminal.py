"""The README's own flow: ``make run`` in a terminal (stdout is no file), then ``audit --local``
in another one finds the functions' log lines (``logs/functions.log``) and reconciles; the
start-up sums up the sources with unsigned fields in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from webhook_pipeline_ops.samples import example_sources, signed_delivery

from tests.conftest import ROOT, free_port
from tests.e2e.conftest import READY_TIMEOUT, LocalStack, _health, wait_for
from tests.e2e.test_local_stack import recorded

pytestmark = pytest.mark.e2e


def _ready(state: Path) -> dict[str, Any] | None:
    try:
        ready: dict[str, Any] = json.loads((state / "ready").read_text())
    except (OSError, ValueError):
        return None
    return ready if _health(ready["health_url"]) else None


def test_audit_local_reads_the_log_of_a_stack_started_in_a_terminal(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AWS_ENDPOINT_URL")}
    env["WEBHOOK_PIPELINE_LOCAL_DIR"] = str(state)
    command = [sys.executable, "-m", "webhook_pipeline_ops.cli", "local", "run"]
    command += ["--port", str(free_port()), "--moto-port", str(free_port())]
    # Given a stack whose stdout is a pipe, as a terminal is: no regular file to log into
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    seen: list[bytes] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(process.stdout.readline, b"")))  # type: ignore[union-attr]
    reader.start()
    try:
        ready = wait_for(lambda: _ready(state), timeout=READY_TIMEOUT, what="the stack")
        secrets = json.loads((state / "secrets.json").read_text())["sources"]
        stack = LocalStack(
            process=process,
            state_dir=state,
            ready=ready,
            outputs=json.loads((state / "outputs.json").read_text()),
            secrets={name: entry["secret"] for name, entry in secrets.items()},
        )
        # When one delivery is accepted and recorded
        d = signed_delivery(example_sources()["stripe"], secret=stack.secrets["stripe"])
        answer = requests.post(stack.url("stripe"), data=d.body, headers=d.headers, timeout=30)
        assert answer.status_code == 202, answer.text
        recorded(stack, "stripe", d.delivery_id)
        # Then `audit --local` (another terminal, same folder) finds it accepted and recorded
        done = subprocess.run(
            [sys.executable, "-m", "webhook_pipeline_ops.cli", "audit", "--local", "--settle", "0",
             "--json"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr + done.stdout
        report = json.loads(done.stdout)
        assert report["sources"]["stripe"]["accepted"] == 1, report
        assert report["sources"]["stripe"]["recorded"] == 1, report
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=10)
    # And the terminal still showed the functions' log lines
    assert any(d.delivery_id.encode() in line for line in seen)
    # And the sources with unsigned fields were summed up once, not warned per source and worker
    summaries = [line for line in seen if b"sources read fields their signature" in line]
    assert len(summaries) == 1 and b"github (delivery_id" in summaries[0], summaries
    assert not [line for line in seen if b"source reads fields the signature" in line]
