"""The parent's side of one function worker process (:mod:`.worker` is the child's): start it
with the function's environment, wait for its init, exchange length-prefixed JSON frames over a
socket pair, kill it (:class:`WorkerProcess`); and the errors an invocation ends with
(:class:`FunctionError`, :class:`FunctionUnavailable`)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook_pipeline_ops.local.worker import send_frame

if TYPE_CHECKING:
    from webhook_pipeline_ops.local.runtime import LocalFunction

_OPS_DIR = Path(__file__).resolve().parents[2]
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


class WorkerProcess:
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
