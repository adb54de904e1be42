"""Providers: one module per sender (scheme, what it signs, defaults, retry horizon, handshakes,
acknowledgement, batch split, vectors, sample), registered by name.

Adding a provider is one module here (a :class:`Provider` subclass decorated with
:func:`register`) plus its test file; the registry, the simulator, ``events/``, the local stack's
development secrets, the shared tests and the README's provider table pick it up. See
``docs/providers.md``.
"""

from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.model import (
    Answer,
    Defaults,
    Handshake,
    HandshakeSample,
    Sample,
    SignedRequest,
    Signs,
    Vector,
    Verified,
)
from webhook_pipeline.providers.registry import (
    all_providers,
    load_provider_modules,
    provider_class,
    register,
)

__all__ = [
    "Answer",
    "Defaults",
    "Handshake",
    "HandshakeSample",
    "Provider",
    "Sample",
    "SignedRequest",
    "Signs",
    "Vector",
    "Verified",
    "all_providers",
    "load_provider_modules",
    "provider_class",
    "register",
]
