"""Fault switches of the local stack: faults a chaos run turns on inside the stack's processes.

Some faults cannot be made from outside a process: an AWS endpoint that answers with throttling
errors, a processor that dies at one exact point of its invocation, a hook that fails for a
while. The local stack gives each of its processes (the moto server, every function worker) the
folder ``<state dir>/faults`` in :data:`FAULTS_DIR_VARIABLE`; a switch is one small JSON file
there that a chaos run writes and removes (:class:`FaultSwitches`). Nothing in the pipeline's
own code (``layers/``, ``functions/``) reads these files: the switches act in the local
emulators around it (the moto server's WSGI app, the worker that plays the Lambda runtime) and
in the test-only ledger hook.

The switches:

``throttle`` (read by the moto server, :class:`ThrottleInjector`)
    ``{"rate": 0.25, "until": <epoch s>, "seed": 1}``: while ``time.time() < until``, that
    share of ``TransactWriteItems`` requests is answered with ``ProvisionedThroughputExceeded``,
    ``ThrottlingException`` or a ``TransactionCanceledException`` whose reasons are
    ``TransactionConflict`` (one of the three at random), and that share of ``SendMessage``
    requests with SQS's ``RequestThrottled``, each as real AWS answers (HTTP 400, the JSON error
    shapes botocore parses). The request never reaches moto. One line per answer in
    ``throttled.jsonl``.
``crash-before-write`` / ``crash-after-write`` (read by a function worker, :mod:`.worker`)
    One-shot: the first worker of the function named in the file (``{"function":
    "ProcessorFunction"}``) that reaches the point takes the switch (an atomic rename, so one
    worker only) and exits at once with status 137, as a killed execution environment does:
    *before-write* in its next ``TransactWriteItems`` call, before the request is sent;
    *after-write* once its handler returned (every write of the batch made), before the batch
    response reaches the poller. The taken file names the worker's PID.
``hook-failing`` (read by :mod:`webhook_pipeline_ops.ledger`)
    ``{"until": <epoch s>}``: until then the ledger hook raises
    :class:`InjectedHookFailure` (a transient failure: the delivery stays recorded with its hook
    pending and is retried). One line per failure in ``hook-failures.jsonl``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: The variable naming the switches' folder in every process of the local stack.
FAULTS_DIR_VARIABLE = "WEBHOOK_PIPELINE_LOCAL_FAULTS_DIR"
#: The crash points a worker knows, by switch name.
CRASH_POINTS = ("crash-before-write", "crash-after-write")
#: Exit status of a worker that a crash switch ended (128 + SIGKILL, as a killed process).
CRASH_EXIT_STATUS = 137


class InjectedHookFailure(RuntimeError):
    """The ``hook-failing`` switch is on: a hook failure injected by a chaos run."""


class FaultSwitches:
    """The switch files of one folder.

    Parameters
    ----------
    directory : Path
        The folder (created on :meth:`arm`).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    @classmethod
    def from_environment(cls) -> FaultSwitches | None:
        """The switches named by :data:`FAULTS_DIR_VARIABLE`, or ``None`` when it is unset."""
        folder = os.environ.get(FAULTS_DIR_VARIABLE)
        return cls(Path(folder)) if folder else None

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def arm(self, name: str, doc: dict[str, Any]) -> None:
        """Turn switch ``name`` on with ``doc`` (written whole, then renamed into place)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, self.path(name))

    def disarm(self, name: str) -> None:
        """Turn switch ``name`` off (no error when it is off)."""
        with contextlib.suppress(FileNotFoundError):
            self.path(name).unlink()

    def read(self, name: str) -> dict[str, Any] | None:
        """Switch ``name``'s document, or ``None`` when it is off (or not readable JSON)."""
        try:
            doc = json.loads(self.path(name).read_text())
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    def take(self, name: str) -> dict[str, Any] | None:
        """Take one-shot switch ``name``: its document when this process won it, else ``None``.

        The file is renamed to ``<name>.taken.<pid>``; of processes racing for it, exactly one
        rename succeeds.
        """
        taken = self.directory / f"{name}.taken.{os.getpid()}"
        try:
            os.rename(self.path(name), taken)
        except OSError:
            return None
        try:
            doc = json.loads(taken.read_text())
        except (OSError, ValueError):
            doc = {}
        return doc if isinstance(doc, dict) else {}

    def takers(self, name: str) -> list[int]:
        """PIDs of the processes that took switch ``name`` so far."""
        return sorted(
            int(p.name.rsplit(".", 1)[1])
            for p in self.directory.glob(f"{name}.taken.*")
            if p.name.rsplit(".", 1)[1].isdigit()
        )

    def clear(self) -> None:
        """Every switch off and every record removed (a stack starting)."""
        if self.directory.is_dir():
            for p in self.directory.iterdir():
                if p.is_file():
                    p.unlink()

    def record(self, log_name: str, doc: dict[str, Any]) -> None:
        """Append ``doc`` as one line to ``<log_name>.jsonl`` (one ``write`` in append mode, so
        lines of several processes do not interleave)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.directory / f"{log_name}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def records(self, log_name: str) -> list[dict[str, Any]]:
        """Every line of ``<log_name>.jsonl`` (none when it does not exist)."""
        try:
            text = (self.directory / f"{log_name}.jsonl").read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------
# throttling, in the moto server

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_DYNAMODB_TYPE = "com.amazonaws.dynamodb.v20120810#"
#: The throttling answers of ``TransactWriteItems``, by the code botocore reports.
DYNAMODB_THROTTLES = (
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "TransactionConflict",
)


def _throttle_answer(operation: str, code: str, items: int) -> tuple[dict[str, str], bytes]:
    """Headers and body of a throttling answer as DynamoDB / SQS send it (HTTP 400)."""
    if operation == "SendMessage":
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "x-amzn-query-error": "RequestThrottled;Sender",
        }
        body: dict[str, Any] = {
            "__type": "com.amazonaws.sqs#RequestThrottled",
            "message": "Request is throttled (injected by a chaos run)",
        }
        return headers, json.dumps(body).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0"}
    if code == "TransactionConflict":
        conflict = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
        reasons = [conflict, *[{"Code": "None"}] * max(0, items - 1)]
        body = {
            "__type": _DYNAMODB_TYPE + "TransactionCanceledException",
            "Message": "Transaction cancelled, please refer cancellation reasons for specific "
            "reasons [TransactionConflict" + ", None" * max(0, items - 1) + "]",
            "CancellationReasons": reasons,
        }
    elif code == "ThrottlingException":
        body = {
            "__type": "com.amazon.coral.availability#ThrottlingException",
            "message": "Rate of requests exceeds the allowed throughput (injected by a chaos run)",
        }
    else:
        body = {
            "__type": _DYNAMODB_TYPE + code,
            "message": "The level of configured provisioned throughput for the table was "
            "exceeded (injected by a chaos run)",
        }
    return headers, json.dumps(body).encode()


def _operation(environ: dict[str, Any]) -> str | None:
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target == "DynamoDB_20120810.TransactWriteItems":
        return "TransactWriteItems"
    if target == "AmazonSQS.SendMessage":
        return "SendMessage"
    return None


class ThrottleInjector:
    """WSGI middleware of the moto server: answers a share of ``TransactWriteItems`` and
    ``SendMessage`` requests with throttling errors while the ``throttle`` switch is on."""

    def __init__(self, app: WsgiApp, switches: FaultSwitches) -> None:
        self.app = app
        self.switches = switches
        self._lock = threading.Lock()
        self._rng = random.Random()  # noqa: S311 - a fault schedule, not security
        self._seeded: object = None

    def _decide(self, operation: str) -> str | None:
        doc = self.switches.read("throttle")
        if doc is None or time.time() >= float(doc.get("until", 0)):
            return None
        with self._lock:
            if self._seeded != doc.get("seed"):
                self._rng.seed(doc.get("seed"))
                self._seeded = doc.get("seed")
            if self._rng.random() >= float(doc.get("rate", 0.0)):
                return None
            if operation == "SendMessage":
                return "RequestThrottled"
            return self._rng.choice(DYNAMODB_THROTTLES)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        operation = _operation(environ)
        code = self._decide(operation) if operation else None
        if operation is None or code is None:
            return self.app(environ, start_response)
        items = 1
        if code == "TransactionConflict":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            with contextlib.suppress(ValueError, TypeError):
                items = len(json.loads(environ["wsgi.input"].read(length))["TransactItems"])
        headers, body = _throttle_answer(operation, code, items)
        self.switches.record("throttled", {"at": time.time(), "op": operation, "code": code})
        start_response("400 Bad Request", [*headers.items(), ("Content-Length", str(len(body)))])
        return [body]


# ------------------------------------------------------------------------------------------------
# crash points, in a function worker


def crash_if_switched(switches: FaultSwitches | None, point: str, function: str) -> None:
    """Exit this process at once (status 137) when crash switch ``point`` is on for
    ``function`` and this process takes it; return otherwise.

    A switch naming another function is left on for that function's workers.
    """
    if switches is None:
        return
    doc = switches.read(point)
    if doc is None or doc.get("function") != function:
        return
    if switches.take(point) is None:
        return  # another worker took it first
    os._exit(CRASH_EXIT_STATUS)


def install_crash_before_write(switches: FaultSwitches, function: str) -> None:
    """Make every botocore ``TransactWriteItems`` call of this process check the
    ``crash-before-write`` switch before the request is sent (a wrapper of botocore's
    ``BaseClient._make_api_call``, in this worker process only)."""
    from botocore.client import BaseClient

    original = BaseClient._make_api_call  # type: ignore[attr-defined]

    def make_api_call(self: Any, operation_name: str, api_params: Any) -> Any:
        if operation_name == "TransactWriteItems":
            crash_if_switched(switches, "crash-before-write", function)
        return original(self, operation_name, api_params)

    BaseClient._make_api_call = make_api_call  # type: ignore[attr-defined]
