"""``webhook-pipeline``: the operator CLI (replay, DLQ peek, status, recorded items, local stack).

Every subcommand lives in its own module that defines ``register(subparsers)``: it adds its
parser(s) and sets ``func`` (``func(args) -> int``, the exit code) with ``set_defaults``. Adding a
subcommand is one module plus one line in :data:`REGISTRARS`. Modules that talk to AWS add the
shared connection and output options with
:func:`webhook_pipeline_ops.aws.common_options` (``parents=[common_options()]``).

Help texts are printed without the docstrings' reST markup (:func:`plain_help`).

Exit codes: 0 success; 1 operational failure (a clear one-line message on stderr, no traceback:
missing queue URL, connection refused, access denied, a replay with failures...); 2 usage error
(argparse, or an invalid replay request); 130 interrupted; 141 stdout closed early (``| head``),
silently, as other command-line tools do.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence

from webhook_pipeline.errors import PipelineError

from webhook_pipeline_ops.aws import OpsError, describe_aws_error, is_aws_error
from webhook_pipeline_ops.output import plain_text

#: Modules whose ``register(subparsers)`` adds subcommands, in help order.
REGISTRARS: tuple[str, ...] = (
    "webhook_pipeline_ops.commands.replay",
    "webhook_pipeline_ops.commands.dlq",
    "webhook_pipeline_ops.commands.status",
    "webhook_pipeline_ops.commands.records",
    "webhook_pipeline_ops.commands.sources",
    "webhook_pipeline_ops.commands.audit",
    "webhook_pipeline_ops.commands.events",
    "webhook_pipeline_ops.commands.cost",
    "webhook_pipeline_ops.commands.chaos",
    "webhook_pipeline_ops.commands.local",
    "webhook_pipeline_ops.commands.send",
    "webhook_pipeline_ops.commands.console",
    "webhook_pipeline_ops.commands.archive",
)
#: Exit code when stdout was closed by the reader (128 + SIGPIPE, like other CLI tools).
EXIT_BROKEN_PIPE = 141


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand, or, given ``command``, with only
    the subcommands of the module named so (``commands.<command>``) when it registers
    ``command`` itself (a run imports only what its command needs); else the full parser."""
    parser = argparse.ArgumentParser(
        prog="webhook-pipeline",
        description="Operate the webhook pipeline: replay the DLQ, inspect queues and records, "
        "run the local stack.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    only = f"webhook_pipeline_ops.commands.{command}"
    if command is not None and only in REGISTRARS:
        importlib.import_module(only).register(subparsers)
        if command in subparsers.choices:
            plain_help(parser)
            return parser
        return build_parser()
    for name in REGISTRARS:
        importlib.import_module(name).register(subparsers)
    plain_help(parser)
    return parser


def plain_help(parser: argparse.ArgumentParser) -> None:
    """Strip reST markup from the descriptions, epilogs and option helps of ``parser`` and of
    every subcommand parser under it (their texts often come from module docstrings)."""
    for attr in ("description", "epilog"):
        text = getattr(parser, attr)
        if text:
            setattr(parser, attr, plain_text(text))
    for action in parser._actions:
        if action.help and action.help is not argparse.SUPPRESS:
            action.help = plain_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.help:
                    choice.help = plain_text(choice.help)
            for sub in dict.fromkeys(action.choices.values()):
                plain_help(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (also when argparse exits, e.g. on a usage error)."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words and not words[0].startswith("-") else None)
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # usage error (2) or --help (0)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OpsError as exc:
        _fail(str(exc))
        return exc.exit_code
    except PipelineError as exc:
        cause = exc.__cause__
        _fail(
            describe_aws_error(cause)
            if isinstance(cause, Exception) and _connection_error(cause)
            else str(exc)
        )
        return 1
    except Exception as exc:
        if not is_aws_error(exc):
            raise
        _fail(describe_aws_error(exc))
        return 1
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130


def _connection_error(exc: Exception) -> bool:
    if not is_aws_error(exc):
        return False
    from botocore.exceptions import EndpointConnectionError, NoCredentialsError

    return isinstance(exc, EndpointConnectionError | NoCredentialsError)


def _fail(message: str) -> None:
    print(f"webhook-pipeline: error: {message}", file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    with contextlib.suppress(OSError, ValueError):  # ValueError: stdout is no real file
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
