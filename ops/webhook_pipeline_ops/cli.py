"""``webhook-pipeline``: the operator CLI (replay, DLQ peek, status, recorded items, local stack).

Every subcommand lives in its own module that defines ``register(subparsers)``: it adds its
parser(s) and sets ``func`` (``func(args) -> int``, the exit code) with ``set_defaults``. Adding a
subcommand is one module plus one line in :data:`REGISTRARS`. Modules that talk to AWS add the
shared connection and output options with
:func:`webhook_pipeline_ops.aws.common_options` (``parents=[common_options()]``).

Exit codes: 0 success; 1 operational failure (a clear one-line message on stderr, no traceback:
missing queue URL, connection refused, access denied, a replay with failures...); 2 usage error
(argparse, or an invalid replay request); 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
)
from webhook_pipeline.errors import PipelineError

from webhook_pipeline_ops.aws import OpsError, describe_aws_error

#: Modules whose ``register(subparsers)`` adds subcommands, in help order.
REGISTRARS: tuple[str, ...] = (
    "webhook_pipeline_ops.commands_replay",
    "webhook_pipeline_ops.commands_dlq",
    "webhook_pipeline_ops.commands_status",
    "webhook_pipeline_ops.commands_records",
    "webhook_pipeline_ops.commands_sources",
    "webhook_pipeline_ops.sample_events",
    "webhook_pipeline_ops.commands_cost",
    "webhook_pipeline_ops.local.commands",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="webhook-pipeline",
        description="Operate the webhook pipeline: replay the DLQ, inspect queues and records, "
        "run the local stack.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in REGISTRARS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (also when argparse exits, e.g. on a usage error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage error (2) or --help (0)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return int(args.func(args))
    except OpsError as exc:
        _fail(str(exc))
        return exc.exit_code
    except (ClientError, EndpointConnectionError, BotoCoreError) as exc:
        _fail(describe_aws_error(exc))
        return 1
    except PipelineError as exc:
        cause = exc.__cause__
        connection = isinstance(cause, EndpointConnectionError | NoCredentialsError)
        _fail(describe_aws_error(cause) if connection and cause else str(exc))
        return 1
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130


def _fail(message: str) -> None:
    print(f"webhook-pipeline: error: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
