"""``webhook-pipeline archive search``: the archived deliveries of a window, by source, event
type, outcome, resource key, delivery id prefix and conditions on body fields.

Locally (``--local``, the default while a local stack runs) it reads the archive bucket over S3;
with ``--stack NAME`` it runs one Athena query over the archive table; both give the same
deliveries in the same order (one per source, delivery id and body, the most final attempt),
see docs/archive.md. It prints the count of every match, then at most ``--limit`` matches; objects
or lines that cannot be read are reported on stderr and skipped.

Exit code 0 (also when nothing matches), 1 on an operational failure, 2 for a usage error (an end
before the start, an unknown source or outcome, a predicate that does not parse), found before
anything is read.
"""

from __future__ import annotations

import argparse
from typing import Any

from webhook_pipeline.archive.record import OUTCOMES

from webhook_pipeline_ops.aws import Aws, OpsError, common_options


def register(subparsers: Any) -> None:
    """Add ``archive search``."""
    parser = subparsers.add_parser("archive", help="search the archive of accepted deliveries")
    actions = parser.add_subparsers(dest="archive_command", metavar="ACTION", required=True)
    search = actions.add_parser(
        "search",
        parents=[common_options(resources=())],
        help="archived deliveries by source, window, event type, outcome and body fields",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    search.add_argument("--archive-bucket", help="the archive bucket (default: from the stack)")
    flt = search.add_argument_group("filter")
    flt.add_argument("--source", action="append", metavar="NAME", help="source (repeatable)")
    flt.add_argument("--from", dest="start", metavar="TIME", help="window start, ISO-8601")
    flt.add_argument("--to", dest="end", metavar="TIME", help="window end (excluded), ISO-8601")
    flt.add_argument("--last", metavar="DURATION", help="the window up to now: 90m, 2h, 1d")
    flt.add_argument(
        "--event-type",
        action="append",
        metavar="GLOB",
        help="event type glob, * and ? (repeatable)",
    )
    flt.add_argument(
        "--outcome", action="append", metavar="OUTCOME", help=f"one of {', '.join(OUTCOMES)}"
    )
    flt.add_argument("--resource-key", metavar="KEY", help="exact resource key")
    flt.add_argument("--delivery-id-prefix", metavar="PREFIX", help="delivery ids starting so")
    flt.add_argument(
        "--where",
        action="append",
        metavar="PREDICATE",
        help="body condition, e.g. 'data.object.amount>=1000' (repeatable, all must hold; "
        "operators = != > >= < <= ~; a missing field never matches)",
    )
    search.add_argument("--limit", type=int, metavar="N", help="print at most N matches")
    search.set_defaults(func=run_search)


def run_search(args: argparse.Namespace) -> int:
    from webhook_pipeline_ops.archive.request import build_filter
    from webhook_pipeline_ops.archive.search_run import choose_mode, render, run_search
    from webhook_pipeline_ops.delivery_records import known_sources

    if args.limit is not None and args.limit < 0:
        raise OpsError("--limit must be 0 or more", exit_code=2)
    mode = choose_mode(args)
    flt = build_filter(args, known_sources(local=bool(args.local)), athena=mode == "athena")
    result = run_search(Aws(args), args, flt, mode)
    render(result, flt, limit=args.limit, as_json=args.json)
    return 0
