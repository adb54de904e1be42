"""One archived delivery, how archive objects are laid out in S3, and deduplication on read.

An archive object is gzip-compressed JSON Lines, one :class:`ArchiveRecord` per line, all of one
source and one hour of receipt, under::

    archive/source=<source>/hour=<YYYY-MM-DD-HH>/<YYYYMMDDTHHMMSSffffffZ>-<32 hex>.jsonl.gz

The hour is the hour of ``received_at`` (UTC), so a window of receipt times reads only its own
partitions; the partition names are Hive-style, as the Athena table's partition projection
(``template.yaml``) reads them.

The archive is written at least once (a retried attempt, or a redelivered archive message, writes
another line for the same delivery), so readers deduplicate: :func:`dedupe` keeps one line per
(source, delivery id, body SHA-256), the one with the most final outcome (``applied``, then
``stale``, then ``duplicate``, then a failed attempt), the earliest archived among equals. Two
deliveries with one id and different bytes (both accepted, for example while the gate was
bypassed) are both kept: each is a delivery ingest accepted.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from webhook_pipeline.envelope import sha256_hex

ARCHIVE_PREFIX = "archive/"
RECORD_VERSION: Literal[1] = 1
#: ``received_at`` and ``archived_at`` are written in this fixed-width UTC form, so that string
#: order is time order (Athena and the local reader compare them as strings).
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
HOUR_FORMAT = "%Y-%m-%d-%H"
#: Outcomes an attempt can archive, most final first (the order :func:`dedupe` keeps).
OUTCOME_RANK: dict[str, int] = {
    "applied": 0,
    "stale": 1,
    "duplicate": 2,
    "retry": 3,
    "malformed": 3,
    "bug": 3,
}
OUTCOMES = tuple(OUTCOME_RANK)


def format_time(moment: datetime) -> str:
    """``moment`` as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC; a naive value is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime(TIME_FORMAT)


def parse_time(text: str) -> datetime:
    """The inverse of :func:`format_time` (raises ``ValueError`` on another form)."""
    return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=UTC)


def hour_of(moment: datetime) -> str:
    """The partition hour of ``moment``: ``YYYY-MM-DD-HH`` (UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime(HOUR_FORMAT)


def partition_prefix(source: str, hour: str) -> str:
    """``archive/source=<source>/hour=<hour>/``: the keys of one source and hour."""
    return f"{ARCHIVE_PREFIX}source={source}/hour={hour}/"


def object_key(source: str, hour: str, archived_at: datetime, unique: str | None = None) -> str:
    """A new object's key in the partition of ``source`` and ``hour`` (``unique``: 32 hex
    characters, random by default, so two writers never overwrite each other)."""
    stamp = archived_at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{partition_prefix(source, hour)}{stamp}-{unique or uuid.uuid4().hex}.jsonl.gz"


class CorruptRecordError(ValueError):
    """An archive line that cannot be read, or whose body does not match its SHA-256."""


class ArchiveRecord(BaseModel):
    """One delivery as archived, with the verdict of the attempt that archived it.

    Attributes
    ----------
    v : int
        Record version (1).
    source, provider : str, str | None
        Source name and its provider (``None`` when the envelope did not name one).
    delivery_id : str
        The sender's delivery id.
    event_type, resource_key : str | None
        As ingest read them from what the provider signs.
    sequence : int | None
        The ordering value for ``resource_key``.
    received_at : str
        Receipt time at ingest, :data:`TIME_FORMAT` (UTC).
    verified_with : str | None
        Which of the source's secrets verified the signature (``"current"``, ``"previous"``),
        ``"unsigned"`` for a source whose provider signs nothing, ``None`` when not known.
    body_sha256 : str
        Hex SHA-256 of the exact received bytes.
    body_size : int
        Their size in bytes.
    content_sha256 : str | None
        The digest copies are compared with, when the provider declares volatile fields.
    headers : dict[str, str]
        The forwarded request headers (lower-cased names), credentials redacted.
    signed_headers : dict[str, str]
        The request headers the provider's signature covers (lower-cased names), credentials
        redacted.
    body : str | None
        The exact bytes, when they are UTF-8 (a JSON string round-trips them exactly).
    body_base64 : str | None
        Base64 of the exact bytes, when they are not UTF-8. Exactly one of the two is set.
    outcome : str
        What the archiving attempt ended in (:data:`OUTCOMES`).
    recorded_outcome : str | None
        For a ``duplicate`` with the recorded copy's bytes: the outcome recorded for the
        delivery (``applied``, ``stale``); :attr:`verdict` is the one searched and kept.
    reason : str | None
        Why it was stale, a duplicate or failed (short, no body content).
    archived_at : str
        When the processor archived it, :data:`TIME_FORMAT` (UTC).
    message_id : str | None
        The SQS message id of the attempt.
    receive_count : int
        Which receive of that message it was.
    gate : str
        ``claimed``, ``bypassed`` or ``replayed`` (the envelope's).
    replay_count : int
        How many times a replay sent the envelope back.
    batch_index, batch_count : int | None
        For one event of a batched POST: its position and the POST's number of events.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    v: Literal[1] = RECORD_VERSION
    source: str = Field(min_length=1)
    provider: str | None = None
    delivery_id: str = Field(min_length=1)
    event_type: str | None = None
    resource_key: str | None = None
    sequence: StrictInt | None = None
    received_at: str
    verified_with: str | None = None
    body_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    body_size: StrictInt = Field(ge=0)
    content_sha256: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    signed_headers: dict[str, str] = Field(default_factory=dict)
    body: str | None = None
    body_base64: str | None = None
    outcome: str
    recorded_outcome: str | None = None
    reason: str | None = None
    archived_at: str
    message_id: str | None = None
    receive_count: StrictInt = 1
    gate: str = "claimed"
    replay_count: StrictInt = 0
    batch_index: StrictInt | None = None
    batch_count: StrictInt | None = None

    @property
    def verdict(self) -> str:
        """The delivery's verdict as this line knows it: the recorded outcome of a duplicate
        with the recorded copy's bytes, else :attr:`outcome`."""
        return self.recorded_outcome or self.outcome

    @staticmethod
    def body_fields(data: bytes) -> dict[str, str]:
        """``{"body": text}`` for UTF-8 bytes, ``{"body_base64": ...}`` otherwise."""
        try:
            return {"body": data.decode("utf-8")}
        except UnicodeDecodeError:
            return {"body_base64": base64.b64encode(data).decode("ascii")}

    def body_bytes(self) -> bytes:
        """The exact received bytes, checked against ``body_sha256``.

        Raises
        ------
        CorruptRecordError
            Neither or both body fields, bad base64, or bytes whose SHA-256 is not
            ``body_sha256``.
        """
        if (self.body is None) == (self.body_base64 is None):
            raise CorruptRecordError(f"{self.delivery_id}: exactly one of body and body_base64")
        if self.body is not None:
            data = self.body.encode("utf-8")
        else:
            try:
                data = base64.b64decode(self.body_base64 or "", validate=True)
            except ValueError as exc:
                raise CorruptRecordError(f"{self.delivery_id}: body_base64: {exc}") from None
        if sha256_hex(data) != self.body_sha256:
            raise CorruptRecordError(f"{self.delivery_id}: body does not match body_sha256")
        return data

    @property
    def received(self) -> datetime:
        """``received_at`` as an aware datetime."""
        return parse_time(self.received_at)

    @property
    def identity(self) -> tuple[str, str, str]:
        """``(source, delivery_id, body_sha256)``: what :func:`dedupe` keeps one line of."""
        return (self.source, self.delivery_id, self.body_sha256)

    def to_line(self) -> str:
        """One JSON line (no newline), ``None`` fields left out."""
        return self.model_dump_json(exclude_none=True)


@dataclass(frozen=True)
class LineProblem:
    """A line of an archive object that could not be read: where, and why (no body content)."""

    key: str
    line: int
    reason: str


def encode_object(records: Iterable[ArchiveRecord]) -> bytes:
    """The gzip-compressed JSON Lines of ``records`` (one object's content)."""
    text = "".join(record.to_line() + "\n" for record in records)
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)


@functools.cache
def _fast_gunzip() -> Callable[[bytes], bytes] | None:
    try:
        from isal.igzip import decompress
    except ImportError:  # optional (the operator CLI installs it, the Lambda layer does not)
        return None
    fast: Callable[[bytes], bytes] = decompress
    return fast


def _gunzip(data: bytes) -> bytes:
    """``gzip.decompress(data)``: by ISA-L when installed (about twice as fast), with gzip's
    own result or exception whenever ISA-L does not accept the data."""
    fast = _fast_gunzip()
    if fast is not None:
        try:
            return fast(data)
        except Exception:  # noqa: S110 (gzip below gives the error that is reported)
            pass
    return gzip.decompress(data)


def decode_text(key: str, data: bytes) -> str | LineProblem:
    """The JSON Lines text of one archive object, or the problem (line 0) that it is not gzip
    UTF-8."""
    try:
        return _gunzip(data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        return LineProblem(key, 0, f"not a gzip JSON Lines object: {type(exc).__name__}")


def decode_object(key: str, data: bytes) -> tuple[list[ArchiveRecord], list[LineProblem]]:
    """The records of one archive object, and a problem per line that is not a record.

    Never raises: an object that is not gzip is one problem at line 0.
    """
    text = decode_text(key, data)
    if isinstance(text, LineProblem):
        return [], [text]
    records: list[ArchiveRecord] = []
    problems: list[LineProblem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        read = read_line(key, number, line)
        if isinstance(read, LineProblem):
            problems.append(read)
        else:
            records.append(read)
    return records, problems


def read_line(key: str, number: int, line: str) -> ArchiveRecord | LineProblem:
    """Line ``number`` of object ``key`` validated as a record, or the problem that it is not
    one (the fields that fail, at most 5; never body content)."""
    try:
        return ArchiveRecord.model_validate_json(line)
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in e["loc"]) or "line" for e in exc.errors()})
        return LineProblem(key, number, f"not a record: {', '.join(fields[:5])}")
    except json.JSONDecodeError:
        return LineProblem(key, number, "not JSON")


def _rank(record: ArchiveRecord) -> tuple[int, str]:
    return (OUTCOME_RANK.get(record.verdict, len(OUTCOME_RANK)), record.archived_at)


def dedupe(records: Iterable[ArchiveRecord]) -> Iterator[ArchiveRecord]:
    """One record per (source, delivery id, body SHA-256): the most final verdict
    (:attr:`ArchiveRecord.verdict`), earliest archived among equals; yielded in order of
    (received_at, source, delivery_id, body_sha256)."""
    best: dict[tuple[str, str, str], ArchiveRecord] = {}
    for record in records:
        kept = best.get(record.identity)
        if kept is None or _rank(record) < _rank(kept):
            best[record.identity] = record
    yield from sorted(best.values(), key=lambda r: (r.received_at, *r.identity))
