"""Helpers of the provider tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook_pipeline.providers import Provider, provider_class
from webhook_pipeline.webhook_request import WebhookRequest


def build(
    name: str, options: Mapping[str, Any] | None = None, tolerance: int | None = None
) -> Provider:
    """The provider ``name`` built as a source would build it."""
    return provider_class(name)(options, tolerance)


def make_request(headers: Mapping[str, str], body: bytes, **kw: Any) -> WebhookRequest:
    """A request as ``webhook_request.request_from_event`` builds it: header names lower-cased."""
    return WebhookRequest(
        method=kw.pop("method", "POST"),
        source=kw.pop("source", "s"),
        headers={k.lower(): v for k, v in headers.items()},
        body=body,
        **kw,
    )
