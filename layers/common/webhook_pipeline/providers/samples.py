"""The test-kit types of the provider model: what the shared tests, the simulator and
``events/`` build, and the functions never do.

A sample challenge (:class:`HandshakeSample`), a test vector (:class:`Vector`), what a sender
sends (:class:`SignedRequest`) and a sample delivery (:class:`Sample`). Provider modules reach
them through :data:`webhook_pipeline.providers.model.samples`, which loads this module on first
use, and they declare their vectors with
:class:`~webhook_pipeline.providers.model.LazyVectors`, so a function's import (which loads the
providers its sources use) never defines these classes.
``from webhook_pipeline.providers import Sample, Vector`` works as well (loaded on first use).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class HandshakeSample:
    """A sample challenge request: method, query parameters, body and non-signature headers."""

    method: str
    body: bytes = b""
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, document: Any, **headers: str) -> HandshakeSample:
        """A ``POST`` challenge with a compact JSON body (as :meth:`Sample.json`) and
        ``content-type: application/json`` unless ``headers`` gives another."""
        body = json.dumps(document, separators=(",", ":")).encode()
        return cls("POST", body, headers={"content-type": "application/json", **headers})


@dataclass(frozen=True)
class Vector:
    """A test vector: a request that must verify with ``secret`` at ``now``.

    Attributes
    ----------
    origin : {"published", "sdk", "self"}
        ``published``: copied from the provider's docs or official SDK tests; ``sdk``: produced
        by the official SDK; ``self``: computed from the documented recipe (self-consistency
        only: says so).
    reference : str
        Where the vector comes from.
    """

    secret: str
    headers: Mapping[str, str]
    body: bytes
    now: float
    origin: Literal["published", "sdk", "self"]
    reference: str
    options: Mapping[str, Any] = field(default_factory=dict)
    delivery_id: str | None = None
    method: str = "POST"
    query: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None


@dataclass(frozen=True)
class SignedRequest:
    """What a sender sends (:meth:`Provider.sign_request`): the headers it attaches, the body
    (with any signature the provider carries inside it, as Adyen's per-item ``hmacSignature``)
    and the URL it calls (with any credential the provider carries in it, as a token in the
    query string of the URL configured at Mollie)."""

    headers: dict[str, str]
    body: bytes
    url: str = ""


@dataclass(frozen=True)
class Sample:
    """A provider-shaped delivery for the simulator and ``events/``: the body and the headers
    other than the signature (:meth:`Provider.sign` adds those)."""

    body: bytes
    headers: dict[str, str]

    @classmethod
    def json(cls, document: Any, **headers: str) -> Sample:
        """A compact JSON body (no spaces, as most senders serialise) with ``content-type``."""
        body = json.dumps(document, separators=(",", ":")).encode()
        return cls(body, {"content-type": "application/json", **headers})
