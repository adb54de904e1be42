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
from typing import Literal


@dataclass(frozen=True)
class SourceSecret:
    """A parsed secret value.

    Attributes
    ----------
    signing : list[str]
        ``[current]`` or ``[current, previous]``.
    verify_token : str | None
        Token of a ``GET`` subscription handshake, when the source has one.
    invalid_previous : bool
        A ``previous`` value was stored but is not usable by the provider (it is left out of
        ``signing``).
    """

    signing: list[str]
    verify_token: str | None = None
    invalid_previous: bool = False


@dataclass(frozen=True)
class SecretProblem:
    """Why a stored secret value is unusable by the source's provider.

    Attributes
    ----------
    value : {"current", "previous"}
        Which value is not in the provider's format: an invalid ``current`` makes every request
        503; an invalid ``previous`` is left out of the values verified against.
    detail : str
        The provider's reason (``whsec_ prefix missing``, ``key too short``, ...).
    """

    value: Literal["current", "previous"]
    detail: str

    def __str__(self) -> str:
        return f"the {self.value} secret: {self.detail}"


def parse_secret(value: str) -> SourceSecret:
    """Parse a stored secret value (plain string, or the JSON object described above).

    Surrounding whitespace is removed from the value and from each of ``current``,
    ``previous`` and ``verify_token`` (a trailing newline, as ``echo`` and many consoles add,
    must not make every genuine delivery fail), and the stripped values are the ones used.

    Raises
    ------
    ValueError
        Not valid JSON where it starts with ``{``; a JSON object without a non-empty string
        ``current``, with a non-string or empty ``previous`` or ``verify_token``, or with
        unknown keys; an empty value.
    """
    text = value.strip()
    if text.startswith("{"):
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("secret JSON must be an object")
        unknown = set(doc) - {"current", "previous", "verify_token"}
        if unknown:
            raise ValueError(f"secret JSON has unknown keys {sorted(unknown)}")
        fields: dict[str, str | None] = {}
        for name in ("current", "previous", "verify_token"):
            item = doc.get(name)
            if item is not None and (not isinstance(item, str) or not item.strip()):
                raise ValueError(f"secret JSON '{name}' must be a non-empty string when present")
            fields[name] = item.strip() if isinstance(item, str) else None
        current, previous = fields["current"], fields["previous"]
        if current is None:
            raise ValueError("secret JSON needs a non-empty string 'current'")
        return SourceSecret([current, previous] if previous else [current], fields["verify_token"])
    if not text:
        raise ValueError("empty secret value")
    return SourceSecret([text])
