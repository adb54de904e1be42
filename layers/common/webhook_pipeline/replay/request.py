"""The replay request: which dead-lettered deliveries to move, how many, how fast, whether to
move them at all (dry run)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import InvalidReplayRequestError

#: Upper bound of ``max_messages`` in one run.
MAX_MESSAGES_LIMIT = 100_000


#: Upper bound of ``rate_per_second`` (SQS standard queues take far more; this guards typos).
MAX_RATE_PER_SECOND = 1_000.0


#: Lower bound of ``rate_per_second``: one send per 100 s (a smaller rate would sleep for ages).
MIN_RATE_PER_SECOND = 0.01


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
        return naive_times_as_utc(data, ("received_after", "received_before"))

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


def naive_times_as_utc(data: Any, keys: tuple[str, ...]) -> Any:
    """A copy of the mapping ``data`` whose ``keys`` hold times without a zone read as UTC
    (anything else, ``data`` itself: pydantic reports it)."""
    if not isinstance(data, Mapping):
        return data
    data = dict(data)
    for key in keys:
        data[key] = _assume_utc(data.get(key))
    return data


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
        default=None, ge=MIN_RATE_PER_SECOND, le=MAX_RATE_PER_SECOND, strict=True
    )  # strict: a number (an integer is fine), never a boolean or a string such as "5"
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
