"""Source secrets from AWS Secrets Manager through Powertools Parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from webhook_pipeline.errors import SecretInvalidError, SecretUnavailableError
from webhook_pipeline.source_secrets import SourceSecret, parse_secret


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
    #: name -> (the stored value, its parsed form): a value is parsed once, not per request.
    _parsed: dict[str, tuple[str, SourceSecret]] = field(
        default_factory=dict, init=False, repr=False
    )

    def get(self, secret_name: str) -> SourceSecret:
        """The parsed secret ``<prefix><secret_name>`` (cached ``max_age_seconds``).

        Raises
        ------
        SecretUnavailableError
            Missing, throttled, timed out (logged with its name, never its value).
        SecretInvalidError
            Stored but not parseable (see :func:`webhook_pipeline.source_secrets.parse_secret`).
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
        text = str(value)
        cached = self._parsed.get(name)
        if cached is not None and cached[0] == text:
            return cached[1]
        try:
            secret = parse_secret(text)
        except ValueError as exc:
            raise SecretInvalidError(detail=f"secret {name!r} malformed: {exc}") from exc
        self._parsed[name] = (text, secret)
        return secret
