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
import logging
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from webhook_pipeline_ops.local.resources import FunctionSpec
from webhook_pipeline_ops.local.worker import FakeLambdaContext
from webhook_pipeline_ops.local.worker_process import (
    FunctionError,
    FunctionUnavailable,
    WorkerProcess,
)

__all__ = ["FakeLambdaContext", "FunctionError", "FunctionUnavailable", "LocalFunction"]

log = logging.getLogger(__name__)

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
        self._idle: queue.LifoQueue[WorkerProcess | None] = queue.LifoQueue()
        self._workers: list[WorkerProcess] = []  # every live worker: initialising, idle or busy
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
    def _spawn(self) -> WorkerProcess:
        with self._lock:
            if self._closed.is_set():
                raise FunctionUnavailable("Runtime.Stopped", f"{self.spec.logical_id} is stopped")
            worker = WorkerProcess(self)
            self._workers.append(worker)
        return worker

    def _initialise(self, worker: WorkerProcess) -> None:
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

    def _forget(self, worker: WorkerProcess) -> None:
        worker.kill()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)

    def _take(self, deadline: float | None) -> WorkerProcess:
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

    def _retire(self, worker: WorkerProcess) -> None:
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

    def _finish_in_background(self, worker: WorkerProcess, function_deadline: float) -> None:
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
