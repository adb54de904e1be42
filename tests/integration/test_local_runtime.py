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
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from webhook_pipeline_ops.local.http_gateway import Gateway, Route
from webhook_pipeline_ops.local.resources import FunctionSpec, HttpRoute
from webhook_pipeline_ops.local.runtime import FunctionError, FunctionUnavailable, LocalFunction

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
import json, os, time
from pathlib import Path

def handler(event, context):
    # A barrier: no worker writes until every invocation is running in a worker of its own, so
    # the writes overlap (and no worker is freed early and handed a second invocation).
    started = Path(event["started"])
    (started / str(os.getpid())).touch()
    deadline = time.monotonic() + 20  # under the function timeout (30 s)
    while len(list(started.iterdir())) < event["workers"] and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(event["lines"]):
        print(json.dumps({"pid": os.getpid(), "i": i, "pad": "x" * event["width"]}))
    return {"pid": os.getpid()}
"""

LOUD_DRIVER = """
import sys, threading
from pathlib import Path
from webhook_pipeline_ops.local.resources import FunctionSpec
from webhook_pipeline_ops.local.runtime import LocalFunction

code = Path(sys.argv[1])
started = code.parent / "started"
started.mkdir()
spec = FunctionSpec("Loud", "stack-loud", code, "app.handler", 30, 128, {}, [], [], [])
fn = LocalFunction(spec, {}, "us-east-1", concurrency=3)
fn.load()
threads = [
    threading.Thread(
        target=fn.invoke,
        args=({"lines": 400, "width": 1500, "started": str(started), "workers": 3},),
    )
    for _ in range(3)
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


SLOW_INIT_HANDLER = """
import os, time
from pathlib import Path

if Path(os.environ["SLOW_INIT_FLAG"]).exists():  # the replacements' init, not the first ones'
    time.sleep(float(Path(os.environ["SLOW_INIT_FLAG"]).read_text()))

def handler(event, context):
    if event.get("sleep"):
        time.sleep(event["sleep"])
    return {"pid": os.getpid(), "remaining_ms": context.get_remaining_time_in_millis()}
"""


def _slow_init_function(tmp: Path, *, timeout: int, concurrency: int = 1) -> LocalFunction:
    code = tmp / "SlowInit"
    code.mkdir()
    (code / "app.py").write_text(SLOW_INIT_HANDLER)
    spec = FunctionSpec("SlowInit", "stack-slow", code, "app.handler", timeout, 128, {}, [], [], [])
    env = {"SLOW_INIT_FLAG": str(tmp / "slow-init")}
    return LocalFunction(spec, env, "us-east-1", concurrency=concurrency)


def test_a_timed_out_invocation_fails_at_its_timeout_not_after_the_replacement_init(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    """The replacement of a timed-out worker starts and initialises off the caller's path: the
    invocation fails at the function's timeout, and a later one waits for the ready worker
    (whose init is not counted against its own timeout)."""
    fn = _slow_init_function(tmp_path, timeout=1)
    functions.append(fn)
    fn.load()
    (tmp_path / "slow-init").write_text("3")  # every replacement takes 3 s to initialise
    started = time.monotonic()
    with pytest.raises(FunctionError) as caught:
        fn.invoke({"sleep": 5})
    assert caught.value.error_type == "Task.TimedOut"
    assert time.monotonic() - started < 2.5  # 1 s timeout, not 1 s + the 3 s init
    answer = fn.invoke({})  # waits for the replacement's init, then runs with its full timeout
    assert answer["remaining_ms"] > 800


def test_a_caller_deadline_with_no_ready_worker_is_function_unavailable(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    fn = _function(tmp_path, "Ingest", timeout=30)
    functions.append(fn)
    release = tmp_path / "release"
    busy = threading.Thread(target=fn.invoke, args=({"wait_for": str(release)},))
    busy.start()
    try:
        _wait_for(tmp_path / "release.started")
        started = time.monotonic()
        with pytest.raises(FunctionUnavailable) as caught:
            fn.invoke({}, deadline=time.monotonic() + 0.5)
        waited = time.monotonic() - started
    finally:
        release.touch()
        busy.join(timeout=30)
    assert caught.value.error_type == "Local.NoWorkerReady"
    assert 0.4 < waited < 2.0


def test_an_answer_not_back_by_the_deadline_is_unavailable_and_the_worker_finishes(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    """As API Gateway gives up at its integration timeout while the function runs on: the caller
    gets FunctionUnavailable at its deadline; the worker finishes and serves again (not killed)."""
    fn = _function(tmp_path, "Ingest", timeout=10)
    functions.append(fn)
    pid = fn.invoke({})["pid"]
    started = time.monotonic()
    with pytest.raises(FunctionUnavailable) as caught:
        fn.invoke({"sleep": 2}, deadline=time.monotonic() + 0.5)
    assert caught.value.error_type == "Local.IntegrationTimeout"
    assert time.monotonic() - started < 1.5
    assert fn.invoke({})["pid"] == pid  # waited for the same worker to finish the first one


def test_stop_ends_busy_and_waiting_invocations_within_seconds_as_unavailable(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    fn = _function(tmp_path, "Ingest", timeout=60)
    functions.append(fn)
    fn.load()
    errors: list[BaseException] = []

    def call(event: dict[str, object]) -> None:
        try:
            fn.invoke(event)
        except BaseException as exc:  # collected for the asserts below
            errors.append(exc)

    release = tmp_path / "release"  # never touched: the busy one is inside its handler
    callers = [threading.Thread(target=call, args=({"wait_for": str(release)},))]
    callers += [threading.Thread(target=call, args=({},)) for _ in range(3)]  # queued
    for caller in callers:
        caller.start()
    _wait_for(tmp_path / "release.started")
    started = time.monotonic()
    fn.stop()
    for caller in callers:
        caller.join(timeout=10)
    assert time.monotonic() - started < 5
    assert len(errors) == 4
    assert all(isinstance(e, FunctionUnavailable) for e in errors), errors
    assert {e.error_type for e in errors if isinstance(e, FunctionError)} == {"Runtime.Stopped"}


def test_the_gateway_answers_503_with_retry_after_when_no_worker_is_ready_in_time(
    tmp_path: Path, functions: list[LocalFunction]
) -> None:
    """API Gateway's integration timeout (the route's TimeoutInMillis) bounds the wait for a
    worker plus the invocation: past it the answer is 503 + Retry-After, never a 500."""
    fn = _function(tmp_path, "Ingest", timeout=30)
    functions.append(fn)
    route = Route(HttpRoute("POST", "/webhooks/{source}", timeout_ms=1000), fn)
    gateway = Gateway("127.0.0.1", 0, [route], {})
    gateway.start()
    release = tmp_path / "release"
    busy = threading.Thread(target=fn.invoke, args=({"wait_for": str(release)},))
    busy.start()
    try:
        _wait_for(tmp_path / "release.started")
        started = time.monotonic()
        request = urllib.request.Request(
            f"http://127.0.0.1:{gateway.port}/webhooks/stripe", data=b"{}", method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=30)
        waited = time.monotonic() - started
    finally:
        release.touch()
        busy.join(timeout=30)
        gateway.stop()
    assert caught.value.code == 503
    assert caught.value.headers["Retry-After"] == "1"
    assert json.loads(caught.value.read()) == {"message": "Service Unavailable"}
    assert 0.9 < waited < 3.0
