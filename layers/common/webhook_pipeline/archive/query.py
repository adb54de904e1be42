"""Reading the archive: which objects a filter needs, their records deduplicated and filtered.

The local reader of ``webhook-pipeline archive search``, the console's Archive page and replay
from the archive all select deliveries with :func:`search`; at scale the same filter is a SQL
query over the Athena table (``webhook_pipeline_ops.archive.athena``), which must give the same
answers (a test runs both over one fixture).
"""

from __future__ import annotations

import contextlib
import fnmatch
import multiprocessing
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from webhook_pipeline.archive.record import (
    ARCHIVE_PREFIX,
    ArchiveRecord,
    LineProblem,
    decode_object,
    dedupe,
    format_time,
    hour_of,
    partition_prefix,
)
from webhook_pipeline.archive.scan import BodyPredicate as BodyPredicate
from webhook_pipeline.archive.scan import S3Settings as S3Settings
from webhook_pipeline.archive.scan import (
    body_matches,
    fetch_and_decode,
    fetch_object,
)
from webhook_pipeline.archive.scan import decode_selected as _screened


@dataclass(frozen=True)
class ArchiveFilter:
    """Which archived deliveries to select (every field optional; all given ones must match).

    Attributes
    ----------
    sources : tuple[str, ...]
        Source names (empty: every source found under ``archive/``).
    start, end : datetime | None
        Receipt-time window, ``start <= received_at < end`` (UTC).
    event_types : tuple[str, ...]
        Event type globs (``fnmatch``, case-sensitive); a delivery without an event type
        matches none.
    outcomes : tuple[str, ...]
        Verdicts after deduplication (``applied``, ``stale``, ``duplicate``, ``retry``,
        ``malformed``, ``bug``; :attr:`ArchiveRecord.verdict`: a delivery archived only by a
        redelivery is found by the outcome recorded for it).
    resource_key : str | None
        Exact resource key.
    delivery_id_prefix : str | None
        Delivery ids starting with this text.
    where : tuple[BodyPredicate, ...]
        Conditions on body fields, all of which must hold (a body that is not JSON matches
        none).
    """

    sources: tuple[str, ...] = ()
    start: datetime | None = None
    end: datetime | None = None
    event_types: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    resource_key: str | None = None
    delivery_id_prefix: str | None = None
    where: tuple[BodyPredicate, ...] = ()

    @cached_property
    def _bounds(self) -> tuple[str | None, str | None]:
        """The window as ``received_at`` strings (formatted once, not per record)."""
        return (
            format_time(self.start) if self.start is not None else None,
            format_time(self.end) if self.end is not None else None,
        )

    def matches(self, record: ArchiveRecord) -> bool:
        """Whether ``record`` (already deduplicated) is selected."""
        if self.sources and record.source not in self.sources:
            return False
        start, end = self._bounds
        if start is not None and record.received_at < start:
            return False
        if end is not None and record.received_at >= end:
            return False
        if self.event_types and not (
            record.event_type is not None
            and any(fnmatch.fnmatchcase(record.event_type, g) for g in self.event_types)
        ):
            return False
        if self.outcomes and record.verdict not in self.outcomes:
            return False
        if self.resource_key is not None and record.resource_key != self.resource_key:
            return False
        if self.delivery_id_prefix is not None and not record.delivery_id.startswith(
            self.delivery_id_prefix
        ):
            return False
        if self.where:
            return _body_matches(record, self.where)
        return True


def _body_matches(record: ArchiveRecord, where: Sequence[BodyPredicate]) -> bool:
    return body_matches(record.body, where)


@dataclass
class SearchResult:
    """What :func:`search` found.

    Attributes
    ----------
    records : list[ArchiveRecord]
        Matching deliveries, one per (source, delivery id, body SHA-256), in order of receipt.
    problems : list[LineProblem]
        Objects or lines that could not be read (reported, skipped).
    objects_read : int
        Archive objects read.
    """

    records: list[ArchiveRecord] = field(default_factory=list)
    problems: list[LineProblem] = field(default_factory=list)
    objects_read: int = 0


def list_sources(s3: Any, bucket: str) -> list[str]:
    """Source names that have an archive partition, sorted."""
    names: list[str] = []
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=f"{ARCHIVE_PREFIX}source=", Delimiter="/"):
        for common in page.get("CommonPrefixes", []):
            names.append(common["Prefix"][len(ARCHIVE_PREFIX) + len("source=") : -1])
    return sorted(names)


def object_keys(s3: Any, bucket: str, source: str, flt: ArchiveFilter) -> Iterator[str]:
    """Keys of the archive objects of ``source`` whose hour can hold a delivery of the window."""
    base = f"{ARCHIVE_PREFIX}source={source}/"
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": base}
    if flt.start is not None:
        # every key of an earlier hour sorts before this one
        kwargs["StartAfter"] = partition_prefix(source, hour_of(flt.start))[:-1]
    stop = None
    if flt.end is not None:
        last = flt.end - timedelta(microseconds=1)
        stop = partition_prefix(source, hour_of(last + timedelta(hours=1)))
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(**kwargs):
        for item in page.get("Contents", []):
            key = item["Key"]
            if stop is not None and key >= stop:
                return
            if key.endswith(".jsonl.gz"):
                yield key


def read_object(s3: Any, bucket: str, key: str) -> tuple[list[ArchiveRecord], list[LineProblem]]:
    """The records of one object (a missing or unreadable object is one problem)."""
    data = fetch_object(s3, bucket, key)
    if isinstance(data, LineProblem):
        return [], [data]
    return decode_object(key, data)


def shares_selection(flt: ArchiveFilter, record: ArchiveRecord) -> bool:
    """The conditions of ``flt`` on what every line of one delivery shares (source, delivery id,
    body bytes: its identity): a line failing them belongs to a delivery ``flt`` does not select,
    whichever of its lines :func:`dedupe` keeps, so it can be dropped before deduplicating."""
    if flt.sources and record.source not in flt.sources:
        return False
    if flt.delivery_id_prefix is not None and not record.delivery_id.startswith(
        flt.delivery_id_prefix
    ):
        return False
    return not flt.where or _body_matches(record, flt.where)


def decode_selected(
    key: str, data: bytes | LineProblem, flt: ArchiveFilter
) -> tuple[list[ArchiveRecord], list[LineProblem]]:
    """The records of one object that :func:`shares_selection` keeps, and its problems: every
    line that may be selected is validated, lines the pre-filter proves unselected are not
    (see :mod:`.scan`)."""
    records, problems = _screened(key, data, flt)
    return [r for r in records if shares_selection(flt, r)], problems


Decoded = tuple[list[ArchiveRecord], list[LineProblem]]


def _decode_job(job: tuple[str, bytes | LineProblem, ArchiveFilter]) -> Decoded:
    return decode_selected(*job)


def _fetch_decode_job(job: tuple[S3Settings, str, str, ArchiveFilter]) -> Decoded | None:
    found = fetch_and_decode(job)
    if found is None:
        return None
    records, problems = found
    return [r for r in records if shares_selection(job[3], r)], problems


def _threads() -> int:
    """Threads of this process, native ones included (Linux), else Python's."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _process_pool(stack: contextlib.ExitStack, processes: int) -> ProcessPoolExecutor:
    """A started pool: its workers are forked before the reading threads exist (started by a
    fork server instead when this process already runs other threads)."""
    methods = multiprocessing.get_all_start_methods()
    single = _threads() == 1
    method = "fork" if single and "fork" in methods else None
    if method is None and "forkserver" in methods:
        method = "forkserver"
    context = multiprocessing.get_context(method)
    procs = stack.enter_context(ProcessPoolExecutor(max_workers=processes, mp_context=context))
    procs.submit(int).result()
    return procs


def search(
    s3: Any,
    bucket: str,
    flt: ArchiveFilter,
    *,
    workers: int = 16,
    processes: int = 0,
    settings: S3Settings | None = None,
) -> SearchResult:
    """Every archived delivery ``flt`` selects, deduplicated (see :mod:`.record`).

    Parameters
    ----------
    s3 : botocore S3 client
        Lists the objects (and reads them, unless worker processes do with ``settings``).
    bucket : str
        The archive bucket.
    flt : ArchiveFilter
        What to select.
    workers : int
        Objects read at once (threads) when this process reads them.
    processes : int
        Worker processes that decompress and validate the objects (0 or 1: in this process;
        more needs ``flt.where`` predicates that pickle). The result is the same.
    settings : S3Settings | None
        With ``processes`` > 1: each worker process reads its own objects with a client built
        from these (the same S3 as ``s3``), so no object's bytes pass through this process; an
        object a worker cannot read is read again with ``s3`` (and reported if that fails).

    Lines that are not records are reported in ``problems`` (by key and line) and skipped; a
    line whose source, delivery id and body show that ``flt`` cannot select its delivery is
    skipped without being validated further (:mod:`.scan`).
    """
    sources = list(flt.sources) or list_sources(s3, bucket)
    keys = [key for source in sources for key in object_keys(s3, bucket, source, flt)]
    result = SearchResult(objects_read=len(keys))
    gathered: list[ArchiveRecord] = []
    with contextlib.ExitStack() as stack:
        procs = _process_pool(stack, processes) if processes > 1 and keys else None
        decoded: list[Decoded] = []
        if procs is not None and settings is not None:
            jobs = [(settings, bucket, key, flt) for key in keys]
            found = list(procs.map(_fetch_decode_job, jobs))
            decoded = [d for d in found if d is not None]
            # objects a worker could not read are read here, with the caller's client
            keys = [key for key, d in zip(keys, found, strict=True) if d is None]
        if keys:
            pool = stack.enter_context(ThreadPoolExecutor(max_workers=max(1, workers)))
            fetched = pool.map(lambda k: (k, fetch_object(s3, bucket, k), flt), keys)
            decoded += (procs.map if procs else map)(_decode_job, fetched)
    for records, problems in decoded:
        gathered.extend(records)
        result.problems.extend(problems)
    result.records = [r for r in dedupe(gathered) if flt.matches(r)]
    return result


def window_hours(start: datetime, end: datetime) -> Iterable[str]:
    """The partition hours of ``start <= t < end`` (UTC), in order."""
    moment = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while moment < end:
        yield hour_of(moment)
        moment += timedelta(hours=1)
