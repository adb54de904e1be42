"""Which hook a delivery runs when hooks are registered by source and by provider: the first of
(source, event type), (source, "*"), (provider, event type), (provider, "*"), ("*", "*")."""

from __future__ import annotations

import pytest
from webhook_pipeline.errors import ConfigurationError
from webhook_pipeline.hooks import HookEvent, HookRegistry

pytestmark = pytest.mark.unit


def named(name: str):  # type: ignore[no-untyped-def]
    def handler(event: HookEvent) -> str:
        return name

    handler.__name__ = name
    return handler


@pytest.fixture
def hooks() -> HookRegistry:
    registry = HookRegistry({"a": "stripe", "b": "stripe", "c": "stripe", "g": "github"})
    registry.on(source="a", event_type="charge.succeeded")(named("a:charge"))
    registry.on(source="b")(named("b:*"))
    registry.on(provider="stripe", event_type="charge.succeeded")(named("stripe:charge"))
    registry.on(provider="stripe")(named("stripe:*"))
    registry.hook("*")(named("*:*"))
    return registry


@pytest.mark.parametrize(
    ("source", "event_type", "expected"),
    [
        ("a", "charge.succeeded", "a:charge"),  # the source's exact hook
        ("a", "invoice.paid", "stripe:*"),  # the source has none for it: its provider's
        ("b", "charge.succeeded", "b:*"),  # a source's catch-all over the provider's exact one
        ("c", "charge.succeeded", "stripe:charge"),  # a source with no hook: its provider's
        ("c", "invoice.paid", "stripe:*"),
        ("c", None, "stripe:*"),
        ("g", "push", "*:*"),  # neither source nor provider hooks: the hook for every source
        ("unknown", "charge.succeeded", "*:*"),  # provider unknown: no provider hook
    ],
)
def test_the_most_specific_registration_wins(
    hooks: HookRegistry, source: str, event_type: str | None, expected: str
) -> None:
    found = hooks.find(source, event_type)
    assert found is not None and found.__name__ == expected


def test_provider_hooks_need_the_sources_providers() -> None:
    hooks = HookRegistry()
    hooks.on(provider="stripe")(named("stripe:*"))
    assert hooks.has_provider_hooks
    assert hooks.find("stripe", "charge.succeeded") is None  # not told stripe is stripe's yet
    assert hooks.providers_without_source() == ["stripe"]
    hooks.use_sources({"stripe": "stripe", "stripe-connect": "stripe"})
    found = hooks.find("stripe-connect", "charge.succeeded")
    assert found is not None and found.__name__ == "stripe:*"
    assert hooks.providers_without_source() == []


def test_registration_errors() -> None:
    hooks = HookRegistry()
    with pytest.raises(ConfigurationError, match="either source= or provider="):
        hooks.on()
    with pytest.raises(ConfigurationError, match="either source= or provider="):
        hooks.on(source="a", provider="stripe")
    with pytest.raises(ConfigurationError, match="every source"):
        hooks.on(provider="*")(named("x"))
    hooks.on(provider="stripe", event_type="x")(named("x"))
    with pytest.raises(ConfigurationError, match="already registered for provider"):
        hooks.on(provider="stripe", event_type="x")(named("y"))
    # a source named like a provider is another registration
    hooks.on(source="stripe", event_type="x")(named("z"))
    assert not HookRegistry().has_provider_hooks
