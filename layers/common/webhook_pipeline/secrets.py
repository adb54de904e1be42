"""Secret values of the sources, from AWS Secrets Manager through Powertools Parameters.

A source's secret is named ``<SECRETS_PREFIX><source.secret>``. Its value is either the signing
secret itself, or JSON ``{"current": "...", "previous": "..."}`` while a rotation window is open
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


def parse_secret_value(value: str) -> list[str]:
    """Turn a stored secret value into ``[current]`` or ``[current, previous]``.

    Raises
    ------
    ValueError
        JSON object without a non-empty string ``current``, or an empty value.
    """
    text = value.strip()
    if text.startswith("{"):
        doc = json.loads(text)
        current = doc.get("current")
        previous = doc.get("previous")
        if not isinstance(current, str) or not current:
            raise ValueError("secret JSON needs a non-empty string 'current'")
        if previous is not None and (not isinstance(previous, str) or not previous):
            raise ValueError("secret JSON 'previous' must be a non-empty string when present")
        return [current, previous] if previous else [current]
    if not text:
        raise ValueError("empty secret value")
    return [value]


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
            return parse_secret_value(str(value))
        except ValueError as exc:
            raise SecretUnavailableError(detail=f"secret {name!r} malformed: {exc}") from exc
