"""The local stack's Redis: a given ``REDIS_URL``, a ``redis-server`` it starts, or a stand-in.

Order of preference (``mode="auto"``):

1. ``REDIS_URL`` from the environment (or ``--redis-url``): used as is, never stopped or flushed.
2. ``redis-server`` on ``PATH``: started on a free port bound to 127.0.0.1 with persistence off
   (``--save "" --appendonly no``) and stopped by its PID when the stack stops.
3. fakeredis' TCP server in this process, with a loud warning: it is NOT a real Redis (no
   eviction, no persistence semantics, its own command implementations).

``bind="0.0.0.0"`` (``local run --for-containers``) makes 2. and 3. listen on every interface so
that Lambda containers reach them as ``host.docker.internal``; redis-server then also runs with
``--protected-mode no`` (it would refuse non-loopback clients otherwise). The URL keeps
``127.0.0.1`` for the host side. A given ``REDIS_URL`` is never rebound.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

log = logging.getLogger(__name__)

RedisMode = Literal["auto", "server", "in-process"]
LOOPBACK = "127.0.0.1"

STANDIN_WARNING = """
**************************************************************************************
*  WARNING: Redis is an IN-PROCESS STAND-IN (fakeredis), NOT a real Redis.           *
*  The dedup gate works, but timings, eviction and failure behaviour differ.          *
*  Install redis-server (apt-get install redis-server) or set REDIS_URL to a real     *
*  Redis for anything you want to trust.                                              *
**************************************************************************************
"""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: have the kernel send SIGTERM to redis-server if the stack dies without cleanup."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def ping(url: str, timeout: float = 0.5) -> bool:
    """True when a Redis answers PING at ``url``."""
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


@dataclass
class RedisRuntime:
    """A running Redis the stack uses, and how to stop what the stack itself started.

    Attributes
    ----------
    url : str
        ``redis://host:port/db``.
    kind : {"external", "redis-server", "in-process"}
        Where it came from.
    pid : int | None
        PID of the redis-server this stack started.
    """

    url: str
    kind: str
    pid: int | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _server: object | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def stop(self) -> None:
        """Stop what the stack started (never an external Redis)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._server is not None:
            self._server.shutdown()  # type: ignore[attr-defined]
            self._server.server_close()  # type: ignore[attr-defined]
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._server = None


def start_redis_server(
    binary: str,
    port: int | None = None,
    ready_timeout: float = 10.0,
    bind: str = LOOPBACK,
) -> RedisRuntime:
    """Start ``redis-server`` on ``bind`` with persistence off; wait until it answers PING.

    Raises
    ------
    RuntimeError
        It exited or did not answer within ``ready_timeout`` seconds.
    """
    port = port or free_port(bind)
    cmd = [
        binary,
        "--port",
        str(port),
        "--bind",
        bind,
        # Without a password redis-server refuses clients from other hosts in protected mode;
        # only turned off when asked to listen beyond the loopback interface.
        "--protected-mode",
        "yes" if bind == LOOPBACK else "no",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
    ]
    process = subprocess.Popen(  # noqa: S603 - fixed argv, our own binary lookup
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = (process.stderr.read() if process.stderr else b"").decode(errors="replace")
            raise RuntimeError(f"redis-server exited with {process.returncode}: {err.strip()}")
        if ping(url, timeout=0.2):
            return RedisRuntime(url=url, kind="redis-server", pid=process.pid, _process=process)
        time.sleep(0.05)
    process.terminate()
    process.wait(timeout=5)
    raise RuntimeError(f"redis-server on port {port} did not answer within {ready_timeout} s")


def start_in_process(port: int | None = None, bind: str = LOOPBACK) -> RedisRuntime:
    """Serve fakeredis over TCP on ``bind`` from a thread of this process (NOT a real Redis).

    Raises
    ------
    RuntimeError
        fakeredis is not installed.
    """
    try:
        from fakeredis import TcpFakeServer
    except ImportError as exc:  # pragma: no cover - fakeredis is in the `local` extra
        raise RuntimeError(
            "no redis-server on PATH and fakeredis is not installed: install "
            "redis-server, set REDIS_URL, or pip install '.[local]'"
        ) from exc
    port = port or free_port(bind)
    server = TcpFakeServer((bind, port), server_type="redis")
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="fake-redis", daemon=True)
    thread.start()
    print(STANDIN_WARNING, file=sys.stderr, flush=True)
    log.warning("using an in-process Redis stand-in (fakeredis) on port %s: NOT a real Redis", port)
    return RedisRuntime(
        url=f"redis://127.0.0.1:{port}/0", kind="in-process", _server=server, _thread=thread
    )


def start_redis(
    url: str | None = None, mode: RedisMode = "auto", bind: str = LOOPBACK
) -> RedisRuntime:
    """Pick and start the stack's Redis (see the module docstring).

    Parameters
    ----------
    url : str | None
        An existing Redis (``REDIS_URL``); used as is when given.
    mode : {"auto", "server", "in-process"}
        ``server`` requires redis-server; ``in-process`` forces the stand-in.
    bind : str
        Listen address of a Redis started here (``0.0.0.0`` for containers).

    Raises
    ------
    RuntimeError
        The given Redis does not answer, or the requested kind cannot start.
    """
    if url:
        if not ping(url, timeout=1.0):
            raise RuntimeError(f"REDIS_URL {url} does not answer PING")
        return RedisRuntime(url=url, kind="external")
    binary = shutil.which("redis-server")
    if mode == "in-process" or (mode == "auto" and binary is None):
        return start_in_process(bind=bind)
    if binary is None:
        raise RuntimeError("redis-server is not on PATH (apt-get install redis-server)")
    return start_redis_server(binary, bind=bind)
