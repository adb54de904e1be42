"""``webhook-pipeline send``: a sender simulator that signs and posts realistic webhooks.

Each source of ``layers/common/sources.toml`` gets provider-shaped payloads
(:func:`webhook_pipeline_ops.simulator.deliveries.payload`: a Stripe event with
``id``/``type``/``created``/``data.object.id``, GitHub with ``X-GitHub-Delivery``/
``X-GitHub-Event``, Standard Webhooks ``type``/``timestamp``/``data.id``, Slack
``event_callback`` with ``event_id``/``event.type``,
Shopify ``admin_graphql_api_id``/``updated_at`` and its headers, generic HMAC) signed by the
source's scheme (``SignatureScheme.sign``) with the source's secret, at send time, as a real
provider signs each attempt.

Options shape the traffic: ``--count`` deliveries per source spread over ``--resources``
resources with increasing sequence values, ``--duplicates`` (a fraction re-sent later with the
same delivery id and body), ``--out-of-order`` (each resource's events sent in swapped pairs, the
newer first), ``--rate`` or ``--burst``, and a sender-side ``--timeout`` with ``--retries`` that
resend the SAME delivery after a timeout, a connection error or a 5xx (honouring ``Retry-After``,
capped). Uses only the standard library (``urllib``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

from webhook_pipeline_ops.output import DefaultsHelpFormatter
from webhook_pipeline_ops.simulator.outcomes import Summary
from webhook_pipeline_ops.simulator.sender import (
    DEFAULT_URL,
    plan,
    recorded_resource_key,
    send_all,
    source_url,
)


def load_local_secrets() -> dict[str, str]:
    """Signing secrets of the running local stack (``.local-stack/secrets.json``)."""
    from webhook_pipeline_ops.local.dev_secrets import read_secrets

    return read_secrets()


def default_base_url() -> str:
    """The local stack's ``ApiUrl`` from ``outputs.json``, else http://127.0.0.1:3000."""
    from webhook_pipeline_ops.local import OUTPUTS_FILE, state_dir

    try:
        return str(json.loads((state_dir() / OUTPUTS_FILE).read_text())["ApiUrl"])
    except (OSError, ValueError, KeyError):
        return DEFAULT_URL


def register(subparsers: Any) -> None:
    """Add ``send`` to the CLI."""
    p = subparsers.add_parser(
        "send",
        help="sign and send realistic webhooks (local stack or a deployed URL)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument(
        "--source",
        action="append",
        metavar="NAME",
        help="source(s) to send as (repeatable or comma-separated; default: all)",
    )
    p.add_argument("--count", type=int, default=5, help="unique deliveries per source")
    p.add_argument("--rate", type=float, default=20.0, help="requests per second")
    p.add_argument("--burst", action="store_true", help="send everything at once (64 at a time)")
    p.add_argument("--concurrency", type=int, default=8, help="parallel senders when paced")
    p.add_argument(
        "--duplicates",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="fraction of deliveries re-sent with the same id and body (0..1)",
    )
    p.add_argument(
        "--out-of-order",
        action="store_true",
        help="send each resource's events in swapped pairs (newer first)",
    )
    p.add_argument("--resources", type=int, default=1, help="distinct resources per source")
    p.add_argument("--timeout", type=float, default=10.0, help="sender-side timeout, seconds")
    p.add_argument(
        "--retries",
        type=int,
        default=2,
        help="resends of the same delivery after a timeout or 5xx",
    )
    p.add_argument(
        "--url",
        help="base URL (default: the local stack's ApiUrl, else "
        f"{DEFAULT_URL}); /webhooks/{{source}} is appended",
    )
    p.add_argument("--secret", help="signing secret (default: .local-stack/secrets.json)")
    p.add_argument("--sources-file", help="sources file (default: layers/common/sources.toml)")
    p.add_argument("--seed", type=int, help="random seed (repeatable traffic shape)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--list",
        action="store_true",
        help="also list each delivery: source, delivery id, resource, final status",
    )
    p.set_defaults(func=_cmd_send)


def _cmd_send(args: argparse.Namespace) -> int:
    from webhook_pipeline_ops.simulator.deliveries import example_sources

    all_sources = example_sources(args.sources_file)
    names = [n.strip() for item in (args.source or []) for n in item.split(",") if n.strip()]
    names = names or list(all_sources)
    unknown = [n for n in names if n not in all_sources]
    if unknown:
        print(
            f"webhook-pipeline send: unknown source(s) {unknown}; known: {sorted(all_sources)}",
            file=sys.stderr,
        )
        return 2
    secrets = _signing_secrets(names, args.secret)
    if secrets is None:
        return 1
    rng = random.Random(args.seed)  # noqa: S311
    base_url = args.url or default_base_url()
    planned = plan(
        [all_sources[n] for n in names],
        count=args.count,
        resources=args.resources,
        duplicates=args.duplicates,
        out_of_order=args.out_of_order,
        rng=rng,
        base_url=base_url,
    )
    summary = send_all(
        planned,
        base_url=base_url,
        secrets=secrets,
        rate=args.rate,
        burst=args.burst,
        concurrency=args.concurrency,
        timeout=args.timeout,
        retries=args.retries,
    )
    _print_summary(summary, args, base_url, names)
    d = summary.as_dict()
    if d["no_answer"]:
        why = ", ".join(sorted(d["no_answer_reasons"]))
        hint = " (is the local stack running?)" if "connection refused" in why else ""
        print(
            f"webhook-pipeline send: {d['no_answer']} deliveries got no answer from "
            f"{source_url(base_url, '{source}')}: {why}{hint}",
            file=sys.stderr,
        )
    return 0 if d["server_5xx"] == 0 and d["no_answer"] == 0 else 1


def _signing_secrets(names: list[str], secret: str | None) -> dict[str, str] | None:
    """Source name -> signing secret: ``secret`` for every source, else the running local
    stack's; ``None`` when some is missing (said why on stderr)."""
    if secret:
        return dict.fromkeys(names, secret)
    try:
        secrets = load_local_secrets()
    except (OSError, ValueError, KeyError):
        print(
            "webhook-pipeline send: no .local-stack/secrets.json (is the local stack "
            "running?); pass --secret",
            file=sys.stderr,
        )
        return None
    missing = [n for n in names if n not in secrets]
    if missing:
        print(f"webhook-pipeline send: no secret for {missing}; pass --secret", file=sys.stderr)
        return None
    return secrets


def _print_summary(
    summary: Summary, args: argparse.Namespace, base_url: str, names: list[str]
) -> None:
    """The target, with ``--list`` each delivery, then the summary (``--json``: as JSON)."""
    if not args.json:
        print(f"-> {source_url(base_url, '{source}')}  sources: {', '.join(names)}")
    if args.list:
        print(f"{'SOURCE':18} {'DELIVERY_ID':40} {'RESOURCE_KEY':36} STATUS")
        for o in summary.outcomes:
            tag = " (duplicate)" if o.planned.duplicate else ""
            print(
                f"{o.planned.source.name:18} {o.planned.delivery_id:40} "
                f"{recorded_resource_key(o.planned) or '-':36} {o.final.status}{tag}"
            )
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2))
    else:
        print(summary.render())


__all__ = ["default_base_url", "load_local_secrets", "register"]
