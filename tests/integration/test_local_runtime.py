"""The local stack's function runtime: each function in its own worker processes, as on Lambda.

Handlers here are small files written per test; the workers are real subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from webhook_pipeline_ops.local.provision import FunctionSpec
from webhook_pipeline_ops.local.runtime import FunctionError, LocalFunction

HANDLER = """
import json, os, time
from pathlib import Path

COLD = os.getpid()

def handler(event, context):
    if event.get("wait_for"):
        Path(event["wait_for"] + ".started").touch()
        deadline = time.monotonic() + 20
        while not Path(event["wait_for"]).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        Path(event["wait_for"] + ".done").touch()
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("raise"):
        raise KeyError(event["raise"])
    return {
        "pid": os.getpid(),
        "cold_pid": COLD,
        "service": os.environ.get("POWERTOOLS_SERVICE_NAME"),
        "function_name": context.function_name,
        "remaining_ms": context.get_remaining_time_in_millis(),
    }
"""


def _function(tmp: Path, name: str, *, timeout: int = 5, concurrency: int = 1) -> LocalFunction:
    code = tmp / name
    code.mkdir()
    (code / "app.py").write_text(HANDLER)
    spec = FunctionSpec(
        name, f"stack-{name}", code, "app.handler", timeout, 128,
        {"POWERTOOLS_SERVICE_NAME": f"stack-{name.lower()}"}, [], [], [],
    )  # fmt: skip
    return LocalFunction(spec, {"BASE": "1"}, "us-east-1", concurrency=concurrency)


def _wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


@pytest.fixture
def functions(tmp_path: Path) -> Iterator[list[LocalFunction]]:
    made: list[LocalFunction] = []
    yield made
    for fn in made:
        fn.stop()


def test_each_function_runs_in_its_own_process_with_its_own_service_name(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    ingest = _function(tmp_path, "Ingest")
    processor = _function(tmp_path, "Processor")
    functions += [ingest, processor]
    a, b = ingest.invoke({}), processor.invoke({})
    assert a["pid"] != os.getpid() and b["pid"] != os.getpid() and a["pid"] != b["pid"]
    assert a["pid"] == a["cold_pid"]  # loaded once, in the worker
    assert (a["service"], b["service"]) == ("stack-ingest", "stack-processor")
    assert a["function_name"] == "stack-Ingest" and 0 < a["remaining_ms"] <= 5000
    assert ingest.invoke({})["pid"] == a["pid"]  # a warm worker is reused


def test_an_invocation_does_not_wait_for_another_function(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    processor = _function(tmp_path, "Processor", timeout=60)
    ingest = _function(tmp_path, "Ingest")
    functions += [processor, ingest]
    release = tmp_path / "release"
    busy = threading.Thread(target=processor.invoke, args=({"wait_for": str(release)},))
    busy.start()
    try:
        _wait_for(tmp_path / "release.started")  # the processor is inside its handler
        # The ingest answers while the processor is still inside its handler.
        assert ingest.invoke({})["service"] == "stack-ingest"
        assert not (tmp_path / "release.done").exists()
    finally:
        release.touch()
        busy.join(timeout=30)


def test_concurrent_invocations_use_separate_workers(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    ingest = _function(tmp_path, "Ingest", concurrency=2)
    functions.append(ingest)
    ingest.load()
    assert len(set(ingest.pids)) == 2
    release = tmp_path / "release"
    first: list[dict[str, int]] = []
    busy = threading.Thread(target=lambda: first.append(ingest.invoke({"wait_for": str(release)})))
    busy.start()
    try:
        _wait_for(tmp_path / "release.started")
        second = ingest.invoke({})  # the other worker answers while the first one is busy
    finally:
        release.touch()
        busy.join(timeout=30)
    assert first and first[0]["pid"] != second["pid"]


def test_a_handler_exception_is_a_function_error_and_the_worker_stays(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    fn = _function(tmp_path, "Ingest")
    functions.append(fn)
    pid = fn.invoke({})["pid"]
    with pytest.raises(FunctionError) as caught:
        fn.invoke({"raise": "boom"})
    assert caught.value.error_type == "KeyError" and "boom" in caught.value.message
    assert "Traceback" in caught.value.trace
    assert fn.invoke({})["pid"] == pid


def test_a_timed_out_invocation_kills_its_worker_and_a_new_one_serves(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    fn = _function(tmp_path, "Ingest", timeout=1)
    functions.append(fn)
    pid = fn.invoke({})["pid"]
    with pytest.raises(FunctionError) as caught:
        fn.invoke({"sleep": 3})
    assert caught.value.error_type == "Task.TimedOut"
    assert fn.invoke({})["pid"] != pid


def test_a_failing_cold_start_is_reported_with_the_exception(tmp_path: Path) -> None:
    code = tmp_path / "Bad"
    code.mkdir()
    (code / "app.py").write_text("raise ValueError('QUEUE_URL is not set')\n")
    spec = FunctionSpec("Bad", "bad", code, "app.handler", 3, 128, {}, [], [], [])
    fn = LocalFunction(spec, {}, "us-east-1")
    with pytest.raises(FunctionError) as caught:
        fn.load()
    assert caught.value.error_type == "ValueError" and "QUEUE_URL" in caught.value.message
    fn.stop()


LOUD_HANDLER = """
import json, os

def handler(event, context):
    for i in range(event["lines"]):
        print(json.dumps({"pid": os.getpid(), "i": i, "pad": "x" * event["width"]}))
    return {"pid": os.getpid()}
"""

LOUD_DRIVER = """
import sys, threading
from pathlib import Path
from webhook_pipeline_ops.local.provision import FunctionSpec
from webhook_pipeline_ops.local.runtime import LocalFunction

code = Path(sys.argv[1])
spec = FunctionSpec("Loud", "stack-loud", code, "app.handler", 30, 128, {}, [], [], [])
fn = LocalFunction(spec, {}, "us-east-1", concurrency=3)
fn.load()
threads = [
    threading.Thread(target=fn.invoke, args=({"lines": 400, "width": 1500},)) for _ in range(3)
]
for t in threads:
    t.start()
for t in threads:
    t.join()
fn.stop()
"""


def test_concurrent_workers_write_whole_lines_to_the_shared_stdout(tmp_path: Path) -> None:
    """Workers share the stack's stdout (one file): each log line arrives whole, never cut by
    another worker's output (what ``audit --local`` parses)."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "app.py").write_text(LOUD_HANDLER)
    out = tmp_path / "stdout.log"
    with out.open("wb") as stdout:
        subprocess.run(
            [sys.executable, "-c", LOUD_DRIVER, str(code)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            check=True,
            timeout=120,
            env={**os.environ, "PYTHONUNBUFFERED": ""},
        )
    lines = out.read_text().splitlines()
    docs = [json.loads(line) for line in lines]  # a cut line would not parse
    assert len(docs) == 1200
    assert len({d["pid"] for d in docs}) == 3
