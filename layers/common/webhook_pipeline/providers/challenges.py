"""Handshake shapes several providers share: a ``GET`` challenge answered with an HMAC of a
query value (:class:`HmacQueryChallenge`: LinkedIn ``challengeCode``, X ``crc_token``), and
:func:`query_value`, a query value decoded exactly once (Microsoft Graph's ``validationToken``).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar
from urllib.parse import parse_qs

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.http import WebhookRequest
from webhook_pipeline.providers.model import Answer, Handshake
from webhook_pipeline.providers.schemes import utf8_hmac
from webhook_pipeline.secrets import SourceSecret

#: The longest query token a challenge is answered for (characters): real ones are far shorter,
#: and an answer must not echo or hash megabytes for anyone who asks.
MAX_CHALLENGE_CHARS = 1024


# -- GET challenges answered with an HMAC of a query value --------------------------------------


def query_value(request: WebhookRequest, name: str) -> str | None:
    """The query parameter ``name``, percent-decoded exactly once (``None`` when absent).

    Read from the raw query string when the request has one (API Gateway HTTP API gives it as
    received); otherwise from the already decoded parameters (REST API, tests). The last value
    wins for a repeated name, as API Gateway's parameters do.
    """
    if request.raw_query:
        values = parse_qs(request.raw_query, keep_blank_values=True).get(name)
        return values[-1] if values else None
    return request.query.get(name)


class HmacQueryChallenge(Handshake):
    """A ``GET ?<parameter>=<token>`` challenge answered 200 with a JSON body holding an
    HMAC-SHA256 of the token keyed with the current signing secret (UTF-8). The challenge is
    unsigned: the answer itself proves the endpoint holds the secret. The provider's only GET,
    so a GET without the parameter is 401 ``handshake_invalid`` rather than 405."""

    method = "GET"
    signed = False
    parameter: ClassVar[str]

    def matches(self, request: WebhookRequest) -> bool:
        return request.method == "GET"

    @abstractmethod
    def body(self, token: str, digest: bytes) -> dict[str, Any]:
        """The JSON answer for ``token`` and the raw HMAC ``digest`` of it."""

    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        """The JSON answer.

        Raises
        ------
        VerificationError
            ``handshake_invalid``: no token, an empty one or one over 1,024 characters.
        """
        token = query_value(request, self.parameter)
        if not token or len(token) > MAX_CHALLENGE_CHARS or not secret.signing:
            raise VerificationError("handshake_invalid", f"no usable {self.parameter}")
        return Answer(200, self.body(token, utf8_hmac(secret.signing[0], token.encode("utf-8"))))
