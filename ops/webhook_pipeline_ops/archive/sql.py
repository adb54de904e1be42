"""The SQL of an :class:`~webhook_pipeline.archive.query.ArchiveFilter` over the Athena table.

One query gives what :func:`webhook_pipeline.archive.query.search` gives over S3: the partitions
of the window (``source IN (...)`` and ``hour BETWEEN`` the window's first and last hour, as
``yyyy-MM-dd-HH`` strings, so partition projection reads only those prefixes), one row per
(source, delivery id, body SHA-256) chosen exactly as :func:`webhook_pipeline.archive.record.dedupe`
chooses (``ROW_NUMBER()`` ordered by the verdict's rank, from
:data:`~webhook_pipeline.archive.record.OUTCOME_RANK`, then ``archived_at``; the verdict is
:data:`VERDICT`, ``recorded_outcome`` when set, else ``outcome``), then the filter (outcomes
matched against the verdict),
in the order of ``dedupe`` (received_at, source, delivery id, body SHA-256).

The ``source`` partition key is projected as ``injected``: Athena requires static equality
conditions on it (``=`` or ``IN`` of literals) and at least one value, so :func:`search_sql`
requires the source names (the CLI lists them from the archive bucket when none is given).

Event type globs become ``LIKE`` patterns (``*`` -> ``%``, ``?`` -> ``_``, a literal ``%``, ``_``
or ``\\`` escaped with ``ESCAPE '\\'``); a glob with a character class (``[...]``) has no
``LIKE`` form and is refused (:class:`ValueError`). Every literal is quoted with
:func:`~webhook_pipeline.archive.predicate.sql_string`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from webhook_pipeline.archive.predicate import sql_string
from webhook_pipeline.archive.query import ArchiveFilter
from webhook_pipeline.archive.record import OUTCOME_RANK, format_time, hour_of

#: The columns read back (``headers`` and ``signed_headers`` are maps: not read by search).
COLUMNS = (
    "source",
    "provider",
    "delivery_id",
    "event_type",
    "resource_key",
    "sequence",
    "received_at",
    "verified_with",
    "body_sha256",
    "body_size",
    "content_sha256",
    "body",
    "body_base64",
    "outcome",
    "recorded_outcome",
    "reason",
    "archived_at",
    "message_id",
    "receive_count",
    "gate",
    "replay_count",
    "batch_index",
    "batch_count",
)
ORDER = "received_at, source, delivery_id, body_sha256"
#: :attr:`webhook_pipeline.archive.record.ArchiveRecord.verdict` in SQL.
VERDICT = "coalesce(recorded_outcome, outcome)"


def identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier (``"`` doubled)."""
    return '"' + name.replace('"', '""') + '"'


def outcome_rank_sql() -> str:
    """``CASE coalesce(recorded_outcome, outcome) WHEN 'applied' THEN 0 ... ELSE n END``:
    :data:`OUTCOME_RANK` of the verdict in SQL (an unknown one ranks last, as in ``dedupe``)."""
    whens = " ".join(f"WHEN {sql_string(k)} THEN {v}" for k, v in OUTCOME_RANK.items())
    return f"CASE {VERDICT} {whens} ELSE {len(OUTCOME_RANK)} END"


def like_pattern(glob: str) -> str:
    """The ``LIKE`` pattern (escape ``\\``) of an ``fnmatch`` glob without ``[``.

    Raises
    ------
    ValueError
        The glob has a character class (``[``).
    """
    if "[" in glob:
        raise ValueError(f"event type glob {glob!r}: character classes ([...]) are not supported")
    out = []
    for char in glob:
        if char in "\\%_":
            out.append("\\" + char)
        elif char == "*":
            out.append("%")
        elif char == "?":
            out.append("_")
        else:
            out.append(char)
    return "".join(out)


def escape_like(text: str) -> str:
    """``text`` matched literally in a ``LIKE`` pattern with ``ESCAPE '\\'``."""
    return "".join("\\" + c if c in "\\%_" else c for c in text)


def _like(column: str, pattern: str) -> str:
    return f"{column} LIKE {sql_string(pattern)} ESCAPE '\\'"


def partition_conditions(flt: ArchiveFilter, sources: list[str]) -> list[str]:
    """The conditions read before deduplicating: the partition keys (``source``, ``hour``) and
    ``delivery_id IS NOT NULL`` (the table reads a line that is not JSON as a row of nulls; the
    local reader reports it as a problem)."""
    conditions = [f"source IN ({', '.join(sql_string(s) for s in sources)})"]
    # a line that is not JSON reads as a row of nulls (ignore.malformed.json): not a delivery
    conditions.append("delivery_id IS NOT NULL")
    if flt.start is not None:
        conditions.append(f"hour >= {sql_string(hour_of(flt.start))}")
    if flt.end is not None:
        last = hour_of(flt.end - timedelta(microseconds=1))
        conditions.append(f"hour <= {sql_string(last)}")
    return conditions


def filter_conditions(flt: ArchiveFilter) -> list[str]:
    """The filter's conditions on a deduplicated row (as ``ArchiveFilter.matches``)."""
    conditions: list[str] = []
    if flt.start is not None:
        conditions.append(f"received_at >= {sql_string(format_time(flt.start))}")
    if flt.end is not None:
        conditions.append(f"received_at < {sql_string(format_time(flt.end))}")
    if flt.event_types:
        likes = [_like("event_type", like_pattern(g)) for g in flt.event_types]
        conditions.append("(" + " OR ".join(likes) + ")")
    if flt.outcomes:
        conditions.append(f"{VERDICT} IN ({', '.join(sql_string(o) for o in flt.outcomes)})")
    if flt.resource_key is not None:
        conditions.append(f"resource_key = {sql_string(flt.resource_key)}")
    if flt.delivery_id_prefix is not None:
        conditions.append(_like("delivery_id", escape_like(flt.delivery_id_prefix) + "%"))
    for predicate in flt.where:
        to_sql: Any = getattr(predicate, "to_sql", None)
        if to_sql is None:
            raise ValueError(f"predicate {predicate!r} has no SQL form (to_sql)")
        conditions.append(str(to_sql("body")))
    return conditions


def search_sql(flt: ArchiveFilter, database: str, table: str, sources: list[str]) -> str:
    """One Athena query selecting what ``search(s3, bucket, flt)`` selects, in its order.

    Parameters
    ----------
    flt : ArchiveFilter
        What to select (its ``sources`` are ignored: ``sources`` is used).
    database, table : str
        The Glue database and table (stack outputs ``ArchiveDatabaseName``,
        ``ArchiveTableName``).
    sources : list[str]
        The source partitions to read (at least one: the key is injected).

    Raises
    ------
    ValueError
        No source, a glob with ``[``, or a predicate without ``to_sql``.
    """
    if not sources:
        raise ValueError("Athena needs at least one source (the source partition is injected)")
    inner_where = " AND ".join(partition_conditions(flt, sources))
    outer = ["rn = 1", *filter_conditions(flt)]
    columns = ", ".join(COLUMNS)
    return (
        f"SELECT {columns}\n"  # noqa: S608 - every literal quoted by sql_string
        f"FROM (\n"
        f"  SELECT {columns},\n"
        f"    ROW_NUMBER() OVER (PARTITION BY source, delivery_id, body_sha256\n"
        f"      ORDER BY {outcome_rank_sql()}, archived_at) AS rn\n"
        f"  FROM {identifier(database)}.{identifier(table)}\n"
        f"  WHERE {inner_where}\n"
        f") AS deduplicated\n"
        f"WHERE {' AND '.join(outer)}\n"
        f"ORDER BY {ORDER}"
    )
