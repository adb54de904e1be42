"""``webhook-pipeline console``: serve the web console on 127.0.0.1 against the local stack or a
deployed stack, with your own AWS credentials (nothing is deployed, nothing exposed).

Pages: deliveries (newest first, live, filters, pages), one delivery (record and body), one
resource (its deliveries in sequence order), the dead-letter queue (select, dry run, confirm,
replay at a rate with progress), health (queues, metrics, alarms) and the archive (search by the
filters of ``archive search``, each archived delivery's body and headers). Ctrl-C stops it.

Binding beyond loopback (``--host``) lets anyone who can reach the port read your deliveries and
replay your DLQ with your credentials: do it only on a network you trust, and name the address
clients will use with ``--allowed-host`` (requests for any other Host are refused).
"""

from __future__ import annotations

import argparse
import ipaddress
import secrets
import sys
from typing import Any

from webhook_pipeline_ops.aws import Aws, OpsError, common_options
from webhook_pipeline_ops.console import DEFAULT_PORT

CONSOLE_RESOURCES = ("queue_url", "dlq_url", "table", "payload_bucket", "archive_bucket")
ALL_IPV4 = "0.0.0.0"  # noqa: S104 - only compared with --host, to require --allowed-host


def register(subparsers: Any) -> None:
    """Add ``console``."""
    parser = subparsers.add_parser(
        "console",
        parents=[common_options(CONSOLE_RESOURCES, json_output=False)],
        help="web console: deliveries, one delivery or resource, the DLQ and replay, health",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    web = parser.add_argument_group("web server")
    web.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (127.0.0.1; anything else is reachable from other machines)",
    )
    web.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port ({DEFAULT_PORT}; 0 = a free one)"
    )
    web.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="another Host header value to answer to (repeatable; needed with --host 0.0.0.0)",
    )
    parser.set_defaults(func=run)


def target_of(args: argparse.Namespace, aws: Aws) -> Any:
    """What the console looks at, for its header and its metrics."""
    from webhook_pipeline_ops.console.backend import Target

    region = aws.session.region_name or "us-east-1"
    if args.local:
        stack = aws.local_outputs.get("StackName") or "webhook-pipeline-local"
        return Target(local=True, label=f"local stack ({stack})", stack=stack, region=region)
    if args.stack:
        return Target(
            local=False, label=f"stack {args.stack} ({region})", stack=args.stack, region=region
        )
    return Target(local=False, label=f"explicit resources ({region})", stack=None, region=region)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    from webhook_pipeline_ops.console.app import create_app
    from webhook_pipeline_ops.console.backend import Backend
    from webhook_pipeline_ops.console.security import host_port
    from webhook_pipeline_ops.console.server import ConsoleServer, bind

    if not 0 <= args.port <= 65535:
        raise OpsError("--port must be within 0..65535", exit_code=2)
    wildcard = args.host in (ALL_IPV4, "::", "")
    if wildcard and not args.allowed_host:
        raise OpsError(
            f"--host {args.host or ALL_IPV4} needs --allowed-host HOST:PORT (the address "
            "browsers will use): requests for any other Host are refused",
            exit_code=2,
        )
    aws = Aws(args)
    backend = Backend(aws, target_of(args, aws))
    backend.check()  # no connection -> the CLI's "is the local stack running?" error
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise OpsError(f"cannot listen on {args.host}:{args.port}: {exc} (use --port)") from None
    port = int(sock.getsockname()[1])
    own = [] if wildcard else [host_port(args.host, port)]
    allowed = [*own, *args.allowed_host]
    token = secrets.token_urlsafe(32)
    app = create_app(backend, allowed_hosts=allowed, token=token)
    url = f"http://{allowed[0]}/"
    if not _loopback(args.host):
        print(
            "WARNING: the console listens on "
            f"{args.host}:{port}, beyond this machine's loopback. Anyone who can reach it can "
            "read your deliveries and replay your dead-letter queue with YOUR AWS credentials. "
            "Use it only on a network you trust; Ctrl-C stops it.",
            file=sys.stderr,
            flush=True,
        )
    print(f"webhook-pipeline console: {url}  ({backend.target.label}; Ctrl-C stops it)", flush=True)
    ConsoleServer(app, sock).run()
    print("console stopped.", flush=True)
    return 0
