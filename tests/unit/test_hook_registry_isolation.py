"""The suite's hook registry is restored after every test (tests/conftest.py): a hook one test
registers, directly or by importing a hooks module such as the ledger, never runs in another
test's processor. The two tests run in file order."""

from __future__ import annotations

from webhook_pipeline.hooks import ANY_SOURCE, registry


def test_1_a_test_registers_a_hook_for_every_source() -> None:
    registry.register(ANY_SOURCE, None, lambda event: None)
    assert registry.find("stripe", "customer.updated") is not None


def test_2_the_next_test_does_not_see_it() -> None:
    assert registry.find("stripe", "customer.updated") is None
