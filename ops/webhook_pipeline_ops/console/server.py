"""The console's HTTP server: uvicorn on a socket bound here, run in the foreground (Ctrl-C or
SIGTERM stop it) or on a thread (tests), stopped cleanly in both cases.

In the foreground the signals are handled here, not by uvicorn: uvicorn re-raises a captured
SIGTERM after its graceful shutdown (the process then dies of it); the console instead finishes
its shutdown (running replays, the sampler) and exits 0. A second Ctrl-C forces the exit.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

#: Seconds a shutdown waits for open connections (the pages poll; nothing long-lived).
GRACEFUL_SECONDS = 5


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0 = a free one).

    Raises
    ------
    OSError
        The address is in use or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server without its own signal handling (:class:`ConsoleServer` does it)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ConsoleServer:
    """uvicorn serving ``app`` on an already bound socket.

    Parameters
    ----------
    app : ASGI application
    sock : socket.socket
        From :func:`bind`; closed when the server stops.
    """

    def __init__(self, app: Any, sock: socket.socket) -> None:
        self.sock = sock
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            server_header=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SECONDS,
        )
        self.server = _Server(config)
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Serve until :meth:`stop`, or (on the main thread) SIGINT/SIGTERM."""
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():

            def on_signal(signum: int, _frame: Any) -> None:
                if self.server.should_exit:
                    self.server.force_exit = True
                self.server.should_exit = True

            previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.server.run(sockets=[self.sock])
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.sock.close()

    def start(self, timeout: float = 10.0) -> None:
        """Serve on a thread; return once it accepts requests.

        Raises
        ------
        RuntimeError
            Not started within ``timeout`` seconds.
        """
        self._thread = threading.Thread(target=self.run, name="console-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                self.stop()
                raise RuntimeError("the console server did not start")
            time.sleep(0.02)

    def stop(self, timeout: float = 15.0) -> None:
        """Ask the server to exit and wait for its thread (lifespan shutdown included)."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
