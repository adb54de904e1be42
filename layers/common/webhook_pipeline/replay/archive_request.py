"""The request of a replay from the archive: which archived deliveries, which mode, how fast, how
many, which job (:class:`ArchiveReplayRequest`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from webhook_pipeline.archive.predicate import PredicateError, parse_predicate
from webhook_pipeline.archive.query import ArchiveFilter
from webhook_pipeline.archive.record import OUTCOMES
from webhook_pipeline.errors import InvalidReplayRequestError
from webhook_pipeline.replay.request import (
    MAX_MESSAGES_LIMIT,
    MAX_RATE_PER_SECOND,
    _describe,
    naive_times_as_utc,
)

#: A job id: what S3 keys and the envelope's ``reprocess.job`` accept.
JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

ReplayMode = Literal["redeliver", "reprocess"]


class ArchiveReplayRequest(BaseModel):
    """A replay from the archive (the ``from_archive`` event of the replay function, or
    ``webhook-pipeline replay --from-archive``).

    Attributes
    ----------
    mode : "redeliver" | "reprocess"
        Required, no default. ``redeliver``: deliveries whose delivery record is missing are sent
        to the main queue again. ``reprocess``: deliveries whose record is ``applied`` are sent
        with ``reprocess={generation, job}`` so their hooks run once more.
    start, end : datetime
        Required receipt-time window, ``start <= received_at < end`` (a time without a zone is
        UTC); ``end`` must be later than ``start``.
    sources, event_types, outcomes, resource_key, delivery_id_prefix
        As :class:`webhook_pipeline.archive.query.ArchiveFilter` (empty = any); ``outcomes`` are
        archive outcomes (``applied``, ``stale``, ...).
    where : tuple[str, ...]
        Conditions on body fields, all of which must hold, each in the grammar of
        ``archive search --where`` (:func:`webhook_pipeline.archive.predicate.parse_predicate`).
    dry_run : bool
        Count exactly what would be sent (after the record checks) and list a sample; send
        nothing, write no job state.
    rate_per_second : float | None
        At most this many messages per second (> 0, at most 1000); ``None`` = unlimited.
    max_deliveries : int | None
        Consider at most the first N candidates (1..100000) of the window, in archive order.
    job : str | None
        Job id (``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``); the same id resumes the job. ``None``: a
        new id is made for a real run.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: ReplayMode
    start: AwareDatetime
    end: AwareDatetime
    sources: tuple[str, ...] = ()
    event_types: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    resource_key: str | None = Field(default=None, min_length=1)
    delivery_id_prefix: str | None = Field(default=None, min_length=1)
    where: tuple[str, ...] = ()
    dry_run: bool = Field(default=False, strict=True)
    rate_per_second: float | None = Field(default=None, gt=0, le=MAX_RATE_PER_SECOND, strict=True)
    max_deliveries: int | None = Field(default=None, ge=1, le=MAX_MESSAGES_LIMIT, strict=True)
    job: str | None = Field(default=None, pattern=JOB_ID_PATTERN)

    @model_validator(mode="before")
    @classmethod
    def _naive_is_utc(cls, data: Any) -> Any:
        return naive_times_as_utc(data, ("start", "end"))

    @model_validator(mode="after")
    def _checked(self) -> ArchiveReplayRequest:
        if self.start >= self.end:
            raise ValueError(
                "the window's end must be later than its start "
                f"(got start {self.start.isoformat()}, end {self.end.isoformat()})"
            )
        unknown = sorted(set(self.outcomes) - set(OUTCOMES))
        if unknown:
            raise ValueError(f"unknown outcome(s) {unknown}: use {', '.join(OUTCOMES)}")
        for text in self.where:
            try:
                parse_predicate(text)
            except PredicateError as exc:
                raise ValueError(f"where: {exc}") from None
        return self

    @classmethod
    def parse(cls, data: Any) -> ArchiveReplayRequest:
        """Validate a raw request (a mapping, or a JSON string).

        Raises
        ------
        InvalidReplayRequestError
            With every problem listed as ``field: reason``.
        """
        try:
            if isinstance(data, str | bytes):
                return cls.model_validate_json(data)
            if not isinstance(data, Mapping):
                raise InvalidReplayRequestError(
                    f"request must be a JSON object, got {type(data).__name__}"
                )
            return cls.model_validate(data)
        except ValidationError as exc:
            raise InvalidReplayRequestError(_describe(exc)) from None

    def archive_filter(self) -> ArchiveFilter:
        """The :class:`ArchiveFilter` that selects the candidates."""
        return ArchiveFilter(
            sources=self.sources,
            start=self.start,
            end=self.end,
            event_types=self.event_types,
            outcomes=self.outcomes,
            resource_key=self.resource_key,
            delivery_id_prefix=self.delivery_id_prefix,
            where=tuple(parse_predicate(text) for text in self.where),
        )

    def fingerprint(self) -> str:
        """Hex SHA-256 of what selects and treats the candidates: mode, window, filter and
        ``max_deliveries``. Not the rate (a resumed job may go faster or slower), the dry run
        flag or the job id."""
        selection = self.model_dump(mode="json", exclude={"rate_per_second", "dry_run", "job"})
        text = json.dumps(selection, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()
