"""Mollie classic webhooks: **unsigned**. The body is ``id=tr_...`` and nothing else.

Source: Mollie's "Webhooks" (docs.mollie.com/reference/webhooks): Mollie calls the webhook URL
with one form parameter, ``id``, whenever the object changes status (a payment becomes paid,
authorized, expired, failed or canceled; later again for each refund and chargeback), and the
receiver must fetch the object from Mollie's API to learn what happened: "fake calls to your
webhook will never result in orders being processed without being actually paid". Mollie's
next-gen webhooks (``X-Mollie-Signature``, in beta; details UNVERIFIED) are not this provider.

Nothing here verifies that Mollie sent the request, and nothing pretends to:

- ``signs`` declares nothing signed (no id, no timestamp, no body), so every source of this
  provider loads with the loud unsigned warning, and ``require_signed_id = true`` refuses it;
- a source must say it accepts unsigned traffic (``options.accept_unsigned = true``), or the
  sources file fails to load;
- the only check is a random token in the URL configured at Mollie
  (``https://<api>/webhooks/<source>?token=<secret>``; the parameter name is the
  ``token_parameter`` option), compared in constant time with the source's secret (at least 32
  characters of ``A-Z a-z 0-9 _ -``). It keeps strangers from filling the queue; it proves
  nothing about the body (anyone who saw the URL once can post anything), and it lives in
  access logs wherever the URL is logged;
- **the hook must confirm every id by fetching the object from Mollie's API** with the account's
  API key, and act on the status Mollie returns, never on the notification;
- the delivery id is the API Gateway request id (``{ request = "id" }``): Mollie announces every
  status change of one payment with the same body, so the body's id would make the refund
  notification a "duplicate" of the payment's and lose it. Each request is its own delivery;
  Mollie's retry after a lost answer runs the hook again, which is harmless because the hook
  fetches the current state anyway (Mollie: "check against your records that the resource
  actually has been changed"). No event type, resource key or sequence: none is sent.

Retries: Mollie retries a webhook that does not answer 2xx (recalled as up to 10 times over
about 26 hours; UNVERIFIED, not found in the retrieved docs); the done-claim TTL covers a day
and a half, though with per-request ids a retry is never a duplicate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import urlencode, urlsplit

from webhook_pipeline.errors import ConfigurationError, VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.crypto import match_secrets
from webhook_pipeline.providers.inline import InlineCredentialProvider
from webhook_pipeline.providers.model import HOUR, Defaults, LazyVectors, Signs, Verified, samples
from webhook_pipeline.providers.registry import register
from webhook_pipeline.webhook_request import WebhookRequest

DEFAULT_PARAMETER = "token"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,256}")
_PARAMETER = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


@register
class Mollie(InlineCredentialProvider):
    """Mollie's unsigned classic webhooks, admitted by a URL token (see the module docstring).

    Options
    -------
    accept_unsigned : bool
        Must be ``true``: the source accepts requests nobody signed.
    token_parameter : str
        The query parameter holding the token in the URL configured at Mollie (``token``).
    """

    name = "mollie"
    title = "Mollie (classic, unsigned)"
    reference = "docs.mollie.com/reference/webhooks (classic webhooks carry no signature)"
    signs = Signs(
        id=None,
        timestamp=None,
        body=False,
        note="nothing is signed: only a token in the URL admits the request; fetch every id "
        "from Mollie's API and act on what it returns",
    )
    defaults = Defaults(delivery_id=FieldLocation(request="id"), body_format="form")
    credential_params = (DEFAULT_PARAMETER,)  # the instance's: its token_parameter
    retry_horizon_seconds = 36 * HOUR
    retry_horizon_reference = (
        "recalled as up to 10 retries over about 26 h (UNVERIFIED); with per-request ids a "
        "retry is never a duplicate"
    )
    option_names = frozenset({"accept_unsigned", "token_parameter"})
    example_options: ClassVar[Mapping[str, Any]] = {"accept_unsigned": True}
    dev_secret = "dev-mollie-url-token-local-only-0123456789"
    vectors = LazyVectors(
        lambda: (
            samples.Vector(
                secret="s3cr3t-url-token-of-at-least-32-characters",
                headers={"content-type": "application/x-www-form-urlencoded"},
                body=b"id=tr_d0b0E3EA3v",
                now=0,
                origin="self",
                reference="no independent vector exists: Mollie signs nothing; the body is the "
                "docs.mollie.com example, the token compare is ours",
                query={"token": "s3cr3t-url-token-of-at-least-32-characters"},
            ),
        )
    )

    def __init__(
        self, options: Mapping[str, Any] | None = None, tolerance_seconds: int | None = None
    ) -> None:
        super().__init__(options, tolerance_seconds)
        if self.options.get("accept_unsigned") is not True:
            raise ConfigurationError(
                "provider 'mollie': classic Mollie webhooks are unsigned; set "
                "options.accept_unsigned = true to accept them (a URL token is the only check, "
                "and the hook must fetch every id from Mollie's API)"
            )
        parameter = self.options.get("token_parameter", DEFAULT_PARAMETER)
        if not isinstance(parameter, str) or not _PARAMETER.fullmatch(parameter):
            raise ConfigurationError("provider 'mollie': token_parameter is not a plain name")
        self.credential_parameter = parameter
        self.credential_params = (parameter,)

    def validate_secret(self, secret: str) -> None:
        """The URL token: 32 to 256 characters of ``A-Z a-z 0-9 _ -`` (safe in a URL as is).

        Raises
        ------
        ConfigurationError
            Shorter than 32 characters, or holding any other character.
        """
        super().validate_secret(secret)
        if not _TOKEN.fullmatch(secret):
            raise ConfigurationError(
                "the Mollie URL token must be 32-256 characters of A-Z a-z 0-9 _ -"
            )

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Admit a request whose URL carries the source's token; nothing is verified about its
        body (``now`` is unused).

        Raises
        ------
        VerificationError
            ``signature_missing`` (no token in the query), ``signature_malformed`` (a token
            that is not ASCII), ``signature_invalid`` (it matches no secret).
        """
        token = request.query.get(self.credential_parameter)
        if not token:
            raise VerificationError("signature_missing", "no URL token")
        if not token.isascii():
            raise VerificationError("signature_malformed", "the URL token is not ASCII")
        index = match_secrets(secrets, lambda secret: secret.encode("ascii"), [token.encode()])
        return Verified(secret_index=index)

    def sign_request(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> samples.SignedRequest:
        """``url`` with the token added to its query string, as configured at Mollie."""
        token = urlencode({self.credential_parameter: secret})
        if not url:
            return samples.SignedRequest({}, body, f"?{token}")
        separator = "&" if urlsplit(url).query else "?"
        return samples.SignedRequest({}, body, f"{url}{separator}{token}")

    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        payment = resource if resource.startswith("tr_") else f"tr_{resource}"
        return samples.Sample(
            urlencode({"id": payment}).encode("ascii"),
            {"content-type": "application/x-www-form-urlencoded"},
        )
