"""``webhook-pipeline sources list|check`` and ``webhook-pipeline providers``.

``sources list`` prints every source with what its provider's signature covers: where the
delivery id comes from and whether it is signed, the signed timestamp and tolerance, the
done-claim TTL, the handshakes. ``sources check`` loads every source's secret from Secrets
Manager (``--local`` or ``--stack``) and validates it against the source's provider as the
ingest function does: one line per source, ``ok``, ``missing`` or the exact problem; exit code 1
on any problem. ``providers`` prints the provider table of the README and docs/providers.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook_pipeline.source_secrets import parse_secret
from webhook_pipeline.sources import ResolvedSource

from webhook_pipeline_ops.aws import Aws, common_options
from webhook_pipeline_ops.output import print_json, print_table

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient


def register(subparsers: Any) -> None:
    """Add ``sources`` and ``providers``."""
    parser = subparsers.add_parser("sources", help="list the sources, check their secrets")
    actions = parser.add_subparsers(dest="sources_command", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="every source with what its signature covers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _sources_options(listing)
    listing.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    listing.set_defaults(func=run_list)
    check = actions.add_parser(
        "check",
        parents=[common_options(resources=("secrets_prefix",))],
        help="load every source's secret and validate it against its provider",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _sources_options(check)
    check.set_defaults(func=run_check)
    providers = subparsers.add_parser(
        "providers", help="the provider table (what each signs, retry horizon, TTL, handshakes)"
    )
    providers.add_argument(
        "--write",
        action="store_true",
        help="refresh the table in README.md and docs/providers.md instead of printing it",
    )
    providers.set_defaults(func=run_providers)


def _sources_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sources-file", type=Path, help="sources file (default: layers/common/sources.toml)"
    )
    parser.add_argument(
        "--catalogue",
        action="store_true",
        help="also every provider no source uses, as the local stack serves them",
    )


def _sources(args: argparse.Namespace) -> dict[str, ResolvedSource]:
    from webhook_pipeline.sources import load_sources

    from webhook_pipeline_ops.simulator.deliveries import example_sources

    if args.catalogue or getattr(args, "local", False):
        return example_sources(args.sources_file)
    return load_sources(args.sources_file)


def describe(source: ResolvedSource) -> dict[str, Any]:
    """One source as ``sources list`` shows it."""
    provider = source.provider
    return {
        "source": source.name,
        "provider": provider.name,
        "delivery_id": source.delivery_id.describe(),
        "id_signed": source.id_is_signed,
        "unsigned_fields": list(source.unsigned),
        "timestamp": provider.signs.timestamp,
        "tolerance_seconds": provider.tolerance_seconds,
        "dedup_ttl_seconds": source.dedup_ttl_seconds,
        "body_format": source.body_format,
        "batch": provider.batch_path is not None,
        "handshakes": [h.name for h in provider.handshakes],
        "enabled": source.enabled,
    }


def run_list(args: argparse.Namespace) -> int:
    rows = [describe(s) for s in _sources(args).values()]
    if args.json:
        print_json(rows)
        return 0
    print_table(
        [
            {
                "source": r["source"],
                "provider": r["provider"],
                "delivery id": r["delivery_id"],
                "id signed": "yes" if r["id_signed"] else "NO",
                "timestamp": "signed" if r["timestamp"] else "-",
                "tolerance s": r["tolerance_seconds"],
                "ttl s": r["dedup_ttl_seconds"],
                "body": r["body_format"],
            }
            for r in rows
        ],
        [
            "source",
            "provider",
            "delivery id",
            "id signed",
            "timestamp",
            "tolerance s",
            "ttl s",
            "body",
        ],
    )
    return 0


def check_secret(
    client: SecretsManagerClient, prefix: str, source: ResolvedSource
) -> tuple[str, str]:
    """``(status, detail)`` of one source's secret: ``ok``, ``missing`` or ``invalid``."""
    from botocore.exceptions import ClientError

    name = f"{prefix}{source.secret}"
    try:
        value = client.get_secret_value(SecretId=name).get("SecretString") or ""
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "ResourceNotFoundException":
            return "missing", f"no secret {name}"
        return "unreadable", f"{name}: {code}"
    try:
        secret = parse_secret(value)
    except ValueError as exc:
        return "invalid", f"{name}: {exc}"
    problem = source.secret_problem(secret)
    if problem is not None:
        return "invalid", f"{name}: {problem}"
    return "ok", name


def run_check(args: argparse.Namespace) -> int:
    aws = Aws(args)
    prefix = aws.resources.require("secrets_prefix")
    client = aws.client("secretsmanager")
    results = {name: check_secret(client, prefix, s) for name, s in _sources(args).items()}
    if args.json:
        print_json({n: {"status": st, "detail": d} for n, (st, d) in results.items()})
    else:
        print_table(
            [{"source": n, "secret": st, "detail": d} for n, (st, d) in results.items()],
            ["source", "secret", "detail"],
        )
    return 0 if all(st == "ok" for st, _ in results.values()) else 1


def run_providers(args: argparse.Namespace) -> int:
    from webhook_pipeline_ops.provider_table import DOCUMENTS, provider_table, with_table

    if not args.write:
        print(provider_table())
        return 0
    for path in DOCUMENTS:
        path.write_text(with_table(path.read_text()))
        print(path)
    return 0
