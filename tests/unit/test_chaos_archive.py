"""The chaos run's archive leg (``webhook_pipeline_ops.chaos.archive_checks``): each named check
has a case that passes and a case with the defect that must fail, over a sender's log, archive
records and table items built by hand; the first-run reading of ``double_applied``; the ledger's
reprocess entries; the window the reprocess leg picks; the report's rows and verdicts."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from webhook_pipeline.archive.record import ArchiveRecord, LineProblem
from webhook_pipeline.hooks import Effects, HookEvent
from webhook_pipeline_ops.chaos.archive_checks import (
    archive_corrupt,
    archive_missing,
    archive_unexpected,
    check_archive,
    check_reprocess,
    generation_entries,
    reprocess_due,
    reprocess_missing,
    reprocess_outside_window,
    reprocess_twice,
    watermark_moved,
)
from webhook_pipeline_ops.chaos.archive_leg import pick_window
from webhook_pipeline_ops.chaos.reconcile import reconcile
from webhook_pipeline_ops.chaos.report import (
    archive_failures,
    archive_rows,
    failure_reasons,
    render,
)
from webhook_pipeline_ops.chaos.traffic import AttemptLog, Copy


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def sent(delivery_id: str, *attempts: tuple[int | None, str], source: str = "stripe") -> Copy:
    """A copy whose attempts are (status, body text)."""
    logs = [AttemptLog(s, float(i), 1.0, None, sha(b)) for i, (s, b) in enumerate(attempts)]
    return Copy(source, delivery_id, "cus_1", 10, False, logs)


def archived(
    delivery_id: str,
    body: str,
    *,
    source: str = "stripe",
    received_at: str = "2026-12-01T10:00:00.000000Z",
    digest: str | None = None,
) -> ArchiveRecord:
    return ArchiveRecord(
        source=source,
        delivery_id=delivery_id,
        received_at=received_at,
        body_sha256=digest or sha(body),
        body_size=len(body),
        body=body,
        outcome="applied",
        archived_at="2026-12-01T10:00:01.000000Z",
    )


def ids(records: list[ArchiveRecord]) -> set[tuple[str, str, str]]:
    return {r.identity for r in records}


# -- archive_missing ------------------------------------------------------------------------------


def test_every_accepted_body_archived_is_not_missing() -> None:
    copies = [sent("evt_1", (202, "a")), sent("evt_2", (None, "b"), (200, "b2"))]
    assert archive_missing(copies, ids([archived("evt_1", "a"), archived("evt_2", "b")])) == []


def test_an_accepted_delivery_not_archived_is_missing() -> None:
    copies = [sent("evt_1", (202, "a")), sent("evt_2", (202, "b"))]
    assert archive_missing(copies, ids([archived("evt_1", "a")])) == [("stripe", "evt_2")]


def test_a_202_body_other_than_the_archived_one_is_missing() -> None:
    """Two copies of one id enqueued with different bytes: both must be archived."""
    copies = [sent("evt_1", (202, "a")), sent("evt_1", (202, "a-resigned"))]
    assert archive_missing(copies, ids([archived("evt_1", "a")])) == [("stripe", "evt_1")]
    both = ids([archived("evt_1", "a"), archived("evt_1", "a-resigned")])
    assert archive_missing(copies, both) == []


def test_the_same_id_from_another_source_does_not_stand_in() -> None:
    copies = [sent("evt_1", (202, "a"), source="github")]
    assert archive_missing(copies, ids([archived("evt_1", "a")])) == [("github", "evt_1")]


def test_a_delivery_acknowledged_without_a_202_needs_one_of_its_bodies() -> None:
    """A timed-out send (enqueued) then a 200 from the gate: whichever bytes ingest took."""
    copies = [sent("evt_1", (None, "first"), (200, "second"))]
    assert archive_missing(copies, ids([archived("evt_1", "first")])) == []
    assert archive_missing(copies, set()) == [("stripe", "evt_1")]


def test_a_delivery_never_acknowledged_is_not_required() -> None:
    copies = [sent("evt_1", (400, "a")), sent("evt_2", (503, "b"), (None, "b"))]
    assert archive_missing(copies, set()) == []


# -- archive_unexpected ---------------------------------------------------------------------------


def test_archived_bytes_that_were_sent_are_expected() -> None:
    copies = [sent("evt_1", (503, "a"), (202, "a2"))]
    both = ids([archived("evt_1", "a"), archived("evt_1", "a2")])
    assert archive_unexpected(both, copies) == []


def test_archived_bytes_nobody_sent_are_unexpected() -> None:
    copies = [sent("evt_1", (202, "a"))]
    found = ids([archived("evt_1", "a"), archived("evt_1", "tampered"), archived("evt_9", "x")])
    assert archive_unexpected(found, copies) == [
        ("stripe", "evt_1", sha("tampered")),
        ("stripe", "evt_9", sha("x")),
    ]


def test_the_runs_own_queue_messages_are_not_unexpected() -> None:
    found = ids([archived("poison_1", "p")])
    assert archive_unexpected(found, [], foreign=[("stripe", "poison_1")]) == []
    assert archive_unexpected(found, [], foreign=[("github", "poison_1")]) != []


# -- archive_corrupt ------------------------------------------------------------------------------


def test_records_that_check_and_no_problems_are_not_corrupt() -> None:
    assert archive_corrupt([archived("evt_1", "a")], []) == []


def test_a_body_not_matching_its_sha_and_a_reader_problem_are_corrupt() -> None:
    bad = archived("evt_2", "changed", digest=sha("original"))
    problem = LineProblem("archive/source=stripe/x.jsonl.gz", 3, "not JSON")
    found = archive_corrupt([archived("evt_1", "a"), bad], [problem])
    assert len(found) == 2
    assert found[0] == "archive/source=stripe/x.jsonl.gz:3: not JSON"
    assert found[1].startswith("stripe/evt_2: ")


def test_check_archive_counts_each_finding_and_names_examples() -> None:
    copies = [sent("evt_1", (202, "a")), sent("evt_2", (202, "b"))]
    records = [archived("evt_1", "a"), archived("evt_3", "c")]
    section = check_archive(copies, records, [LineProblem("k", 0, "not gzip")])
    counts = [section[k] for k in ("archive_missing", "archive_unexpected", "archive_corrupt")]
    assert counts == [1, 1, 1]
    assert section["examples"]["archive_missing"] == ["stripe/evt_2"]
    assert section["examples"]["archive_unexpected"] == [f"stripe/evt_3/{sha('c')}"]


# -- double_applied reads first runs only ---------------------------------------------------------


def delivery(delivery_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "pk": f"DELIVERY#stripe#{delivery_id}",
        "sk": "DELIVERY",
        "source": "stripe",
        "delivery_id": delivery_id,
        "outcome": "applied",
        "hook_state": "done",
        "resource_key": "cus_1",
        "sequence": 10,
        "recorded_at": "2026-12-01T10:00:00.000000+00:00",
        "content_sha256": sha(delivery_id),
    } | extra


def entry(delivery_id: str, n: int, generation: int | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pk": f"LEDGER#stripe#{delivery_id}",
        "sk": f"{delivery_id}-{n}-{generation}",
        "type": "ledger",
        "source": "stripe",
        "delivery_id": delivery_id,
    }
    if generation is not None:
        item |= {"generation": generation, "idempotency_key": f"stripe:{delivery_id}:g{generation}"}
    return item


def resource_item(watermark: int) -> dict[str, Any]:
    return {
        "pk": "RESOURCE#stripe#cus_1",
        "sk": "RESOURCE",
        "source": "stripe",
        "resource_key": "cus_1",
        "watermark": watermark,
    }


def test_a_reprocess_entry_is_not_a_double_apply() -> None:
    items = [delivery("evt_1"), resource_item(10), entry("evt_1", 1), entry("evt_1", 2, 1)]
    rec = reconcile([sent("evt_1", (202, "evt_1"))], items, [])
    assert (rec.double_applied, rec.ledger_items, rec.failed()) == (0, 1, False)


def test_a_genuine_double_first_run_is_still_caught_beside_a_reprocess_entry() -> None:
    items = [delivery("evt_1"), resource_item(10), entry("evt_1", 1), entry("evt_1", 2)]
    items.append(entry("evt_1", 3, 1))
    rec = reconcile([sent("evt_1", (202, "evt_1"))], items, [])
    assert (rec.double_applied, rec.failed()) == (1, True)
    assert rec.examples["double_applied"] == ["stripe/evt_1"]


def test_a_reprocess_entry_does_not_stand_in_for_a_missing_first_run() -> None:
    items = [delivery("evt_1"), delivery("evt_2"), resource_item(10), entry("evt_1", 1)]
    items.append(entry("evt_2", 1, 1))
    rec = reconcile([sent("evt_1", (202, "a")), sent("evt_2", (202, "b"))], items, [])
    assert (rec.applied_without_ledger, rec.failed()) == (1, True)


def test_the_ledger_marks_a_reprocess_run_with_its_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from webhook_pipeline_ops import ledger

    monkeypatch.setattr(ledger, "_SWITCHES", None)
    monkeypatch.setenv("TABLE_NAME", "deliveries")
    first = HookEvent(
        "stripe", "evt_1", "invoice.paid", None, None, datetime(2026, 12, 1, tzinfo=UTC)
    )
    again = HookEvent(
        "stripe", "evt_1", "invoice.paid", None, None, first.received_at, replay_generation=4
    )
    effects = [ledger.append_entry(e) for e in (first, again)]
    assert all(isinstance(e, Effects) for e in effects)
    items = [e.writes[0]["Put"]["Item"] for e in effects if isinstance(e, Effects)]
    assert "generation" not in items[0] and "idempotency_key" not in items[0]
    assert items[1]["generation"] == {"N": "4"}
    assert items[1]["idempotency_key"] == {"S": "stripe:evt_1:g4"}


# -- the reprocess checks -------------------------------------------------------------------------


def test_due_is_applied_with_its_first_hook_done_and_the_recorded_body() -> None:
    before = [
        delivery("evt_1"),
        delivery("evt_2", outcome="stale"),
        delivery("evt_3", hook_state="pending"),
        delivery("evt_4", content_sha256=sha("another body")),
    ]
    window = [archived(d, d) for d in ("evt_1", "evt_2", "evt_3", "evt_4", "evt_5")]
    assert reprocess_due(window, before) == {("stripe", "evt_1")}


def test_generation_entries_count_only_that_generation() -> None:
    items = [entry("evt_1", 1), entry("evt_1", 2, 3), entry("evt_1", 3, 2), entry("evt_2", 1, 3)]
    assert generation_entries(items, 3) == Counter({("stripe", "evt_1"): 1, ("stripe", "evt_2"): 1})


def test_a_due_delivery_without_an_entry_is_missing() -> None:
    due = {("stripe", "evt_1"), ("stripe", "evt_2")}
    assert reprocess_missing(due, Counter({("stripe", "evt_1"): 1})) == [("stripe", "evt_2")]
    assert reprocess_missing(due, Counter(dict.fromkeys(due, 1))) == []


def test_two_entries_of_one_generation_are_twice() -> None:
    assert reprocess_twice(Counter({("stripe", "evt_1"): 2, ("stripe", "evt_2"): 1})) == [
        ("stripe", "evt_1")
    ]
    assert reprocess_twice(Counter({("stripe", "evt_1"): 1})) == []


def test_an_entry_of_a_delivery_not_due_is_outside_the_window() -> None:
    due = {("stripe", "evt_1")}
    found = Counter({("stripe", "evt_1"): 1, ("stripe", "evt_9"): 1})
    assert reprocess_outside_window(due, found) == [("stripe", "evt_9")]
    assert reprocess_outside_window(due, Counter({("stripe", "evt_1"): 1})) == []


def test_a_changed_added_or_removed_resource_item_is_a_moved_watermark() -> None:
    assert watermark_moved([resource_item(10)], [resource_item(10)]) == []
    assert watermark_moved([resource_item(10)], [resource_item(9)]) == [("stripe", "cus_1")]
    assert watermark_moved([], [resource_item(10)]) == [("stripe", "cus_1")]
    touched = resource_item(10) | {"updated_at": "later"}
    assert watermark_moved([resource_item(10)], [touched]) == [("stripe", "cus_1")]


def test_check_reprocess_passes_exactly_once_in_the_window_and_fails_each_defect() -> None:
    before = [delivery("evt_1"), delivery("evt_2"), delivery("evt_9"), resource_item(10)]
    window = [archived("evt_1", "evt_1"), archived("evt_2", "evt_2")]
    good = [*before, entry("evt_1", 1, 5), entry("evt_2", 1, 5)]
    clean = check_reprocess(window, before, good, 5)
    assert (clean["due"], clean["entries"]) == (2, 2)
    verdicts = ("reprocess_missing", "reprocess_twice", "reprocess_outside_window")
    assert [clean[k] for k in (*verdicts, "watermark_moved")] == [0, 0, 0, 0]
    bad = [delivery("evt_1"), delivery("evt_2"), delivery("evt_9"), resource_item(12)]
    bad += [entry("evt_1", 1, 5), entry("evt_1", 2, 5), entry("evt_9", 1, 5)]
    found = check_reprocess(window, before, bad, 5)
    assert [found[k] for k in (*verdicts, "watermark_moved")] == [1, 1, 1, 1]
    assert found["examples"]["reprocess_missing"] == ["stripe/evt_2"]
    assert found["examples"]["reprocess_outside_window"] == ["stripe/evt_9"]


# -- the window and the report --------------------------------------------------------------------


def stamp(i: int) -> str:
    return f"2026-12-01T10:00:{i:02d}.000000Z"


def test_the_window_holds_size_records_from_the_middle_of_a_long_run() -> None:
    records = [archived(f"evt_{i:02d}", "x", received_at=stamp(i)) for i in range(40)]
    start, end, window = pick_window(records[::-1], 10)  # type: ignore[misc]
    assert [r.delivery_id for r in window] == [f"evt_{i:02d}" for i in range(10, 20)]
    assert (start, end) == (stamp(10), stamp(20))


def test_a_short_run_is_reprocessed_whole_and_an_empty_archive_not_at_all() -> None:
    records = [archived(f"evt_{i}", "x", received_at=stamp(i)) for i in range(5)]
    start, end, window = pick_window(records, 10)  # type: ignore[misc]
    assert len(window) == 5 and start == stamp(0) and end == "2026-12-01T10:00:04.000001Z"
    assert pick_window([], 10) is None


def leg(**findings: Any) -> dict[str, Any]:
    reprocess = {
        "archived_in_window": 2,
        "due": 2,
        "entries": 2,
        "generation": 1,
        "status": "complete",
        "failed": [],
        "kills": [{"cursor_seen": 3, "status_after": "running"}, {"cursor_seen": None}],
        "runs": 3,
        "settle_seconds": 3.0,
        "last_run": {"sent": 2, "skipped": {}},
        "reprocess_missing": 0,
        "reprocess_twice": 0,
        "reprocess_outside_window": 0,
        "watermark_moved": 0,
    }
    archive = {
        "identities": 3,
        "deliveries": 2,
        "objects_read": 1,
        "queue_drained_seconds": 3.0,
        "archive_missing": 0,
        "archive_unexpected": 0,
        "archive_corrupt": 0,
        "reprocess": reprocess,
    }
    for name, value in findings.items():
        (reprocess if name in reprocess else archive)[name] = value
    return archive


@pytest.mark.parametrize(
    "finding",
    [
        "archive_missing",
        "archive_unexpected",
        "archive_corrupt",
        "reprocess_missing",
        "reprocess_twice",
        "reprocess_outside_window",
        "watermark_moved",
    ],
)
def test_each_archive_finding_fails_the_proof(finding: str) -> None:
    assert archive_failures(leg()) == []
    assert archive_failures(leg(**{finding: 1})) == [finding]


def test_the_jobs_own_skip_reasons_do_not_switch_the_leg_off() -> None:
    """A job that skipped stale deliveries still has its findings checked."""
    found = leg(reprocess_twice=1, last_run={"skipped": {"stale": 7}})
    assert archive_failures(found) == ["reprocess_twice"]
    assert "REPROCESS TWICE" in "\n".join(str(k) for k, _ in archive_rows(found))
    assert archive_failures(leg() | {"reprocess": {"not_run": "--reprocess-deliveries 0"}}) == []


def test_an_incomplete_job_or_an_undrained_queue_fails_the_proof() -> None:
    assert archive_failures(leg(status="incomplete"))[0].startswith("reprocess job incomplete")
    assert archive_failures(leg(queue_drained_seconds=None))[0].startswith("archive queue not")
    assert archive_failures(None) == []


def test_the_report_prints_the_archive_figures_and_fails_on_them() -> None:
    rec = reconcile([sent("evt_1", (202, "evt_1"))], [delivery("evt_1"), resource_item(10)], [])
    sender = dict.fromkeys(
        ("copies", "duplicate_copies", "requests", "retries", "final_2xx", "final_4xx"), 1
    ) | {"final_5xx": 0, "final_no_answer": 0, "elapsed_seconds": 1.0}
    report = {
        "reconciliation": rec.as_dict(),
        "sender": sender,
        "faults": [],
        "archive": leg(archive_missing=2),
        "settle_seconds": 1.0,
        "poison": {"not_recorded_nor_in_dlq": []},
    }
    text = render(report)
    assert "ARCHIVE MISSING" in text and "REPROCESS TWICE" in text
    assert "1 killed (1 mid-job), 3 runs" in text
    assert failure_reasons(report, 60) == ["archive_missing"]
