"""The chaos run's reconciliation: the sender's log against the stack's state, as named checks.

Nothing here talks to a network or a process: :mod:`webhook_pipeline_ops.chaos.run` sends
the traffic, injects the faults and reads the stack's state, then calls :func:`reconcile` with

- the sender's log: one :class:`~webhook_pipeline_ops.chaos.traffic.Copy` per request sequence
  the sender made (an original or a duplicate copy of a delivery, with every attempt's answer),
- the deliveries table's items (plain Python values, as ``boto3``'s ``TypeDeserializer`` gives),
- the dead-letter queue's entries (``source``, ``delivery_id``, ``reason``),

and gets a :class:`Reconciliation`: lost, recorded after a 4xx, double-applied (from the hook
ledger when the table holds one), out-of-order applied and watermark mismatches, each with
examples. :func:`Reconciliation.failed` says whether the proof failed.

Each finding is one named check below (a function whose docstring says what it proves); the
per-delivery checks (:func:`is_lost`, :func:`is_recorded_after_4xx`) are predicates over one
delivery, the others read the whole :class:`Evidence` and return the offending keys.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from webhook_pipeline_ops.chaos.traffic import Copy, is_2xx, is_4xx

#: (source, delivery id) of a delivery, or (source, resource key) of a resource.
Key = tuple[str, str]
#: The most examples a finding lists.
MAX_EXAMPLES = 10


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

    def note(self, kind: str, key: Key) -> None:
        """Add ``source/key`` to the examples of ``kind`` (the first :data:`MAX_EXAMPLES`)."""
        listed = self.examples.setdefault(kind, [])
        if len(listed) < MAX_EXAMPLES:
            listed.append(f"{key[0]}/{key[1]}")


# ------------------------------------------------------------------------------------------------
# the evidence


@dataclass
class Evidence:
    """The sender's log, the table and the DLQ, indexed for the checks.

    ``by_delivery``: the copies of each delivery, in send order; ``records``: its ``DELIVERY#``
    item; ``resources``: each resource's ``RESOURCE#`` item; ``ledger``: hook ledger items per
    delivery; ``dlq_reasons``: the reason of each DLQ entry that has one; ``accepted``: the
    deliveries some copy of which got a 2xx.
    """

    by_delivery: dict[Key, list[Copy]] = field(default_factory=lambda: defaultdict(list))
    records: dict[Key, Mapping[str, Any]] = field(default_factory=dict)
    resources: dict[Key, Mapping[str, Any]] = field(default_factory=dict)
    ledger: Counter[Key] = field(default_factory=Counter)
    dlq_reasons: dict[Key, str] = field(default_factory=dict)
    accepted: set[Key] = field(default_factory=set)

    def applied(self, key: Key) -> bool:
        """Whether ``key``'s record says its event was applied."""
        return self.records[key].get("outcome") == "applied"


def ledger_key(item: Mapping[str, Any]) -> Key | None:
    """The (source, delivery id) a hook ledger item counts, or ``None`` for other items.

    Tolerant of the ledger's layout: an item is a ledger item when ``type`` is ``ledger`` or
    ``pk`` starts with ``LEDGER#`` (a first run's or a reprocess's: :func:`is_first_run`); its
    delivery comes from its ``source`` and ``delivery_id`` attributes when present, else from
    ``pk`` as ``LEDGER#<source>#<delivery id>`` (source names contain no ``#``; the delivery id
    is the rest).
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


def is_first_run(item: Mapping[str, Any]) -> bool:
    """Whether a ledger item is of a first run of the hook: a reprocess's run carries its
    ``generation`` (:mod:`webhook_pipeline_ops.ledger`) and is counted by the archive leg."""
    return item.get("generation") is None


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def gather(
    copies: Iterable[Copy],
    items: Iterable[Mapping[str, Any]],
    dlq: Iterable[Mapping[str, Any]],
    rec: Reconciliation,
) -> Evidence:
    """Index the inputs; count copies, deliveries, ledger items, DLQ entries and the DLQ entries
    of no delivery sent (``dlq_foreign``) into ``rec``."""
    ev = Evidence()
    for c in copies:
        ev.by_delivery[(c.source, c.delivery_id)].append(c)
        rec.copies += 1
    rec.deliveries = len(ev.by_delivery)
    for item in items:
        pk = str(item.get("pk", ""))
        if pk.startswith("DELIVERY#"):
            ev.records[(str(item.get("source")), str(item.get("delivery_id")))] = item
        elif pk.startswith("RESOURCE#"):
            ev.resources[(str(item.get("source")), str(item.get("resource_key")))] = item
        elif (key := ledger_key(item)) is not None and is_first_run(item):
            ev.ledger[key] += 1
            rec.ledger_items += 1
    for entry in dlq:
        rec.dlq_entries += 1
        key = (str(entry.get("source") or ""), str(entry.get("delivery_id") or ""))
        if key not in ev.by_delivery:
            rec.dlq_foreign += 1
        if entry.get("reason"):
            ev.dlq_reasons[key] = str(entry["reason"])
    return ev


# ------------------------------------------------------------------------------------------------
# the checks of one delivery


def acknowledged(group: list[Copy]) -> bool:
    """Some attempt of some copy got a 2xx: the pipeline took the delivery on."""
    return any(is_2xx(a.status) for c in group for a in c.attempts)


def rejected(group: list[Copy]) -> bool:
    """No 2xx, and some copy's final answer was a 4xx: the pipeline refused it for good."""
    return not acknowledged(group) and any(is_4xx(c.final) for c in group)


def is_lost(ev: Evidence, key: Key) -> bool:
    """Proves no acknowledged delivery vanished: a delivery some copy of which got a 2xx is
    recorded (a ``DELIVERY#`` item) or in the DLQ with a reason; one that is neither is lost."""
    return acknowledged(ev.by_delivery[key]) and key not in ev.records and key not in ev.dlq_reasons


def is_recorded_after_4xx(ev: Evidence, key: Key) -> bool:
    """Proves a rejection is final: a delivery every copy of which was refused (a 4xx, no 2xx)
    must not be recorded."""
    return rejected(ev.by_delivery[key]) and key in ev.records


def tally_deliveries(ev: Evidence, rec: Reconciliation) -> None:
    """Run the per-delivery checks over every delivery, in send order; count acknowledged,
    rejected and unacknowledged deliveries (5xx or no answer only: the sender still owes a
    retry, so recorded or not both hold), the duplicates the gate stopped (200) and the extra
    copies it let past (202 beyond the first)."""
    for key, group in ev.by_delivery.items():
        statuses = [a.status for c in group for a in c.attempts]
        rec.gate_duplicates += sum(1 for s in statuses if s == 200)
        rec.past_gate_copies += max(0, sum(1 for s in statuses if s == 202) - 1)
        if acknowledged(group):
            rec.acknowledged += 1
            ev.accepted.add(key)
        elif rejected(group):
            rec.rejected_4xx += 1
        else:
            rec.unacknowledged += 1
            rec.note("unacknowledged", key)
        if is_lost(ev, key):
            rec.lost += 1
            rec.note("lost", key)
        if is_recorded_after_4xx(ev, key):
            rec.recorded_after_4xx += 1
            rec.note("recorded_after_4xx", key)


def count_records(ev: Evidence, rec: Reconciliation) -> None:
    """Count the sent deliveries in the DLQ (with a reason) and recorded (applied / stale)."""
    sent = [k for k in ev.records if k in ev.by_delivery]
    rec.in_dlq = sum(1 for k in ev.dlq_reasons if k in ev.by_delivery)
    rec.recorded = len(sent)
    rec.recorded_applied = sum(1 for k in sent if ev.records[k].get("outcome") == "applied")
    rec.recorded_stale = sum(1 for k in sent if ev.records[k].get("outcome") == "stale")


# ------------------------------------------------------------------------------------------------
# the checks of the hook


def hooks_parked(ev: Evidence) -> set[Key]:
    """Proves a failing hook is owed, not skipped: an applied record whose hook is still
    ``pending`` and a copy of which is in the DLQ with a reason is parked (any copy a replay
    brings back runs the hook: the processor runs an applied record's pending hook when a copy
    arrives). ``dlq peek`` gives every entry a reason, "retries exhausted" at the least."""
    return {
        k
        for k, r in ev.records.items()
        if r.get("outcome") == "applied"
        and r.get("hook_state") == "pending"
        and k in ev.dlq_reasons
    }


def hooks_pending(ev: Evidence, parked: set[Key]) -> int:
    """Records whose hook is still ``pending`` after the settle and not parked in the DLQ (a
    figure, not a failure: the hook may still be retried)."""
    return sum(
        1 for k, r in ev.records.items() if r.get("hook_state") == "pending" and k not in parked
    )


def double_applied(ev: Evidence) -> list[Key]:
    """Proves "at most once" for the hook: deliveries with more than one hook ledger item."""
    return [k for k, n in ev.ledger.items() if n > 1]


def applied_without_ledger(ev: Evidence, parked: set[Key]) -> list[Key]:
    """Proves "at least once" for the hook: applied records with no ledger item that are not
    parked in the DLQ (a hook skipped with nothing left to run it)."""
    return [k for k in ev.records if ev.applied(k) and not ev.ledger[k] and k not in parked]


def check_hooks(ev: Evidence, rec: Reconciliation) -> None:
    """Parked and pending hooks; double-applied and applied without a ledger only when the
    table holds ledger items (else both stay ``None``, "not measured")."""
    parked = hooks_parked(ev)
    rec.hooks_parked_in_dlq = len(parked)
    for k in sorted(parked):
        rec.note("hooks_parked_in_dlq", k)
    rec.hooks_pending = hooks_pending(ev, parked)
    if not rec.ledger_items:
        return
    doubles = double_applied(ev)
    rec.double_applied = len(doubles)
    for k in doubles:
        rec.note("double_applied", k)
    missing = applied_without_ledger(ev, parked)
    rec.applied_without_ledger = len(missing)
    for k in missing:
        rec.note("applied_without_ledger", k)


# ------------------------------------------------------------------------------------------------
# the checks of each resource


def _below_earlier(applied: list[tuple[str, int, Key]]) -> list[Key]:
    """Of one resource's applies ``(recorded_at, sequence, key)``, those whose sequence is below
    one applied strictly earlier (applies of the same instant are not ordered among themselves)."""
    applied = sorted(applied)
    found: list[Key] = []
    earlier: int | None = None  # highest sequence applied strictly before this time
    i = 0
    while i < len(applied):
        same = [g for g in applied[i:] if g[0] == applied[i][0]]
        found += [key for _, seq, key in same if earlier is not None and seq < earlier]
        top = max(seq for _, seq, _ in same)
        earlier = top if earlier is None else max(earlier, top)
        i += len(same)
    return found


def out_of_order_applied(ev: Evidence) -> list[Key]:
    """Proves ordering: per resource, the applied records taken in ``recorded_at`` order whose
    sequence is below one applied strictly earlier (an older event applied over a newer one)."""
    per_resource: dict[Key, list[tuple[str, int, Key]]] = defaultdict(list)
    for key, r in ev.records.items():
        seq = _number(r.get("sequence"))
        if r.get("outcome") == "applied" and r.get("resource_key") is not None and seq is not None:
            resource = (key[0], str(r["resource_key"]))
            per_resource[resource].append((str(r.get("recorded_at", "")), seq, key))
    return [key for applies in per_resource.values() for key in _below_earlier(applies)]


def expected_watermarks(ev: Evidence) -> dict[Key, int]:
    """Per resource, the highest sequence among its deliveries that count: recorded, or
    acknowledged and not in the DLQ. The recorded sequence is in the pipeline's own unit (some
    providers' timestamps are read in microseconds); the sender's only for what was never
    recorded."""
    expected: dict[Key, int] = {}
    for key, group in ev.by_delivery.items():
        first = group[0]
        if first.resource_key is None or first.sequence is None:
            continue
        if key in ev.records or (key in ev.accepted and key not in ev.dlq_reasons):
            seq = _number(ev.records[key].get("sequence")) if key in ev.records else None
            seq = first.sequence if seq is None else seq
            res = (first.source, first.resource_key)
            expected[res] = max(expected.get(res, seq), seq)
    return expected


def watermark_mismatches(ev: Evidence) -> list[tuple[Key, int | None, int]]:
    """Proves the final state: each resource's ``watermark`` is the highest sequence it
    accepted (:func:`expected_watermarks`); ``(resource, watermark, expected)`` for the others,
    in the order the resources were first sent."""
    found: list[tuple[Key, int | None, int]] = []
    for res, want in expected_watermarks(ev).items():
        got = _number((ev.resources.get(res) or {}).get("watermark"))
        if got != want:
            found.append((res, got, want))
    return found


def check_resources(ev: Evidence, rec: Reconciliation) -> None:
    """Out-of-order applies and watermark mismatches, with the resources checked."""
    for key in out_of_order_applied(ev):
        rec.out_of_order_applied += 1
        rec.note("out_of_order_applied", key)
    rec.resources_checked = len(expected_watermarks(ev))
    for res, got, want in watermark_mismatches(ev):
        rec.watermark_mismatches += 1
        rec.note("watermark_mismatch", (res[0], f"{res[1]} (watermark {got}, expected {want})"))


def reconcile(
    copies: Iterable[Copy],
    items: Iterable[Mapping[str, Any]],
    dlq: Iterable[Mapping[str, Any]],
) -> Reconciliation:
    """Reconcile the sender's log with the deliveries table and the DLQ: every named check
    above, in the report's order (lost and recorded after a 4xx per delivery; the hooks;
    ordering and watermarks per resource)."""
    rec = Reconciliation()
    ev = gather(copies, items, dlq, rec)
    tally_deliveries(ev, rec)
    count_records(ev, rec)
    check_hooks(ev, rec)
    check_resources(ev, rec)
    return rec
