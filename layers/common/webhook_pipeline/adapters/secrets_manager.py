"""Source secrets from AWS Secrets Manager through Powertools Parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook_pipeline.errors import SecretUnavailableError
from webhook_pipeline.secrets import SourceSecret, parse_secret


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
