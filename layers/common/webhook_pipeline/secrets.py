"""Secret values of the sources: the stored format and its parsing (the Secrets Manager adapter is
:mod:`webhook_pipeline.adapters.secrets_manager`).

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
