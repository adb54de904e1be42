"""Run the SAM functions' handlers as the Lambda runtime would: each in its own worker processes.

Each function of the template gets a pool of worker processes (:mod:`.worker`), one per
concurrent execution environment: its interpreter imports the handler file with the function's
environment from the template (``POWERTOOLS_SERVICE_NAME`` included, so each function logs and
emits metrics under its own service name) and serves one invocation at a time. An
acknowledgement of the ingest function therefore never waits for a processor batch, and the
Powertools Logger/Metrics singletons are never shared between functions, as on AWS.

Invocations get a fake Lambda context (request id, function name, remaining time from the
template's ``Timeout``). An invocation running past the function's timeout is ended as Lambda
ends it: its worker is killed (a new one starts for the next invocation) and the invocation fails
with ``Task timed out``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.local.provision import FunctionSpec
from webhook_pipeline_ops.local.worker import FakeLambdaContext, recv_frame, send_frame

__all__ = ["FakeLambdaContext", "FunctionError", "LocalFunction"]

log = logging.getLogger(__name__)

_OPS_DIR = Path(__file__).resolve().parents[2]
#: Seconds a worker may take for its cold start (imports, settings validation).
INIT_TIMEOUT_SECONDS = 60.0


class FunctionError(Exception):
    """An invocation failed: the handler raised (``error_type`` is the exception's class name),
    timed out (``Task.TimedOut``) or its worker died (``Runtime.ExitError``)."""

    def __init__(self, error_type: str, message: str, trace: str = "") -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message
        self.trace = trace


class _Worker:
    """One worker process and the parent's end of its socket pair."""

    def __init__(self, function: LocalFunction) -> None:
        parent, child = socket.socketpair()
        self.sock = parent
        env = {**os.environ, **function.environment}
        # The worker finds this package even when it is not installed (ops/ first on the path).
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_OPS_DIR), os.environ.get("PYTHONPATH", "")) if p
        )
        try:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", "webhook_pipeline_ops.local.worker", str(child.fileno())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            child.close()
        self.sock.settimeout(INIT_TIMEOUT_SECONDS)
        try:
            send_frame(
                self.sock,
                {
                    "logical_id": function.spec.logical_id,
                    "handler": function.spec.handler,
                    "code_dir": str(function.spec.code_dir),
                    "environment": function.environment,
                },
            )
            reply = recv_frame(self.sock)
        except (OSError, EOFError) as exc:
            self.kill()
            raise FunctionError(
                "Runtime.InitError", f"{function.spec.logical_id}: worker init failed: {exc}"
            ) from exc
        if "error" in reply:
            self.kill()
            err = reply["error"]
            raise FunctionError(err["type"], err["message"], err.get("traceback", ""))

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def call(self, request: dict[str, Any], timeout: float) -> Any:
        self.sock.settimeout(timeout)
        send_frame(self.sock, request)
        return recv_frame(self.sock)

    def close(self) -> None:
        """Close the socket (the worker exits) and reap it; kill it if it does not exit."""
        with contextlib.suppress(OSError):
            self.sock.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
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
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._loaded = False
        self._closed = False

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:123456789012:function:{self.spec.name}"

    @property
    def pids(self) -> list[int]:
        """PIDs of the live worker processes."""
        with self._lock:
            return [w.pid for w in self._workers]

    def load(self) -> None:
        """Start the worker processes (their cold starts), once.

        Raises
        ------
        FunctionError
            A worker failed its init (the handler file is missing, its import raised: a bad
            configuration fails the cold start); ``error_type`` names the exception.
        """
        with self._lock:
            if self._loaded:
                return
            for _ in range(self.concurrency):
                worker = _Worker(self)
                self._workers.append(worker)
                self._idle.put(worker)
            self._loaded = True
        log.info(
            "%s: %d worker process(es) ready (pids %s)",
            self.spec.logical_id,
            self.concurrency,
            ", ".join(str(p) for p in self.pids),
        )

    def invoke(self, event: dict[str, Any]) -> Any:
        """Call the handler with ``event`` in a free worker; returns its JSON result.

        Raises
        ------
        FunctionError
            The handler raised, the invocation ran past the function's timeout, or the worker
            died.
        """
        self.load()
        worker = self._idle.get()
        if worker is None or self._closed:
            self._idle.put(None)
            raise FunctionError("Runtime.Stopped", f"{self.spec.logical_id} is stopped")
        context = {
            "function_name": self.spec.name,
            "memory_limit_in_mb": self.spec.memory_mb,
            "invoked_function_arn": self.arn,
            "timeout_seconds": self.spec.timeout_seconds,
            "aws_request_id": str(uuid.uuid4()),
        }
        healthy = False
        try:
            reply = worker.call({"event": event, "context": context}, self.spec.timeout_seconds)
            healthy = True
        except TimeoutError as exc:
            raise FunctionError(
                "Task.TimedOut",
                f"Task timed out after {self.spec.timeout_seconds:.2f} seconds",
            ) from exc
        except (OSError, EOFError) as exc:
            raise FunctionError(
                "Runtime.ExitError", f"{self.spec.logical_id}: worker exited: {exc}"
            ) from exc
        finally:
            self._release(worker, healthy)
        if "error" in reply:
            err = reply["error"]
            raise FunctionError(err["type"], err["message"], err.get("traceback", ""))
        return reply["result"]

    def _release(self, worker: _Worker, healthy: bool) -> None:
        if healthy or self._closed:
            self._idle.put(worker)
            return
        worker.kill()  # a timed-out or dead execution environment is never reused
        with self._lock:
            self._workers.remove(worker)
        try:
            replacement = _Worker(self)
        except FunctionError:
            log.exception("%s: a replacement worker failed its init", self.spec.logical_id)
            self._idle.put(None)  # later invocations fail fast instead of waiting forever
            return
        with self._lock:
            self._workers.append(replacement)
        self._idle.put(replacement)

    def stop(self) -> None:
        """Stop every worker process (idempotent)."""
        self._closed = True
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.close()
        self._idle.put(None)
