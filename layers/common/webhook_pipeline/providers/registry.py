"""The provider registry: providers register themselves; nothing keeps a list by hand.

A provider module decorates its :class:`~webhook_pipeline.providers.base.Provider` subclass with
:func:`register`. Built-in providers are the modules of :mod:`webhook_pipeline.providers.builtin`
(every one of them holds one provider), found by name: provider ``standard-webhooks`` lives in
``webhook_pipeline/providers/builtin/standard_webhooks.py``, so a source's provider is imported
on demand (cold start imports only the providers the sources use) and :func:`all_providers`
imports every module of that package. Your own providers live in modules of yours, named in
``PROVIDER_MODULES`` (the ingest function) or passed to :func:`load_provider_modules`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

from webhook_pipeline.config_errors import nearest
from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline.providers.base import Provider

#: The package whose every module is one built-in provider.
_PACKAGE = "webhook_pipeline.providers.builtin"
_REGISTRY: dict[str, type[Provider]] = {}


def register[P: type[Provider]](cls: P) -> P:
    """Class decorator: add a provider to the registry under ``cls.name``.

    Raises
    ------
    ConfigurationError
        Another class is already registered under the same name.
    """
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing is not cls:
        raise ConfigurationError(
            f"provider {cls.name!r} is registered twice: {existing.__module__} and {cls.__module__}"
        )
    _REGISTRY[cls.name] = cls
    return cls


def provider_class(name: str) -> type[Provider]:
    """The provider registered as ``name``, importing its built-in module on first use.

    Raises
    ------
    ConfigurationError
        No such provider (the message lists the known ones).
    """
    if name not in _REGISTRY and name.replace("-", "_").isidentifier():
        module = f"{_PACKAGE}.{name.replace('-', '_')}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    try:
        return _REGISTRY[name]
    except KeyError:
        known = sorted(all_providers())
        raise ConfigurationError(
            f"key 'provider': unknown provider {name!r}{nearest(name, known)}; known: {known}"
        ) from None


def load_provider_modules(modules: Iterable[str]) -> None:
    """Import modules that register providers of their own.

    Raises
    ------
    ConfigurationError
        A module cannot be imported.
    """
    for module in modules:
        try:
            loaded = importlib.import_module(module)
        except Exception as exc:
            raise ConfigurationError(
                f"provider module {module!r} cannot be imported: {exc}"
            ) from exc
        # A module imported earlier (its decorators ran then) still registers its providers.
        for value in vars(loaded).values():
            if (
                isinstance(value, type)
                and issubclass(value, Provider)
                and value.__module__ == loaded.__name__
                and isinstance(getattr(value, "name", None), str)
            ):
                register(value)


def builtin_module_names() -> list[str]:
    """Dotted names of the built-in provider modules."""
    package = importlib.import_module(_PACKAGE)
    return [
        f"{_PACKAGE}.{info.name}"
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    ]


def all_providers() -> dict[str, type[Provider]]:
    """Every provider: the built-in modules (all imported) and any registered by other modules."""
    for module in builtin_module_names():
        importlib.import_module(module)
    return dict(sorted(_REGISTRY.items()))
