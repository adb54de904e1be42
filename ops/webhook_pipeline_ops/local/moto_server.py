"""The moto server of the local stack, in its own process, with the local stack's moto patches.

``python -m webhook_pipeline_ops.local.moto_server HOST PORT FD`` applies
:mod:`.moto_patches` (only here: no other process sees them), binds ``HOST:PORT`` (0 = a free
port), writes ``{"port": N}`` (or ``{"error": "..."}``) as one line to file descriptor ``FD`` and
serves until SIGTERM. Its own process keeps moto's CPU time apart from the gateway, the pollers
and the functions (no shared interpreter lock).

moto's DynamoDB backend is not safe under concurrent requests (a request thread changing a table
while another iterates it fails with ``RuntimeError: dictionary changed size during
iteration``, an HTTP 500 the processor must then retry), so DynamoDB requests (the
``X-Amz-Target: DynamoDB_...`` JSON API) are served one at a time. Other services keep their
threads; SQS long polls must not block the rest of the server.

With ``WEBHOOK_PIPELINE_LOCAL_FAULTS_DIR`` set (the stack sets it), the ``throttle`` switch of
:mod:`.faults` makes the server answer a share of ``TransactWriteItems`` and ``SendMessage``
requests with throttling errors, for a chaos run.

:class:`MotoProcess` starts and stops it from the stack.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.local.faults import FAULTS_DIR_VARIABLE

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_OPS_DIR = Path(__file__).resolve().parents[2]


class SerializeDynamoDB:
    """WSGI middleware: one DynamoDB request at a time (the whole response built in the lock)."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if not str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB"):
            return self.app(environ, start_response)
        with self.lock:
            return list(self.app(environ, start_response))


class MotoProcess:
    """The moto server process: :meth:`start` (raises ``OSError`` when the port cannot be bound),
    :meth:`get_host_and_port`, :meth:`stop` (SIGTERM to its PID, then SIGKILL)."""

    def __init__(
        self, ip_address: str = "127.0.0.1", port: int = 0, faults_dir: Path | None = None
    ) -> None:
        self.ip_address = ip_address
        self.requested_port = port
        self.faults_dir = faults_dir
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self, timeout: float = 60.0) -> None:
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_OPS_DIR), os.environ.get("PYTHONPATH", "")) if p
        )
        if self.faults_dir is not None:
            env[FAULTS_DIR_VARIABLE] = str(self.faults_dir)
        try:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [
                    sys.executable,
                    "-m",
                    "webhook_pipeline_ops.local.moto_server",
                    self.ip_address,
                    str(self.requested_port),
                    str(write_fd),
                ],
                pass_fds=(write_fd,),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            line = _read_line(pipe, timeout)
        doc = json.loads(line) if line else {"error": "the moto server exited before listening"}
        if "error" in doc:
            self.stop()
            raise OSError(doc["error"])
        self.port = int(doc["port"])

    def get_host_and_port(self) -> tuple[str, int]:
        return self.ip_address, self.port

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _read_line(pipe: Any, timeout: float) -> bytes:
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(pipe.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return result[0].strip() if result else b""


def serve(host: str, port: int, report_fd: int) -> int:
    """Apply the patches, bind, report the port on ``report_fd``, serve until SIGTERM."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    from webhook_pipeline_ops.local import moto_patches
    from webhook_pipeline_ops.local.faults import FaultSwitches, ThrottleInjector

    moto_patches.apply()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request in the log
    app: WsgiApp = SerializeDynamoDB(DomainDispatcherApplication(create_backend_app))
    switches = FaultSwitches.from_environment()
    if switches is not None:  # a chaos run's throttling switch (local.faults)
        app = ThrottleInjector(app, switches)
    with os.fdopen(report_fd, "w") as report:
        try:
            server = make_server(host, port, app, True, request_handler=MotoRequestHandler)
        except OSError as exc:
            report.write(json.dumps({"error": str(exc)}) + "\n")
            return 1
        report.write(json.dumps({"port": server.server_port}) + "\n")

    def on_term(_signum: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    parent = os.getppid()

    def orphaned() -> None:  # the stack was killed: do not outlive it
        while os.getppid() == parent:
            time.sleep(1.0)
        server.shutdown()

    threading.Thread(target=orphaned, daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the stack stops it (Ctrl-C reaches the group)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
