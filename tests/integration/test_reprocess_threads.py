"""Reprocess under real concurrency: processors on several threads handle copies of one reprocess
envelope at once against in-process moto (its DynamoDB calls made atomic, as the real service's
are), every hook call held until all copies are inside it. The generation's mark committed with
the Effects is the only guard: exactly one copy commits, the others discard their effects."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from webhook_pipeline.hooks import HookEvent, HookRegistry
from webhook_pipeline.process.model import Outcome, RecordResult

from tests.integration.test_processor import atomic_moto  # noqa: F401 - fixture
from tests.integration.test_processor_reprocess import Harness, again, first

pytestmark = pytest.mark.integration

COPIES = 4


@pytest.fixture
def h(aws: None, atomic_moto: None, monkeypatch: pytest.MonkeyPatch) -> Harness:  # noqa: F811
    return Harness(monkeypatch)


def hold_reprocess_hooks(h: Harness, parties: int) -> threading.Barrier:
    """Every hook call of generation 1 waits (at most 10 s) until ``parties`` are inside."""
    barrier = threading.Barrier(parties, timeout=10)

    def held(event: HookEvent) -> object:
        if event.replay_generation == 1:
            barrier.wait()
        return h.hook(event)

    h.hooks = HookRegistry()
    h.hooks.register("*", None, held)
    return barrier


@pytest.mark.parametrize("coalesce", [True, False])
def test_copies_on_threads_commit_one_generation_once(h: Harness, coalesce: bool) -> None:
    # Given evt_1 applied (one ledger entry)
    assert h.run(first("a1", "evt_1"))["a1"].outcome is Outcome.APPLIED
    barrier = hold_reprocess_hooks(h, COPIES)
    # When COPIES processors, each on its own thread, run generation 1 of evt_1 at once

    def one(n: int) -> RecordResult:
        return h.run(again(f"r{n}", "evt_1", gen=1), coalesce=coalesce)[f"r{n}"]

    with ThreadPoolExecutor(COPIES) as pool:
        results = list(pool.map(one, range(COPIES)))
    # Then every copy ran the hook (all were inside it together), one committed, the others
    # were skipped with their effects discarded: one more ledger entry, one mark
    assert not barrier.broken
    assert sum(1 for c in h.calls if c[1] == 1) == COPIES
    assert sorted(r.outcome.value for r in results) == ["reprocessed"] + ["skipped"] * (COPIES - 1)
    assert all(r.acknowledged for r in results)
    assert h.ledger_count("evt_1") == 2
    assert list(h.items("REPROCESS#")) == ["REPROCESS#stripe#evt_1|GENERATION#1"]
    # And generation 2 still runs once afterwards
    assert h.run(again("g2", "evt_1", gen=2))["g2"].outcome is Outcome.REPROCESSED
    assert h.ledger_count("evt_1") == 3
