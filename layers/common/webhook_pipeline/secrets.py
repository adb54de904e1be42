"""Secret values of the sources, from AWS Secrets Manager through Powertools Parameters.

A source's secret is named ``<SECRETS_PREFIX><source.secret>``. Its value is either the signing
secret itself, or JSON ``{"current": "...", "previous": "...", "verify_token": "..."}``
(``previous`` only while a rotation window is open; ``verify_token`` only for schemes with a
``GET`` subscription handshake, such as Meta's ``hub.verify_token``)
(the previous secret is still accepted; verifications that only it passes are counted in the
``VerifiedWithPreviousSecret`` metric so an operator can see when the sender has switched).
Values are cached in the container for ``max_age_seconds``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from webhook_pipeline.errors import IngestError


class SecretUnavailableError(IngestError):
    """The secret could not be read (missing, throttled, timeout): 503, the sender retries."""

    status = 503
    reason = "secret_unavailable"


class SecretStore(Protocol):
    """Gives the secrets of a source: current first, then previous if a rotation is open."""

    def secrets_for(self, secret_name: str) -> list[str]: ...

    def verify_token_for(self, secret_name: str) -> str | None: ...


@dataclass(frozen=True)
class SourceSecret:
    """A parsed secret value.

    Attributes
    ----------
    signing : list[str]
        ``[current]`` or ``[current, previous]``.
    verify_token : str | None
        Token of a ``GET`` subscription handshake, when the source has one.
    """

    signing: list[str]
    verify_token: str | None = None


def parse_secret(value: str) -> SourceSecret:
    """Parse a stored secret value (plain string, or the JSON object described above).

    Raises
    ------
    ValueError
        JSON object without a non-empty string ``current``, a non-string ``previous`` or
        ``verify_token``, unknown keys, or an empty value.
    """
    text = value.strip()
    if text.startswith("{"):
        doc = json.loads(text)
        unknown = set(doc) - {"current", "previous", "verify_token"}
        if unknown:
            raise ValueError(f"secret JSON has unknown keys {sorted(unknown)}")
        current, previous, token = doc.get("current"), doc.get("previous"), doc.get("verify_token")
        if not isinstance(current, str) or not current:
            raise ValueError("secret JSON needs a non-empty string 'current'")
        for name, item in (("previous", previous), ("verify_token", token)):
            if item is not None and (not isinstance(item, str) or not item):
                raise ValueError(f"secret JSON '{name}' must be a non-empty string when present")
        return SourceSecret([current, previous] if previous else [current], token)
    if not text:
        raise ValueError("empty secret value")
    return SourceSecret([value])


@dataclass
class SecretsManagerStore:
    """:class:`SecretStore` over Powertools' ``SecretsProvider`` (cached ``GetSecretValue``).

    Parameters
    ----------
    prefix : str
        Prepended to every secret name (``webhook-pipeline/<stack>/``).
    provider : aws_lambda_powertools.utilities.parameters.SecretsProvider
        Built once per container with a botocore client that has explicit timeouts.
    max_age_seconds : int
        Cache lifetime of a value in seconds.
    """

    prefix: str
    provider: Any
    max_age_seconds: int = 300

    def secrets_for(self, secret_name: str) -> list[str]:
        """Return ``[current]`` or ``[current, previous]`` for ``secret_name``.

        Raises
        ------
        SecretUnavailableError
            The secret is missing, unreadable or malformed (logged with its name, never its value).
        """
        return self._secret(secret_name).signing

    def verify_token_for(self, secret_name: str) -> str | None:
        """Return the subscription handshake's verify token of ``secret_name``, if it has one.

        Raises
        ------
        SecretUnavailableError
        """
        return self._secret(secret_name).verify_token

    def _secret(self, secret_name: str) -> SourceSecret:
        name = f"{self.prefix}{secret_name}"
        try:
            value = self.provider.get(name, max_age=self.max_age_seconds)
        except Exception as exc:  # GetParameterError wraps every botocore failure
            raise SecretUnavailableError(
                detail=f"secret {name!r} unavailable: {type(exc).__name__}"
            ) from exc
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        try:
            return parse_secret(str(value))
        except ValueError as exc:
            raise SecretUnavailableError(detail=f"secret {name!r} malformed: {exc}") from exc
