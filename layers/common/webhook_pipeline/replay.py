"""Replay of dead-lettered deliveries: DLQ -> main queue, with a filter, a dry run and a rate limit.

AWS's own redrive (``StartMessageMoveTask``) moves everything, cannot filter, has no dry run and
reports nothing. :func:`replay` does all three and works only against two small interfaces
(:class:`DeadLetterReader`, :class:`MainQueueSender`); the boto3 adapters live in
:mod:`webhook_pipeline.sqs_dlq` and are wired in the replay function and the operator CLI.

Semantics, per received DLQ message:

- the body is parsed as an :class:`~webhook_pipeline.envelope.Envelope`. A body that does not
  parse is **skipped** (counted in ``skipped`` and in ``malformed``) and left in the DLQ, visible
  again at once: replaying it would only poison the main queue again. It needs a human (inspect it
  with ``webhook-pipeline dlq peek --show-body``, then delete it by hand);
- an envelope that does not match the filter is **skipped** and made visible again at once
  (``ChangeMessageVisibility`` to 0);
- a matching envelope in a **dry run** is counted in ``matched``, listed in ``would_replay`` and
  made visible again at once;
- otherwise the envelope is sent to the main queue with ``replay_count + 1`` and
  ``gate = "replayed"`` (every other field unchanged), and deleted from the DLQ **only after** the
  send succeeded. If the send fails the message is made visible again and counted in ``failed``;
  it stays in the DLQ. If the send succeeded but the delete failed the delivery is counted as
  replayed and in ``delete_failed``: the DLQ copy will be replayed again later, which the
  processor's conditional writes make harmless (recorded once, applied once).

Replays skip the signature and freshness checks (they were verified at receipt) but never the
database guarantees: the processor treats a replayed envelope like any other.

Because a message made visible again can be received again in the same run, the message ids seen
are tracked. A message received a second time is not counted again and is *parked*: kept hidden
(for the visibility timeout of that receive) instead of being released, so the following receives
reach messages not yet seen instead of cycling through the same ones; every parked message is made
visible again at the end of the run. The run ends (``stopped="drained"``) when a receive returns
nothing, or :data:`MAX_IDLE_RECEIVES` receives in a row return only messages already seen.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import MalformedEnvelopeError, PipelineError

#: SQS returns at most 10 messages per receive.
SQS_MAX_BATCH = 10
#: Upper bound of ``max_messages`` in one run.
MAX_MESSAGES_LIMIT = 100_000
#: Upper bound of ``rate_per_second`` (SQS standard queues take far more; this guards typos).
MAX_RATE_PER_SECOND = 1_000.0
#: Lower bound of ``rate_per_second``: one send per 100 s (a smaller rate would sleep for ages).
MIN_RATE_PER_SECOND = 0.01
#: Default safety margin before the caller's own timeout (milliseconds).
DEFAULT_SAFETY_MARGIN_MS = 10_000
#: At most this many entries are listed in ``would_replay`` of a dry-run report.
MAX_LISTED = 100
#: Extra seconds added to the visibility timeout of a received batch.
VISIBILITY_MARGIN_SECONDS = 30
#: SQS's maximum visibility timeout (12 hours).
MAX_VISIBILITY_SECONDS = 43_200
#: The run ends after this many receives in a row that brought no message not seen yet.
MAX_IDLE_RECEIVES = 3

StopReason = Literal["drained", "max_messages", "time_limit", "send_failures", "receive_failed"]


# --------------------------------------------------------------------------- request model


class InvalidReplayRequestError(PipelineError):
    """The replay request is not valid (unknown keys, negative numbers, an empty time range...).

    The message lists every problem as ``field: reason``, one per ``;``.
    """


class ReplayFilter(BaseModel):
    """Which DLQ messages a replay moves. Every given criterion must match (AND); none = all.

    Attributes
    ----------
    source : str | None
        Exact source name.
    event_type : str | None
        Exact event type (envelopes without an event type never match a given one).
    delivery_id : str | None
        Exact delivery id.
    received_after : datetime | None
        Inclusive lower bound of the envelope's ``received_at``. A time without a zone is UTC.
    received_before : datetime | None
        Exclusive upper bound of ``received_at`` (half-open interval, so adjacent windows
        neither overlap nor leave a gap). Must be later than ``received_after``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str | None = Field(default=None, min_length=1, max_length=64)
    event_type: str | None = Field(default=None, min_length=1)
    delivery_id: str | None = Field(default=None, min_length=1, max_length=256)
    received_after: AwareDatetime | None = None
    received_before: AwareDatetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _naive_is_utc(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            for key in ("received_after", "received_before"):
                data[key] = _assume_utc(data.get(key))
        return data

    @model_validator(mode="after")
    def _ordered_range(self) -> ReplayFilter:
        if (
            self.received_after is not None
            and self.received_before is not None
            and self.received_after >= self.received_before
        ):
            raise ValueError(
                "received_after must be earlier than received_before "
                f"(got {self.received_after.isoformat()} >= {self.received_before.isoformat()})"
            )
        return self

    def matches(self, envelope: Envelope) -> bool:
        """Return whether ``envelope`` satisfies every given criterion."""
        if self.source is not None and envelope.source != self.source:
            return False
        if self.event_type is not None and envelope.event_type != self.event_type:
            return False
        if self.delivery_id is not None and envelope.delivery_id != self.delivery_id:
            return False
        received = envelope.received_at
        if received.tzinfo is None:
            received = received.replace(tzinfo=UTC)
        if self.received_after is not None and received < self.received_after:
            return False
        return not (self.received_before is not None and received >= self.received_before)

    def describe(self) -> str:
        """Short human description (``"all"`` when empty)."""
        parts = [f"{k}={v}" for k, v in self.model_dump(mode="json", exclude_none=True).items()]
        return " ".join(parts) or "all"


def _assume_utc(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value  # let pydantic report it
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return value


class ReplayRequest(BaseModel):
    """The replay function's input (also built by ``webhook-pipeline replay``).

    Attributes
    ----------
    max_messages : int
        At most this many distinct DLQ messages are examined in the run (1..100000, default 100).
    dry_run : bool
        Count and list what would move; move nothing (default false).
    rate_per_second : float | None
        At most this many sends to the main queue per second (0.01..1000); ``None`` = unlimited.
    filter : ReplayFilter
        Which messages to move (default: all).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_messages: int = Field(default=100, ge=1, le=MAX_MESSAGES_LIMIT, strict=True)
    dry_run: bool = Field(default=False, strict=True)
    rate_per_second: float | None = Field(
        default=None, ge=MIN_RATE_PER_SECOND, le=MAX_RATE_PER_SECOND
    )
    filter: ReplayFilter = Field(default_factory=ReplayFilter)

    @classmethod
    def parse(cls, data: Any) -> ReplayRequest:
        """Validate a raw request (the Lambda event, or a JSON string).

        Parameters
        ----------
        data : Mapping | str | bytes | None
            The request; ``None`` is an empty request (all defaults).

        Raises
        ------
        InvalidReplayRequestError
            With every problem listed as ``field: reason``.
        """
        try:
            if data is None:
                return cls()
            if isinstance(data, str | bytes):
                return cls.model_validate_json(data)
            if not isinstance(data, Mapping):
                raise InvalidReplayRequestError(
                    f"request must be a JSON object, got {type(data).__name__}"
                )
            return cls.model_validate(data)
        except ValidationError as exc:
            raise InvalidReplayRequestError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors(include_url=False, include_context=False):
        where = ".".join(str(p) for p in err["loc"]) or "request"
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        problems.append(f"{where}: {message}")
    return "invalid replay request: " + "; ".join(problems)


# --------------------------------------------------------------------------- ports


@dataclass(frozen=True)
class DlqMessage:
    """One message received from the DLQ.

    Attributes
    ----------
    message_id : str
        SQS message id (stable across receives).
    receipt_handle : str
        Handle of this receive (for delete / change visibility).
    body : str
        The message body (an envelope, unless the message is poison).
    receive_count : int
        ``ApproximateReceiveCount`` (receives on the main queue plus on the DLQ).
    sent_at : datetime | None
        ``SentTimestamp``: when the message was first sent (to the main queue), UTC.
    message_attributes : Mapping[str, Any]
        SQS message attributes in the ``SendMessage`` shape; forwarded unchanged on replay.
    """

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int = 0
    sent_at: datetime | None = None
    message_attributes: Mapping[str, Any] = field(default_factory=dict)


class QueueOperationError(PipelineError):
    """A queue call failed (the adapters translate their client errors into this)."""


class DeadLetterReader(Protocol):
    """The DLQ as the replay needs it."""

    def receive(self, max_messages: int, visibility_timeout: int) -> Sequence[DlqMessage]:
        """Receive up to ``max_messages`` (1..10), hidden for ``visibility_timeout`` seconds.

        Raises :class:`QueueOperationError` on failure.
        """
        ...

    def delete(self, message: DlqMessage) -> None:
        """Delete a received message. Raises :class:`QueueOperationError` on failure."""
        ...

    def change_visibility(self, message: DlqMessage, timeout_seconds: int) -> None:
        """Set a received message's visibility timeout (0 = visible again now).

        Raises :class:`QueueOperationError` on failure.
        """
        ...

    def approximate_depth(self) -> int | None:
        """Approximate number of messages in the queue (visible + in flight), if known."""
        ...


class MainQueueSender(Protocol):
    """The main queue as the replay needs it."""

    def send(self, body: str, message_attributes: Mapping[str, Any]) -> None:
        """Send one message. Raises :class:`QueueOperationError` when it was not accepted."""
        ...


# --------------------------------------------------------------------------- rate limit


class RateLimiter:
    """Token bucket of capacity 1: consecutive acquisitions are at least ``1/rate`` s apart.

    Parameters
    ----------
    rate_per_second : float | None
        Tokens per second; ``None`` disables the limit.
    clock : Callable[[], float]
        Monotonic clock in seconds (injectable for tests).
    sleep : Callable[[float], None]
        Sleep for seconds (injectable for tests).
    """

    def __init__(
        self,
        rate_per_second: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = 0.0 if rate_per_second is None else 1.0 / rate_per_second
        self._clock = clock
        self._sleep = sleep
        self._next_at: float | None = None

    def delay(self) -> float:
        """Seconds :meth:`acquire` would sleep now (0 when a token is available)."""
        if self._next_at is None or self.interval == 0:
            return 0.0
        return max(0.0, self._next_at - self._clock())

    def acquire(self) -> float:
        """Wait for a token; return the seconds slept."""
        wait = self.delay()
        if wait > 0:
            self._sleep(wait)
        now = self._clock()
        self._next_at = max(now, self._next_at or now) + self.interval
        return wait


# --------------------------------------------------------------------------- the run


Outcome = Literal["replayed", "would_replay", "skipped", "malformed", "failed", "delete_failed"]


@dataclass(frozen=True)
class MessageResult:
    """What happened to one examined message (given to the ``on_message`` callback)."""

    message: DlqMessage
    envelope: Envelope | None
    outcome: Outcome
    reason: str | None = None


@dataclass
class ReplayReport:
    """The result of a run.

    Attributes
    ----------
    examined : int
        Distinct DLQ messages looked at.
    matched : int
        Of those, envelopes matching the filter (in a dry run: what would move).
    replayed : int
        Sent to the main queue (and, unless counted in ``delete_failed``, deleted from the DLQ).
    skipped : int
        Not matching the filter, or malformed; left in the DLQ, visible again.
    failed : int
        Matching, but the send to the main queue failed; left in the DLQ, visible again.
    malformed : int
        Of ``skipped``, bodies that are not valid envelopes (need a human).
    delete_failed : int
        Of ``replayed``, sent but not deleted from the DLQ (a later replay repeats them; harmless).
    dry_run : bool
        Whether this was a dry run.
    remaining : int | None
        Approximate DLQ depth after the run (visible + in flight; SQS's counters lag by up to a
        minute), ``None`` when it could not be read.
    complete : bool
        True when the run went through every message it could see (``stopped == "drained"``).
    stopped : str
        Why the run ended: ``drained`` (nothing more to see, see the module docstring),
        ``max_messages``,
        ``time_limit`` (stopped before the caller's timeout), ``send_failures`` (too many
        consecutive send failures), ``receive_failed``.
    would_replay : list[dict]
        Dry run only: the first :data:`MAX_LISTED` matching deliveries.
    """

    dry_run: bool
    examined: int = 0
    matched: int = 0
    replayed: int = 0
    skipped: int = 0
    failed: int = 0
    malformed: int = 0
    delete_failed: int = 0
    remaining: int | None = None
    complete: bool = False
    stopped: str = "drained"
    error: str | None = None
    would_replay: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (``error``/``would_replay`` only when relevant)."""
        out: dict[str, Any] = {
            "examined": self.examined,
            "matched": self.matched,
            "replayed": self.replayed,
            "skipped": self.skipped,
            "failed": self.failed,
            "malformed": self.malformed,
            "delete_failed": self.delete_failed,
            "dry_run": self.dry_run,
            "remaining": self.remaining,
            "complete": self.complete,
            "stopped": self.stopped,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.dry_run:
            out["would_replay"] = list(self.would_replay)
        return out


def replayed_envelope(envelope: Envelope) -> Envelope:
    """The envelope as it goes back to the main queue: ``replay_count + 1``, ``gate="replayed"``."""
    return envelope.model_copy(
        update={"replay_count": envelope.replay_count + 1, "gate": "replayed"}
    )


def summary(envelope: Envelope, message: DlqMessage) -> dict[str, Any]:
    """Short description of a DLQ delivery (no body, no headers)."""
    return {
        "message_id": message.message_id,
        "source": envelope.source,
        "delivery_id": envelope.delivery_id,
        "event_type": envelope.event_type,
        "received_at": envelope.received_at.isoformat(),
        "replay_count": envelope.replay_count,
        "receive_count": message.receive_count,
    }


class _Stop(Exception):  # internal control flow, not an error
    def __init__(self, reason: StopReason) -> None:
        self.reason = reason


def replay(
    request: ReplayRequest,
    dlq: DeadLetterReader,
    main_queue: MainQueueSender,
    *,
    remaining_time_ms: Callable[[], int] | None = None,
    safety_margin_ms: int = DEFAULT_SAFETY_MARGIN_MS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_message: Callable[[MessageResult], None] | None = None,
    max_consecutive_failures: int = 5,
) -> ReplayReport:
    """Move matching DLQ messages back to the main queue (or, in a dry run, count them).

    Parameters
    ----------
    request : ReplayRequest
        Validated request (filter, dry run, max messages, rate).
    dlq, main_queue : DeadLetterReader, MainQueueSender
        The queues (see the module docstring for what is done with each message).
    remaining_time_ms : Callable[[], int] | None
        Milliseconds the caller has left (Lambda ``context.get_remaining_time_in_millis``);
        ``None`` = no time limit. The run stops, releasing messages it holds, as soon as less
        than ``safety_margin_ms`` would remain (also before a rate-limit sleep that would cross
        it), and reports ``stopped="time_limit"``.
    safety_margin_ms : int
        Milliseconds kept in reserve before the caller's timeout.
    clock, sleep : Callable
        Monotonic clock (s) and sleep (s) used by the rate limiter (injectable for tests).
    on_message : Callable[[MessageResult], None] | None
        Called after each examined message (progress display, dry-run listing).
    max_consecutive_failures : int
        Stop (``stopped="send_failures"``) after this many send failures in a row.

    Returns
    -------
    ReplayReport
        Counts, ``remaining`` (approximate DLQ depth after the run) and why the run stopped.
    """
    report = ReplayReport(dry_run=request.dry_run)
    limiter = RateLimiter(None if request.dry_run else request.rate_per_second, clock, sleep)
    seen: set[str] = set()
    consecutive_failures = 0

    def check_time() -> None:
        if _out_of_time(remaining_time_ms, safety_margin_ms, 0.0):
            raise _Stop("time_limit")

    def release(message: DlqMessage) -> None:
        # On failure it becomes visible anyway when its visibility timeout runs out.
        with contextlib.suppress(QueueOperationError):
            dlq.change_visibility(message, 0)

    def finish(result: MessageResult) -> None:
        if on_message is not None:
            on_message(result)

    held: list[DlqMessage] = []
    parked: dict[str, DlqMessage] = {}
    idle_receives = 0
    try:
        while True:
            budget = request.max_messages - report.examined
            if budget <= 0:
                raise _Stop("max_messages")
            check_time()
            batch = min(SQS_MAX_BATCH, budget)
            try:
                received = list(dlq.receive(batch, _visibility_for(batch, limiter.interval)))
            except QueueOperationError as exc:
                report.error = str(exc)
                raise _Stop("receive_failed") from None
            if not received:
                raise _Stop("drained")
            held = []
            for message in received:
                if message.message_id in seen:
                    parked[message.message_id] = message  # newest receipt handle wins
                elif all(m.message_id != message.message_id for m in held):
                    held.append(message)
            if not held:
                idle_receives += 1
                if idle_receives >= MAX_IDLE_RECEIVES:
                    raise _Stop("drained")
                continue
            idle_receives = 0
            while held:
                message = held[0]
                check_time()
                seen.add(message.message_id)
                report.examined += 1
                try:
                    envelope = Envelope.from_json(message.body)
                except MalformedEnvelopeError as exc:
                    report.skipped += 1
                    report.malformed += 1
                    release(held.pop(0))
                    finish(MessageResult(message, None, "malformed", str(exc)))
                    continue
                if not request.filter.matches(envelope):
                    report.skipped += 1
                    release(held.pop(0))
                    finish(MessageResult(message, envelope, "skipped", "filter"))
                    continue
                report.matched += 1
                if request.dry_run:
                    if len(report.would_replay) < MAX_LISTED:
                        report.would_replay.append(summary(envelope, message))
                    release(held.pop(0))
                    finish(MessageResult(message, envelope, "would_replay"))
                    continue
                if _out_of_time(remaining_time_ms, safety_margin_ms, limiter.delay()):
                    # Not examined after all: it stays for the next run.
                    seen.discard(message.message_id)
                    report.examined -= 1
                    report.matched -= 1
                    raise _Stop("time_limit")
                limiter.acquire()
                held.pop(0)
                try:
                    main_queue.send(
                        replayed_envelope(envelope).to_json(), message.message_attributes
                    )
                except QueueOperationError as exc:
                    report.failed += 1
                    consecutive_failures += 1
                    release(message)
                    finish(MessageResult(message, envelope, "failed", str(exc)))
                    if consecutive_failures >= max_consecutive_failures:
                        raise _Stop("send_failures") from None
                    continue
                consecutive_failures = 0
                report.replayed += 1
                try:
                    dlq.delete(message)
                except QueueOperationError as exc:
                    report.delete_failed += 1
                    finish(MessageResult(message, envelope, "delete_failed", str(exc)))
                    continue
                finish(MessageResult(message, envelope, "replayed"))
    except _Stop as stop:
        report.stopped = stop.reason
    finally:
        for message in [*held, *parked.values()]:
            release(message)
    report.complete = report.stopped == "drained"
    try:
        report.remaining = dlq.approximate_depth()
    except QueueOperationError:
        report.remaining = None
    return report


def _out_of_time(
    remaining_time_ms: Callable[[], int] | None, safety_margin_ms: int, wait_seconds: float
) -> bool:
    """Whether waiting ``wait_seconds`` would leave less than the safety margin."""
    if remaining_time_ms is None:
        return False
    return remaining_time_ms() - wait_seconds * 1000 < safety_margin_ms


def _visibility_for(batch: int, interval: float) -> int:
    """Visibility timeout (s) long enough to work through a batch at the rate limit."""
    seconds = math.ceil(batch * interval) + VISIBILITY_MARGIN_SECONDS
    return min(seconds, MAX_VISIBILITY_SECONDS)


__all__ = [
    "DeadLetterReader",
    "DlqMessage",
    "InvalidReplayRequestError",
    "MainQueueSender",
    "MessageResult",
    "QueueOperationError",
    "RateLimiter",
    "ReplayFilter",
    "ReplayReport",
    "ReplayRequest",
    "replay",
    "replayed_envelope",
]
