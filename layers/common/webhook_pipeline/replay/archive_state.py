"""The state of a replay-from-archive job, kept in the archive bucket, and the allocation of a
reprocess generation.

Layout (the archive bucket, outside ``archive/`` so the archive's readers never see it)::

    replay-jobs/<job id>.json              the job's state (:class:`JobState`)
    replay-jobs/<job id>.<16 hex>.candidates.json.gz
                                           the job's candidates, in order, as it started
    replay-generations/<12-digit number>   one object per allocated generation (body: job id)

Generation allocation: the next number after the highest object under ``replay-generations/``
is claimed with a conditional ``PutObject`` (``If-None-Match: *``): S3 accepts exactly one writer
of a key, so two jobs never get the same generation, and a lost race moves on to the next
number. It is allocated once, when the job's state is created, and kept in the state for every
resume. The job's state is created the same way (conditional put), so two runs that start one job
at the same moment end with one state (the loser reads the winner's and checks its fingerprint).
A generation allocated by a run that died before creating the state is never used: harmless.
No table write: the replay needs only reads of the deliveries table.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from webhook_pipeline.archive.record import ArchiveRecord
from webhook_pipeline.errors import InvalidReplayRequestError

JOBS_PREFIX = "replay-jobs/"
GENERATIONS_PREFIX = "replay-generations/"
#: Attempts at claiming a generation number before giving up.
GENERATION_ATTEMPTS = 20

_TAKEN_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "412"})
_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})


class JobStateError(RuntimeError):
    """The job's state cannot be read, written or trusted (an S3 error, or a state object that
    is not a job state)."""


class JobState(BaseModel):
    """One job's progress (``replay-jobs/<job>.json``).

    Attributes
    ----------
    job : str
        Job id.
    fingerprint : str
        :meth:`ArchiveReplayRequest.fingerprint` of the request that started it.
    request : dict
        That request (JSON), for operators.
    mode : str
        ``redeliver`` or ``reprocess``.
    generation : int | None
        The reprocess generation (``None`` for redeliver).
    total : int
        Candidates of the job (after ``max_deliveries``).
    candidates_sha256 : str
        Digest of the ordered candidate identities when the job started.
    candidates_key : str
        Where those identities are kept (:meth:`JobStore.save_candidates`): a resume whose
        archive search finds other candidates (deliveries archived late, objects removed) goes
        on over these, so the cursor keeps pointing at the same delivery.
    cursor : int
        Index of the next candidate to examine (0..total).
    sent : int
        Messages sent so far (a chunk re-sent after a kill counts again).
    skipped : dict[str, int]
        Candidates not sent, by reason.
    failed : list[dict]
        Candidates that could not be sent (corrupt record, body not stored), by id (at most
        :data:`MAX_LISTED_FAILURES`).
    failed_count : int
        All of them.
    status : str
        ``running``, ``incomplete`` (stopped early; run again) or ``complete``.
    started_at, updated_at : str
        ISO-8601 UTC.
    """

    model_config = ConfigDict(extra="forbid")

    job: str
    fingerprint: str
    request: dict[str, Any]
    mode: str
    generation: int | None = None
    total: int = Field(ge=0)
    candidates_sha256: str
    candidates_key: str
    cursor: int = Field(default=0, ge=0)
    sent: int = 0
    skipped: dict[str, int] = Field(default_factory=dict)
    failed: list[dict[str, str]] = Field(default_factory=list)
    failed_count: int = 0
    status: str = "running"
    started_at: str
    updated_at: str


#: At most this many failed candidates are listed in a job's state.
MAX_LISTED_FAILURES = 1_000


def job_key(job: str) -> str:
    """``replay-jobs/<job>.json``."""
    return f"{JOBS_PREFIX}{job}.json"


class JobStore:
    """Job states and generations in the archive bucket.

    Parameters
    ----------
    s3 : botocore S3 client
    bucket : str
        The archive bucket.
    """

    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3 = s3
        self.bucket = bucket
        #: The ETag of each job's state as this store last read or wrote it: a checkpoint is
        #: written only over that version (``If-Match``), so two runs of one job at once cannot
        #: both go on (the second writer stops).
        self.etags: dict[str, str] = {}

    def load(self, job: str) -> JobState | None:
        """The job's state, ``None`` when it has none.

        Raises
        ------
        JobStateError
            Not readable, or not a job state.
        """
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=job_key(job))
            data = response["Body"].read()
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES:
                return None
            raise JobStateError(f"job {job}: state not readable: {_code(exc)}") from None
        self.etags[job] = response["ETag"]
        try:
            return JobState.model_validate_json(data)
        except ValidationError:
            raise JobStateError(f"job {job}: {job_key(job)} is not a job state") from None

    def create(self, state: JobState) -> JobState:
        """Store a new job's state unless one exists; return the state that is stored.

        Raises
        ------
        JobStateError
            S3 refused the write.
        """
        try:
            response = self.s3.put_object(
                Bucket=self.bucket,
                Key=job_key(state.job),
                Body=state.model_dump_json().encode(),
                ContentType="application/json",
                IfNoneMatch="*",
            )
        except ClientError as exc:
            if _code(exc) in _TAKEN_CODES:
                existing = self.load(state.job)
                if existing is not None:
                    return existing
            raise JobStateError(f"job {state.job}: state not written: {_code(exc)}") from None
        self.etags[state.job] = response["ETag"]
        return state

    def save(self, state: JobState) -> None:
        """Overwrite the job's state (the checkpoint), only over the version this store last
        read or wrote.

        Raises
        ------
        JobStateError
            S3 refused the write, or another run of the job wrote its state since.
        """
        conditions = {"IfMatch": self.etags[state.job]} if state.job in self.etags else {}
        try:
            response = self.s3.put_object(
                Bucket=self.bucket,
                Key=job_key(state.job),
                Body=state.model_dump_json().encode(),
                ContentType="application/json",
                **conditions,
            )
        except ClientError as exc:
            if _code(exc) in _TAKEN_CODES:
                raise JobStateError(
                    f"job {state.job}: another run of this job wrote its state since this run "
                    "read it (two runs of one job at once); this run stops"
                ) from None
            raise JobStateError(f"job {state.job}: checkpoint not written: {_code(exc)}") from None
        self.etags[state.job] = response["ETag"]

    def save_candidates(self, job: str, digest: str, identities: list[tuple[str, str, str]]) -> str:
        """Store the ordered candidate identities of a new job; return the key. The key carries
        the digest, so two runs that start one job write the same content to the same key.

        Raises
        ------
        JobStateError
            S3 refused the write.
        """
        key = f"{JOBS_PREFIX}{job}.{digest[:16]}.candidates.json.gz"
        body = gzip.compress(json.dumps([list(i) for i in identities]).encode(), mtime=0)
        try:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
        except ClientError as exc:
            raise JobStateError(f"job {job}: candidates not written: {_code(exc)}") from None
        return key

    def load_candidates(self, key: str) -> list[tuple[str, str, str]]:
        """The identities :meth:`save_candidates` stored. Raises :class:`JobStateError`."""
        try:
            data = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            return [(s, d, h) for s, d, h in json.loads(gzip.decompress(data))]
        except (ClientError, OSError, ValueError) as exc:
            raise JobStateError(f"{key}: candidates not readable: {type(exc).__name__}") from None

    def allocate_generation(self, job: str) -> int:
        """A generation number no other job has (see the module docstring).

        Raises
        ------
        JobStateError
            S3 refused, or :data:`GENERATION_ATTEMPTS` numbers were taken in a row.
        """
        number = self._highest_generation() + 1
        for _ in range(GENERATION_ATTEMPTS):
            try:
                self.s3.put_object(
                    Bucket=self.bucket,
                    Key=f"{GENERATIONS_PREFIX}{number:012d}",
                    Body=json.dumps({"job": job}).encode(),
                    IfNoneMatch="*",
                )
            except ClientError as exc:
                if _code(exc) not in _TAKEN_CODES:
                    raise JobStateError(f"generation not allocated: {_code(exc)}") from None
                number += 1
                continue
            return number
        raise JobStateError(f"generation not allocated: {GENERATION_ATTEMPTS} numbers taken")

    def _highest_generation(self) -> int:
        highest = 0
        paginator = self.s3.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=GENERATIONS_PREFIX):
                for item in page.get("Contents", []):
                    tail = item["Key"][len(GENERATIONS_PREFIX) :]
                    if tail.isdigit():
                        highest = max(highest, int(tail))
        except ClientError as exc:
            raise JobStateError(f"generations not listed: {_code(exc)}") from None
        return highest


def check_resumable(state: JobState, fingerprint: str) -> None:
    """Refuse to resume ``state`` with another request.

    Raises
    ------
    InvalidReplayRequestError
        The request's fingerprint differs (another window, filter, mode or maximum).
    """
    if state.fingerprint != fingerprint:
        raise InvalidReplayRequestError(
            f"job {state.job} was started with another request ({json.dumps(state.request)}); "
            "resume it with the same mode, window, filters and --max, or start a new job"
        )


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "error"))


@dataclass(frozen=True)
class Gone:
    """A candidate of a resumed job that the archive no longer has (reported in ``failed``)."""

    source: str
    delivery_id: str
    body_sha256: str

    @property
    def identity(self) -> tuple[str, str, str]:
        """As :attr:`ArchiveRecord.identity`."""
        return (self.source, self.delivery_id, self.body_sha256)


def new_job_id(now: datetime | None = None) -> str:
    """``<YYYYMMDDTHHMMSSZ>-<8 hex>``."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


def candidates_digest(candidates: Sequence[ArchiveRecord | Gone]) -> str:
    """Hex SHA-256 of the ordered (source, delivery id, body SHA-256) of the candidates."""
    digest = hashlib.sha256()
    for record in candidates:
        digest.update("\x1f".join(record.identity).encode() + b"\x1e")
    return digest.hexdigest()
