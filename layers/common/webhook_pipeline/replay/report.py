"""What a replay run reports: one :class:`MessageResult` per examined DLQ message (to the
``on_message`` callback) and the :class:`ReplayReport` of the run
(:func:`webhook_pipeline.replay.run.replay`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.replay.ports import DlqMessage

ReplayOutcome = Literal[
    "replayed", "would_replay", "skipped", "malformed", "failed", "delete_failed"
]


@dataclass(frozen=True)
class MessageResult:
    """What happened to one examined message (given to the ``on_message`` callback)."""

    message: DlqMessage
    envelope: Envelope | None
    outcome: ReplayOutcome
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
        Dry run only: the first :data:`~webhook_pipeline.replay.run.MAX_LISTED` matching deliveries.
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
