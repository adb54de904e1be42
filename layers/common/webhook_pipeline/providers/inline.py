"""The base of providers whose credential travels in the body or the URL, not a header."""

from __future__ import annotations

from abc import abstractmethod

from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.model import samples


class InlineCredentialProvider(Provider):
    """A provider whose sender attaches no signature header: the credential travels inside the
    body (Adyen's per-item ``hmacSignature``, Mailgun's ``signature``) or the URL (Mollie's
    token), and :meth:`sign_request` writes it there."""

    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """No headers: the credential is in the body or the URL (:meth:`sign_request`)."""
        return {}

    @abstractmethod
    def sign_request(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> samples.SignedRequest:
        """What the sender sends, with the credential written into the body or the URL."""
