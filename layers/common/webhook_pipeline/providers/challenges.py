"""Handshake shapes several providers share: a ``GET`` challenge answered with an HMAC of a
query value (:class:`HmacQueryChallenge`: LinkedIn ``challengeCode``, X ``crc_token``), and
:func:`query_value`, a query value decoded exactly once (Microsoft Graph's ``validationToken``).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar
from urllib.parse import parse_qs

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.providers.crypto import utf8_hmac
from webhook_pipeline.providers.model import Answer, Handshake
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest

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


#: The byte every delivery of a provider with an :class:`HmacQueryChallenge` holds and no token
#: it answers does: their deliveries are JSON objects (``{``), their tokens random strings.
OBJECT_OPEN = b"{"


class HmacQueryChallenge(Handshake):
    """A ``GET ?<parameter>=<token>`` challenge answered 200 with a JSON body holding an
    HMAC-SHA256 of the token keyed with the current signing secret (UTF-8). The challenge is
    unsigned: the answer itself proves the endpoint holds the secret. The provider's only GET,
    so a GET without the parameter is 401 ``handshake_invalid`` rather than 405.

    The answer is the same HMAC, under the same key, as a delivery's signature (X signs the
    body, LinkedIn the body or ``"hmacsha256=" + body``), and anyone may ask for it: answered
    for a token that is a delivery's signed message, it would be a signing oracle. The provider
    cannot be asked to answer otherwise, so the two uses are kept apart on what is accepted, by
    one predicate (:meth:`answerable`): a message without ``{``. The challenge answers only
    tokens that are such messages; the provider's verifier refuses (401 ``signature_invalid``,
    :func:`~webhook_pipeline.providers.model.refuse_challenge_message`) a delivery whose signed
    message is one, before comparing digests. Every delivery these providers send is a JSON
    object, so its signed message holds ``{`` whatever the prefix; the tokens they send (X: a
    random base64 string, LinkedIn: a UUID) hold none. Nothing a challenge answers can verify a
    delivery, whatever the body and the source's body format (and these providers accept the
    ``json`` format only, :attr:`Provider.body_formats`)."""

    method = "GET"
    signed = False
    parameter: ClassVar[str]

    def matches(self, request: WebhookRequest) -> bool:
        return request.method == "GET"

    def answerable(self, message: bytes) -> bool:
        """A message without ``{``: the only ones this challenge answers an HMAC of, and the
        ones a delivery's signed message may never be."""
        return OBJECT_OPEN not in message

    @abstractmethod
    def body(self, token: str, digest: bytes) -> dict[str, Any]:
        """The JSON answer for ``token`` and the raw HMAC ``digest`` of it."""

    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        """The JSON answer.

        Raises
        ------
        VerificationError
            ``handshake_invalid``: no token, an empty one, one over 1,024 characters, or one
            that is not :meth:`answerable` (it holds ``{``, as a delivery's signed message
            does).
        """
        token = query_value(request, self.parameter)
        if not token or len(token) > MAX_CHALLENGE_CHARS or not secret.signing:
            raise VerificationError("handshake_invalid", f"no usable {self.parameter}")
        message = token.encode("utf-8")
        if not self.answerable(message):
            raise VerificationError(
                "handshake_invalid", f"{self.parameter} could be a delivery body: not signed"
            )
        return Answer(200, self.body(token, utf8_hmac(secret.signing[0], message)))
