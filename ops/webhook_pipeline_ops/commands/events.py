"""``webhook-pipeline events``: write the sample ingest events of ``events/`` (what is written and
why at a fixed time: :mod:`webhook_pipeline_ops.simulator.event_files`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.simulator import event_files
from webhook_pipeline_ops.simulator.event_files import DEFAULT_OUT, FIXED_TIME, write_events


def register(subparsers: Any) -> None:
    """Add ``events`` to the operator CLI."""
    parser = subparsers.add_parser(
        "events",
        help="write the sample ingest and archive events (events/*.json)",
        description=event_files.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="output folder (default: events/)"
    )
    parser.add_argument(
        "--now",
        action="store_true",
        help="sign at the current time instead of the fixed time of the committed files",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import sys
    import time

    if args.now and args.out.resolve() == DEFAULT_OUT.resolve():
        print(
            "webhook-pipeline events: --now writes copies that expire (300 s for signed "
            "timestamps); give --out DIR so the committed events/ stay as they are",
            file=sys.stderr,
        )
        return 2
    for path in write_events(args.out, int(time.time()) if args.now else FIXED_TIME):
        print(path)
    return 0
