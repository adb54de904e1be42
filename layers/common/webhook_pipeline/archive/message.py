"""The message the processor sends to the archive queue for each parsed envelope it handled, and
how the archiver reads it back.

One message per processing attempt: the envelope exactly as the processor parsed it, and the
attempt's verdict::

    {"v": 1, "envelope": {...}, "outcome": "applied", "reason": null,
     "message_id": "...", "receive_count": 1, "archived_at": "2026-01-01T00:00:00.000000Z"}

The body travels as the envelope carries it (inline base64, or the claim-check pointer the
archiver follows), so the message is at most the envelope plus a few hundred bytes.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from webhook_pipeline.archive.record import OUTCOMES
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import MalformedEnvelopeError

__all__ = ["ArchiveMessage", "MalformedArchiveMessageError"]


class MalformedArchiveMessageError(MalformedEnvelopeError):
    """An archive queue message that is not an :class:`ArchiveMessage` (names fields only)."""


class ArchiveMessage(BaseModel):
    """One attempt's archive message.

    Attributes
    ----------
    v : int
        Message version (1).
    envelope : Envelope
        The envelope as the processor parsed it.
    outcome : str
        The attempt's outcome (one of :data:`webhook_pipeline.archive.record.OUTCOMES`).
    reason : str | None
        Why it was stale, a duplicate or failed (short, no body content; at most 1,000
        characters).
    message_id : str
        The main queue's SQS message id of the attempt.
    receive_count : int
        Which receive of that message it was (1 for the first).
    archived_at : str
        When the processor sent it, ``%Y-%m-%dT%H:%M:%S.%fZ`` (UTC).
    recorded_outcome : {"applied", "stale"} | None
        For a ``duplicate`` with the recorded copy's bytes: the outcome recorded for the
        delivery; ``None`` otherwise.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    envelope: Envelope
    outcome: str
    reason: str | None = Field(default=None, max_length=1000)
    message_id: str
    receive_count: StrictInt = Field(default=1, ge=1)
    archived_at: str
    recorded_outcome: Literal["applied", "stale"] | None = None

    def to_json(self) -> str:
        """The message body: compact JSON, ``None`` fields left out."""
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> ArchiveMessage:
        """Parse a message body.

        Raises
        ------
        MalformedArchiveMessageError
            Not JSON, not this shape, an outcome not in ``OUTCOMES``; the message names the
            fields and error types only, never a value.
        """
        try:
            message = cls.model_validate_json(text)
        except ValidationError as exc:
            where = sorted({".".join(str(p) for p in e["loc"]) or "message" for e in exc.errors()})
            raise MalformedArchiveMessageError(
                f"not an archive message: {exc.error_count()} error(s) at {', '.join(where[:5])}"
            ) from None
        except json.JSONDecodeError:  # pragma: no cover - pydantic reports JSON errors itself
            raise MalformedArchiveMessageError("not an archive message: not JSON") from None
        if message.outcome not in OUTCOMES:
            raise MalformedArchiveMessageError("not an archive message: unknown outcome")
        return message
