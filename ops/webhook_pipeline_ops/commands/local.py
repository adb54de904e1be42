"""``webhook-pipeline local``: the local stack's commands ``local run``, ``local stop``,
``local demo`` and ``local secret`` (:mod:`webhook_pipeline_ops.local.secret_command`).

Registered in ``webhook_pipeline_ops.cli`` through :func:`register`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from webhook_pipeline_ops.local import foreground, secret_command, state_dir
from webhook_pipeline_ops.local.background import start_background, stop_running
from webhook_pipeline_ops.local.function_log import keep_function_log
from webhook_pipeline_ops.local.options import (
    Options,
    StackError,
    add_run_arguments,
    background_argv,
)
from webhook_pipeline_ops.local.secret_command import SECRETS_MAX_AGE_VARIABLE
from webhook_pipeline_ops.local.state_files import read_ready
from webhook_pipeline_ops.output import command_name

if TYPE_CHECKING:
    from webhook_pipeline.sources import ResolvedSource


def register(subparsers: Any) -> None:
    """Add ``local {run,stop,demo,secret}``."""
    local = subparsers.add_parser(
        "local",
        help="run the whole pipeline on this machine (no AWS account, no Docker)",
        description="The local stack: Redis, a moto server, the template's resources, the ingest "
        "function behind http://127.0.0.1:3000/webhooks/{source} and the processor "
        "behind an SQS poller. See docs/local-stack.md.",
    )
    sub = local.add_subparsers(dest="local_command", metavar="ACTION", required=True)

    run = sub.add_parser("run", help="start the local stack (foreground; Ctrl-C stops it)")
    add_run_arguments(run)
    run.add_argument(
        "--background",
        action="store_true",
        help="start detached, wait until ready, print the endpoints and return",
    )
    run.add_argument(
        "--ready-timeout",
        type=float,
        default=90.0,
        help="seconds to wait for readiness with --background (90)",
    )
    run.add_argument(
        "--secrets-max-age",
        type=int,
        metavar="SECONDS",
        help="seconds the ingest function caches a signing secret (default: its 300, as "
        "deployed); short, `local secret set` takes effect sooner",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    run.set_defaults(func=_cmd_run)

    stop = sub.add_parser("stop", help="stop a local stack started in the background")
    stop.add_argument("--state-dir", help="folder of the stack's files (default: .local-stack)")
    stop.set_defaults(func=_cmd_stop)

    demo = sub.add_parser(
        "demo",
        help="send a short mixed scenario and show the results "
        "(starts the stack in the background if needed)",
    )
    add_run_arguments(demo)
    demo.set_defaults(func=_cmd_demo, visibility_timeout_default=2)
    secret_command.register(sub)


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("botocore", "boto3", "urllib3", "werkzeug", "s3transfer"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


#: Set for the stack's workers once :func:`unsigned_summary` is printed: the ingest function then
#: skips its per-source warning at each worker's start (a deployed one warns at every cold start).
UNSIGNED_SUMMARY_VARIABLE = "WEBHOOK_PIPELINE_UNSIGNED_SUMMARY"


def check_sources() -> tuple[str | None, dict[str, ResolvedSource]]:
    """``(problem, sources)``: the reason the stack's sources file (``layers/common/sources.toml``
    of the project, with every provider's catalogue source) cannot load, or ``None`` and the
    sources. Checked before Redis, moto and provisioning start, so a bad file fails ``local run``
    at once with the reason."""
    from webhook_pipeline.errors import ConfigurationError
    from webhook_pipeline.sources import load_sources

    from webhook_pipeline_ops.local import project_root

    try:
        file = project_root() / "layers" / "common" / "sources.toml"
        return None, load_sources(file, catalogue=True)
    except ConfigurationError as exc:
        return str(exc), {}


def unsigned_summary(sources: Mapping[str, ResolvedSource]) -> str | None:
    """One line naming the sources that read identity or ordering from fields their signature
    does not cover (what the ingest function warns about per source), or ``None``."""
    unsigned = {name: s.unsigned for name, s in sources.items() if s.unsigned}
    if not unsigned:
        return None
    listed = ", ".join(f"{name} ({', '.join(fields)})" for name, fields in sorted(unsigned.items()))
    return (
        f"{len(unsigned)} of {len(sources)} sources read fields their signature does not cover "
        "(a captured body resent with other values there is not detected by the signature; the "
        f"gate and the body-consistency check are the only guard): {listed}. Deployed, the "
        f"ingest function warns about each at every cold start; `{command_name()} sources "
        "list` shows what each provider signs."
    )


def _cmd_run(args: argparse.Namespace) -> int:
    _configure_logging(args.verbose)
    problem, sources = check_sources()
    if problem is not None:
        print(f"webhook-pipeline local run: {problem}", file=sys.stderr)
        return 2
    if args.secrets_max_age is not None:  # the workers inherit the environment
        if not 0 <= args.secrets_max_age <= 86_400:
            print("webhook-pipeline local run: --secrets-max-age: 0 to 86400", file=sys.stderr)
            return 2
        os.environ[SECRETS_MAX_AGE_VARIABLE] = str(args.secrets_max_age)
    summary = unsigned_summary(sources)
    if summary is not None and not args.background:  # the background stack prints it itself
        print(summary, flush=True)
        os.environ[UNSIGNED_SUMMARY_VARIABLE] = "printed"  # inherited by every worker
    if args.background:
        try:
            ready = start_background(
                background_argv(args), args.state_dir, timeout=args.ready_timeout
            )
        except StackError as exc:
            print(f"webhook-pipeline local run: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(ready, indent=2))
        print(
            f"local stack running in the background (pid {ready['pid']}); "
            f"stop it with `{command_name()} local stop`"
        )
        return 0
    try:
        options = Options.from_args(args)
    except StackError as exc:
        print(f"webhook-pipeline local run: {exc}", file=sys.stderr)
        return 2
    folder = state_dir(args.state_dir)
    if read_ready(folder) is not None:  # another stack's folder: it refuses to start
        return foreground.run(options)
    function_log = keep_function_log(folder)  # for `audit --local` (a terminal is no file)
    try:
        return foreground.run(options)
    finally:
        if function_log is not None:
            function_log.stop()


def _cmd_stop(args: argparse.Namespace) -> int:
    if stop_running(args.state_dir):
        print("local stack stopped.")
    else:
        print("no local stack is running.")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from webhook_pipeline_ops.local import demo

    _configure_logging(False)
    logging.getLogger().setLevel(logging.WARNING)
    return demo.run_demo(args)
