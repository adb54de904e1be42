"""The chaos run's archive leg, pure part: the named checks of the archive and of a reprocess.

Identities are ``(source, delivery id, body SHA-256)``, as the archive deduplicates them
(:mod:`webhook_pipeline.archive.record`); deliveries are ``(source, delivery id)``. Every check
takes plain data (the sender's log, archive records, table items) and returns its offenders, so
each is tested on data built by hand (``tests/unit/test_chaos_archive.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook_pipeline.archive.record import ArchiveRecord, CorruptRecordError, LineProblem

from webhook_pipeline_ops.chaos.reconcile import Key, acknowledged, ledger_key
from webhook_pipeline_ops.chaos.traffic import Copy

#: (source, delivery id, body SHA-256) of one archived or sent body.
Identity = tuple[str, str, str]
#: The most examples a finding lists.
MAX_EXAMPLES = 10


def _examples(keys: Iterable[tuple[str, ...]]) -> list[str]:
    return ["/".join(k) for k in sorted(keys)[:MAX_EXAMPLES]]


# ------------------------------------------------------------------------------------------------
# the archive


def sent_identities(copies: Iterable[Copy], statuses: Sequence[int] | None = None) -> set[Identity]:
    """The identity of every request sent (``statuses``: only requests answered with one of
    them), from the body SHA-256 the sender logged."""
    return {
        (c.source, c.delivery_id, a.body_sha256)
        for c in copies
        for a in c.attempts
        if a.body_sha256 is not None and (statuses is None or a.status in statuses)
    }


def archive_missing(copies: Iterable[Copy], archived: set[Identity]) -> list[Key]:
    """Proves "every accepted delivery is archived exactly": of the deliveries some copy of
    which got a 2xx (dead-lettered ones included), those for which the archive lacks the bytes
    of a request answered 202 (enqueued), or, with no 202 (a timed-out send enqueued, then a 200
    from the gate), lacks the bytes of every request sent."""
    by_delivery: dict[Key, list[Copy]] = {}
    for c in copies:
        by_delivery.setdefault((c.source, c.delivery_id), []).append(c)
    missing: list[Key] = []
    for key, group in by_delivery.items():
        if not acknowledged(group):
            continue
        enqueued = sent_identities(group, (202,))
        if enqueued:
            if not enqueued <= archived:
                missing.append(key)
        elif not sent_identities(group) & archived:
            missing.append(key)
    return missing


def archive_unexpected(
    archived: set[Identity], copies: Iterable[Copy], foreign: Iterable[Key] = ()
) -> list[Identity]:
    """Proves the archive holds only what was sent: archived identities no request carried
    (a delivery nobody sent, or bytes other than the ones sent). ``foreign``: deliveries the run
    put on the queue itself (the poison fault), not sent over HTTP."""
    sent = sent_identities(copies)
    skip = set(foreign)
    return sorted(i for i in archived - sent if (i[0], i[1]) not in skip)


def archive_corrupt(records: Iterable[ArchiveRecord], problems: Iterable[LineProblem]) -> list[str]:
    """Proves the archive reads back: each problem of the reader (``key:line: reason``) and each
    record whose body does not check against its SHA-256 (:meth:`ArchiveRecord.body_bytes`)."""
    found = [f"{p.key}:{p.line}: {p.reason}" for p in problems]
    for record in records:
        try:
            record.body_bytes()
        except CorruptRecordError as exc:
            found.append(f"{record.source}/{record.delivery_id}: {exc}")
    return found


def check_archive(
    copies: Sequence[Copy],
    records: Sequence[ArchiveRecord],
    problems: Sequence[LineProblem],
    foreign: Iterable[Key] = (),
) -> dict[str, Any]:
    """The report's ``archive`` section: identities read, ``archive_missing``,
    ``archive_unexpected``, ``archive_corrupt`` (counts) and up to ten examples of each."""
    archived = {r.identity for r in records}
    missing = archive_missing(copies, archived)
    unexpected = archive_unexpected(archived, copies, foreign)
    corrupt = archive_corrupt(records, problems)
    return {
        "identities": len(archived),
        "deliveries": len({(s, d) for s, d, _ in archived}),
        "archive_missing": len(missing),
        "archive_unexpected": len(unexpected),
        "archive_corrupt": len(corrupt),
        "examples": {
            "archive_missing": _examples(missing),
            "archive_unexpected": _examples(unexpected),
            "archive_corrupt": corrupt[:MAX_EXAMPLES],
        },
    }


# ------------------------------------------------------------------------------------------------
# a reprocess


def _digest(item: Mapping[str, Any]) -> str | None:
    value = item.get("content_sha256") or item.get("body_sha256")
    return str(value) if value else None


def reprocess_due(window: Iterable[ArchiveRecord], items: Iterable[Mapping[str, Any]]) -> set[Key]:
    """The deliveries a reprocess of ``window`` (the archived records it selects) must run the
    hook of once: recorded ``applied`` with the first hook ``done`` (its first run completed),
    with an archived body whose content digest is the recorded one."""
    records = {
        (str(i.get("source")), str(i.get("delivery_id"))): i
        for i in items
        if str(i.get("pk", "")).startswith("DELIVERY#")
    }
    due: set[Key] = set()
    for r in window:
        item = records.get((r.source, r.delivery_id))
        if item is None or item.get("outcome") != "applied" or item.get("hook_state") != "done":
            continue
        if _digest(item) in (None, r.content_sha256 or r.body_sha256):
            due.add((r.source, r.delivery_id))
    return due


def generation_entries(items: Iterable[Mapping[str, Any]], generation: int) -> Counter[Key]:
    """Ledger entries of reprocess ``generation``, per delivery."""
    found: Counter[Key] = Counter()
    for item in items:
        key = ledger_key(item)
        got = item.get("generation")
        if key is not None and got is not None and int(got) == generation:
            found[key] += 1
    return found


def reprocess_missing(due: set[Key], entries: Counter[Key]) -> list[Key]:
    """Proves "at least once" for the reprocess: due deliveries with no entry of the
    generation."""
    return sorted(k for k in due if not entries[k])


def reprocess_twice(entries: Counter[Key]) -> list[Key]:
    """Proves "at most once" for the reprocess: deliveries with two or more entries of the
    generation (a killed and resumed job sent some again; the per-generation mark must hold)."""
    return sorted(k for k, n in entries.items() if n > 1)


def reprocess_outside_window(due: set[Key], entries: Counter[Key]) -> list[Key]:
    """Proves the reprocess kept to its window: deliveries with an entry of the generation that
    were not due (outside the window, or in it but not applied, stale or with a pending hook)."""
    return sorted(k for k, n in entries.items() if n and k not in due)


def resources(items: Iterable[Mapping[str, Any]]) -> dict[Key, Mapping[str, Any]]:
    """Each ``RESOURCE#`` item by (source, resource key)."""
    return {
        (str(i.get("source")), str(i.get("resource_key"))): i
        for i in items
        if str(i.get("pk", "")).startswith("RESOURCE#")
    }


def watermark_moved(
    before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]]
) -> list[Key]:
    """Proves a reprocess writes no resource state: resources whose item (watermark and every
    other attribute) differs after the reprocess, or that appeared or vanished."""
    old, new = resources(before), resources(after)
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def check_reprocess(
    window: Sequence[ArchiveRecord],
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    generation: int,
) -> dict[str, Any]:
    """The reprocess findings: ``due``, ``entries`` (ledger entries of the generation),
    ``reprocess_missing``, ``reprocess_twice``, ``reprocess_outside_window``, ``watermark_moved``
    (counts) and up to ten examples of each. ``before``/``after``: the table's items."""
    due = reprocess_due(window, before)
    entries = generation_entries(after, generation)
    found = {
        "reprocess_missing": reprocess_missing(due, entries),
        "reprocess_twice": reprocess_twice(entries),
        "reprocess_outside_window": reprocess_outside_window(due, entries),
        "watermark_moved": watermark_moved(before, after),
    }
    return {
        "due": len(due),
        "entries": sum(entries.values()),
        **{name: len(keys) for name, keys in found.items()},
        "examples": {name: _examples(keys) for name, keys in found.items()},
    }


#: The archive leg's findings that fail the proof, in the order the failure message names them.
ARCHIVE_VERDICTS = ("archive_missing", "archive_unexpected", "archive_corrupt")
REPROCESS_VERDICTS = (
    "reprocess_missing",
    "reprocess_twice",
    "reprocess_outside_window",
    "watermark_moved",
)
