"""The provider model: everything about one sender, declared in one module.

A provider module defines one :class:`Provider` subclass and registers it with
:func:`webhook_pipeline.providers.registry.register`. The class declares:

- its **scheme**: :meth:`Provider.verify` (raw body and headers against the secrets) and
  :meth:`Provider.sign` (the same headers a sender would attach, for the simulator and tests);
- **what the signature covers** (:attr:`Provider.signs`): whether a delivery id, a timestamp and the
  body are signed, and what :meth:`verify` returns of them (:class:`Verified`). Identity and order
  are read only from verified material (invariant I8);
- its **secret format** (:meth:`Provider.validate_secret`), checked when the secret is loaded;
- its **default source settings** (:attr:`Provider.defaults`): where the delivery id, event type,
  resource key and sequence are, the body format (``json`` | ``form`` | ``raw``, never taken from
  ``Content-Type``), the tolerance and timestamp unit;
- its **sender retry horizon** (:attr:`Provider.retry_horizon_seconds`), the default done-claim TTL;
- its **handshakes** (:attr:`Provider.handshakes`), answered before the gate;
- its **acknowledgement** (:meth:`Provider.acknowledgement`) and the statuses it must never get
  (:attr:`Provider.stop_statuses`);
- the body fields that change between retries (:attr:`Provider.volatile_fields`), ignored by the
  duplicate body-consistency check;
- a **batch split** (:attr:`Provider.batch_path`) for senders that put many events in one POST;
- its **test vectors** (:attr:`Provider.vectors`) and a **sample payload** (:meth:`Provider.sample`)
  for the simulator and ``events/``.

Everything else (the registry, the simulator, ``events/``, the local stack's development secrets,
the shared tests, the README's provider table) reads these declarations. The value types they
are declared with (:class:`Signs`, :class:`Defaults`, :class:`Vector`...) are in
:mod:`webhook_pipeline.providers.model`; the test-kit ones (:class:`Sample`, :class:`Vector`...)
in :mod:`webhook_pipeline.providers.samples`. A provider whose credential travels in the body or
the URL rather than a header subclasses
:class:`~webhook_pipeline.providers.inline.InlineCredentialProvider`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.providers.crypto import check_freshness
from webhook_pipeline.providers.model import (
    Answer,
    BodyFormat,
    Defaults,
    Handshake,
    Signs,
    Verified,
    samples,
)
from webhook_pipeline.webhook_request import WebhookRequest


class Provider(ABC):
    """One sender: scheme, secret format, defaults, retry horizon, handshakes, acknowledgement.

    Instances are built per source with that source's provider options and tolerance.

    Class attributes
    ----------------
    name : str
        Registry name used in the sources file (``provider = "stripe"``).
    title : str
        Display name.
    reference : str
        The source of the scheme: the provider's docs and official SDK files it follows.
    signs : Signs
        What the signature covers.
    defaults : Defaults
        Default source settings.
    default_tolerance_seconds : int | None
        Freshness tolerance when the source sets none; ``None`` without a signed timestamp.
    retry_horizon_seconds : int
        How long the sender retries one delivery (seconds): the default done-claim TTL.
    retry_horizon_reference : str
        Where that figure comes from.
    stop_statuses : frozenset[int]
        Statuses this sender treats as "stop" or "disable the endpoint" (Standard Webhooks 410,
        Mailgun 406, Postmark 403): never answered to it; an answer that would be one becomes
        503 (the sender retries, nothing is lost).
    volatile_fields : tuple[str, ...]
        Dotted body paths that change between retries of one delivery (HubSpot
        ``attemptNumber``): removed before the body-consistency hash.
    batch_path : str | None
        Dotted path of the array of events in the body (``""`` = the body is the array), when
        one POST carries many deliveries; each event is then its own delivery and the default
        field locations are relative to the event.
    handshakes : tuple[Handshake, ...]
        Endpoint verification challenges this provider sends.
    option_names : frozenset[str]
        The ``options`` keys this provider understands; any other key is a configuration error.
    vectors : Sequence[Vector]
        Requests that must verify (the shared tests run every one): a tuple, or
        :class:`~webhook_pipeline.providers.model.LazyVectors` to build them on first read (the
        built-in providers do: a function's import never builds them).
    dev_secret : str
        A development signing secret in this provider's format (local stack and ``events/``
        only); for asymmetric schemes the private key (:meth:`verification_secret` gives what is
        stored).
    example_options : Mapping[str, Any]
        Options of the example source the local stack serves for this provider when no source
        uses it (``SOURCES_CATALOGUE``).

    Raises
    ------
    ConfigurationError
        From the constructor: an unknown option, a tolerance that is not a positive integer.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    reference: ClassVar[str]
    signs: ClassVar[Signs]
    defaults: ClassVar[Defaults]
    default_tolerance_seconds: ClassVar[int | None] = None
    retry_horizon_seconds: ClassVar[int]
    retry_horizon_reference: ClassVar[str] = ""
    stop_statuses: ClassVar[frozenset[int]] = frozenset()
    volatile_fields: ClassVar[tuple[str, ...]] = ()
    batch_path: ClassVar[str | None] = None
    handshakes: ClassVar[tuple[Handshake, ...]] = ()
    option_names: ClassVar[frozenset[str]] = frozenset()
    vectors: ClassVar[Sequence[samples.Vector]] = ()
    dev_secret: ClassVar[str]
    example_options: ClassVar[Mapping[str, Any]] = {}
    #: The header that carries the signature, and the one that carries the signed timestamp
    #: (the same for Stripe, whose ``t`` is inside ``Stripe-Signature``); instance attributes
    #: where options choose them (generic HMAC).
    signature_header: str = ""
    #: Where the credential is when it is not in a header: the URL query parameter of a token
    #: (Mollie, whose classic webhooks are unsigned), or the dotted body path of a credential or
    #: signature inside the body, relative to each item where :attr:`batch_path` splits the body
    #: (Google Ads ``google_key``, Microsoft Graph's per-notification ``clientState``, Mailgun's
    #: ``signature`` object, Adyen's per-item
    #: ``NotificationRequestItem.additionalData.hmacSignature``); ``signature_header`` is then
    #: empty and :meth:`sign_body` or :meth:`sign_request` puts it there.
    credential_parameter: str = ""
    signature_field: str = ""
    #: Credentials (not signatures) the sender puts in the body or the URL: dotted body paths,
    #: relative to each event where :attr:`batch_path` splits the body (Google Ads
    #: ``google_key``), and query parameters (Mollie's token, Meta's ``hub.verify_token``).
    #: :mod:`webhook_pipeline.redaction` replaces their values wherever a body or a URL is
    #: shown or logged; a source may not read a field from them.
    credential_fields: ClassVar[tuple[str, ...]] = ()
    credential_params: tuple[str, ...] = ()
    timestamp_header: str | None = None
    #: How the signed timestamp is written: Unix seconds, Unix milliseconds or RFC 3339.
    timestamp_unit: Literal["seconds", "milliseconds", "rfc3339"] = "seconds"
    #: The signed timestamp may carry a decimal fraction, read as its integer part (the Standard
    #: Webhooks family, as the Svix libraries read it); otherwise a plain integer only.
    timestamp_fraction: ClassVar[bool] = False
    #: The signature covers the URL the sender called (``request.public_url``): a mismatch is
    #: logged with the URL reconstructed, so an operator can see a proxy rewrote it.
    signs_url: ClassVar[bool] = False
    #: The body formats this scheme can verify (a source declaring another fails to load).
    body_formats: ClassVar[frozenset[BodyFormat]] = frozenset({"json", "form", "raw"})

    def __init__(
        self, options: Mapping[str, Any] | None = None, tolerance_seconds: int | None = None
    ) -> None:
        self.options = dict(options or {})
        #: The body format of the source (the provider's default until :meth:`use_body_format`).
        self.body_format: BodyFormat = self.defaults.body_format
        unknown = sorted(set(self.options) - self.option_names)
        if unknown:
            raise ConfigurationError(
                f"provider {self.name!r}: unknown option(s) {unknown}; "
                f"known: {sorted(self.option_names)}"
            )
        if tolerance_seconds is not None and (
            isinstance(tolerance_seconds, bool)
            or not isinstance(tolerance_seconds, int)
            or tolerance_seconds <= 0
        ):
            raise ConfigurationError(
                f"provider {self.name!r}: tolerance_seconds must be a positive integer"
            )
        self.tolerance_seconds = (
            tolerance_seconds if tolerance_seconds is not None else self.default_tolerance_seconds
        )

    def use_body_format(self, body_format: BodyFormat | None) -> None:
        """Adopt the body format the source declares (``None``: keep the provider's default).

        A scheme whose signature is inside the body (Mailgun) reads it in this format, never in
        the one the unsigned ``Content-Type`` names.

        Raises
        ------
        ConfigurationError
            The scheme cannot verify a body of that format (:attr:`body_formats`).
        """
        chosen = body_format or self.defaults.body_format
        if chosen not in self.body_formats:
            raise ConfigurationError(
                f"provider {self.name!r} cannot verify a {chosen!r} body; "
                f"declare one of {sorted(self.body_formats)}"
            )
        self.body_format = chosen

    # -- the scheme -------------------------------------------------------------------------

    @abstractmethod
    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> Verified:
        """Verify ``request`` against ``secrets`` at time ``now``.

        Parameters
        ----------
        request : WebhookRequest
            Headers (case-insensitive) and the exact received body bytes.
        secrets : Sequence[str]
            Current secret first, then the previous one if a rotation window is open; already
            validated by :meth:`validate_secret`.
        now : float
            Current Unix time in seconds.

        Returns
        -------
        Verified

        Raises
        ------
        VerificationError
            Signature missing, malformed or matching no secret; headers of two families that
            disagree (``signature_mismatch``).
        TimestampError
            Timestamp missing, not a plain integer, stale or in the future.
        """

    @abstractmethod
    def sign(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> dict[str, str]:
        """The headers a sender of this provider attaches to ``body`` (simulator and tests).

        ``timestamp`` is Unix seconds (providers with another unit convert); ``delivery_id`` goes
        where the provider puts it in headers, if it does; ``url`` is the URL the sender calls
        (for providers that sign it).
        """

    def sign_body(self, body: bytes, secret: str, *, timestamp: int, delivery_id: str) -> bytes:
        """``body`` as the sender sends it, signed with ``secret`` at ``timestamp`` (Unix seconds).

        The same bytes for every provider whose signature travels in headers. Providers that
        carry their credential or their signed timestamp inside the body (Google Ads
        ``google_key``, Microsoft Graph ``clientState``, Linear ``webhookTimestamp``) return the
        body with it put there. The simulator, ``events/`` and the tests call this before
        :meth:`sign`, which then signs the returned bytes.
        """
        return body

    def sign_request(
        self, body: bytes, secret: str, *, timestamp: int, delivery_id: str, url: str = ""
    ) -> samples.SignedRequest:
        """Everything a sender of this provider sends for ``body``: the body as
        :meth:`sign_body` returns it, :meth:`sign`'s headers for those bytes, and the URL
        unchanged. Providers that carry their whole signature inside the body (Adyen, Mailgun)
        or their credential in the URL (Mollie) override this; the simulator, ``events/`` and
        the shared tests sign through it.
        """
        signed = self.sign_body(body, secret, timestamp=timestamp, delivery_id=delivery_id)
        return samples.SignedRequest(
            self.sign(signed, secret, timestamp=timestamp, delivery_id=delivery_id, url=url),
            signed,
            url,
        )

    def validate_secret(self, secret: str) -> None:
        """Check that ``secret`` (whitespace already stripped) is usable by this scheme.

        Raises
        ------
        ConfigurationError
            The value is not in this provider's secret format; the message names the problem,
            never the value. The default accepts any non-empty string.
        """
        if not secret:
            raise ConfigurationError("the secret is empty")

    def check_fresh(self, timestamp_seconds: float, now: float) -> None:
        """Check a signed timestamp (seconds) against ``now`` with this source's tolerance.

        Raises
        ------
        TimestampError
            ``timestamp_stale`` or ``timestamp_future``.
        ConfigurationError
            The provider has no tolerance (one without a signed timestamp called this).
        """
        if self.tolerance_seconds is None:
            raise ConfigurationError(f"provider {self.name!r} has no timestamp tolerance")
        check_freshness(timestamp_seconds, now, self.tolerance_seconds)

    # -- identity ---------------------------------------------------------------------------

    def field_defaults(self) -> Defaults:
        """This instance's default field locations (:attr:`defaults`, unless the options change
        them, as a generic HMAC template that signs the delivery id does)."""
        return self.defaults

    def refuse_recut(
        self, request: WebhookRequest, document: Any, fields: Mapping[str, FieldLocation]
    ) -> None:
        """Raise ``BadDeliveryError`` (400) when the verified ``request``'s signed string, split
        another way, reads another identity from ``fields`` (role -> location: ``delivery_id``,
        ``event_type``, ``resource_key``, ``sequence``). Nothing by default: every other scheme
        signs a string whose split the verifier fixes (docs/providers.md, "Signed strings
        without delimiters")."""
        return None

    def signed_header_names(self) -> frozenset[str]:
        """Lower-case names of headers this provider's signature always covers (static; used at
        source load to tell signed from unsigned field locations). The default: the
        :attr:`timestamp_header`, when the signed timestamp has a header of its own (Slack,
        Zendesk, Discord...); a scheme that signs other headers overrides this."""
        header = self.timestamp_header
        if header is None or header == self.signature_header:
            return frozenset()
        return frozenset({header.lower()})

    # -- answers ----------------------------------------------------------------------------

    def acknowledgement(self, status: int, body: dict[str, Any]) -> Answer:
        """The answer to a delivery that was accepted (202) or a duplicate (200).

        ``body`` is the pipeline's own JSON (``{"status": "accepted", "delivery_id": ...}``). The
        default sends it as is; providers that expect a fixed body (Adyen ``[accepted]``, Twilio's
        empty TwiML) override this.
        """
        return Answer(status, body)

    # -- samples ----------------------------------------------------------------------------

    @abstractmethod
    def sample(
        self,
        *,
        delivery_id: str,
        resource: str,
        sequence: int,
        event_type: str | None,
        timestamp: int,
    ) -> samples.Sample:
        """A realistic delivery body and its non-signature headers.

        Parameters
        ----------
        delivery_id : str
            The id to put where the provider puts it (body or header).
        resource : str
            The resource the event is about.
        sequence : int
            Its ordering value, as Unix seconds where the provider orders by a time.
        event_type : str | None
            The event type (``None``: a typical one).
        timestamp : int
            Send time, Unix seconds.
        """

    def new_delivery_id(self, random_hex: str) -> str:
        """A delivery id in this provider's style, from 32 random hex digits."""
        h = random_hex
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def verification_secret(self, signing_secret: str) -> str:
        """What a source stores to verify signatures made with ``signing_secret``: the same
        value for HMAC schemes, the public key for asymmetric ones (Ed25519, ECDSA)."""
        return signing_secret

    def restamp(self, headers: Mapping[str, str], raw: str | None) -> dict[str, str] | None:
        """``headers`` (as :meth:`sign` made them) with the signed timestamp replaced by ``raw``
        exactly as written (``None``: removed), the signature left as it was; ``None`` when the
        timestamp is not in a header. For the shared tests of timestamp parsing."""
        if self.timestamp_header is None or self.timestamp_header == self.signature_header:
            return None
        out = {k: v for k, v in headers.items() if k.lower() != self.timestamp_header.lower()}
        if raw is not None:
            out[self.timestamp_header] = raw
        return out

    def random_secret(self, entropy: bytes) -> str:
        """A random secret in this provider's format, from at least 32 random bytes (the local
        stack's ``--random-secrets``)."""
        return entropy.hex()[:40]

    def dev_secret_value(self) -> str:
        """The Secrets Manager value of the development secret (plain, or the JSON object when
        a handshake needs more than the signing secret)."""
        return self.dev_secret
