"""From ``archive search`` options to an :class:`ArchiveFilter`, every check done before anything
is read: a bad window, an unknown source or outcome, a predicate that does not parse, a glob
Athena cannot run are usage errors (:class:`OpsError` with exit code 2)."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta

from webhook_pipeline.archive.predicate import PredicateError, parse_predicate
from webhook_pipeline.archive.query import ArchiveFilter
from webhook_pipeline.archive.record import OUTCOMES

from webhook_pipeline_ops.aws import OpsError

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def usage(message: str) -> OpsError:
    """A usage error (exit code 2)."""
    return OpsError(message, exit_code=2)


def parse_moment(option: str, text: str) -> datetime:
    """An ISO-8601 time (``Z`` or an offset; UTC when naive).

    Raises
    ------
    OpsError
        Not ISO-8601 (exit code 2).
    """
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise usage(f"{option}: not an ISO-8601 time: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_duration(text: str) -> timedelta:
    """``30s``, ``90m``, ``2h``, ``1d``.

    Raises
    ------
    OpsError
        Another form, or zero (exit code 2).
    """
    match = _DURATION.fullmatch(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise usage(f"--last: not a duration like 90m, 2h or 1d: {text!r}")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def window(args: argparse.Namespace, now: datetime) -> tuple[datetime | None, datetime | None]:
    """``(start, end)`` from ``--from``/``--to`` or ``--last`` (end exclusive; ``None`` = open).

    Raises
    ------
    OpsError
        ``--last`` with ``--from``/``--to``, a time that does not parse, or an end not after
        the start (exit code 2).
    """
    if args.last is not None:
        if args.start is not None or args.end is not None:
            raise usage("--last cannot be combined with --from or --to")
        return now - parse_duration(args.last), now
    start = parse_moment("--from", args.start) if args.start is not None else None
    end = parse_moment("--to", args.end) if args.end is not None else None
    if start is not None and end is not None and end <= start:
        raise usage(f"--to ({args.end}) must be later than --from ({args.start})")
    return start, end


def build_filter(
    args: argparse.Namespace,
    known_sources: list[str] | None,
    *,
    athena: bool,
    now: datetime | None = None,
) -> ArchiveFilter:
    """The filter of ``archive search``'s options.

    Parameters
    ----------
    args : argparse.Namespace
        ``source``, ``start``, ``end``, ``last``, ``event_type``, ``outcome``,
        ``resource_key``, ``delivery_id_prefix``, ``where`` (lists where repeatable).
    known_sources : list[str] | None
        The source names a ``--source`` must be one of (``None``: not checked).
    athena : bool
        Whether the query runs in Athena (globs with ``[`` have no SQL form there).

    Raises
    ------
    OpsError
        A usage error (exit code 2), before anything is read.
    """
    start, end = window(args, now or datetime.now(UTC))
    sources = tuple(dict.fromkeys(args.source or ()))
    if known_sources is not None:
        unknown = [s for s in sources if s not in known_sources]
        if unknown:
            raise usage(
                f"unknown source {', '.join(map(repr, unknown))} "
                f"(sources: {', '.join(known_sources)})"
            )
    outcomes = tuple(dict.fromkeys(args.outcome or ()))
    bad = [o for o in outcomes if o not in OUTCOMES]
    if bad:
        raise usage(
            f"unknown outcome {', '.join(map(repr, bad))} (outcomes: {', '.join(OUTCOMES)})"
        )
    globs = tuple(args.event_type or ())
    if athena and any("[" in g for g in globs):
        raise usage("--event-type: character classes ([...]) are not supported with --stack")
    try:
        where = tuple(parse_predicate(text) for text in args.where or ())
    except PredicateError as exc:
        raise usage(f"--where: {exc}") from None
    return ArchiveFilter(
        sources=sources,
        start=start,
        end=end,
        event_types=globs,
        outcomes=outcomes,
        resource_key=args.resource_key,
        delivery_id_prefix=args.delivery_id_prefix,
        where=where,
    )
