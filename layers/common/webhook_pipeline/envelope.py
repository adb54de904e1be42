"""The SQS message the ingest function sends and the processor and replay function read.

An envelope carries a verified delivery: who sent it, its delivery id, when it was received, the
selected headers, and the body either inline (base64 of the raw bytes) or, above the inline
threshold, as a claim-check pointer to an S3 object. ``body_size`` and ``body_sha256`` always
describe the raw bytes so the processor can check the integrity of a claim-check body.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from webhook_pipeline.bounds import (
    MAX_DELIVERY_ID_BYTES,
    MAX_EVENT_TYPE_BYTES,
    MAX_RESOURCE_KEY_BYTES,
    utf8_size,
)
from webhook_pipeline.errors import MalformedEnvelopeError

SCHEMA_VERSION: Literal[1] = 1  # the only version this code reads and writes


class BodyPointer(BaseModel):
    """Where a claim-check body lives in S3."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bucket: str
    key: str


class Reprocess(BaseModel):
    """Marks an envelope as a reprocess: a delivery already applied runs its hook again.

    Attributes
    ----------
    generation : int
        The replay generation (>= 1): the hook runs at most once per (delivery, generation).
    job : str
        The replay job that sent it (1 to 128 characters), for operators.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    generation: StrictInt = Field(ge=1)
    job: str = Field(min_length=1, max_length=128)


class Envelope(BaseModel):
    """A verified delivery on its way to the processor.

    Attributes
    ----------
    schema_version : int
        Envelope schema version (currently 1).
    source : str
        Source name.
    delivery_id : str
        The sender's delivery id (at most 256 UTF-8 bytes).
    received_at : datetime
        When the ingest function received the request (UTC).
    event_type : str | None
        Event type, when the source defines where it is (at most 256 UTF-8 bytes).
    resource_key : str | None
        The resource whose events must apply in order, when the source defines it (at most
        1,024 UTF-8 bytes). The three bounds are the ingest's (``webhook_pipeline.bounds``),
        checked again here so an envelope no ingest could have sent is ``malformed`` with that
        reason instead of a key DynamoDB refuses.
    sequence : int | None
        The ordering value of this event for ``resource_key`` (greater is newer).
    headers : dict[str, str]
        Selected request headers, lower-cased names (never signature headers).
    body_b64 : str | None
        Base64 of the raw body bytes when the body is inline.
    body_ref : BodyPointer | None
        S3 location of the body when it was over the inline threshold (claim check).
    body_size : int
        Size of the raw body in bytes.
    body_sha256 : str
        Hex SHA-256 of the raw body bytes.
    content_sha256 : str | None
        The content digest duplicates are compared with, when it differs from ``body_sha256``
        (the provider declares volatile fields, such as HubSpot's ``attemptNumber``).
    batch_index, batch_count : int | None
        For one event of a batched POST (many events in one request): its position and the
        number of events in that POST.
    replay_count : int
        How many times the replay function has sent this envelope back to the main queue.
    gate : Literal["claimed", "bypassed", "replayed"]
        Whether the Redis gate claimed this delivery, was bypassed (fail-open), or the envelope
        came from a replay.
    reprocess : Reprocess | None
        Set by a replay from the archive in reprocess mode: the processor writes no record and
        moves no watermark; it runs the hook of an ``applied`` delivery again, once per
        generation (``webhook_pipeline.process.reprocess``).
    provider : str | None
        The source's provider name (``"stripe"``), for the archive; ``None`` in an envelope
        written before ingest set it.
    verified_with : Literal["current", "previous", "unsigned"] | None
        Which of the source's secrets verified the request (``"unsigned"``: the provider signs
        nothing, a shared token only admitted it); ``None`` when not known (older envelopes).
    signed_headers : dict[str, str]
        The request headers the provider's signature covered (lower-cased names), credentials
        redacted (:func:`webhook_pipeline.redaction.redact_headers`); empty when none (or an
        older envelope).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    source: str = Field(min_length=1, max_length=64)
    delivery_id: str = Field(min_length=1)
    received_at: datetime
    event_type: str | None = None
    resource_key: str | None = None
    sequence: StrictInt | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    body_b64: str | None = None
    body_ref: BodyPointer | None = None
    body_size: StrictInt = Field(ge=0)
    body_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    content_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    batch_index: StrictInt | None = Field(default=None, ge=0)
    batch_count: StrictInt | None = Field(default=None, ge=1)
    replay_count: int = Field(default=0, ge=0)
    gate: Literal["claimed", "bypassed", "replayed"] = "claimed"
    reprocess: Reprocess | None = None
    provider: str | None = None
    verified_with: Literal["current", "previous", "unsigned"] | None = None
    signed_headers: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_body(self) -> Envelope:
        if (self.body_b64 is None) == (self.body_ref is None):
            raise ValueError("exactly one of body_b64 and body_ref")
        if (self.resource_key is None) != (self.sequence is None):
            raise ValueError("resource_key and sequence go together")
        if (self.batch_index is None) != (self.batch_count is None):
            raise ValueError("batch_index and batch_count go together")
        for name, value, bound in (
            ("delivery_id", self.delivery_id, MAX_DELIVERY_ID_BYTES),
            ("event_type", self.event_type, MAX_EVENT_TYPE_BYTES),
            ("resource_key", self.resource_key, MAX_RESOURCE_KEY_BYTES),
        ):
            if value is not None and utf8_size(value) > bound:
                raise ValueError(f"{name} is over {bound} UTF-8 bytes")
        return self

    @property
    def content_digest(self) -> str:
        """The digest two copies of this delivery are compared with."""
        return self.content_sha256 or self.body_sha256

    def to_json(self) -> str:
        """Serialize for an SQS message body (compact JSON)."""
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Envelope:
        """Parse an SQS message body.

        Raises
        ------
        MalformedEnvelopeError
            Not JSON, or not a valid envelope of a known schema version. The message names the
            fields and error types only, never their values (a body must not reach a log line,
            a failure note or ``dlq peek`` through an error message).
        """
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            problems = [
                f"{'.'.join(str(p) for p in err['loc']) or 'envelope'}: "
                # this model's own checks name a rule, never a value: their message is kept
                + (err["msg"] if err["type"] == "value_error" else err["type"])
                for err in exc.errors(include_url=False, include_input=False, include_context=False)
            ]
            raise MalformedEnvelopeError(
                f"not a valid envelope: {exc.error_count()} error(s): {'; '.join(problems[:5])}"
            ) from None


def claim_check_prefix(source: str) -> str:
    """The key prefix of every claim-check body of ``source``: ``"bodies/<source>/"``.

    The ingest function writes under it; the processor follows only pointers under it (in the
    configured payload bucket), so an envelope cannot make it read another source's bodies.
    """
    return f"bodies/{source}/"


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def utcnow() -> datetime:
    """Timezone-aware current UTC time."""
    return datetime.now(UTC)
