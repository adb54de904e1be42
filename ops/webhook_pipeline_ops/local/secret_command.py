"""``webhook-pipeline local secret set SOURCE [VALUE]``: give a source of the running local stack
another signing secret.

The value is checked against the source's provider format, stored in the stack's Secrets Manager
(moto) under the source's secret id, as ``aws secretsmanager put-secret-value`` would for a
deployed stack, and written to ``secrets.json`` so that ``send`` signs with it. For asymmetric
providers (SendGrid, Discord) VALUE is the private key ``send`` signs with and the stored value
its public key; a handshake's verify token is kept.

The ingest function caches a secret for ``SECRETS_MAX_AGE_SECONDS`` (300 s), locally as deployed:
the new value is used once the cached one expires (at once by a worker started after the
change). ``local run --secrets-max-age SECONDS`` shortens the cache for a local stack.
"""

from __future__ import annotations

import argparse
import json
import secrets as random_secrets
import sys
from pathlib import Path
from typing import Any

#: The ingest function's setting for how long it caches a secret (seconds).
SECRETS_MAX_AGE_VARIABLE = "SECRETS_MAX_AGE_SECONDS"


def register(local_actions: Any) -> None:
    """Add ``secret set`` to the ``local`` actions."""
    secret = local_actions.add_parser(
        "secret",
        help="set a source's signing secret in the running local stack (send signs with it)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = secret.add_subparsers(dest="secret_command", metavar="ACTION", required=True)
    put = actions.add_parser("set", help="store a new signing secret for SOURCE")
    put.add_argument("source", metavar="SOURCE")
    put.add_argument(
        "value",
        metavar="VALUE",
        nargs="?",
        help="the signing secret; '-' reads it from stdin; omitted: a random one in the "
        "provider's format",
    )
    put.add_argument("--state-dir", help="folder of the stack's files (default: .local-stack)")
    put.set_defaults(func=run_set)


def run_set(args: argparse.Namespace) -> int:
    from webhook_pipeline_ops.local import state_dir

    value = sys.stdin.read().strip() if args.value == "-" else args.value
    try:
        secret_id = set_secret(state_dir(args.state_dir), args.source, value)
    except (LookupError, ValueError) as exc:
        print(f"webhook-pipeline local secret set: {exc}", file=sys.stderr)
        return 1
    print(
        f"{args.source}: new signing secret stored as {secret_id} and in secrets.json (send "
        "signs with it). The ingest function uses it once its cached value expires: within "
        f"{SECRETS_MAX_AGE_VARIABLE} (300 s, or the stack's `local run --secrets-max-age`)."
    )
    return 0


def set_secret(folder: Path, source_name: str, value: str | None) -> str:
    """Store ``value`` (``None``: a random one) as ``source_name``'s signing secret in the stack
    running from ``folder``.

    Returns
    -------
    str
        The Secrets Manager secret id.

    Raises
    ------
    LookupError
        No stack runs from ``folder``, or it has no such source.
    ValueError
        ``value`` is not in the provider's format (the provider's reason).
    """
    import boto3
    from webhook_pipeline.source_secrets import parse_secret

    from webhook_pipeline_ops.local import OUTPUTS_FILE, SECRETS_FILE
    from webhook_pipeline_ops.local.state_files import read_ready
    from webhook_pipeline_ops.simulator.deliveries import example_sources

    if read_ready(folder) is None:
        raise LookupError(f"no local stack runs from {folder} (webhook-pipeline local run)")
    doc: dict[str, Any] = json.loads((folder / SECRETS_FILE).read_text())
    entry = doc["sources"].get(source_name)
    source = example_sources().get(source_name)
    if entry is None or source is None:
        raise LookupError(f"the local stack has no source {source_name!r}")
    provider = source.provider
    signing = value or provider.random_secret(random_secrets.token_bytes(32))
    outputs = json.loads((folder / OUTPUTS_FILE).read_text())
    client = boto3.client(
        "secretsmanager",
        endpoint_url=outputs["EndpointUrl"],
        region_name=outputs["Region"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # noqa: S106 - the local moto server's fake credentials
    )
    current = client.get_secret_value(SecretId=entry["secret_id"])["SecretString"]
    token = parse_secret(current).verify_token
    verification = provider.verification_secret(signing)
    stored = (
        verification
        if token is None
        else json.dumps({"current": verification, "verify_token": token})
    )
    problem = source.secret_problem(parse_secret(stored))
    if problem is not None:
        raise ValueError(f"{source_name} ({provider.name}): {problem}")
    client.put_secret_value(SecretId=entry["secret_id"], SecretString=stored)
    entry["secret"] = signing
    path = folder / SECRETS_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tmp.chmod(0o600)
    tmp.replace(path)
    return str(entry["secret_id"])
