"""Test vectors several providers share (:class:`~webhook_pipeline.providers.model.Vector`).

- :func:`github_published_vector`: GitHub's published ``sha256=<hex>`` of the body, reused by
  the providers that compute the same HMAC (GitHub, Meta, Bitbucket, Jira).
- :func:`recipe_vector`: a vector we computed from a provider's documented recipe, for the
  providers that publish none; it proves self-consistency only and its reference says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook_pipeline.providers.model import samples


def github_published_vector(header: str, reference: str | None = None) -> samples.Vector:
    """GitHub's published vector (secret ``It's a Secret to Everybody``, body ``Hello, World!``)
    under ``header``, for GitHub and the providers that compute the same ``sha256=<hex>`` of the
    body; ``reference`` (when given) replaces the default one naming the reuse."""
    return samples.Vector(
        secret="It's a Secret to Everybody",
        headers={header: "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
        body=b"Hello, World!",
        now=0,
        origin="published",
        reference=reference
        or "github/docs validating-webhook-deliveries.md: the same HMAC-SHA256 hex of "
        f"the body with a sha256= prefix, here under {header}",
    )


RECIPE_BODY = b'{"id":"evt_1","type":"test"}'


def recipe_vector(
    secret: str,
    headers: Mapping[str, str],
    *,
    publisher: str,
    now: float = 0,
    section: int = 16,
    lacking: str = "no vector and no signer",
) -> samples.Vector:
    """A vector over :data:`RECIPE_BODY` computed with stdlib ``hmac`` from the documented recipe
    (providers-wave2.md ``section``), for a provider (``publisher``) that publishes ``lacking``:
    ``origin="self"``, so it proves self-consistency only, and the reference says so."""
    return samples.Vector(
        secret=secret,
        headers=headers,
        body=RECIPE_BODY,
        now=now,
        origin="self",
        reference="computed with stdlib hmac from the documented recipe (providers-wave2 "
        f"section {section}); self-consistency only: {publisher} publishes {lacking}",
    )
