"""Reprocess envelopes on moto with the real store adapter: the hook of an applied delivery runs
again once per generation, its Effects commit once, no record and no watermark is written, and a
stale, missing or still pending delivery is skipped (invariants I4, I9, I13)."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import boto3
import pytest
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.hooks import HookEvent, HookRegistry, registry
from webhook_pipeline.process.model import Message, Outcome, RecordResult
from webhook_pipeline.process.service import ProcessorService

from tests.helpers import create_deliveries_table, envelope_json
from tests.integration.test_processor import (  # noqa: F401 - fixtures of the processor function
    app,
    atomic_moto,
    invoke,
    logs,
    metric_totals,
    outcome_lines,
    resources,
    sqs_record,
)

pytestmark = pytest.mark.integration

TABLE = "webhook-pipeline-deliveries"
BUCKET = "webhook-pipeline-payloads"
NOW = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)


class Harness:
    """One table, the ledger hook (wrapped to see each call) and services on it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # Imported here: importing the ledger registers its hook on the process-wide registry,
        # which the conftest fixture restores after the test; these services use their own.
        from webhook_pipeline_ops import ledger

        monkeypatch.setenv("TABLE_NAME", TABLE)
        self.ledger = ledger
        self.client = boto3.client("dynamodb")
        create_deliveries_table(self.client, TABLE)
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        self.calls: list[tuple[str, int | None, str]] = []
        self.superseded: dict[tuple[str, int | None], int | None] = {}
        self.failing: set[tuple[str, int | None]] = set()
        self.during: Callable[[HookEvent], None] | None = None
        self.hooks = HookRegistry()
        self.hooks.register("*", None, self.hook)
        self.clock = NOW

    def hook(self, event: HookEvent) -> object:
        self.calls.append((event.delivery_id, event.replay_generation, event.idempotency_key))
        self.superseded[(event.delivery_id, event.replay_generation)] = event.superseded_by
        if (event.delivery_id, event.replay_generation) in self.failing:
            raise RuntimeError("hook bug")
        if self.during is not None:
            during, self.during = self.during, None
            during(event)
        return self.ledger.append_entry(event)

    def service(self, *, coalesce: bool = True) -> ProcessorService:
        return ProcessorService(
            store=DynamoDBDeliveryStore(self.client, TABLE, sleep=lambda _: None),
            payloads=S3PayloadStore(boto3.client("s3"), BUCKET),
            hooks=self.hooks,
            retention=timedelta(days=7),
            clock=lambda: self.clock,
            coalesce=coalesce,
        )

    def run(self, *messages: Message, coalesce: bool = True) -> dict[str, RecordResult]:
        return self.service(coalesce=coalesce).process_batch(list(messages))

    def ledger_count(self, delivery_id: str) -> int:
        return len(self.ledger.entries(self.client, TABLE, "stripe", delivery_id))

    def items(self, prefix: str) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for page in self.client.get_paginator("scan").paginate(TableName=TABLE):
            for item in page["Items"]:
                if item["pk"]["S"].startswith(prefix):
                    found[item["pk"]["S"] + "|" + item["sk"]["S"]] = item
        return found


@pytest.fixture
def h(aws: None, monkeypatch: pytest.MonkeyPatch) -> Harness:
    return Harness(monkeypatch)


def first(mid: str, did: str, res: str | None = "cus_1", seq: int | None = 1) -> Message:
    return Message(mid, envelope_json(did, res, seq))


def again(
    mid: str, did: str, res: str | None = "cus_1", seq: int | None = 1, *, gen: int = 1
) -> Message:
    reprocess = {"generation": gen, "job": f"job-{gen}"}
    return Message(mid, envelope_json(did, res, seq, reprocess=reprocess))


def outcomes(results: dict[str, RecordResult]) -> dict[str, tuple[str, str | None]]:
    return {mid: (r.outcome.value, r.reason) for mid, r in sorted(results.items())}


def test_a_reprocess_runs_the_hook_once_per_generation(h: Harness) -> None:
    # Given evt_1 (resource cus_1) and evt_9 (no resource) applied, each hook run once
    h.run(first("a1", "evt_1"), first("a9", "evt_9", None, None), first("a2", "evt_2", seq=2))
    # When one batch holds two copies of generation 1 of each
    results = h.run(
        again("r1", "evt_1"),
        again("r1b", "evt_1"),
        again("r9", "evt_9", None, None),
        again("r9b", "evt_9", None, None),
    )
    # Then each hook ran once more, with the generation in its key; the copies were skipped
    assert outcomes(results) == {
        "r1": ("reprocessed", "generation 1 of job job-1"),
        "r1b": ("skipped", "generation 1 reprocessed already"),
        "r9": ("reprocessed", "generation 1 of job job-1"),
        "r9b": ("skipped", "generation 1 reprocessed already"),
    }
    assert all(r.acknowledged for r in results.values())
    assert sorted(c for c in h.calls if c[1] == 1) == [
        ("evt_1", 1, "stripe:evt_1:g1"),
        ("evt_9", 1, "stripe:evt_9:g1"),
    ]
    assert ("evt_1", None, "stripe:evt_1") in h.calls
    # When the same generation comes again in another batch (a resumed job), then generation 2
    redelivered = h.run(again("r1c", "evt_1"), again("r9c", "evt_9", None, None))
    assert {r.outcome for r in redelivered.values()} == {Outcome.SKIPPED}
    second = h.run(again("s1", "evt_1", gen=2))
    # Then only generation 2 ran again: three runs of evt_1 in all, one of evt_2 (untouched)
    assert outcomes(second) == {"s1": ("reprocessed", "generation 2 of job job-2")}
    assert [c[2] for c in h.calls if c[0] == "evt_1"] == [
        "stripe:evt_1",
        "stripe:evt_1:g1",
        "stripe:evt_1:g2",
    ]
    assert (h.ledger_count("evt_1"), h.ledger_count("evt_9"), h.ledger_count("evt_2")) == (3, 2, 1)
    marks = h.items("REPROCESS#")
    assert sorted(marks) == [
        "REPROCESS#stripe#evt_1|GENERATION#1",
        "REPROCESS#stripe#evt_1|GENERATION#2",
        "REPROCESS#stripe#evt_9|GENERATION#1",
    ]
    record = h.items("DELIVERY#stripe#evt_1")["DELIVERY#stripe#evt_1|DELIVERY"]
    assert marks["REPROCESS#stripe#evt_1|GENERATION#2"]["expires_at"] == record["expires_at"]
    assert marks["REPROCESS#stripe#evt_1|GENERATION#2"]["job"] == {"S": "job-2"}


def test_a_concurrent_copy_that_loses_the_race_commits_no_effects(h: Harness) -> None:
    # Given evt_1 applied (one ledger entry)
    h.run(first("a1", "evt_1"))
    inner: dict[str, RecordResult] = {}
    # When, while generation 1's hook runs, another processor runs a copy of it to the end
    h.during = lambda _: inner.update(h.run(again("copy", "evt_1")))
    outer = h.run(again("r1", "evt_1"))
    # Then both ran the hook, the copy committed first, and the first run's effects were
    # discarded: exactly one more ledger entry and one mark
    assert [c[2] for c in h.calls] == ["stripe:evt_1", "stripe:evt_1:g1", "stripe:evt_1:g1"]
    assert inner["copy"].outcome is Outcome.REPROCESSED
    assert outer["r1"].outcome is Outcome.SKIPPED
    assert outer["r1"].reason == "generation 1 reprocessed by another run first; effects discarded"
    assert outer["r1"].acknowledged and outer["r1"].hook == "ran"
    assert h.ledger_count("evt_1") == 2
    assert len(h.items("REPROCESS#")) == 1


def test_reprocessing_never_writes_a_record_or_a_watermark(h: Harness) -> None:
    # Given cus_1 at watermark 5 (evt_old at 1, evt_new at 5) and a later clock
    h.run(first("a1", "evt_old", seq=1), first("a5", "evt_new", seq=5))
    before = {**h.items("RESOURCE#"), **h.items("DELIVERY#")}
    h.clock = NOW + timedelta(hours=3)
    # When the older event is reprocessed
    older = h.run(again("r1", "evt_old", seq=1))
    # Then its hook ran again, and the resource item and records are exactly as they were
    assert older["r1"].outcome is Outcome.REPROCESSED
    assert {**h.items("RESOURCE#"), **h.items("DELIVERY#")} == before
    assert before["RESOURCE#stripe#cus_1|RESOURCE"]["watermark"] == {"N": "5"}
    # And the same after the newest event is reprocessed
    newest = h.run(again("r5", "evt_new", seq=5))
    assert newest["r5"].outcome is Outcome.REPROCESSED
    assert {**h.items("RESOURCE#"), **h.items("DELIVERY#")} == before


def test_an_overtaken_event_is_reprocessed_as_superseded_never_as_the_latest(h: Harness) -> None:
    # Given cus_1 at watermark 5 (evt_old at 1, evt_new at 5), and evt_other of no resource
    h.run(first("a1", "evt_old", seq=1), first("a5", "evt_new", seq=5))
    h.run(first("ao", "evt_other", res=None, seq=None))
    assert set(h.superseded.values()) == {None}  # a first run is never superseded
    # When all three are reprocessed
    h.run(again("r1", "evt_old", seq=1), again("r5", "evt_new", seq=5))
    h.run(again("ro", "evt_other", res=None, seq=None))
    # Then the older one's hook is told the resource moved on to 5; the latest and the
    # unordered one are not superseded
    assert {k: v for k, v in h.superseded.items() if k[1] == 1} == {
        ("evt_old", 1): 5,
        ("evt_new", 1): None,
        ("evt_other", 1): None,
    }


def test_a_reprocess_in_a_coalesced_batch_stays_out_of_the_group_write(h: Harness) -> None:
    # Given cus_1 at watermark 5
    h.run(first("a1", "evt_1", seq=1), first("a5", "evt_5", seq=5))
    # When one batch holds new events 6 and 7 and a reprocess of evt_1 and of evt_5
    results = h.run(
        first("n7", "evt_7", seq=7),
        again("r5", "evt_5", seq=5),
        first("n6", "evt_6", seq=6),
        again("r1", "evt_1", seq=1),
    )
    # Then the new events are applied, the reprocesses ran, in sequence order, watermark at 7
    assert {mid: r.outcome.value for mid, r in results.items()} == {
        "n6": "applied",
        "n7": "applied",
        "r1": "reprocessed",
        "r5": "reprocessed",
    }
    assert [c[0] for c in h.calls[2:]] == ["evt_1", "evt_5", "evt_6", "evt_7"]
    resource = h.items("RESOURCE#")["RESOURCE#stripe#cus_1|RESOURCE"]
    assert (resource["watermark"], resource["last_delivery_id"]) == ({"N": "7"}, {"S": "evt_7"})


def test_a_stale_or_missing_record_is_skipped_and_its_hook_does_not_run(h: Harness) -> None:
    # Given evt_new applied at 5, then evt_old (2) recorded as stale
    h.run(first("a5", "evt_new", seq=5))
    h.run(first("a2", "evt_old", seq=2))
    calls = list(h.calls)
    # When evt_old and a never recorded evt_gone (newer than the watermark) are reprocessed
    results = h.run(again("r2", "evt_old", seq=2), again("rg", "evt_gone", seq=9))
    # Then both are skipped, acknowledged, no hook ran, and nothing was written
    assert outcomes(results) == {
        "r2": ("skipped", "recorded as stale"),
        "rg": ("skipped", "not recorded"),
    }
    assert all(r.acknowledged and r.hook is None for r in results.values())
    assert h.calls == calls
    assert (h.ledger_count("evt_old"), h.ledger_count("evt_gone")) == (0, 0)
    assert h.items("REPROCESS#") == {}
    assert "DELIVERY#stripe#evt_gone|DELIVERY" not in h.items("DELIVERY#")
    resource = h.items("RESOURCE#")["RESOURCE#stripe#cus_1|RESOURCE"]
    assert resource["watermark"] == {"N": "5"}


def test_a_delivery_whose_first_hook_is_pending_is_not_reprocessed(h: Harness) -> None:
    # Given evt_1 applied whose first hook failed (hook_state pending)
    h.failing.add(("evt_1", None))
    assert h.run(first("a1", "evt_1"))["a1"].outcome is Outcome.RETRY
    # When generation 1 is reprocessed
    skipped = h.run(again("r1", "evt_1"))
    # Then it is skipped: the hook did not run and no effects or mark were committed
    assert outcomes(skipped) == {"r1": ("skipped", "hook pending")}
    assert [c[1] for c in h.calls] == [None]
    assert h.ledger_count("evt_1") == 0
    # When the first run's redelivery completes the hook, the same reprocess runs
    h.failing.clear()
    assert h.run(first("a1", "evt_1"))["a1"].hook == "ran"
    assert h.run(again("r1", "evt_1"))["r1"].outcome is Outcome.REPROCESSED
    assert h.ledger_count("evt_1") == 2


def test_a_failing_reprocess_hook_is_retried_and_then_commits_once(h: Harness) -> None:
    # Given evt_1 applied, and generation 1's hook failing once
    h.run(first("a1", "evt_1"))
    h.failing.add(("evt_1", 1))
    failed = h.run(again("r1", "evt_1"))["r1"]
    # Then it is a retry with the hook failed (noted for dlq peek), nothing committed
    assert (failed.outcome, failed.hook, failed.acknowledged) == (Outcome.RETRY, "failed", False)
    note = DynamoDBDeliveryStore(h.client, TABLE).get_failure("r1")
    assert note is not None and note["reason"].startswith("hook failed: RuntimeError")
    assert (h.ledger_count("evt_1"), h.items("REPROCESS#")) == (1, {})
    # When it is redelivered with the hook fixed
    h.failing.clear()
    assert h.run(again("r1", "evt_1"))["r1"].outcome is Outcome.REPROCESSED
    assert h.ledger_count("evt_1") == 2


def test_a_reprocess_whose_body_differs_from_the_record_is_skipped(h: Harness) -> None:
    h.run(first("a1", "evt_1"))
    other = envelope_json("evt_1", body=b'{"id":"other"}', reprocess={"generation": 1, "job": "j"})
    results = h.run(Message("r1", other))
    assert outcomes(results) == {"r1": ("skipped", "body differs from the recorded delivery")}
    assert h.ledger_count("evt_1") == 1


def test_the_ledger_counts_one_more_entry_per_reprocessed_delivery(h: Harness) -> None:
    # Given a window of eight deliveries of four resources, two of them stale, one pending
    firsts = [first(f"a{i}", f"evt_{i}", f"cus_{i % 4}", 10 - i) for i in range(8)]
    h.failing.add(("evt_3", None))
    h.run(*firsts[:4])
    h.run(*firsts[4:])
    # evt_4..7 are older than evt_0..3 of their resource (stale); evt_3's first hook is pending
    before = {f"evt_{i}": h.ledger_count(f"evt_{i}") for i in range(8)}
    assert before == {f"evt_{i}": 1 if i < 3 else 0 for i in range(8)}
    # When the window is reprocessed as generation 1, every delivery sent twice in one batch
    # and once more in a second batch
    window = [again(f"r{i}", f"evt_{i}", f"cus_{i % 4}", 10 - i) for i in range(8)]
    copies = [again(f"c{i}", f"evt_{i}", f"cus_{i % 4}", 10 - i) for i in range(8)]
    first_batch = h.run(*window, *copies)
    h.run(*[again(f"d{i}", f"evt_{i}", f"cus_{i % 4}", 10 - i) for i in range(8)])
    # Then the applied, completed deliveries have exactly one more entry; the others none
    after = {f"evt_{i}": h.ledger_count(f"evt_{i}") for i in range(8)}
    assert after == {f"evt_{i}": 2 if i < 3 else 0 for i in range(8)}
    reprocessed = sorted(m for m, r in first_batch.items() if r.outcome is Outcome.REPROCESSED)
    assert reprocessed == ["r0", "r1", "r2"]


def test_the_handler_counts_and_logs_reprocessed_and_skipped(
    app: Callable[..., ModuleType],  # noqa: F811 - the fixture imported above
    logs: io.StringIO,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the processor function with a hook for stripe, and evt_1 applied
    runs: list[str] = []
    registry.register("stripe", None, lambda event: runs.append(event.idempotency_key))
    processor = app()
    assert invoke(processor, sqs_record(envelope_json("evt_1"), "a1"))["batchItemFailures"] == []
    capsys.readouterr()
    outcome_lines(logs)
    # When a batch holds generation 1 of evt_1 twice and of the unrecorded evt_2
    reprocess = {"generation": 1, "job": "job-7"}
    bodies = [envelope_json(d, reprocess=reprocess) for d in ("evt_1", "evt_1", "evt_2")]
    response = invoke(processor, *(sqs_record(b, f"r{i}") for i, b in enumerate(bodies)))
    # Then all are acknowledged, one metric per outcome, one log line per message
    assert response["batchItemFailures"] == []
    assert runs == ["stripe:evt_1", "stripe:evt_1:g1"]
    totals = metric_totals(capsys.readouterr().out)
    assert totals == {"Reprocessed": 1, "ReprocessSkipped": 2, "HookCompleted": 1}
    lines = sorted(outcome_lines(logs), key=lambda line: line["message_id"])
    assert [(x["message_id"], x["outcome"], x["reason"]) for x in lines] == [
        ("r0", "reprocessed", "generation 1 of job job-7"),
        ("r1", "skipped", "generation 1 reprocessed already"),
        ("r2", "skipped", "not recorded"),
    ]
    assert {(x["generation"], x["job"], x["delivery_id"]) for x in lines[:2]} == {
        (1, "job-7", "evt_1")
    }


def test_a_reprocess_of_a_delivery_with_no_hook_is_skipped(h: Harness) -> None:
    # Given evt_1 applied with the ledger hook, then a processor with no hook registered
    h.run(first("a1", "evt_1"))
    h.hooks = HookRegistry()
    # When generation 1 is reprocessed
    results = h.run(again("r1", "evt_1"))
    # Then nothing ran and no mark was written (a later run with the hook back can still run it)
    assert outcomes(results) == {"r1": ("skipped", "no hook")}
    assert h.items("REPROCESS#") == {}
