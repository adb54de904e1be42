"""The options of ``local run`` (also ``local demo``): parsed (:class:`Options`), added to a parser
(:func:`add_run_arguments`) and written back as an argv for a background start
(:func:`background_argv`); :class:`StackError`, the one error a stack start raises."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

REGION = "us-east-1"

#: Template parameters the local stack sets unless ``--parameter`` names them. The archiver's
#: batching window is 60 s in AWS (fewer, larger archive objects); locally a delivery reaches the
#: archive within seconds, as a demo expects. ``--parameter ArchiverBatchingWindowSeconds=60``
#: restores the deployed value.
LOCAL_PARAMETER_DEFAULTS = {"ArchiverBatchingWindowSeconds": "2"}


def local_parameters(given: dict[str, str], gateway_url: str) -> dict[str, str]:
    """The parameter overrides of a local stack: ``given`` (``--parameter``), then
    :data:`LOCAL_PARAMETER_DEFAULTS` and ``PublicBaseUrl`` = ``gateway_url`` where not given
    (URL-signing providers - Twilio, Square, HubSpot - sign the URL they call: locally that is
    the gateway's own http:// URL)."""
    return {**LOCAL_PARAMETER_DEFAULTS, "PublicBaseUrl": gateway_url, **given}


class StackError(Exception):
    """The local stack cannot start (port in use, bad template, a function fails its init)."""


@dataclass
class Options:
    """Options of ``local run`` (see :func:`add_run_arguments`)."""

    host: str = "127.0.0.1"
    port: int = 3000
    moto_port: int = 0
    template: Path | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    visibility_timeout: int | None = None
    redis_url: str | None = None
    redis_mode: str = "auto"
    state_dir: Path | None = None
    stack_name: str = "webhook-pipeline-local"
    region: str = REGION
    random_secrets: bool = False
    for_containers: bool = False
    ingest_workers: int = 4
    invoke_port: int = 0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        params = {}
        for item in args.parameter or []:
            key, sep, value = item.partition("=")
            if not sep:
                raise StackError(f"--parameter {item!r}: expected Key=Value")
            params[key] = value
        return cls(
            host=args.host,
            port=args.port,
            moto_port=args.moto_port,
            template=Path(args.template) if args.template else None,
            parameters=params,
            visibility_timeout=args.visibility_timeout,
            redis_url=args.redis_url
            if args.redis_url is not None
            else os.environ.get("REDIS_URL") or None,
            redis_mode=args.redis,
            state_dir=Path(args.state_dir) if args.state_dir else None,
            stack_name=args.stack_name,
            region=args.region,
            random_secrets=args.random_secrets,
            for_containers=getattr(args, "for_containers", False),
            ingest_workers=getattr(args, "ingest_workers", 4),
            invoke_port=getattr(args, "invoke_port", 0),
        )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``local run`` (also accepted by ``local demo``)."""
    _add_listen_arguments(parser)
    _add_resource_arguments(parser)
    _add_process_arguments(parser)


def _add_listen_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the gateway and the moto server listen."""
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="gateway bind address (127.0.0.1; anything else exposes the webhooks and is warned "
        "about)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=3000,
        help="gateway port: http://HOST:PORT/webhooks/{source} (3000; 0 = free)",
    )
    parser.add_argument(
        "--moto-port",
        type=int,
        default=0,
        help="moto server port on 127.0.0.1 (default: a free port)",
    )


def _add_resource_arguments(parser: argparse.ArgumentParser) -> None:
    """The template, its parameters and the emulated resources (Redis, state folder, secrets)."""
    parser.add_argument("--template", help="SAM template (default: template.yaml of the repo)")
    parser.add_argument(
        "--parameter",
        action="append",
        metavar="KEY=VALUE",
        help="template parameter override (repeatable)",
    )
    parser.add_argument(
        "--visibility-timeout",
        type=int,
        metavar="SECONDS",
        help="override every queue's VisibilityTimeout (e.g. 2 for demos/tests: "
        "a poison message then reaches the DLQ in seconds)",
    )
    parser.add_argument(
        "--redis-url",
        default=None,
        help="use this Redis (default: $REDIS_URL, else start redis-server)",
    )
    parser.add_argument(
        "--redis",
        choices=("auto", "server", "in-process"),
        default="auto",
        help="auto: redis-server if installed, else an in-process stand-in",
    )
    parser.add_argument(
        "--state-dir",
        help="folder of outputs.json, secrets.json, ready "
        "(default: .local-stack or $WEBHOOK_PIPELINE_LOCAL_DIR)",
    )
    parser.add_argument(
        "--stack-name", default="webhook-pipeline-local", help="AWS::StackName for resource names"
    )
    parser.add_argument("--region", default=REGION, help="region of the emulated resources")
    parser.add_argument(
        "--random-secrets",
        action="store_true",
        help="random signing secrets instead of the documented dev secrets",
    )


def _add_process_arguments(parser: argparse.ArgumentParser) -> None:
    """``--for-containers`` with its Invoke API port, and the ingest function's workers."""
    parser.add_argument(
        "--for-containers",
        action="store_true",
        help="backend for `sam local invoke`: the moto server and the Redis started here listen "
        "on 0.0.0.0 (reachable from Lambda containers as host.docker.internal), and "
        "STATE_DIR/sam-env.json is written for `sam local invoke --env-vars`. SECURITY: 0.0.0.0 "
        "exposes the emulators (no authentication) to the machine's network; use it only for "
        "local development on a trusted network. A --redis-url Redis is used as is and must "
        "itself be reachable from the containers. Also serves the Lambda Invoke API "
        "(POST /2015-03-31/functions/NAME/invocations) on its own 127.0.0.1 port "
        "(--invoke-port; ready/outputs name it LambdaEndpointUrl), never on the webhook port",
    )
    parser.add_argument(
        "--invoke-port",
        type=int,
        default=0,
        help="loopback port of the Lambda Invoke API with --for-containers (default: a free port)",
    )
    parser.add_argument(
        "--ingest-workers",
        type=int,
        default=4,
        help="worker processes of the ingest function (its concurrent executions; 4)",
    )


def background_argv(args: argparse.Namespace) -> list[str]:
    """The ``local run`` options of ``args`` as an argv (without ``--background``)."""
    argv = [
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--moto-port",
        str(args.moto_port),
        "--redis",
        args.redis,
        "--stack-name",
        args.stack_name,
        "--region",
        args.region,
    ]
    for flag, value in (
        ("--template", args.template),
        ("--redis-url", args.redis_url),
        ("--visibility-timeout", args.visibility_timeout),
        ("--state-dir", args.state_dir),
    ):
        if value is not None:
            argv += [flag, str(value)]
    for item in args.parameter or []:
        argv += ["--parameter", item]
    if args.random_secrets:
        argv.append("--random-secrets")
    if getattr(args, "for_containers", False):
        argv.append("--for-containers")
    for flag, name in (("--invoke-port", "invoke_port"), ("--ingest-workers", "ingest_workers")):
        if getattr(args, name, None) is not None:
            argv += [flag, str(getattr(args, name))]
    if getattr(args, "secrets_max_age", None) is not None:
        argv += ["--secrets-max-age", str(args.secrets_max_age)]
    if getattr(args, "verbose", False):
        argv.append("--verbose")
    return argv
