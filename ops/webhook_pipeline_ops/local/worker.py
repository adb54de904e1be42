"""One function worker process of the local stack: the handler in its own interpreter, as on Lambda.

Started by :class:`webhook_pipeline_ops.local.runtime.LocalFunction` as
``python -m webhook_pipeline_ops.local.worker FD``; ``FD`` is its end of a socket pair. Frames
both ways are a 4-byte big-endian length and a JSON document:

1. init (parent -> worker): ``{"logical_id", "handler", "code_dir", "environment"}``; the worker
   sets the environment (``POWERTOOLS_SERVICE_NAME`` included: one service name per function),
   imports the handler file (the cold start) and answers ``{"ok": true}`` or ``{"error": {...}}``;
2. invoke (parent -> worker): ``{"event", "context": {function_name, memory_limit_in_mb,
   invoked_function_arn, timeout_seconds, aws_request_id}}``; the answer is ``{"result": ...}``
   or ``{"error": {"type", "message", "traceback"}}`` (the handler raised).

With ``WEBHOOK_PIPELINE_LOCAL_FAULTS_DIR`` in its environment, the worker obeys the crash
switches of :mod:`.faults` (a chaos run's processor killed before its DynamoDB write, or after
it and before the batch response reaches the poller).

The worker serves one invocation at a time (a Lambda execution environment) and exits when the
parent closes the socket. Its stdout/stderr are the stack's (the functions' log lines).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import signal
import socket
import struct
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from webhook_pipeline_ops.local.faults import (
    FaultSwitches,
    crash_if_switched,
    install_crash_before_write,
)

_HEADER = struct.Struct(">I")


def send_frame(sock: socket.socket, doc: Any) -> None:
    """Send ``doc`` as one frame (raises ``OSError`` if the peer is gone)."""
    data = json.dumps(doc, separators=(",", ":")).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> Any:
    """Receive one frame; ``EOFError`` when the peer closed the socket."""
    header = _read_exact(sock, _HEADER.size)
    if header is None:
        raise EOFError
    data = _read_exact(sock, _HEADER.unpack(header)[0])
    if data is None:
        raise EOFError
    return json.loads(data)


@dataclass
class FakeLambdaContext:
    """The attributes of ``awslambdaric``'s context object that handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int
    invoked_function_arn: str
    timeout_seconds: int
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = ""
    log_stream_name: str = "local"
    identity: Any = None
    client_context: Any = None
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self.log_group_name = self.log_group_name or f"/aws/lambda/{self.function_name}"
        self._deadline = time.monotonic() + self.timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout (never negative)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def import_handler_file(name: str, path: Path) -> ModuleType:
    """Import ``path`` as module ``name`` with its folder first on ``sys.path`` (its siblings,
    e.g. a ``HOOKS_MODULE``, import as on Lambda)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    code_dir = str(path.parent)
    sys.path.insert(0, code_dir)
    try:
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        with contextlib.suppress(ValueError):
            sys.path.remove(code_dir)
        raise
    return module


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": traceback.format_exc(),
    }


def serve(sock: socket.socket) -> int:
    """Run the init frame then invocations until the parent closes ``sock``. Returns 0."""
    try:
        init = recv_frame(sock)
    except EOFError:
        return 0
    os.environ.update(init["environment"])
    module_name, _, attr = init["handler"].rpartition(".")
    path = Path(init["code_dir"]) / (module_name.replace(".", "/") + ".py")
    try:
        if not path.is_file():
            raise FileNotFoundError(f"{init['logical_id']}: handler file {path} not found")
        module = import_handler_file(f"local_lambda_{init['logical_id']}", path)
        handler = getattr(module, attr)
    except Exception as exc:
        send_frame(sock, {"error": _error(exc)})
        return 0
    send_frame(sock, {"ok": True, "pid": os.getpid()})
    switches = FaultSwitches.from_environment()
    if switches is not None:  # a chaos run's crash points (local.faults)
        install_crash_before_write(switches, init["logical_id"])
    while True:
        try:
            request = recv_frame(sock)
        except EOFError:
            return 0
        context = FakeLambdaContext(**request["context"])
        try:
            reply: dict[str, Any] = {"result": handler(request["event"], context)}
        except Exception as exc:
            reply = {"error": _error(exc)}
        sys.stdout.flush()
        crash_if_switched(switches, "crash-after-write", init["logical_id"])
        try:
            send_frame(sock, reply)
        except (TypeError, ValueError) as exc:  # a result JSON cannot carry
            send_frame(sock, {"error": _error(exc)})


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the stack stops its workers (Ctrl-C: the group)
    # Every worker writes to the stack's one stdout: a whole line per write() call, so lines of
    # concurrent workers never interleave (block buffering flushed 8 KB chunks that cut log
    # lines in two, and `audit --local` then missed an acceptance). On Lambda each line is a
    # log event of its own.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True)
    sock = socket.socket(fileno=int(argv[0]))
    try:
        return serve(sock)
    except (BrokenPipeError, ConnectionResetError):  # the stack stopped while we answered
        return 0
    finally:
        sock.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
