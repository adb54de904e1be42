"""The development secrets of the local stack: one per example source (every provider), created
in the moto server's Secrets Manager (:func:`seed_secrets`) and read back by the simulator and
the demo from ``secrets.json`` (:func:`read_secrets`)."""

from __future__ import annotations

import json
import secrets as random_secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook_pipeline.source_secrets import parse_secret
from webhook_pipeline.sources import ResolvedSource

from webhook_pipeline_ops.local import SECRETS_FILE, state_dir

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient


def dev_secret(source: ResolvedSource, *, random: bool) -> tuple[str, str]:
    """The development secret of a source: ``(signing secret, stored Secrets Manager value)``.

    The provider's documented development value (the one the committed ``events/`` are signed
    with) unless ``random``; a random one keeps the provider's format (``whsec_`` + base64 for
    Standard Webhooks...). For asymmetric providers (SendGrid, Discord, v1a) the signing secret
    is the private key the simulator signs with and the stored value its public key; a
    handshake's verify token is random too with ``random``.
    """
    provider = source.provider
    stored = provider.dev_secret_value()
    if not random:
        return provider.dev_secret, stored
    signing = provider.random_secret(random_secrets.token_bytes(32))
    verification = provider.verification_secret(signing)
    if parse_secret(stored).verify_token is None:
        return signing, verification
    token = random_secrets.token_hex(12)
    return signing, json.dumps({"current": verification, "verify_token": token})


def seed_secrets(
    secretsmanager: SecretsManagerClient, prefix: str, sources_file: Path | None, *, random: bool
) -> dict[str, Any]:
    """Create one secret per example source under ``prefix``; return the ``secrets.json``
    document. Every provider of the registry is covered (the catalogue sources)."""
    from webhook_pipeline_ops.simulator.deliveries import example_sources

    doc: dict[str, Any] = {"secrets_prefix": prefix, "sources": {}}
    for name, source in example_sources(sources_file).items():
        signing, stored = dev_secret(source, random=random)
        secret_id = f"{prefix}{source.secret}"
        secretsmanager.create_secret(Name=secret_id, SecretString=stored)
        token = parse_secret(stored).verify_token
        if token is not None:
            doc.setdefault("verify_tokens", {})[name] = token
        doc["sources"][name] = {
            "provider": source.provider.name,
            "secret_id": secret_id,
            "secret": signing,
        }
    return doc


def read_secrets(directory: Path | None = None) -> dict[str, str]:
    """Source name -> signing secret, from the running local stack's ``secrets.json``."""
    path = state_dir(directory) / SECRETS_FILE
    doc = json.loads(path.read_text())
    return {name: entry["secret"] for name, entry in doc["sources"].items()}


def secrets_location(
    environments: list[dict[str, str]], *, default_prefix: str, default_sources: Path
) -> tuple[str, Path]:
    """``(secrets prefix, sources file)`` the functions read: the first function environment
    with ``SECRETS_PREFIX`` / ``SOURCES_FILE``, else the defaults."""
    prefix = next((env["SECRETS_PREFIX"] for env in environments if "SECRETS_PREFIX" in env), None)
    sources = next((env["SOURCES_FILE"] for env in environments if "SOURCES_FILE" in env), None)
    return (
        default_prefix if prefix is None else prefix,
        default_sources if sources is None else Path(sources),
    )
