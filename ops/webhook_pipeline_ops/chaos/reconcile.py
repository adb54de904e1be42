"""The chaos run's pure parts: the traffic shape, the fault schedule and the reconciliation.

Nothing here talks to a network or a process: :mod:`webhook_pipeline_ops.commands.chaos` sends
the traffic, injects the faults and reads the stack's state, then calls :func:`reconcile` with

- the sender's log: one :class:`Copy` per request sequence the sender made (an original or a
  duplicate copy of a delivery, with every attempt's answer),
- the deliveries table's items (plain Python values, as ``boto3``'s ``TypeDeserializer`` gives),
- the dead-letter queue's entries (``source``, ``delivery_id``, ``reason``),

and gets a :class:`Reconciliation`: lost, recorded after a 4xx, double-applied (from the hook
ledger when the table holds one), out-of-order applied and watermark mismatches, each with
examples. :func:`Reconciliation.failed` says whether the proof failed.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: Every fault kind, in the order a schedule lists them.
FAULT_KINDS: tuple[str, ...] = (
    "redis-kill",
    "redis-stop",
    "redis-flush",
    "redis-full",
    "moto-stop",
    "aws-throttle",
    "processor-kill",
    "processor-crash-before-write",
    "processor-crash-after-write",
    "hook-failing",
    "poison",
    "replay",
)
#: What each fault does (the table in ``docs/reliability.md`` says which mechanism absorbs it).
FAULT_DESCRIPTIONS: dict[str, str] = {
    "redis-kill": "SIGKILL the Redis server, restart it empty on the same port",
    "redis-stop": "SIGSTOP the Redis server for longer than the gate timeout, then SIGCONT",
    "redis-flush": "FLUSHALL: every claim gone",
    "redis-full": "maxmemory below the data set with noeviction: writes refused, then restored",
    "moto-stop": "SIGSTOP the AWS endpoint (moto server: SQS and DynamoDB) 10-15 s, then SIGCONT",
    "aws-throttle": "the AWS endpoint answers a share of TransactWriteItems with "
    "ProvisionedThroughputExceeded / ThrottlingException / TransactionConflict and of "
    "SendMessage with RequestThrottled, for a while",
    "processor-kill": "SIGKILL a processor worker process in the middle of its batches",
    "processor-crash-before-write": "a processor worker exits in its next TransactWriteItems "
    "call, before the request is sent",
    "processor-crash-after-write": "a processor worker exits once its handler returned (every "
    "write of the batch made), before the batch response reaches the poller",
    "hook-failing": "the hook (the ledger) raises on every call for a while, then recovers",
    "poison": "messages that are no envelope sent to the main queue: they must reach the DLQ",
    "replay": "replay of the DLQ while traffic flows",
}
#: Fault kinds this tool cannot inject, with the reason, listed in every report (none today:
#: the kinds that need a way into the stack's processes use its fault switches,
#: ``webhook_pipeline_ops.local.faults``).
NOT_INJECTED: dict[str, str] = {}
#: How long each held fault lasts, seconds (min, max); the others are instantaneous.
HOLDS: dict[str, tuple[float, float]] = {
    "redis-stop": (2.0, 3.0),
    "redis-full": (3.0, 5.0),
    "redis-kill": (1.0, 2.0),
    "moto-stop": (10.0, 15.0),
    "aws-throttle": (6.0, 10.0),
    "hook-failing": (2.0, 4.0),
}


class NotInjected(Exception):
    """The fault cannot be injected into this stack (the message says why)."""


# ------------------------------------------------------------------------------------------------
# the sender's log


@dataclass
class AttemptLog:
    """One request of a copy: the answer's status (``None``: no answer), its time since the run
    started (seconds), latency (ms) and, without an answer, why."""

    status: int | None
    at: float
    ms: float
    error: str | None = None


@dataclass
class Copy:
    """One copy of a delivery as the sender sent it (an original, or a duplicate with the same
    delivery id and body), with every attempt in order.

    ``resource_key`` is the key the pipeline records (``None`` when the source has none) and
    ``sequence`` the event's ordering value (Unix seconds).
    """

    source: str
    delivery_id: str
    resource_key: str | None
    sequence: int | None
    duplicate: bool
    attempts: list[AttemptLog] = field(default_factory=list)

    @property
    def final(self) -> int | None:
        """The last attempt's status (``None``: no answer, or never sent)."""
        return self.attempts[-1].status if self.attempts else None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Copy:
        return cls(
            source=data["source"],
            delivery_id=data["delivery_id"],
            resource_key=data.get("resource_key"),
            sequence=data.get("sequence"),
            duplicate=bool(data.get("duplicate")),
            attempts=[AttemptLog(**a) for a in data.get("attempts", [])],
        )


def _is_2xx(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


def _is_4xx(status: int | None) -> bool:
    return status is not None and 400 <= status < 500


# ------------------------------------------------------------------------------------------------
# traffic shape


def interleave(streams: Sequence[Sequence[Any]], rng: random.Random) -> list[Any]:
    """Merge ``streams`` at random, keeping each stream's own order (sources interleaved, each
    resource's send order intact)."""
    positions = [0] * len(streams)
    pool = [i for i, s in enumerate(streams) for _ in s]
    rng.shuffle(pool)
    merged = []
    for i in pool:
        merged.append(streams[i][positions[i]])
        positions[i] += 1
    return merged


def with_duplicates(
    items: Sequence[Any], fraction: float, immediate: float, rng: random.Random
) -> list[tuple[Any, bool]]:
    """``items`` with duplicate copies added: ``(item, is_duplicate)`` in send order.

    ``fraction`` of the items (0..1) get one duplicate copy; of those, ``immediate`` (0..1) are
    sent right behind their original (they race it at the gate), the others at a random later
    point of the run (seconds to minutes later).
    """
    n = len(items)
    keyed: list[tuple[float, int, Any, bool]] = [
        (float(i), 0, x, False) for i, x in enumerate(items)
    ]
    chosen = rng.sample(range(n), round(n * max(0.0, min(1.0, fraction)))) if n else []
    for i in chosen:
        key = i + 0.5 if rng.random() < immediate else rng.uniform(i + 1, n)
        keyed.append((key, 1, items[i], True))
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [(x, dup) for _, _, x, dup in keyed]


def send_offsets(
    n: int, rate: float, bursts: int, burst_size: int, rng: random.Random
) -> list[float]:
    """When each of ``n`` sends is due, seconds from the start: paced at ``rate`` per second,
    except ``bursts`` runs of ``burst_size`` consecutive sends that are all due at once."""
    offsets = [i / rate if rate > 0 else 0.0 for i in range(n)]
    if n and bursts and burst_size:
        for _ in range(bursts):
            start = rng.randrange(0, max(1, n - burst_size))
            for j in range(start, min(n, start + burst_size)):
                offsets[j] = offsets[start]
    return offsets


def progress_step(total: int) -> int:
    """Print the traffic's progress every this many answered copies (every 5 %, at least 50)."""
    return max(50, total // 20)


def traffic_progress(
    done: int, total: int, elapsed: float, expected: float, finals: Mapping[str, int]
) -> str:
    """One progress line: copies answered of ``total``, the answers so far by class (``2xx``,
    ``4xx``, ``5xx``, ``no answer``), elapsed seconds and what is left of ``expected`` (the
    paced schedule's length in seconds; retries and a slow stack add to it)."""
    answers = ", ".join(f"{k} {v}" for k, v in sorted(finals.items()))
    left = max(0.0, expected - elapsed)
    return (
        f"[{elapsed:7.1f} s] traffic: {done}/{total} copies answered ({100 * done / total:.0f} %)"
        f"; {answers or 'no answer yet'}; about {left:.0f} s of the schedule left"
    )


def answer_class(status: int | None) -> str:
    """``2xx``, ``4xx``, ``5xx`` or ``no answer``."""
    return "no answer" if status is None else f"{status // 100}xx"


# ------------------------------------------------------------------------------------------------
# fault schedule


@dataclass
class ScheduledFault:
    """A fault due when ``at_progress`` (0..1) of the traffic was answered, held ``hold`` s."""

    kind: str
    at_progress: float
    hold: float


def schedule_faults(kinds: Sequence[str], seed: int) -> list[ScheduledFault]:
    """Each kind once, at a seeded point of the traffic, in progress order.

    Redis, AWS and processor faults fall between 10 % and 75 % of the traffic, one in each of
    as many equal slices of that span (in a seeded order, each at a seeded point of its slice
    that leaves a gap of at least 2 % to the next slice: their effects stay apart); poison
    messages early (10-30 %) and the DLQ replay late (80-90 %) so that the poison is in the DLQ
    by then. Holds are :data:`HOLDS` (``redis-stop`` 2-3 s: the gate timeout is 200 ms;
    ``moto-stop`` 10-15 s; ``hook-failing`` 2-4 s, shorter than the visibility timeout times
    the receive count, so a delivery retried through it is not dead-lettered).

    Raises
    ------
    ValueError
        An unknown kind.
    """
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown:
        raise ValueError(f"unknown fault kind(s) {unknown}; known: {list(FAULT_KINDS)}")
    rng = random.Random(seed)  # noqa: S311 - a reproducible schedule, not security
    middle = [k for k in FAULT_KINDS if k in kinds and k not in ("poison", "replay")]
    rng.shuffle(middle)
    width = 0.65 / len(middle) if middle else 0.0
    gap = min(0.02, width / 2)
    faults = [
        ScheduledFault(
            k,
            round(0.10 + i * width + rng.uniform(0.0, width - gap), 3),
            round(rng.uniform(*HOLDS.get(k, (0.0, 0.0))), 1),
        )
        for i, k in enumerate(middle)
    ]
    if "poison" in kinds:
        faults.append(ScheduledFault("poison", round(rng.uniform(0.10, 0.30), 3), 0.0))
    if "replay" in kinds:
        faults.append(ScheduledFault("replay", round(rng.uniform(0.80, 0.90), 3), 0.0))
    return sorted(faults, key=lambda f: f.at_progress)


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
        if any(_is_2xx(s) for s in statuses):
            rec.acknowledged += 1
            accepted.add(key)
            if key not in records and key not in dlq_reasons:
                rec.lost += 1
                note("lost", key)
        elif any(_is_4xx(c.final) for c in group):
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


# ------------------------------------------------------------------------------------------------
# the report


def render(report: Mapping[str, Any]) -> str:
    """The figures table of a chaos report (what ``bench/results/chaos.json`` holds)."""
    r = report["reconciliation"]
    s = report["sender"]
    rows: list[tuple[str, Any]] = [
        ("deliveries (distinct ids)", r["deliveries"]),
        ("copies sent (duplicates included)", s["copies"]),
        ("duplicate copies", s["duplicate_copies"]),
        ("requests (retries included)", s["requests"]),
        ("sender retries", s["retries"]),
        (
            "final 2xx / 4xx / 5xx / no answer",
            f"{s['final_2xx']} / {s['final_4xx']} / {s['final_5xx']} / {s['final_no_answer']}",
        ),
        ("acknowledged deliveries (a 2xx)", r["acknowledged"]),
        ("unacknowledged (5xx/no answer only)", r["unacknowledged"]),
        ("duplicates stopped at the gate (200)", r["gate_duplicates"]),
        ("duplicate copies past the gate (extra 202)", r["past_gate_copies"]),
        (
            "recorded (applied / stale)",
            f"{r['recorded']} ({r['recorded_applied']} / {r['recorded_stale']})",
        ),
        ("DLQ entries (injected poison)", f"{r['dlq_entries']} ({r['dlq_foreign']})"),
        ("DLQ replayed", report.get("replayed", 0)),
        ("time to settle (s)", report.get("settle_seconds")),
        ("traffic (s)", s.get("elapsed_seconds")),
        ("LOST", r["lost"]),
        ("DOUBLE-APPLIED", r["double_applied"]),
        ("applied without a hook run (ledger)", r["applied_without_ledger"]),
        ("OUT-OF-ORDER APPLIED", r["out_of_order_applied"]),
        ("watermark mismatches", f"{r['watermark_mismatches']} of {r['resources_checked']}"),
        ("recorded after a 4xx", r["recorded_after_4xx"]),
        ("hooks still pending after settle", r["hooks_pending"]),
        ("hooks parked in the DLQ (a replay runs them)", r.get("hooks_parked_in_dlq", 0)),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("")
    lines.append("faults:")
    kinds = [f["kind"] for f in report.get("faults", [])] + list(report.get("not_injected", {}))
    kind_width = max((len(k) for k in kinds), default=15)
    for f in report.get("faults", []):
        state = "injected" if f.get("injected") else "NOT injected"
        lines.append(
            f"  {f['at']:>8.1f} s  {f['kind']:<{kind_width}} {state:<13} "
            f"{f.get('detail', '')}".rstrip()
        )
    for kind, why in report.get("not_injected", {}).items():
        lines.append(f"  {'-':>8}    {kind:<{kind_width}} NOT injected  {why}")
    return "\n".join(lines)
