"""uvicorn's h11 protocol with the local gateway's connection deadlines.

uvicorn closes a kept-alive connection idle for ``timeout_keep_alive``, but has no deadline for a
request head: h11 waits for the line and headers however slowly they trickle in. This protocol
adds, per connection:

- an idle deadline from the connection's start (uvicorn arms one only after a first answer);
- one deadline for the whole request head, from its first byte to its last header: a client
  sending a byte at a time cannot extend it (a per-read timeout would let it);
- a 400 when a chunk announces a size of more than 8 hex digits (h11 accepts 20; an API front
  door refuses such a chunk, and no body within the 10 MB payload limit needs one);
- ``TCP_NODELAY`` on each connection (an answer's head and body are two writes; with Nagle's
  algorithm the second waited for the client's delayed ACK, about 40 ms per kept-alive request);
- ``X-Content-Type-Options: nosniff`` and a JSON body on uvicorn's own 400 for a request h11
  cannot parse (bad ``Content-Length``, malformed chunk, chunk not followed by CRLF).

Deadlines are read at each connection from ``deadlines`` (seconds), so they can be changed while
the server runs.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: Largest chunk size accepted: 8 hex digits.
MAX_CHUNK_SIZE = 0xFFFFFFFF


class Deadlines:
    """Seconds for a request head, a request body and an idle connection, each read when used."""

    def __init__(
        self, head: Callable[[], float], body: Callable[[], float], idle: Callable[[], float]
    ) -> None:
        self.head = head
        self.body = body
        self.idle = idle


def protocol_class(deadlines: Deadlines) -> type[H11Protocol]:
    """An :class:`H11Protocol` subclass holding ``deadlines`` (uvicorn's ``http=`` setting)."""
    return type("GatewayProtocol", (_GatewayProtocol,), {"deadlines": deadlines})


class _GatewayProtocol(H11Protocol):
    deadlines: Deadlines

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn's idle timer after an answer (typed int there; call_later takes seconds)
        self.timeout_keep_alive = self.deadlines.idle()  # type: ignore[assignment]
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:  # an answer's head and body are two writes: no Nagle wait between
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)  # type: ignore[arg-type]
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )  # idle before the first byte too

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            self._cancel_head_timer()
        elif self.conn.their_state is h11.IDLE:  # a head has begun and is not complete
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(self.deadlines.head(), self._head_late)
        else:
            self._cancel_head_timer()
            self._refuse_oversized_chunk()

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()  # no answer: the request never arrived

    def _refuse_oversized_chunk(self) -> None:
        # h11 keeps the size of the chunk being read on its reader (no public accessor).
        reader = getattr(self.conn, "_reader", None)
        if int(getattr(reader, "_bytes_in_chunk", 0) or 0) <= MAX_CHUNK_SIZE:
            return
        if self.cycle is not None and not self.cycle.response_started:
            self.cycle.disconnected = True  # the application's answer is not sent
            self.cycle.message_event.set()
        self.transport.write(_answer_400("malformed chunk size"))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        self.transport.write(_answer_400(msg))
        self.transport.close()


def _answer_400(reason: str) -> bytes:
    body = b'{"message":"Bad Request: ' + reason.encode("ascii", "replace") + b'"}'
    return (
        b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
        b"X-Content-Type-Options: nosniff\r\nconnection: close\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
