"""Run the SAM functions' handlers as the Lambda runtime would: each in its own worker processes.

Each function of the template gets a pool of worker processes (:mod:`.worker`), one per
concurrent execution environment: its interpreter imports the handler file with the function's
environment from the template (``POWERTOOLS_SERVICE_NAME`` included, so each function logs and
emits metrics under its own service name) and serves one invocation at a time. An
acknowledgement of the ingest function therefore never waits for a processor batch, and the
Powertools Logger/Metrics singletons are never shared between functions, as on AWS.

As on Lambda, a worker's init (the handler module's import: settings, clients) is a phase of
its own with its own limit (:data:`INIT_TIMEOUT_SECONDS`), never counted against the function's
``Timeout``: an invocation is only handed to a worker whose init has finished. Invocations get a
fake Lambda context (request id, function name, remaining time from the template's ``Timeout``).
An invocation running past the function's timeout is ended as Lambda ends it: its worker is
killed and the invocation fails with ``Task timed out``; a replacement worker is started and
initialised off the request path (a background thread), and later invocations wait for a ready
worker.

A caller with a deadline (the HTTP gateway: API Gateway's integration timeout) gets
:class:`FunctionUnavailable` when no worker takes the invocation before it, or when the answer
is not back by it (the worker then finishes the invocation on its own, as a Lambda function
keeps running after API Gateway gave up): API Gateway's 503, never a 500 after minutes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.local.resources import FunctionSpec
from webhook_pipeline_ops.local.worker import FakeLambdaContext, send_frame

__all__ = ["FakeLambdaContext", "FunctionError", "FunctionUnavailable", "LocalFunction"]

log = logging.getLogger(__name__)

_OPS_DIR = Path(__file__).resolve().parents[2]
#: Seconds a worker may take for its init (imports, settings validation, clients). Lambda allows
#: 10 s (:data:`LAMBDA_INIT_LIMIT_SECONDS`) and then runs the init again inside the first
#: invocation, under the function's timeout; locally a busy development machine is slower than a
#: Lambda environment, so the init gets longer and a slower one is only warned about.
INIT_TIMEOUT_SECONDS = 60.0
LAMBDA_INIT_LIMIT_SECONDS = 10.0
#: Seconds before a replacement whose init failed is tried again (doubling up to the maximum).
REPLACEMENT_RETRY_SECONDS = (1.0, 30.0)
#: Seconds :meth:`LocalFunction.stop` lets workers exit on their own before killing them.
STOP_GRACE_SECONDS = 2.0
_HEADER = struct.Struct(">I")


class FunctionError(Exception):
    """An invocation failed: the handler raised (``error_type`` is the exception's class name),
    timed out (``Task.TimedOut``) or its worker died (``Runtime.ExitError``)."""

    def __init__(self, error_type: str, message: str, trace: str = "") -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message
        self.trace = trace


class FunctionUnavailable(FunctionError):
    """The invocation got no answer through no fault of its handler: no worker was ready before
    the caller's deadline (``Local.NoWorkerReady``), the answer was not back by it
    (``Local.IntegrationTimeout``; the worker finishes the invocation on its own), or the
    function is stopping (``Runtime.Stopped``). API Gateway answers such a request 503."""


class _Worker:
    """One worker process and the parent's end of its socket pair.

    Built in two steps so that a pool's inits run in parallel and off any request's path: the
    constructor starts the process and sends the init frame, :meth:`wait_ready` waits for its
    answer.
    """

    def __init__(self, function: LocalFunction) -> None:
        parent, child = socket.socketpair()
        self.sock = parent
        self.logical_id = function.spec.logical_id
        self._buffer = bytearray()
        env = {**os.environ, **function.environment}
        # The worker finds this package even when it is not installed (ops/ first on the path).
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_OPS_DIR), os.environ.get("PYTHONPATH", "")) if p
        )
        self.started = time.monotonic()
        try:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", "webhook_pipeline_ops.local.worker", str(child.fileno())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            child.close()
        with contextlib.suppress(OSError):  # a worker dead already fails wait_ready
            self.send(
                {
                    "logical_id": function.spec.logical_id,
                    "handler": function.spec.handler,
                    "code_dir": str(function.spec.code_dir),
                    "environment": function.environment,
                }
            )

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def wait_ready(self, timeout: float) -> float:
        """Wait for the init's answer; returns the init's duration in seconds.

        Raises
        ------
        FunctionError
            The init raised (``error_type`` names the exception) or did not answer within
            ``timeout`` seconds (``Runtime.InitError``); the worker is killed.
        """
        try:
            reply = self.receive(time.monotonic() + timeout)
        except (OSError, EOFError) as exc:  # TimeoutError is an OSError
            self.kill()
            raise FunctionError(
                "Runtime.InitError", f"{self.logical_id}: worker init failed: {exc!r}"
            ) from exc
        if "error" in reply:
            self.kill()
            err = reply["error"]
            raise FunctionError(err["type"], err["message"], err.get("traceback", ""))
        return time.monotonic() - self.started

    def send(self, doc: Any) -> None:
        self.sock.settimeout(None)  # the worker reads it whole whatever its size
        send_frame(self.sock, doc)

    def receive(self, until: float) -> Any:
        """The next frame, by monotonic time ``until`` (``TimeoutError`` otherwise, the part
        read so far kept for the next call); ``EOFError`` when the worker closed its end."""
        while True:
            if len(self._buffer) >= _HEADER.size:
                end = _HEADER.size + _HEADER.unpack_from(self._buffer)[0]
                if len(self._buffer) >= end:
                    frame = bytes(self._buffer[_HEADER.size : end])
                    del self._buffer[:end]
                    return json.loads(frame)
            left = until - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError
            self._buffer += chunk

    def close_socket(self) -> None:
        """Close the parent's end: an idle worker exits, a busy one after its invocation."""
        with contextlib.suppress(OSError):
            self.sock.close()

    def kill(self) -> None:
        self.close_socket()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class LocalFunction:
    """One function of the template and its worker processes.

    Parameters
    ----------
    spec : FunctionSpec
        The function as provisioned from the template.
    base_environment : Mapping[str, str]
        Variables under the template's (credentials, region, ``AWS_ENDPOINT_URL``).
    region : str
        Region of the fake ARN.
    concurrency : int
        Worker processes (concurrent executions); an invocation beyond it waits for a free one.
    """

    def __init__(
        self,
        spec: FunctionSpec,
        base_environment: Mapping[str, str],
        region: str,
        concurrency: int = 1,
    ) -> None:
        self.spec = spec
        self.region = region
        self.concurrency = max(1, concurrency)
        self.environment = {**base_environment, **spec.environment}
        self._idle: queue.LifoQueue[_Worker | None] = queue.LifoQueue()
        self._workers: list[_Worker] = []  # every live worker: initialising, idle or busy
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._loaded = False
        self._closed = threading.Event()

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:123456789012:function:{self.spec.name}"

    @property
    def pids(self) -> list[int]:
        """PIDs of the live worker processes."""
        with self._lock:
            return [w.pid for w in self._workers]

    def load(self) -> None:
        """Start the worker processes and wait for their inits (in parallel), once.

        Raises
        ------
        FunctionError
            A worker failed its init (the handler file is missing, its import raised: a bad
            configuration fails the cold start); ``error_type`` names the exception.
        """
        with self._load_lock:
            if self._loaded:
                return
            workers = [self._spawn() for _ in range(self.concurrency)]
            for worker in workers:
                self._initialise(worker)
            for worker in workers:
                self._idle.put(worker)
            self._loaded = True
        log.info(
            "%s: %d worker process(es) ready (pids %s)",
            self.spec.logical_id,
            self.concurrency,
            ", ".join(str(p) for p in self.pids),
        )

    def invoke(self, event: dict[str, Any], deadline: float | None = None) -> Any:
        """Call the handler with ``event`` in a ready worker; returns its JSON result.

        Parameters
        ----------
        deadline : float | None
            ``time.monotonic()`` by which the caller needs the answer (the gateway: the
            request's arrival plus the route's integration timeout); ``None`` waits for a
            worker as long as it takes, and for the function's timeout.

        Raises
        ------
        FunctionUnavailable
            No worker was ready before ``deadline``, the answer was not back by it, or the
            function is stopping.
        FunctionError
            The handler raised, the invocation ran past the function's timeout
            (``Task.TimedOut``), or the worker died (``Runtime.ExitError``).
        """
        self.load()
        worker = self._take(deadline)
        timeout = self.spec.timeout_seconds
        context = {
            "function_name": self.spec.name,
            "memory_limit_in_mb": self.spec.memory_mb,
            "invoked_function_arn": self.arn,
            "timeout_seconds": timeout,
            "aws_request_id": str(uuid.uuid4()),
        }
        function_deadline = time.monotonic() + timeout
        until = function_deadline if deadline is None else min(deadline, function_deadline)
        try:
            worker.send({"event": event, "context": context})
            reply = worker.receive(until)
        except TimeoutError as exc:
            if time.monotonic() < function_deadline:  # the caller's deadline came first
                self._finish_in_background(worker, function_deadline)
                raise FunctionUnavailable(
                    "Local.IntegrationTimeout",
                    f"{self.spec.logical_id}: no answer before the caller's deadline",
                ) from exc
            self._retire(worker)
            raise FunctionError(
                "Task.TimedOut", f"Task timed out after {timeout:.2f} seconds"
            ) from exc
        except (OSError, EOFError) as exc:
            self._retire(worker)
            if self._closed.is_set():
                raise FunctionUnavailable(
                    "Runtime.Stopped", f"{self.spec.logical_id} is stopped"
                ) from exc
            raise FunctionError(
                "Runtime.ExitError", f"{self.spec.logical_id}: worker exited: {exc!r}"
            ) from exc
        self._idle.put(worker)
        if "error" in reply:
            err = reply["error"]
            raise FunctionError(err["type"], err["message"], err.get("traceback", ""))
        return reply["result"]

    def stop(self) -> None:
        """Stop every worker process (idempotent): each gets :data:`STOP_GRACE_SECONDS` to exit
        on its own (an idle one exits at once), then is killed; waiting callers get
        ``Runtime.Stopped``."""
        self._closed.set()
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.close_socket()
        grace = time.monotonic() + STOP_GRACE_SECONDS
        for worker in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=max(0.0, grace - time.monotonic()))
            worker.kill()
        self._idle.put(None)

    # -- the pool --------------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        with self._lock:
            if self._closed.is_set():
                raise FunctionUnavailable("Runtime.Stopped", f"{self.spec.logical_id} is stopped")
            worker = _Worker(self)
            self._workers.append(worker)
        return worker

    def _initialise(self, worker: _Worker) -> None:
        """Wait for ``worker``'s init; on failure it leaves the pool and the error is raised."""
        try:
            seconds = worker.wait_ready(INIT_TIMEOUT_SECONDS)
        except FunctionError:
            self._forget(worker)
            raise
        if seconds > LAMBDA_INIT_LIMIT_SECONDS:
            log.warning(
                "%s: worker pid %d took %.1f s to initialise, over Lambda's %.0f s init limit "
                "(Lambda would run the init again inside the first invocation, under the "
                "function's timeout)",
                self.spec.logical_id,
                worker.pid,
                seconds,
                LAMBDA_INIT_LIMIT_SECONDS,
            )
        else:
            log.debug(
                "%s: worker pid %d initialised in %.2f s", self.spec.logical_id, worker.pid, seconds
            )

    def _forget(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)

    def _take(self, deadline: float | None) -> _Worker:
        """A ready worker, waiting until ``deadline`` at most."""
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                worker = self._idle.get(timeout=wait)
            except queue.Empty:
                raise FunctionUnavailable(
                    "Local.NoWorkerReady",
                    f"{self.spec.logical_id}: no worker was ready before the caller's deadline",
                ) from None
            if worker is None or self._closed.is_set():
                self._idle.put(None)  # wake the next waiter too
                raise FunctionUnavailable("Runtime.Stopped", f"{self.spec.logical_id} is stopped")
            if worker.process.poll() is None:
                return worker
            self._retire(worker)  # died while idle: replace it, take another

    def _retire(self, worker: _Worker) -> None:
        """Kill a timed-out or dead worker (never reused) and start its replacement off the
        caller's path."""
        self._forget(worker)
        if not self._closed.is_set():
            threading.Thread(
                target=self._replace, name=f"replace-{self.spec.logical_id}", daemon=True
            ).start()

    def _replace(self) -> None:
        """Start and initialise one worker, trying again after a failed init until stopped."""
        delay, longest = REPLACEMENT_RETRY_SECONDS
        while not self._closed.is_set():
            try:
                worker = self._spawn()
                self._initialise(worker)
            except FunctionUnavailable:
                return
            except FunctionError as exc:
                log.error(
                    "%s: a replacement worker failed its init (%s: %s); trying again in %.0f s",
                    self.spec.logical_id,
                    exc.error_type,
                    exc.message,
                    delay,
                )
                self._closed.wait(delay)
                delay = min(longest, delay * 2)
                continue
            log.info(
                "%s: replacement worker pid %d ready (init %.2f s)",
                self.spec.logical_id,
                worker.pid,
                time.monotonic() - worker.started,
            )
            self._idle.put(worker)
            return

    def _finish_in_background(self, worker: _Worker, function_deadline: float) -> None:
        """Let ``worker`` finish an invocation its caller gave up on (its answer is dropped),
        then serve again; past the function's timeout it is retired like any timed-out one."""

        def finish() -> None:
            try:
                worker.receive(function_deadline)
            except (OSError, EOFError):
                self._retire(worker)
                return
            self._idle.put(worker)

        threading.Thread(target=finish, name=f"finish-{self.spec.logical_id}", daemon=True).start()
