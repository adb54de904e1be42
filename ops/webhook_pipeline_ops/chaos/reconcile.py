"""The chaos run's reconciliation: the sender's log against the stack's state, as named checks.

Nothing here talks to a network or a process: :mod:`webhook_pipeline_ops.commands.chaos` sends
the traffic, injects the faults and reads the stack's state, then calls :func:`reconcile` with

- the sender's log: one :class:`~webhook_pipeline_ops.chaos.traffic.Copy` per request sequence
  the sender made (an original or a duplicate copy of a delivery, with every attempt's answer),
- the deliveries table's items (plain Python values, as ``boto3``'s ``TypeDeserializer`` gives),
- the dead-letter queue's entries (``source``, ``delivery_id``, ``reason``),

and gets a :class:`Reconciliation`: lost, recorded after a 4xx, double-applied (from the hook
ledger when the table holds one), out-of-order applied and watermark mismatches, each with
examples. :func:`Reconciliation.failed` says whether the proof failed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from webhook_pipeline_ops.chaos.traffic import Copy, is_2xx, is_4xx

# ------------------------------------------------------------------------------------------------
# reconciliation


@dataclass
class Reconciliation:
    """What the stack's state says about every delivery the sender sent.

    Counts are of distinct (source, delivery id) unless named otherwise; ``examples`` holds up to
    ten ``source/delivery id`` per finding.
    """

    deliveries: int = 0
    copies: int = 0
    acknowledged: int = 0
    rejected_4xx: int = 0
    unacknowledged: int = 0
    recorded: int = 0
    recorded_applied: int = 0
    recorded_stale: int = 0
    in_dlq: int = 0
    dlq_entries: int = 0
    dlq_foreign: int = 0
    lost: int = 0
    recorded_after_4xx: int = 0
    double_applied: int | None = None
    applied_without_ledger: int | None = None
    ledger_items: int = 0
    hooks_pending: int = 0
    hooks_parked_in_dlq: int = 0
    out_of_order_applied: int = 0
    watermark_mismatches: int = 0
    resources_checked: int = 0
    gate_duplicates: int = 0
    past_gate_copies: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)

    def failed(self) -> bool:
        """True when the proof fails: something lost, double-applied (or applied without its
        hook running), applied out of order, a final watermark that is not the highest sequence
        accepted, or a 4xx recorded."""
        return bool(
            self.lost
            or self.double_applied
            or self.out_of_order_applied
            or self.watermark_mismatches
            or self.recorded_after_4xx
            or self.applied_without_ledger
        )

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("double_applied", "applied_without_ledger"):
            if data[name] is None:
                data[name] = "not measured"
        return data


Key = tuple[str, str]


def ledger_key(item: Mapping[str, Any]) -> Key | None:
    """The (source, delivery id) a hook ledger item counts, or ``None`` for other items.

    Tolerant of the ledger's layout: an item is a ledger item when ``type`` is ``ledger`` or
    ``pk`` starts with ``LEDGER#``; its delivery comes from its ``source`` and ``delivery_id``
    attributes when present, else from ``pk`` as ``LEDGER#<source>#<delivery id>`` (source names
    contain no ``#``; the delivery id is the rest).
    """
    pk = str(item.get("pk", ""))
    if item.get("type") != "ledger" and not pk.startswith("LEDGER#"):
        return None
    source, delivery_id = item.get("source"), item.get("delivery_id")
    if isinstance(source, str) and isinstance(delivery_id, str):
        return source, delivery_id
    parts = pk.split("#", 2)
    if len(parts) == 3:
        return parts[1], parts[2]
    return None


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def reconcile(
    copies: Iterable[Copy],
    items: Iterable[Mapping[str, Any]],
    dlq: Iterable[Mapping[str, Any]],
) -> Reconciliation:
    """Reconcile the sender's log with the deliveries table and the DLQ.

    - lost: a delivery some copy of which got a 2xx, neither recorded (``DELIVERY#`` item) nor in
      the DLQ with a reason;
    - recorded after a 4xx: no copy got a 2xx, some got a 4xx, yet it is recorded;
    - double-applied: deliveries with more than one hook ledger item, and applied without a
      ledger: ``applied`` records with none (both ``None``, "not measured", when the table
      holds no ledger item);
    - out-of-order applied: per resource, ``applied`` records taken in ``recorded_at`` order
      whose sequence is below one applied strictly earlier;
    - watermark mismatches: a resource whose ``watermark`` is not the highest sequence among its
      deliveries that are recorded, or acknowledged and not in the DLQ.

    A delivery whose copies got only 5xx or no answer is "unacknowledged": its sender still owes
    a retry, so it may or may not be recorded.
    """
    rec = Reconciliation()
    by_delivery: dict[Key, list[Copy]] = defaultdict(list)
    for c in copies:
        by_delivery[(c.source, c.delivery_id)].append(c)
        rec.copies += 1
    rec.deliveries = len(by_delivery)

    records: dict[Key, Mapping[str, Any]] = {}
    resources: dict[tuple[str, str], Mapping[str, Any]] = {}
    ledger: Counter[Key] = Counter()
    for item in items:
        pk = str(item.get("pk", ""))
        if pk.startswith("DELIVERY#"):
            records[(str(item.get("source")), str(item.get("delivery_id")))] = item
        elif pk.startswith("RESOURCE#"):
            resources[(str(item.get("source")), str(item.get("resource_key")))] = item
        else:
            key = ledger_key(item)
            if key is not None:
                ledger[key] += 1
                rec.ledger_items += 1
    dlq_reasons: dict[Key, str] = {}
    for entry in dlq:
        rec.dlq_entries += 1
        key = (str(entry.get("source") or ""), str(entry.get("delivery_id") or ""))
        if key not in by_delivery:
            rec.dlq_foreign += 1
        if entry.get("reason"):
            dlq_reasons[key] = str(entry["reason"])

    examples: dict[str, list[str]] = defaultdict(list)

    def note(kind: str, key: Key | tuple[str, str]) -> None:
        if len(examples[kind]) < 10:
            examples[kind].append(f"{key[0]}/{key[1]}")

    accepted: set[Key] = set()
    for key, group in by_delivery.items():
        statuses = [a.status for c in group for a in c.attempts]
        rec.gate_duplicates += sum(1 for s in statuses if s == 200)
        rec.past_gate_copies += max(0, sum(1 for s in statuses if s == 202) - 1)
        if any(is_2xx(s) for s in statuses):
            rec.acknowledged += 1
            accepted.add(key)
            if key not in records and key not in dlq_reasons:
                rec.lost += 1
                note("lost", key)
        elif any(is_4xx(c.final) for c in group):
            rec.rejected_4xx += 1
            if key in records:
                rec.recorded_after_4xx += 1
                note("recorded_after_4xx", key)
        else:
            rec.unacknowledged += 1
            note("unacknowledged", key)
    rec.in_dlq = sum(1 for k in dlq_reasons if k in by_delivery)
    rec.recorded = sum(1 for k in records if k in by_delivery)
    rec.recorded_applied = sum(
        1 for k, r in records.items() if k in by_delivery and r.get("outcome") == "applied"
    )
    rec.recorded_stale = sum(
        1 for k, r in records.items() if k in by_delivery and r.get("outcome") == "stale"
    )
    # An applied delivery whose hook kept failing until a copy of it went to the DLQ is parked,
    # not lost: the record says the hook is still owed, and any copy a replay brings back runs
    # it (the processor runs an applied record's pending hook when a copy arrives). It is
    # counted apart from "applied without a hook run", a hook skipped with nothing left to run
    # it. (``dlq peek`` gives every entry a reason, "retries exhausted" at the least.)
    parked = {
        k
        for k, r in records.items()
        if r.get("outcome") == "applied" and r.get("hook_state") == "pending" and k in dlq_reasons
    }
    rec.hooks_parked_in_dlq = len(parked)
    for k in sorted(parked):
        note("hooks_parked_in_dlq", k)
    rec.hooks_pending = sum(
        1 for k, r in records.items() if r.get("hook_state") == "pending" and k not in parked
    )

    if rec.ledger_items:
        doubles = [k for k, n in ledger.items() if n > 1]
        rec.double_applied = len(doubles)
        for k in doubles:
            note("double_applied", k)
        # The other half of "exactly once": an applied delivery whose hook never ran.
        missing = [
            k
            for k, r in records.items()
            if r.get("outcome") == "applied" and not ledger[k] and k not in parked
        ]
        rec.applied_without_ledger = len(missing)
        for k in missing:
            note("applied_without_ledger", k)

    # Ordering: applied records per resource in the order they were recorded.
    applied: dict[tuple[str, str], list[tuple[str, int, Key]]] = defaultdict(list)
    for key, r in records.items():
        seq = _number(r.get("sequence"))
        if r.get("outcome") == "applied" and r.get("resource_key") is not None and seq is not None:
            applied[(key[0], str(r["resource_key"]))].append(
                (str(r.get("recorded_at", "")), seq, key)
            )
    for group_items in applied.values():
        group_items.sort()
        earlier: int | None = None  # highest sequence applied strictly before this time
        i = 0
        while i < len(group_items):
            same = [g for g in group_items[i:] if g[0] == group_items[i][0]]
            for _, seq, key in same:
                if earlier is not None and seq < earlier:
                    rec.out_of_order_applied += 1
                    note("out_of_order_applied", key)
            top = max(seq for _, seq, _ in same)
            earlier = top if earlier is None else max(earlier, top)
            i += len(same)

    # Watermarks: the highest sequence among the deliveries that count for each resource.
    expected: dict[tuple[str, str], int] = {}
    for key, group in by_delivery.items():
        first = group[0]
        if first.resource_key is None or first.sequence is None:
            continue
        counts = key in records or (key in accepted and key not in dlq_reasons)
        if counts:
            # The recorded sequence is in the pipeline's own unit (some providers' timestamps
            # are read in microseconds); the sender's only for what was never recorded.
            seq = _number(records[key].get("sequence")) if key in records else None
            seq = first.sequence if seq is None else seq
            res = (first.source, first.resource_key)
            expected[res] = max(expected.get(res, seq), seq)
    for res, want in expected.items():
        rec.resources_checked += 1
        got = _number((resources.get(res) or {}).get("watermark"))
        if got != want:
            rec.watermark_mismatches += 1
            note("watermark_mismatch", (res[0], f"{res[1]} (watermark {got}, expected {want})"))
    rec.examples = dict(examples)
    return rec
