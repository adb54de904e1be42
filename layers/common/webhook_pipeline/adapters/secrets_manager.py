"""Source secrets from AWS Secrets Manager through Powertools Parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook_pipeline.errors import SecretInvalidError, SecretUnavailableError
from webhook_pipeline.secrets import SourceSecret, parse_secret


@dataclass
class SecretsManagerStore:
    """The ingest's ``SecretStore`` over Powertools' ``SecretsProvider`` (cached
    ``GetSecretValue``).

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

    def get(self, secret_name: str) -> SourceSecret:
        """The parsed secret ``<prefix><secret_name>`` (cached ``max_age_seconds``).

        Raises
        ------
        SecretUnavailableError
            Missing, throttled, timed out (logged with its name, never its value).
        SecretInvalidError
            Stored but not parseable (see :func:`webhook_pipeline.secrets.parse_secret`).
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
            return parse_secret(str(value))
        except ValueError as exc:
            raise SecretInvalidError(detail=f"secret {name!r} malformed: {exc}") from exc
