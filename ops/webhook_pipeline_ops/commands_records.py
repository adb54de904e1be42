"""``webhook-pipeline deliveries get SOURCE ID`` and ``resources get SOURCE KEY``.

Print the items the processor recorded in the deliveries table, as JSON: the delivery record
(outcome, sequence, when it was recorded...) and the resource item (its sequence watermark). The
keys are built by :mod:`webhook_pipeline.store`, the processor's own adapter, so the CLI reads
exactly what the processor writes (strongly consistent reads). Exit code 1 when there is no such
item.
"""

from __future__ import annotations

import argparse
from typing import Any

from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.output import print_json


def register(subparsers: Any) -> None:
    """Add ``deliveries get`` and ``resources get``."""
    for noun, key_name, what in (
        ("deliveries", "DELIVERY_ID", "the delivery record of a (source, delivery id)"),
        ("resources", "KEY", "the resource item (sequence watermark) of a (source, resource key)"),
    ):
        parser = subparsers.add_parser(noun, help=f"show {what}")
        actions = parser.add_subparsers(dest=f"{noun}_command", metavar="ACTION", required=True)
        get = actions.add_parser(
            "get",
            parents=[common_options()],
            help=f"print {what} as JSON",
            description=__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        get.add_argument("source", metavar="SOURCE")
        get.add_argument("key", metavar=key_name)
        get.set_defaults(func=run_get, noun=noun)


def _store(aws: Aws) -> Any:
    from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore

    return DynamoDBDeliveryStore(aws.client("dynamodb"), aws.resources.require("table"))


def get_delivery(aws: Aws, source: str, delivery_id: str) -> dict[str, Any] | None:
    """The delivery record, or ``None``."""
    item: dict[str, Any] | None = _store(aws).get_delivery(source, delivery_id)
    return item


def get_resource(aws: Aws, source: str, key: str) -> dict[str, Any] | None:
    """The resource item, or ``None``."""
    item: dict[str, Any] | None = _store(aws).get_resource(source, key)
    return item


def run_get(args: argparse.Namespace) -> int:
    aws = Aws(args)
    if args.noun == "deliveries":
        item = get_delivery(aws, args.source, args.key)
        missing = f"no delivery recorded for source {args.source!r}, delivery id {args.key!r}"
    else:
        item = get_resource(aws, args.source, args.key)
        missing = f"no resource item for source {args.source!r}, resource key {args.key!r}"
    if item is None:
        raise OpsError(missing)
    print_json(item)
    return 0
