"""Registry of signature schemes by name (the ``scheme`` of a source).

Adding a provider: write ``signatures/<provider>.py`` with a :class:`SignatureScheme` subclass,
import it here and add it to ``SCHEMES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook_pipeline.signatures.base import SignatureScheme
from webhook_pipeline.signatures.generic_hmac import GenericHmacScheme
from webhook_pipeline.signatures.github import GitHubScheme
from webhook_pipeline.signatures.meta import MetaScheme
from webhook_pipeline.signatures.shopify import ShopifyScheme
from webhook_pipeline.signatures.slack import SlackScheme
from webhook_pipeline.signatures.standard_webhooks import StandardWebhooksScheme
from webhook_pipeline.signatures.stripe import StripeScheme

SCHEMES: dict[str, type[SignatureScheme]] = {
    cls.name: cls
    for cls in (
        StripeScheme,
        GitHubScheme,
        StandardWebhooksScheme,
        SlackScheme,
        ShopifyScheme,
        GenericHmacScheme,
        MetaScheme,
    )
}


def build_scheme(
    name: str, options: Mapping[str, Any] | None = None, tolerance_seconds: int | None = None
) -> SignatureScheme:
    """Instantiate the scheme ``name`` with its source's options and tolerance (seconds).

    Raises
    ------
    ConfigurationError
        Unknown scheme name or invalid options.
    """
    from webhook_pipeline.errors import ConfigurationError

    try:
        cls = SCHEMES[name]
    except KeyError as exc:
        raise ConfigurationError(
            f"unknown signature scheme {name!r}; known: {sorted(SCHEMES)}"
        ) from exc
    return cls(options, tolerance_seconds)
