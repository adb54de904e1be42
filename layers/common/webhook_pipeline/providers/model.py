"""The value types of the provider model (:mod:`webhook_pipeline.providers.base`).

What a verification proved (:class:`Verified`), what a signature covers (:class:`Signs`), a
provider's default source settings (:class:`Defaults`), an HTTP answer (:class:`Answer`), a
handshake (:class:`Handshake`) and a provider's test vectors, built on first read
(:class:`LazyVectors`); with the units the provider modules declare their figures in. The
test-kit types (samples, vectors, signed requests) are in :mod:`webhook_pipeline.providers.samples`,
reached through :data:`samples`, which loads that module on first use.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

from webhook_pipeline.errors import VerificationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.source_secrets import SourceSecret
from webhook_pipeline.webhook_request import WebhookRequest


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, executed on its first attribute access (importlib's
    ``LazyLoader``, as the ``importlib`` documentation's "Implementing lazy imports" recipe);
    the module itself when it is loaded already."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from webhook_pipeline.providers import samples as samples
else:
    #: :mod:`webhook_pipeline.providers.samples`, loaded on first use.
    samples = lazy_module("webhook_pipeline.providers.samples")

BodyFormat = Literal["json", "form", "raw"]

HOUR = 3_600
DAY = 86_400


def iso_utc(seconds: int) -> str:
    """``2026-01-01T00:00:00Z`` for Unix ``seconds`` (sample payloads)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Verified:
    """What a successful verification proved.

    Attributes
    ----------
    secret_index : int
        Index into the secrets passed to ``verify`` of the one that matched (0 = current,
        1 = previous).
    timestamp : int | None
        The signed timestamp in Unix **seconds**, or ``None`` when the scheme signs none.
    delivery_id : str | None
        The delivery id the signature covered, where the scheme signs one (Standard Webhooks
        ``webhook-id``, Twitch message id...); ``None`` when it signs no id.
    signed_headers : frozenset[str]
        Lower-case names of the headers whose values the signature covered.
    family : str | None
        The header family the signature was read from, when a scheme accepts several
        (``"webhook"`` or ``"svix"`` for Standard Webhooks).
    raw_timestamp : str | None
        The signed timestamp exactly as sent, in the provider's own unit (milliseconds for
        some).
    replay_token : str | None
        A signed value the provider makes unique per request (Mailgun's ``token``): the ingest
        use case binds it to the delivery id it first came with (the token with another id is
        401 ``replay_detected``; with the same id it is the sender's resend).
    """

    secret_index: int
    timestamp: int | None = None
    delivery_id: str | None = None
    signed_headers: frozenset[str] = frozenset()
    family: str | None = None
    raw_timestamp: str | None = None
    replay_token: str | None = None


@dataclass(frozen=True)
class Signs:
    """What a provider's signature covers, as documentation and as the rule identity follows.

    Attributes
    ----------
    id : str | None
        Where the signed delivery id is (``"webhook-id header"``), or ``None`` when the provider
        signs no id: then any id is read from unsigned material and only the dedup gate and the
        body-consistency check stand between a captured body and a second delivery.
    timestamp : str | None
        The signed timestamp (``"t in Stripe-Signature, seconds"``), or ``None``: a captured
        delivery can then be replayed at any time.
    body : bool
        Whether the body bytes are covered. ``False`` (Mailgun, Postmark, Telegram) means body
        fields, including ids and ordering values, are unsigned, except those in
        ``body_fields``.
    note : str
        What is not signed, in plain words (shown in the docs and at source load).
    body_fields : tuple[str, ...]
        With ``body = False``: the dotted body paths (relative to one event of a batch) whose
        values the signature covers although the body bytes are not (Adyen signs eight fields
        of each ``NotificationRequestItem``). A field location reading only these is signed.
    """

    id: str | None
    timestamp: str | None
    body: bool = True
    note: str = ""
    body_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Defaults:
    """A provider's default source settings (a source may override each).

    Attributes
    ----------
    delivery_id : FieldLocation | None
        Where the delivery id is. ``FieldLocation(signed="id")`` for schemes that sign one
        (the id is then :attr:`Verified.delivery_id`, and a source may not move it).
    event_type, resource_key, sequence : FieldLocation | None
        Event type; the resource whose order matters; its ordering value.
    body_format : BodyFormat
        How the body is parsed: ``json``, ``form`` (``application/x-www-form-urlencoded``) or
        ``raw`` (never parsed; no body fields).
    forward_headers : tuple[str, ...]
        Headers copied into the envelope (lower-cased), never signature headers.
    """

    delivery_id: FieldLocation | None
    event_type: FieldLocation | None = None
    resource_key: FieldLocation | None = None
    sequence: FieldLocation | None = None
    body_format: BodyFormat = "json"
    forward_headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: a status, a body (JSON object or text) and its content type."""

    status: int
    body: dict[str, Any] | list[Any] | str
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)

    def text(self) -> str:
        """The body as sent on the wire."""
        if isinstance(self.body, str):
            return self.body
        return json.dumps(self.body, separators=(",", ":"))


class Handshake(ABC):
    """A provider's endpoint verification (challenge) request: recognised, optionally verified,
    and answered before the gate; it never touches Redis, SQS or DynamoDB.

    Class attributes
    ----------------
    name : str
        Short name used in logs and the ``HandshakeAnswered`` metric (``url_verification``).
    method : {"GET", "POST"}
        The HTTP method the challenge arrives with.
    signed : bool
        The challenge is signed like a delivery (Slack, Zoom, Twitch, Discord): the request is
        verified first and a bad signature is 401. Unsigned challenges (Meta, LinkedIn, X,
        Microsoft Graph) prove the endpoint holds the secret by answering with a token or HMAC.
    """

    name: ClassVar[str]
    method: ClassVar[Literal["GET", "POST"]]
    signed: ClassVar[bool]

    @abstractmethod
    def matches(self, request: WebhookRequest) -> bool:
        """Whether ``request`` is this challenge (cheap: shape only, before any verification)."""

    @abstractmethod
    def answer(self, request: WebhookRequest, secret: SourceSecret) -> Answer:
        """The answer to ``request``.

        Raises
        ------
        VerificationError
            The challenge is malformed or its token does not match (401).
        """

    def answerable(self, message: bytes) -> bool:
        """Whether this handshake, unsigned, answers with a keyed digest of ``message`` (the
        bytes it puts in its HMAC). ``False`` for every message (the default) when the answer
        is not keyed or the challenge is signed like a delivery; :func:`refuse_challenge_message`
        refuses a delivery whose signed message is one this returns ``True`` for."""
        return False

    @abstractmethod
    def sample(self, secret: SourceSecret) -> samples.HandshakeSample:
        """A challenge as the provider sends it (unsigned: signed challenges are signed with
        :meth:`Provider.sign` by the caller), for ``events/`` and tests."""


def refuse_challenge_message(handshakes: Sequence[Handshake], message: bytes) -> None:
    """Refuse a delivery whose signed ``message`` (the exact bytes its HMAC covers) is one an
    unsigned handshake of its provider answers (:meth:`Handshake.answerable`): anyone may ask
    for that answer, so it proves nothing. Called by a verifier before it compares digests, so
    the messages a challenge answers and the messages a delivery verifies with are disjoint by
    one predicate, whatever the source's body format.

    Raises
    ------
    VerificationError
        ``signature_invalid``: the message is one a challenge answers.
    """
    for handshake in handshakes:
        if not handshake.signed and handshake.answerable(message):
            raise VerificationError(
                "signature_invalid",
                f"the signed message is one the unsigned {handshake.name} challenge answers",
            )


class LazyVectors(Sequence["samples.Vector"]):
    """A provider's test vectors, built by ``build()`` on first read and kept.

    The functions never read a provider's vectors (the shared tests, the simulator and
    ``events/`` do), so the built-in providers declare them with this: a function's import then
    neither builds them nor defines :class:`~webhook_pipeline.providers.samples.Vector`. It
    reads as the tuple ``build`` returns (index, slice, ``len``, iteration, truth value).
    """

    __slots__ = ("_build", "_vectors")

    def __init__(self, build: Callable[[], tuple[samples.Vector, ...]]) -> None:
        self._build = build
        self._vectors: tuple[samples.Vector, ...] | None = None

    def _built(self) -> tuple[samples.Vector, ...]:
        if self._vectors is None:
            self._vectors = tuple(self._build())
        return self._vectors

    @overload
    def __getitem__(self, index: int) -> samples.Vector: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[samples.Vector, ...]: ...

    def __getitem__(self, index: int | slice) -> samples.Vector | tuple[samples.Vector, ...]:
        return self._built()[index]

    def __len__(self) -> int:
        return len(self._built())

    def __repr__(self) -> str:
        return f"LazyVectors({self._built()!r})"
