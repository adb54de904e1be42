"""The moto server of the local stack: ``ThreadedMotoServer`` with DynamoDB calls serialized.

moto's DynamoDB backend is not safe under concurrent requests: ``TransactWriteItems`` deep-copies
a table while another request thread changes it and fails with ``RuntimeError: dictionary changed
size during iteration`` (an HTTP 500 the processor must then retry). The processor writes from a
thread pool, so the local stack serializes DynamoDB requests (the ``X-Amz-Target: DynamoDB_...``
JSON API) behind one lock. Other services keep their threads; SQS long polls must not block the
rest of the server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


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


class LocalMotoServer(ThreadedMotoServer):
    """A threaded moto server on ``ip_address:port`` (0 = a free port).

    Unlike its base class, :meth:`start` raises ``OSError`` when the port cannot be bound instead
    of waiting forever.
    """

    _error: OSError | None = None

    def _server_entry(self) -> None:
        app = SerializeDynamoDB(DomainDispatcherApplication(create_backend_app))
        try:
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
        except OSError as exc:
            self._error = exc
            self._server_ready_event.set()
            return
        self._server_ready_event.set()
        self._server.serve_forever()

    def start(self) -> None:
        super().start()
        if self._error is not None:
            raise self._error
