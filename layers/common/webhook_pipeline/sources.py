"""Source definitions: who may send webhooks, through which provider, with which overrides.

Definitions live in a versioned TOML file deployed with the code (``layers/common/sources.toml``,
which lands at ``/opt/python/sources.toml`` in the layer). The file is validated once at cold
start; any error fails the init loudly (:class:`ConfigurationError`). Secret *values* never appear
here: a source names its secret in AWS Secrets Manager.

A source is mostly its provider: the provider module declares where the delivery id, event type,
resource key and sequence are, the body format and the tolerance. A source chooses its name, its
provider and secret, and overrides what it needs::

    [sources.stripe]
    provider = "stripe"

    [sources.stripe-connect]
    provider = "stripe"
    secret = "stripe-connect"
    tolerance_seconds = 120

Identity rules (invariant I8), enforced here:

- where the provider signs a delivery id, the delivery id IS that id: a source may not read it
  from another location;
- a source whose delivery id (or resource key or sequence) is read from unsigned material loads
  with a loud warning naming the risk, or fails to load with ``require_signed_id = true``;
- the body format is the source's (``json`` | ``form`` | ``raw``), never ``Content-Type``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from webhook_pipeline.config_errors import describe_validation_error
from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline.fields import FieldLocation
from webhook_pipeline.observability import logger
from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.registry import (
    all_providers,
    load_provider_modules,
    provider_class,
)
from webhook_pipeline.redaction import refuse_credentials
from webhook_pipeline.source_secrets import SecretProblem, SourceSecret

DEFAULT_SOURCES_FILE = Path(__file__).resolve().parent.parent / "sources.toml"
SOURCE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
#: Longest done-claim TTL a source may ask for (seconds); the deployment caps it further.
MAX_SOURCE_TTL_SECONDS = 90 * 86_400


class Source(BaseModel):
    """One ``[sources.<name>]`` table as written.

    Attributes
    ----------
    name : str
        The ``{source}`` path segment; also the default secret name suffix.
    provider : str
        Provider name (see ``webhook_pipeline.providers``).
    options : dict
        Provider options (the generic HMAC provider's header, algorithm, encoding...).
    secret : str
        Secret name under the stack's secrets prefix; defaults to ``name``.
    tolerance_seconds : int | None
        Timestamp tolerance in seconds (both directions); the provider's default when unset.
    delivery_id, event_type, resource_key, sequence : FieldLocation | None
        Overrides of the provider's field locations.
    body_format : {"json", "form", "raw"} | None
        Override of the provider's body format.
    dedup_ttl_seconds : int | None
        Done-claim TTL in seconds; the provider's retry horizon when unset.
    forward_headers : list[str]
        Headers copied into the envelope (lower-cased) besides the provider's own.
    require_signed_id : bool
        Refuse to load when the delivery id is read from unsigned material.
    public_url : str | None
        For providers that sign the URL they call: that URL exactly as configured at the
        provider (``https://hooks.example.com/webhooks/twilio``), when a proxy or custom domain
        makes it differ from what API Gateway sees.
    enabled : bool
        Disabled sources answer 404.
    """

    # strict: a string where a number or a boolean belongs is an error, not converted
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(pattern=SOURCE_NAME_PATTERN)
    provider: str
    options: dict[str, Any] = Field(default_factory=dict)
    secret: str = ""
    tolerance_seconds: int | None = Field(default=None, gt=0, le=86_400)
    delivery_id: FieldLocation | None = None
    event_type: FieldLocation | None = None
    resource_key: FieldLocation | None = None
    sequence: FieldLocation | None = None
    body_format: Literal["json", "form", "raw"] | None = None
    dedup_ttl_seconds: int | None = Field(default=None, ge=60, le=MAX_SOURCE_TTL_SECONDS)
    forward_headers: list[str] = Field(default_factory=list)
    require_signed_id: bool = False
    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    enabled: bool = True

    @field_validator("forward_headers")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [h.lower() for h in value]


@dataclass(frozen=True)
class ResolvedSource:
    """A source with its provider built and every setting decided.

    Attributes
    ----------
    name, secret : str
        Source name and secret name.
    provider : Provider
        The provider, built with the source's options and tolerance.
    delivery_id : FieldLocation
        Where the delivery id is (``signed="id"`` when the provider signs it).
    event_type, resource_key, sequence : FieldLocation | None
        The other fields (resource key and sequence both or neither).
    body_format : {"json", "form", "raw"}
        How the body is parsed.
    dedup_ttl_seconds : int
        Done-claim TTL before the deployment's cap (seconds).
    forward_headers : tuple[str, ...]
        Lower-case names of headers copied into the envelope.
    unsigned : tuple[str, ...]
        The identity and ordering fields read from material the signature does not cover
        (``"delivery_id"``, ``"resource_key"``, ``"sequence"``).
    public_url : str | None
        The URL the provider calls, when set (providers that sign it).
    enabled : bool
        Disabled sources answer 404.
    """

    name: str
    secret: str
    provider: Provider
    delivery_id: FieldLocation
    event_type: FieldLocation | None
    resource_key: FieldLocation | None
    sequence: FieldLocation | None
    body_format: Literal["json", "form", "raw"]
    dedup_ttl_seconds: int
    forward_headers: tuple[str, ...]
    unsigned: tuple[str, ...]
    public_url: str | None = None
    enabled: bool = True

    @property
    def id_is_signed(self) -> bool:
        """Whether the delivery id comes from material the signature covered."""
        return "delivery_id" not in self.unsigned

    def secret_problem(self, secret: SourceSecret) -> SecretProblem | None:
        """Why a value of ``secret`` is unusable by this source's provider (the first such
        value, current before previous), or ``None`` when every value is in the provider's
        format."""
        for index, value in enumerate(secret.signing):
            try:
                self.provider.validate_secret(value)
            except ConfigurationError as exc:
                return SecretProblem("current" if index == 0 else "previous", str(exc))
        return None


def resolve(source: Source) -> ResolvedSource:
    """Build ``source``'s provider and decide every setting (the rules of this module).

    Raises
    ------
    ConfigurationError
        Unknown provider or option; a delivery id moved away from the signed one; no delivery
        id location; resource key without sequence; body fields with ``body_format = "raw"``;
        an unsigned delivery id with ``require_signed_id``.
    """
    where = f"source {source.name!r}"
    provider = provider_class(source.provider)(source.options, source.tolerance_seconds)
    provider.use_body_format(source.body_format)
    defaults = provider.field_defaults()
    delivery_id = _delivery_id(source, provider, defaults.delivery_id)
    event_type = source.event_type or defaults.event_type
    resource_key = source.resource_key or defaults.resource_key
    sequence = source.sequence or defaults.sequence
    if (resource_key is None) != (sequence is None):
        raise ConfigurationError(f"{where}: resource_key and sequence go together")
    body_format = provider.body_format
    locations = {
        "delivery_id": delivery_id,
        "event_type": event_type,
        "resource_key": resource_key,
        "sequence": sequence,
    }
    if body_format == "raw" and any(loc and loc.body for loc in locations.values()):
        raise ConfigurationError(f"{where}: body fields need body_format json or form, not raw")
    refuse_credentials(where, provider, locations, source.forward_headers)
    unsigned = tuple(
        name
        for name, loc in locations.items()
        if name != "event_type" and loc is not None and not _covered(loc, provider)
    )
    if "delivery_id" in unsigned and source.require_signed_id:
        raise ConfigurationError(
            f"{where}: require_signed_id is set but the delivery id ({delivery_id.describe()}) "
            f"is not covered by {provider.name}'s signature"
        )
    return ResolvedSource(
        name=source.name,
        secret=source.secret or source.name,
        provider=provider,
        delivery_id=delivery_id,
        event_type=event_type,
        resource_key=resource_key,
        sequence=sequence,
        body_format=body_format,
        dedup_ttl_seconds=source.dedup_ttl_seconds or provider.retry_horizon_seconds,
        forward_headers=tuple(dict.fromkeys((*defaults.forward_headers, *source.forward_headers))),
        unsigned=unsigned,
        public_url=source.public_url,
        enabled=source.enabled,
    )


def _delivery_id(
    source: Source, provider: Provider, default: FieldLocation | None
) -> FieldLocation:
    where = f"source {source.name!r}"
    override = source.delivery_id
    if default is not None and default.signed:
        signed_headers = provider.signed_header_names()
        if override is not None and not (
            override.signed or (override.header and override.header.lower() in signed_headers)
        ):
            raise ConfigurationError(
                f"{where}: {provider.name} signs the delivery id ({provider.signs.id}); "
                f"delivery_id may not be read from {override.describe()}"
            )
        return default
    location = override or default
    if location is None:
        raise ConfigurationError(f"{where}: set delivery_id (provider {provider.name} has none)")
    return location


def _covered(location: FieldLocation, provider: Provider) -> bool:
    """Whether the signature covers a value read from ``location`` (statically)."""
    if location.signed or location.value:
        return True
    if location.body or location.digest:
        if provider.signs.body:
            return True
        paths = location.body if isinstance(location.body, list) else [location.body]
        return location.digest is None and all(p in provider.signs.body_fields for p in paths)
    header = location.header
    return header is not None and header.lower() in provider.signed_header_names()


def warn_unsigned(sources: Mapping[str, ResolvedSource]) -> None:
    """Log one WARNING per source that reads identity or ordering from unsigned material."""
    for source in sources.values():
        if source.unsigned:
            logger.warning(
                "source reads fields the signature does not cover",
                extra={
                    "source": source.name,
                    "provider": source.provider.name,
                    "unsigned_fields": list(source.unsigned),
                    "risk": "a captured body resent with other values for these fields is not "
                    "detected by the signature; the gate and the body-consistency check are the "
                    "only guard",
                    "provider_note": source.provider.signs.note,
                },
            )


def parse_sources(data: Mapping[str, Any], file: str = "sources file") -> dict[str, Source]:
    """Validate a parsed sources document and return the sources by name (not yet resolved).

    Raises
    ------
    ConfigurationError
        On any schema error: one line per error naming ``file``, the source and the key, with
        the nearest valid key for an unknown one (:mod:`webhook_pipeline.config_errors`).
    """
    raw_sources = data.get("sources")
    if not isinstance(raw_sources, Mapping) or not raw_sources:
        raise ConfigurationError(f"{file}: no [sources.<name>] tables")
    sources: dict[str, Source] = {}
    for name, body in raw_sources.items():
        if isinstance(body, Mapping) and "scheme" in body:
            raise ConfigurationError(
                f"{file}: [sources.{name}] 'scheme' is now 'provider' (and 'scheme_options' "
                "'options')"
            )
        try:
            sources[name] = Source.model_validate(
                {**dict(body), "name": name} if isinstance(body, Mapping) else body
            )
        except ValidationError as exc:
            detail = describe_validation_error(
                exc, file=file, table=f"sources.{name}", model=Source
            )
            raise ConfigurationError(detail) from None
    return sources


def load_sources(
    path: str | Path | None = None,
    provider_modules: Iterable[str] = (),
    *,
    catalogue: bool = False,
    min_tolerance_seconds: int = 0,
) -> dict[str, ResolvedSource]:
    """Read, validate and resolve the TOML sources file at ``path`` (default: next to the
    package), after importing ``provider_modules`` (your own providers).

    With ``catalogue`` (``SOURCES_CATALOGUE=true``: the local stack, ``sam local invoke``
    against it), every registered provider that no source of the file uses is also served as a
    source named after it, with the provider's ``example_options``: so the simulator, ``events/``
    and the development secrets cover every provider without a list kept by hand. A deployed
    stack serves only the file's sources.

    With ``min_tolerance_seconds`` (``LOCAL_MIN_TOLERANCE_SECONDS``, local development only),
    every source whose provider checks a signed timestamp gets a tolerance of at least that many
    seconds: a ``sam local invoke`` container start outlasts Discord's 15 s.

    Raises
    ------
    ConfigurationError
        File missing, not TOML, or invalid (see :func:`parse_sources` and :func:`resolve`).
    """
    load_provider_modules(provider_modules)
    file, defined = _defined(path, catalogue)
    sources = {}
    for name, source in defined.items():
        try:
            sources[name] = resolve(_at_least(source, min_tolerance_seconds))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{file}: [sources.{name}] {exc}") from None
    return sources


def source_providers(path: str | Path | None = None, *, catalogue: bool = False) -> dict[str, str]:
    """Source name -> provider name, as :func:`load_sources` serves them, without building the
    providers (the processor's hooks registered by provider need only this).

    Raises
    ------
    ConfigurationError
        As :func:`load_sources` for the file; a provider is not checked to exist here.
    """
    return {name: source.provider for name, source in _defined(path, catalogue)[1].items()}


def _defined(path: str | Path | None, catalogue: bool) -> tuple[Path, dict[str, Source]]:
    """The file read and its sources and, with ``catalogue``, one per provider no source of it
    uses."""
    file, data = _read(path)
    defined = parse_sources(data, str(file))
    if catalogue:
        used = {s.provider for s in defined.values()}
        for name, cls in all_providers().items():
            if name not in used and name not in defined:
                defined[name] = Source(name=name, provider=name, options=dict(cls.example_options))
    return file, defined


def _at_least(source: Source, seconds: int) -> Source:
    """``source`` with a tolerance of at least ``seconds`` where its provider checks one."""
    default = provider_class(source.provider).default_tolerance_seconds
    tolerance = source.tolerance_seconds or default
    if not seconds or tolerance is None or tolerance >= seconds:
        return source
    return source.model_copy(update={"tolerance_seconds": seconds})


def _read(path: str | Path | None) -> tuple[Path, dict[str, Any]]:
    """The TOML sources file at ``path`` (default: next to the package) and its parsed data."""
    file = Path(path) if path else DEFAULT_SOURCES_FILE
    try:
        with file.open("rb") as fh:
            return file, tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigurationError(f"sources file not found: {file}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"sources file {file} is not valid TOML: {exc}") from exc
