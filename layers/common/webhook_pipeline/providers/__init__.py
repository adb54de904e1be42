"""Providers: what a sender signs and how it is verified (scheme, what it signs, defaults,
retry horizon, handshakes, acknowledgement, batch split, vectors, sample), registered by name.

This package holds the building blocks every provider uses (:mod:`.base`, :mod:`.model`,
:mod:`.schemes`, :mod:`.crypto`, :mod:`.challenges`, :mod:`.registry`, and the test kit
:mod:`.samples` / :mod:`.vectors`); the built-in providers are the modules of
:mod:`webhook_pipeline.providers.builtin`. Adding a built-in provider is one module there (a
:class:`Provider` subclass decorated with :func:`register`) plus its test file; the registry,
the simulator, ``events/``, the local stack's development secrets, the shared tests and the
README's provider table pick it up. See ``docs/providers.md``.
"""

from typing import TYPE_CHECKING

from webhook_pipeline.providers.base import Provider
from webhook_pipeline.providers.model import (
    Answer,
    Defaults,
    Handshake,
    LazyVectors,
    Signs,
    Verified,
    samples,
)
from webhook_pipeline.providers.registry import (
    all_providers,
    load_provider_modules,
    provider_class,
    register,
)

if TYPE_CHECKING:
    from webhook_pipeline.providers.samples import HandshakeSample, Sample, SignedRequest, Vector

_TEST_KIT = frozenset({"HandshakeSample", "Sample", "SignedRequest", "Vector"})


def __getattr__(name: str) -> object:
    """``Sample``, ``Vector``, ``SignedRequest`` and ``HandshakeSample`` from
    :mod:`webhook_pipeline.providers.samples`, loaded on first use: importing a provider (as a
    function's cold start does) never defines them."""
    if name in _TEST_KIT:
        return getattr(samples, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Answer",
    "Defaults",
    "Handshake",
    "HandshakeSample",
    "LazyVectors",
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
