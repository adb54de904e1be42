"""The README's own flow in a terminal: ``make run`` (stdout is no file), then, in another
terminal, ``audit --local`` finds the functions' log lines (``logs/functions.log``) and
reconciles; the start-up sums up the sources with unsigned fields in one line; ``local secret
set`` gives a source a new secret that ``send`` signs with."""

from __future__ import annotations

import json
import os
import secrets as random_secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from webhook_pipeline_ops.simulator.deliveries import example_sources, signed_delivery

from tests.conftest import ROOT, free_port
from tests.e2e.conftest import READY_TIMEOUT, LocalStack, _health, wait_for
from tests.e2e.test_local_stack import recorded

pytestmark = pytest.mark.e2e


@dataclass
class TerminalStack:
    stack: LocalStack
    env: dict[str, str]
    seen: list[bytes]  # what the "terminal" showed

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "webhook_pipeline_ops.cli", *argv],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


def _ready(state: Path) -> dict[str, Any] | None:
    try:
        ready: dict[str, Any] = json.loads((state / "ready").read_text())
    except (OSError, ValueError):
        return None
    return ready if _health(ready["health_url"]) else None


@pytest.fixture(scope="module")
def terminal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TerminalStack]:
    """``local run`` with its stdout on a pipe, as in a terminal; a 1 s secrets cache."""
    state = tmp_path_factory.mktemp("terminal") / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AWS_ENDPOINT_URL")}
    env["WEBHOOK_PIPELINE_LOCAL_DIR"] = str(state)
    command = [sys.executable, "-m", "webhook_pipeline_ops.cli", "local", "run"]
    command += ["--port", str(free_port()), "--moto-port", str(free_port())]
    command += ["--secrets-max-age", "1"]
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
        yield TerminalStack(stack, env, seen)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=10)


def test_audit_local_reads_the_log_of_a_stack_started_in_a_terminal(
    terminal: TerminalStack,
) -> None:
    stack = terminal.stack
    # Given one delivery accepted and recorded
    d = signed_delivery(example_sources()["github"], secret=stack.secrets["github"])
    answer = requests.post(stack.url("github"), data=d.body, headers=d.headers, timeout=30)
    assert answer.status_code == 202, answer.text
    recorded(stack, "github", d.delivery_id)
    # When `audit --local` runs in another terminal on the same folder
    done = terminal.cli("audit", "--local", "--settle", "0", "--json")
    # Then it finds the delivery accepted and recorded
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert report["sources"]["github"]["accepted"] == 1, report
    assert report["sources"]["github"]["recorded"] == 1, report
    # And the terminal still shows the functions' log lines
    wait_for(lambda: any(d.delivery_id.encode() in line for line in terminal.seen), timeout=10)
    # And the sources with unsigned fields were summed up once, not warned per source and worker
    summaries = [line for line in terminal.seen if b"sources read fields their signature" in line]
    assert len(summaries) == 1 and b"github (delivery_id" in summaries[0], summaries
    assert not [line for line in terminal.seen if b"source reads fields the signature" in line]


def _send(terminal: TerminalStack, *options: str) -> dict[str, Any]:
    done = terminal.cli("send", "--source", "stripe", "--count", "1", "--retries", "0",
                        "--json", *options)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def test_a_secret_set_locally_is_the_one_send_signs_with_and_the_old_one_is_refused(
    terminal: TerminalStack,
) -> None:
    old = terminal.stack.secrets["stripe"]
    new = example_sources()["stripe"].provider.random_secret(random_secrets.token_bytes(32))
    # When the source is given a new secret
    done = terminal.cli("local", "secret", "set", "stripe", new)
    assert done.returncode == 0, done.stderr
    assert "new signing secret stored" in done.stdout
    # Then send (signing with secrets.json) is accepted once the 1 s cache has expired
    wait_for(lambda: _send(terminal)["accepted_202"] == 1, timeout=30, what="the new secret")
    # And a delivery signed with the old secret is refused
    refused = _send(terminal, "--secret", old)
    assert (refused["accepted_202"], refused["client_4xx"]) == (0, 1), refused
    # And a value not in the provider's format is refused with the reason, nothing changed
    before = (terminal.stack.state_dir / "secrets.json").read_text()
    bad = terminal.cli("local", "secret", "set", "clerk", "whsec_!!")
    assert bad.returncode == 1 and "not whsec_<base64>" in bad.stderr, bad.stderr
    assert (terminal.stack.state_dir / "secrets.json").read_text() == before


def test_audit_local_reads_the_log_of_a_stack_whose_stdout_is_a_file_elsewhere(
    tmp_path: Path,
) -> None:
    # `local run --port N > /tmp/x.log 2>&1 &`: stdout is a regular file, not the state folder's
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AWS_ENDPOINT_URL")}
    env["WEBHOOK_PIPELINE_LOCAL_DIR"] = str(state)
    command = [sys.executable, "-m", "webhook_pipeline_ops.cli", "local", "run"]
    command += ["--port", str(free_port()), "--moto-port", str(free_port())]
    redirected = tmp_path / "x.log"
    with redirected.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
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
        # Given one delivery accepted and recorded
        d = signed_delivery(example_sources()["github"], secret=stack.secrets["github"])
        answer = requests.post(stack.url("github"), data=d.body, headers=d.headers, timeout=30)
        assert answer.status_code == 202, answer.text
        recorded(stack, "github", d.delivery_id)
        # When `audit --local` runs on the same folder
        done = TerminalStack(stack, env, []).cli("audit", "--local", "--settle", "0", "--json")
        # Then it finds the delivery accepted and recorded
        assert done.returncode == 0, done.stderr + done.stdout
        report = json.loads(done.stdout)
        assert report["sources"]["github"]["accepted"] == 1, report
        assert report["sources"]["github"]["recorded"] == 1, report
        # And the file stdout was redirected to still gets every line, once
        kept = (state / "logs" / "functions.log").read_bytes()
        accepted = [line for line in kept.splitlines() if d.delivery_id.encode() in line]
        assert accepted
        wait_for(
            lambda: [
                line for line in redirected.read_bytes().splitlines()
                if d.delivery_id.encode() in line
            ] == accepted,
            timeout=10, what="the lines copied to the redirected stdout",
        )  # fmt: skip
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert b"local stack stopped." in redirected.read_bytes()
