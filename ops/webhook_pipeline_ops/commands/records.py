"""``webhook-pipeline deliveries get SOURCE ID`` and ``resources get SOURCE KEY``.

Print the items the processor recorded in the deliveries table, as JSON. The keys are built by
:mod:`webhook_pipeline.adapters.dynamodb`, the processor's own adapter, so the CLI reads exactly
what the processor writes (strongly consistent reads). Exit code 1 when there is no such item; when
the source is not one of the sources file's, the message says so.
"""

from __future__ import annotations

import argparse
from typing import Any

from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.delivery_records import get_delivery, get_resource, unknown_source_hint
from webhook_pipeline_ops.output import print_json

DESCRIPTIONS = {
    "deliveries": (
        "Print the delivery record of (SOURCE, DELIVERY_ID) as JSON: outcome (applied or stale), "
        "sequence, received and recorded times, body size and SHA-256, hook state, replay count. "
        "Exit code 1 when none is recorded."
    ),
    "resources": (
        "Print the resource item of (SOURCE, KEY) as JSON: its sequence watermark and the last "
        "delivery that moved it. Exit code 1 when there is none."
    ),
}


def register(subparsers: Any) -> None:
    """Add ``deliveries get`` and ``resources get``."""
    for noun, key_name, key_help, what in (
        (
            "deliveries",
            "DELIVERY_ID",
            "the delivery id the source sent (as `send --list` prints it); an id that starts "
            "with '-' (SendGrid's sg_event_id can) goes after '--': get sendgrid -- -8WCF...",
            "the delivery record of a (source, delivery id)",
        ),
        (
            "resources",
            "KEY",
            "the resource key as recorded (e.g. a Stripe customer id); one that starts with "
            "'-' goes after '--'",
            "the resource item (sequence watermark) of a (source, resource key)",
        ),
    ):
        parser = subparsers.add_parser(noun, help=f"show {what}")
        actions = parser.add_subparsers(dest=f"{noun}_command", metavar="ACTION", required=True)
        get = actions.add_parser(
            "get",
            parents=[common_options(("table",), json_output=None)],
            help=f"print {what} as JSON",
            description=DESCRIPTIONS[noun],
        )
        get.add_argument(
            "source", metavar="SOURCE", help="source name (layers/common/sources.toml)"
        )
        get.add_argument("key", metavar=key_name, help=key_help)
        get.set_defaults(func=run_get, noun=noun)


def run_get(args: argparse.Namespace) -> int:
    aws = Aws(args)
    if args.noun == "deliveries":
        item = get_delivery(aws, args.source, args.key)
        missing = f"no delivery recorded for source {args.source!r}, delivery id {args.key!r}"
    else:
        item = get_resource(aws, args.source, args.key)
        missing = f"no resource item for source {args.source!r}, resource key {args.key!r}"
    if item is None:
        raise OpsError(missing + unknown_source_hint(args.source, local=bool(args.local)))
    print_json(item)
    return 0
