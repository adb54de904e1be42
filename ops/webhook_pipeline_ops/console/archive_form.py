"""The Archive page's filter form: query parameters checked and turned into an
:class:`~webhook_pipeline.archive.query.ArchiveFilter` before anything is read.

The filters are those of ``webhook-pipeline archive search``: ``source`` (one of the known
sources), ``from``/``to`` (UTC receipt times, ``to`` exclusive), ``event_type`` (a glob),
``outcome`` (:data:`webhook_pipeline.archive.record.OUTCOMES`), ``resource_key`` (exact),
``delivery_id`` (a prefix) and ``where`` (a condition on body fields, parsed by
:func:`_parse_where`: one ``archive search --where`` per line).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhook_pipeline.archive.predicate import PredicateError, parse_predicate
from webhook_pipeline.archive.query import ArchiveFilter, BodyPredicate
from webhook_pipeline.archive.record import OUTCOMES

from webhook_pipeline_ops.console import params
from webhook_pipeline_ops.console.params import BadRequestError, parse_time

#: The form's fields (query parameter names), in the order the page shows them.
FIELDS = ("source", "from", "to", "event_type", "outcome", "resource_key", "delivery_id", "where")


def archive_filter(q: Any, known_sources: Callable[[], list[str]]) -> ArchiveFilter:
    """The filter the query parameters ``q`` ask for.

    Parameters
    ----------
    q : Mapping[str, str]
        The request's query parameters (:data:`FIELDS`; others are ignored).
    known_sources : Callable[[], list[str]]
        Sources a ``source`` may name (configured, or with an archive partition); called only
        when a ``source`` is given, after every other parameter passed its checks (so a
        request with another bad value reads nothing).

    Raises
    ------
    BadRequestError
        A value the search cannot use: a time that is not ISO 8601, ``from`` not earlier than
        ``to``, an unknown outcome or source, a ``where`` that does not parse, a value too long.
    """
    outcome = params.choice(q, "outcome", OUTCOMES)
    start_text, end_text = params.text(q, "from", 40), params.text(q, "to", 40)
    start = parse_time(start_text, "from") if start_text else None
    end = parse_time(end_text, "to") if end_text else None
    if start is not None and end is not None and start >= end:
        raise BadRequestError("from must be earlier than to (the window is from <= received < to)")
    where_text = params.text(q, "where", 2048)
    where = _parse_where(where_text) if where_text else ()
    event_type = params.text(q, "event_type", 256)
    resource_key = params.text(q, "resource_key", 1024)
    delivery_id_prefix = params.text(q, "delivery_id", 256)
    source = params.text(q, "source", 64)
    if source is not None:
        names = known_sources()
        if source not in names:
            shown = ", ".join(names) or "none"
            raise BadRequestError(f"source {source!r} is unknown (sources: {shown})")
    return ArchiveFilter(
        sources=(source,) if source else (),
        start=start,
        end=end,
        event_types=(event_type,) if event_type else (),
        outcomes=(outcome,) if outcome else (),
        resource_key=resource_key,
        delivery_id_prefix=delivery_id_prefix,
        where=where,
    )


def _parse_where(text: str) -> tuple[BodyPredicate, ...]:
    """The body conditions of ``where`` text, one per line, all of which must hold: each the
    ``--where`` of ``archive search`` (:func:`webhook_pipeline.archive.predicate.parse_predicate`,
    for example ``data.object.amount >= 1000``); blank lines are ignored.

    Raises
    ------
    BadRequestError
        A line does not parse (the message names the line and the position).
    """
    try:
        return tuple(parse_predicate(line.strip()) for line in text.splitlines() if line.strip())
    except PredicateError as exc:
        raise BadRequestError(f"where: {exc}") from None
