"""Handshake shapes several providers share: a ``GET`` challenge answered with an HMAC of a
query value (:class:`HmacQueryChallenge`: LinkedIn ``challengeCode``, X ``crc_token``), and
:func:`query_value`, a query value decoded exactly once (Microsoft Graph's ``validationToken``).
"""

from __future__ import annotations

import json
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


def _parses_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


class HmacQueryChallenge(Handshake):
    """A ``GET ?<parameter>=<token>`` challenge answered 200 with a JSON body holding an
    HMAC-SHA256 of the token keyed with the current signing secret (UTF-8). The challenge is
    unsigned: the answer itself proves the endpoint holds the secret. The provider's only GET,
    so a GET without the parameter is 401 ``handshake_invalid`` rather than 405.

    The answer is the same HMAC, under the same key, as a delivery's signature of its body (X,
    LinkedIn), so anyone may ask for it: a token that could be a delivery body would make this a
    signing oracle. Their delivery bodies are JSON, so a token that parses as JSON (an object, an
    array, but also a number or a string) is refused; the tokens these providers send are random
    strings that do not. A provider whose signed message is the body with a prefix (LinkedIn's
    ``prefix_in_hmac`` reading signs ``"hmacsha256=" + body``) names that prefix in
    :attr:`signed_prefixes`, and a token starting with it (in any case) is refused as well:
    otherwise ``hmacsha256=`` plus a body of the caller's choice, the empty body included,
    would be signed."""

    method = "GET"
    signed = False
    parameter: ClassVar[str]
    #: Prefixes the provider's deliveries are signed with in front of the body.
    signed_prefixes: ClassVar[tuple[str, ...]] = ()

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
            ``handshake_invalid``: no token, an empty one, one over 1,024 characters, or one that
            could be the signed message of a delivery (a JSON body, or one of
            :attr:`signed_prefixes` followed by anything): it would be signed like one.
        """
        token = query_value(request, self.parameter)
        if not token or len(token) > MAX_CHALLENGE_CHARS or not secret.signing:
            raise VerificationError("handshake_invalid", f"no usable {self.parameter}")
        folded = token.casefold()
        if _parses_as_json(token) or any(
            folded.startswith(p.casefold()) for p in self.signed_prefixes
        ):
            raise VerificationError(
                "handshake_invalid", f"{self.parameter} could be a delivery body: not signed"
            )
        return Answer(200, self.body(token, utf8_hmac(secret.signing[0], token.encode("utf-8"))))
