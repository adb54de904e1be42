"""Which credentials to redact in what the operator tools show or log: the named source's
provider's (:attr:`~webhook_pipeline.providers.base.Provider.credential_fields`,
``credential_params``), and every provider's when the source is not known here.

The replacing itself is :mod:`webhook_pipeline.redaction`'s.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from webhook_pipeline.redaction import redact_body

if TYPE_CHECKING:
    from webhook_pipeline.providers.base import Provider


@functools.cache
def _providers() -> dict[str, Provider]:
    """The provider of every source the stack serves, by source name (``{}`` when the
    sources file cannot be read)."""
    from webhook_pipeline.errors import ConfigurationError

    from webhook_pipeline_ops.simulator.deliveries import example_sources

    try:
        return {name: s.provider for name, s in example_sources().items()}
    except ConfigurationError:
        return {}


def _candidates(source: str | None) -> list[Provider]:
    known = _providers().get(source or "")
    return [known] if known is not None else list(_providers().values())


def shown_body(source: str | None, raw: bytes) -> bytes:
    """``raw`` as a page or a terminal may show it: the credential fields of ``source``'s
    provider (of every provider when ``source`` is unknown) replaced by ``[redacted]``, in a
    stored event (one element of a batch: the fields are relative to it) or a whole POST."""
    fields_by_path: dict[str | None, set[str]] = {}
    for provider in _candidates(source):
        paths = [None] if provider.batch_path is None else [None, provider.batch_path]
        for path in paths:
            fields_by_path.setdefault(path, set()).update(provider.credential_fields)
    for path, fields in fields_by_path.items():  # one parse per batch path, not per provider
        raw = redact_body(raw, fields, path)
    return raw


def query_credentials() -> frozenset[str]:
    """Every query parameter that carries a credential for some source the stack serves
    (Mollie's ``token`` or its configured name, Meta's ``hub.verify_token``)."""
    from webhook_pipeline.providers.registry import all_providers

    names = {n for p in _providers().values() for n in p.credential_params}
    names.update(n for cls in all_providers().values() for n in cls.credential_params)
    return frozenset(names)
