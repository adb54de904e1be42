"""The chaos run's reconciliation (``webhook_pipeline_ops.chaos``): each finding has a
case that passes and a case that must fail, over a sender's log and table items built by hand."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from webhook_pipeline_ops.chaos.faults import FAULT_KINDS, schedule_faults
from webhook_pipeline_ops.chaos.reconcile import (
    Reconciliation,
    acknowledged,
    applied_without_ledger,
    double_applied,
    gather,
    is_lost,
    is_recorded_after_4xx,
    ledger_key,
    out_of_order_applied,
    reconcile,
    watermark_mismatches,
)
from webhook_pipeline_ops.chaos.report import render
from webhook_pipeline_ops.chaos.traffic import AttemptLog, Copy, interleave, with_duplicates


def copy(
    delivery_id: str,
    *statuses: int | None,
    source: str = "stripe",
    resource: str | None = "cus_1",
    sequence: int | None = 10,
    duplicate: bool = False,
) -> Copy:
    return Copy(
        source,
        delivery_id,
        resource,
        sequence,
        duplicate,
        [AttemptLog(s, float(i), 1.0) for i, s in enumerate(statuses)],
    )


def record(
    delivery_id: str,
    *,
    source: str = "stripe",
    resource: str | None = "cus_1",
    sequence: int | None = 10,
    outcome: str = "applied",
    recorded_at: str = "2026-12-01T10:00:00.000000+00:00",
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pk": f"DELIVERY#{source}#{delivery_id}",
        "sk": "DELIVERY",
        "type": "delivery",
        "source": source,
        "delivery_id": delivery_id,
        "outcome": outcome,
        "recorded_at": recorded_at,
    }
    if resource is not None:
        item |= {"resource_key": resource, "sequence": sequence}
    return item


def resource(key: str, watermark: int, source: str = "stripe") -> dict[str, Any]:
    return {
        "pk": f"RESOURCE#{source}#{key}",
        "sk": "RESOURCE",
        "type": "resource",
        "source": source,
        "resource_key": key,
        "watermark": watermark,
    }


# -- lost -----------------------------------------------------------------------------------------


def test_every_acknowledged_delivery_recorded_is_not_lost() -> None:
    rec = reconcile(
        [copy("evt_1", 503, 202), copy("evt_1", 200, duplicate=True)],
        [record("evt_1"), resource("cus_1", 10)],
        [],
    )
    assert (rec.lost, rec.acknowledged, rec.recorded, rec.failed()) == (0, 1, 1, False)
    assert (rec.gate_duplicates, rec.past_gate_copies) == (1, 0)


def test_an_acknowledged_delivery_neither_recorded_nor_in_the_dlq_is_lost() -> None:
    rec = reconcile(
        [copy("evt_1", 202), copy("evt_2", 202, sequence=11)],
        [record("evt_1"), resource("cus_1", 10)],
        [],
    )
    assert rec.lost == 1
    assert rec.examples["lost"] == ["stripe/evt_2"]
    assert rec.failed()


def test_a_2xx_on_any_attempt_of_any_copy_counts_as_acknowledged() -> None:
    """The first copy got 202 then the sender's own retry timed out: still owed."""
    rec = reconcile([copy("evt_1", 202), copy("evt_1", None, duplicate=True)], [], [])
    assert (rec.acknowledged, rec.lost) == (1, 1)


def test_in_the_dlq_with_a_reason_is_not_lost_without_one_it_is() -> None:
    sent = [copy("evt_1", 202)]
    with_reason = reconcile(
        sent, [], [{"source": "stripe", "delivery_id": "evt_1", "reason": "retries exhausted"}]
    )
    assert (with_reason.lost, with_reason.in_dlq) == (0, 1)
    without = reconcile(sent, [], [{"source": "stripe", "delivery_id": "evt_1", "reason": ""}])
    assert without.lost == 1


def test_unacknowledged_deliveries_are_not_lost_whether_recorded_or_not() -> None:
    rec = reconcile(
        [copy("evt_1", 503, 503), copy("evt_2", None, sequence=11)],
        [record("evt_2", sequence=11), resource("cus_1", 11)],
        [],
    )
    assert (rec.lost, rec.unacknowledged, rec.failed()) == (0, 2, False)


def test_dlq_entries_of_no_sent_delivery_are_counted_as_foreign() -> None:
    rec = reconcile(
        [copy("evt_1", 202)],
        [record("evt_1"), resource("cus_1", 10)],
        [{"source": "stripe", "delivery_id": "other", "reason": "malformed"}],
    )
    assert (rec.dlq_entries, rec.dlq_foreign, rec.in_dlq) == (1, 1, 0)


# -- 4xx ------------------------------------------------------------------------------------------


def test_a_rejected_delivery_recorded_fails_the_proof() -> None:
    ok = reconcile([copy("evt_1", 401)], [], [])
    assert (ok.rejected_4xx, ok.recorded_after_4xx, ok.failed()) == (1, 0, False)
    bad = reconcile([copy("evt_1", 401)], [record("evt_1"), resource("cus_1", 10)], [])
    assert (bad.recorded_after_4xx, bad.failed()) == (1, True)


# -- double-applied -------------------------------------------------------------------------------


def ledger(source: str, delivery_id: str, n: int) -> dict[str, Any]:
    return {"pk": f"LEDGER#{source}#{delivery_id}", "sk": f"INVOCATION#{n}"}


def test_double_applied_is_not_measured_without_ledger_items() -> None:
    rec = reconcile([copy("evt_1", 202)], [record("evt_1"), resource("cus_1", 10)], [])
    assert rec.double_applied is None
    assert rec.as_dict()["double_applied"] == "not measured"


def test_one_ledger_item_per_delivery_is_zero_double_applied() -> None:
    items = [record("evt_1"), resource("cus_1", 10), ledger("stripe", "evt_1", 1)]
    rec = reconcile([copy("evt_1", 202)], items, [])
    assert (rec.double_applied, rec.ledger_items, rec.failed()) == (0, 1, False)


def test_two_ledger_items_of_one_delivery_fail_the_proof() -> None:
    items = [record("evt_1"), resource("cus_1", 10)]
    items += [ledger("stripe", "evt_1", 1), ledger("stripe", "evt_1", 2)]
    rec = reconcile([copy("evt_1", 202)], items, [])
    assert (rec.double_applied, rec.failed()) == (1, True)
    assert rec.examples["double_applied"] == ["stripe/evt_1"]


def test_ledger_items_are_read_by_attributes_or_by_their_key() -> None:
    assert ledger_key({"pk": "LEDGER#stripe#evt#1", "sk": "x"}) == ("stripe", "evt#1")
    by_attrs = {"pk": "LEDGER#abc", "source": "github", "delivery_id": "d-1"}
    assert ledger_key(by_attrs) == ("github", "d-1")
    assert ledger_key({"pk": "x", "type": "ledger", "source": "s", "delivery_id": "d"}) == (
        "s",
        "d",
    )
    assert ledger_key({"pk": "DELIVERY#stripe#evt_1"}) is None


# -- order and watermarks -------------------------------------------------------------------------


def test_applied_in_rising_order_with_stale_older_events_is_in_order() -> None:
    sent = [copy("e3", 202, sequence=3), copy("e2", 202, sequence=2), copy("e4", 202, sequence=4)]
    items = [
        record("e3", sequence=3, recorded_at="2026-12-01T10:00:01"),
        record("e2", sequence=2, outcome="stale", recorded_at="2026-12-01T10:00:02"),
        record("e4", sequence=4, recorded_at="2026-12-01T10:00:03"),
        resource("cus_1", 4),
    ]
    rec = reconcile(sent, items, [])
    assert (rec.out_of_order_applied, rec.watermark_mismatches, rec.failed()) == (0, 0, False)


def test_an_older_event_applied_after_a_newer_one_is_out_of_order() -> None:
    sent = [copy("e3", 202, sequence=3), copy("e2", 202, sequence=2)]
    items = [
        record("e3", sequence=3, recorded_at="2026-12-01T10:00:01"),
        record("e2", sequence=2, recorded_at="2026-12-01T10:00:02"),
        resource("cus_1", 3),
    ]
    rec = reconcile(sent, items, [])
    assert rec.out_of_order_applied == 1
    assert rec.examples["out_of_order_applied"] == ["stripe/e2"]
    assert rec.failed()


def test_records_of_the_same_instant_are_not_ordered_against_each_other() -> None:
    sent = [copy("e3", 202, sequence=3), copy("e2", 202, sequence=2)]
    same = "2026-12-01T10:00:01"
    items = [record("e3", sequence=3, recorded_at=same), record("e2", sequence=2, recorded_at=same)]
    rec = reconcile(sent, [*items, resource("cus_1", 3)], [])
    assert rec.out_of_order_applied == 0


def test_a_final_watermark_below_the_highest_accepted_sequence_fails_the_proof() -> None:
    sent = [copy("e1", 202, sequence=1), copy("e2", 202, sequence=2)]
    items = [record("e1", sequence=1), record("e2", sequence=2, recorded_at="2026-12-01T11:00:00")]
    good = reconcile(sent, [*items, resource("cus_1", 2)], [])
    assert (good.watermark_mismatches, good.resources_checked) == (0, 1)
    bad = reconcile(sent, [*items, resource("cus_1", 1)], [])
    assert (bad.watermark_mismatches, bad.failed()) == (1, True)
    missing = reconcile(sent, items, [])
    assert missing.watermark_mismatches == 1


def test_the_recorded_sequence_unit_wins_over_the_senders() -> None:
    """Some providers' timestamps are read in microseconds: the record says which."""
    sent = [copy("e1", 202, sequence=5)]
    rec = reconcile(sent, [record("e1", sequence=5_000_000), resource("cus_1", 5_000_000)], [])
    assert rec.watermark_mismatches == 0


def test_a_dead_lettered_delivery_does_not_count_towards_the_watermark() -> None:
    sent = [copy("e1", 202, sequence=1), copy("e2", 202, sequence=2)]
    dlq = [{"source": "stripe", "delivery_id": "e2", "reason": "bug"}]
    rec = reconcile(sent, [record("e1", sequence=1), resource("cus_1", 1)], dlq)
    assert (rec.lost, rec.watermark_mismatches) == (0, 0)


def test_the_expected_watermark_is_the_highest_sequence_sent_not_the_last() -> None:
    """The sender's last copy of a resource carries an older event than an earlier one: the
    watermark must be the highest sequence, whatever order they were sent in."""
    sent = [copy("e5", 202, sequence=5), copy("e9", 202, sequence=9), copy("e3", 202, sequence=3)]
    items = [
        record("e5", sequence=5, recorded_at="2026-12-01T10:00:01"),
        record("e9", sequence=9, recorded_at="2026-12-01T10:00:02"),
        record("e3", sequence=3, outcome="stale", recorded_at="2026-12-01T10:00:03"),
    ]
    right = reconcile(sent, [*items, resource("cus_1", 9)], [])
    assert (right.watermark_mismatches, right.resources_checked, right.failed()) == (0, 1, False)
    last_sent = reconcile(sent, [*items, resource("cus_1", 3)], [])
    assert (last_sent.watermark_mismatches, last_sent.failed()) == (1, True)
    assert last_sent.examples["watermark_mismatch"] == ["stripe/cus_1 (watermark 3, expected 9)"]


def test_every_apply_below_an_earlier_one_is_out_of_order_not_only_the_first() -> None:
    """9 applied, then 3, then 5: both 3 and 5 are below the 9 applied before them (5 is above
    the 3 just before it, which must not reset what "earlier" means); 7 and 8 applied together
    later are two more, and 10 is in order."""
    sent = [copy(f"e{n}", 202, sequence=n) for n in (9, 3, 5, 7, 8, 10)]
    at = {9: "10:00:01", 3: "10:00:02", 5: "10:00:03", 7: "10:00:04", 8: "10:00:04", 10: "10:00:05"}
    items = [record(f"e{n}", sequence=n, recorded_at=f"2026-12-01T{t}") for n, t in at.items()]
    rec = reconcile(sent, [*items, resource("cus_1", 10)], [])
    assert rec.out_of_order_applied == 4
    assert sorted(rec.examples["out_of_order_applied"]) == [
        "stripe/e3",
        "stripe/e5",
        "stripe/e7",
        "stripe/e8",
    ]
    assert (rec.watermark_mismatches, rec.failed()) == (0, True)


# -- traffic shape, schedule, report --------------------------------------------------------------


def test_interleave_keeps_each_streams_order() -> None:
    merged = interleave([["a1", "a2", "a3"], ["b1", "b2"]], random.Random(1))
    assert sorted(merged) == ["a1", "a2", "a3", "b1", "b2"]
    assert [x for x in merged if x[0] == "a"] == ["a1", "a2", "a3"]


def test_duplicates_follow_their_original() -> None:
    items = list(range(100))
    out = with_duplicates(items, 0.5, immediate=0.3, rng=random.Random(2))
    assert sum(1 for _, dup in out if dup) == 50
    first = {}
    for i, (x, dup) in enumerate(out):
        if not dup:
            first[x] = i
        else:
            assert x in first  # a duplicate never precedes its original


def test_the_schedule_is_seeded_and_has_every_kind_once() -> None:
    a, b = schedule_faults(FAULT_KINDS, 7), schedule_faults(FAULT_KINDS, 7)
    assert a == b
    assert sorted(f.kind for f in a) == sorted(FAULT_KINDS)
    assert a[-1].kind == "replay"
    moto = next(f for f in a if f.kind == "moto-stop")
    assert 10 <= moto.hold <= 15
    assert schedule_faults(FAULT_KINDS, 8) != a
    with pytest.raises(ValueError, match="unknown fault"):
        schedule_faults(["disk-full"], 1)


@pytest.mark.parametrize("seed", range(20))
def test_the_schedule_keeps_the_held_faults_apart_and_bounded(seed: int) -> None:
    faults = schedule_faults(FAULT_KINDS, seed)
    middle = [f for f in faults if f.kind not in ("poison", "replay")]
    assert all(0.10 <= f.at_progress <= 0.75 for f in middle)
    points = [f.at_progress for f in middle]
    assert all(b - a >= 0.019 for a, b in itertools.pairwise(points))
    holds = {f.kind: f.hold for f in faults}
    assert 6 <= holds["aws-throttle"] <= 10
    assert 2 <= holds["hook-failing"] <= 4  # below visibility timeout x receives (5 s x 3)
    assert holds["processor-crash-before-write"] == holds["processor-crash-after-write"] == 0
    assert 0.80 <= next(f.at_progress for f in faults if f.kind == "replay") <= 0.90


def test_render_names_every_fault_and_the_verdicts() -> None:
    rec = reconcile([copy("evt_1", 202)], [record("evt_1"), resource("cus_1", 10)], [])
    sender = {
        "copies": 1,
        "duplicate_copies": 0,
        "requests": 1,
        "retries": 0,
        "final_2xx": 1,
        "final_4xx": 0,
        "final_5xx": 0,
        "final_no_answer": 0,
        "elapsed_seconds": 1.0,
    }
    text = render(
        {
            "reconciliation": rec.as_dict(),
            "sender": sender,
            "faults": [{"kind": "redis-kill", "at": 1.5, "injected": True, "detail": "pid 1"}],
            "not_injected": {"throttling": "needs a hook"},
        }
    )
    assert "LOST" in text and "not measured" in text
    assert "redis-kill" in text and "throttling" in text and "NOT injected" in text


def test_an_applied_delivery_without_a_ledger_item_fails_the_proof_once_measured() -> None:
    sent = [copy("evt_1", 202), copy("evt_2", 202, sequence=11)]
    items = [record("evt_1"), record("evt_2", sequence=11, recorded_at="2026-12-01T11:00:00")]
    items += [resource("cus_1", 11), ledger("stripe", "evt_1", 1)]
    rec = reconcile(sent, items, [])
    assert (rec.applied_without_ledger, rec.double_applied, rec.failed()) == (1, 0, True)
    assert rec.examples["applied_without_ledger"] == ["stripe/evt_2"]
    complete = reconcile(sent, [*items, ledger("stripe", "evt_2", 1)], [])
    assert (complete.applied_without_ledger, complete.failed()) == (0, False)
    unmeasured = reconcile(sent, items[:3], [])
    assert unmeasured.as_dict()["applied_without_ledger"] == "not measured"


def test_a_hook_parked_in_the_dlq_is_owed_not_skipped() -> None:
    """An applied delivery whose hook failed until its message went to the DLQ (with the
    processor's reason) still owes its hook: counted as parked, not as "applied without a hook
    run"; the same record with no DLQ entry, or one without a reason, fails the proof."""
    sent = [copy("evt_1", 202), copy("evt_2", 202, sequence=11)]
    pending = {**record("evt_2", sequence=11, recorded_at="2026-12-01T11:00:00")}
    pending["hook_state"] = "pending"
    items = [record("evt_1"), pending, resource("cus_1", 11), ledger("stripe", "evt_1", 1)]
    reason = [{"source": "stripe", "delivery_id": "evt_2", "reason": "hook failed: Boom"}]
    parked = reconcile(sent, items, reason)
    assert (parked.hooks_parked_in_dlq, parked.hooks_pending) == (1, 0)
    assert (parked.applied_without_ledger, parked.failed()) == (0, False)
    assert parked.examples["hooks_parked_in_dlq"] == ["stripe/evt_2"]
    assert "hooks parked in the DLQ" in render(
        {
            "reconciliation": parked.as_dict(),
            "sender": dict.fromkeys(
                ("copies", "duplicate_copies", "requests", "retries", "final_2xx", "final_4xx"), 0
            )
            | {"final_5xx": 0, "final_no_answer": 0, "elapsed_seconds": 1.0},
        }
    )
    for dlq in ([], [{"source": "stripe", "delivery_id": "evt_2", "reason": ""}]):
        skipped = reconcile(sent, items, dlq)
        assert (skipped.hooks_parked_in_dlq, skipped.hooks_pending) == (0, 1)
        assert (skipped.applied_without_ledger, skipped.failed()) == (1, True)
    # only an applied record's hook is owed: a stale one left pending is not parked
    stale = {**pending, "outcome": "stale"}
    not_applied = reconcile(sent, [items[0], stale, *items[2:]], reason)
    assert (not_applied.hooks_parked_in_dlq, not_applied.hooks_pending) == (0, 1)
    # a DLQ entry does not excuse a record that says its hook is done yet has no ledger item
    done = [*items[:1], record("evt_2", sequence=11), *items[2:]]
    not_owed = reconcile(sent, done, reason)
    assert (not_owed.hooks_parked_in_dlq, not_owed.applied_without_ledger) == (0, 1)
    ran = reconcile(sent, [*done, ledger("stripe", "evt_2", 1)], reason)
    assert (ran.hooks_parked_in_dlq, ran.applied_without_ledger, ran.failed()) == (0, 0, False)


# -- the figures of the gate and the table ------------------------------------------------------


def test_copies_past_the_gate_are_the_202s_beyond_the_first_of_a_delivery() -> None:
    """Three copies of evt_1 answered 202, 202 (after a 503) and 200; evt_2's one 202: two extra
    copies got past the gate (evt_1's second and third 202), one was stopped there (the 200)."""
    sent = [
        copy("evt_1", 202),
        copy("evt_1", 503, 202, duplicate=True),
        copy("evt_1", 202, 200, duplicate=True),
        copy("evt_2", 202, sequence=11),
    ]
    items = [record("evt_1"), record("evt_2", sequence=11), resource("cus_1", 11)]
    rec = reconcile(sent, items, [])
    assert (rec.past_gate_copies, rec.gate_duplicates) == (2, 1)
    assert (rec.acknowledged, rec.lost, rec.failed()) == (2, 0, False)


def test_recorded_counts_the_sent_deliveries_by_outcome_only() -> None:
    """Two applied and one stale record of sent deliveries, and one record of a delivery this
    run never sent (an earlier run's): recorded 3 (2 applied / 1 stale), the stranger ignored."""
    sent = [copy("evt_1", 202), copy("evt_2", 202, sequence=12), copy("evt_3", 202, sequence=11)]
    items = [
        record("evt_1"),
        record("evt_2", sequence=12, recorded_at="2026-12-01T11:00:00"),
        record("evt_3", sequence=11, outcome="stale", recorded_at="2026-12-01T12:00:00"),
        record("evt_old", sequence=5),
        resource("cus_1", 12),
    ]
    rec = reconcile(sent, items, [])
    assert (rec.recorded, rec.recorded_applied, rec.recorded_stale) == (3, 2, 1)
    assert (rec.out_of_order_applied, rec.failed()) == (0, False)


def test_each_named_check_alone_names_its_offenders() -> None:
    """The checks read one :class:`Evidence` apart from :func:`reconcile`: evt_1 lost, evt_2
    recorded after a 4xx, evt_3 applied twice (two ledger items), evt_4 applied with none, evt_5
    (sequence 9) applied after evt_4 (sequence 12), cus_1's watermark 10 instead of 12."""
    sent = [copy("evt_1", 202), copy("evt_2", 400), copy("evt_3", 202)]
    sent += [copy("evt_4", 202, sequence=12), copy("evt_5", 202, sequence=9)]
    items = [record("evt_2"), record("evt_3"), record("evt_4", sequence=12)]
    items += [record("evt_5", sequence=9, recorded_at="2026-12-01T11:00:00")]
    items += [ledger("stripe", "evt_3", 1), ledger("stripe", "evt_3", 2)]
    items += [ledger("stripe", "evt_5", 1), ledger("stripe", "evt_2", 1), resource("cus_1", 10)]
    ev = gather(sent, items, [], Reconciliation())
    ev.accepted = {k for k, group in ev.by_delivery.items() if acknowledged(group)}
    assert [k[1] for k in ev.by_delivery if is_lost(ev, k)] == ["evt_1"]
    assert [k[1] for k in ev.by_delivery if is_recorded_after_4xx(ev, k)] == ["evt_2"]
    assert [k[1] for k in double_applied(ev)] == ["evt_3"]
    assert [k[1] for k in applied_without_ledger(ev, set())] == ["evt_4"]
    assert [k[1] for k in out_of_order_applied(ev)] == ["evt_5"]
    assert watermark_mismatches(ev) == [(("stripe", "cus_1"), 10, 12)]


def test_an_equal_sequence_applied_later_is_in_order() -> None:
    """Ties are applied in arrival order (docs/data-model.md, "Equal sequence values are
    applied"): evt_2 with evt_1's sequence, applied a second later, is not out of order."""
    sent = [copy("evt_1", 202, sequence=10), copy("evt_2", 202, sequence=10)]
    items = [record("evt_1"), record("evt_2", recorded_at="2026-12-01T10:00:01.000000+00:00")]
    rec = reconcile(sent, [*items, resource("cus_1", 10)], [])
    assert (rec.out_of_order_applied, rec.failed()) == (0, False)
