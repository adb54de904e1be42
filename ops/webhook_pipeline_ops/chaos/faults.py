"""The chaos run's faults: the kinds, their seeded schedule, and the faults made inside the local
stack's processes through its fault switches.

Each switch function arms a switch of :mod:`webhook_pipeline_ops.local.faults` in the stack's
``faults_dir`` (named by its ``ready`` file), waits for it to act and returns a one-line account
of what happened, counted from the records the stack's processes wrote. A fault that did not act
(a stack without switches, no request of the kind arrived, the ledger hook not loaded) raises
:class:`NotInjected` with the reason: the report then says "NOT injected" instead of claiming it.
The faults made from outside the stack (signals, Redis commands, messages) are
:mod:`webhook_pipeline_ops.chaos.injection`'s.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.local.faults import FaultSwitches

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
#: The function whose workers the crash points end (the template's processor).
PROCESSOR = "ProcessorFunction"
#: Seconds a crash switch may wait for a processor invocation to reach its point.
CRASH_WAIT_SECONDS = 60.0


class NotInjected(Exception):
    """The fault cannot be injected into this stack (the message says why)."""


# ------------------------------------------------------------------------------------------------
# the schedule


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


def parse_kinds(text: str) -> list[str]:
    """The kinds of ``--faults``: ``all``, ``none`` (or empty) or a comma-separated list."""
    if text.strip() == "all":
        return list(FAULT_KINDS)
    if text.strip() in ("", "none"):
        return []
    return [k.strip() for k in text.split(",") if k.strip()]


# ------------------------------------------------------------------------------------------------
# the stack's fault switches


def switches_of(ready: dict[str, Any]) -> FaultSwitches:
    """The stack's switches; :class:`NotInjected` when its ``ready`` file names none."""
    folder = ready.get("faults_dir")
    if not folder:
        raise NotInjected("the stack has no fault switches (its ready file names no faults_dir)")
    return FaultSwitches(Path(folder))


def _hold(
    switches: FaultSwitches, name: str, doc: dict[str, Any], hold: float, log_name: str
) -> list[dict[str, Any]]:
    """Switch ``name`` on with ``doc`` for ``hold`` seconds; the records ``log_name`` gained."""
    before = len(switches.records(log_name))
    switches.arm(name, doc)
    try:
        time.sleep(hold)
    finally:
        switches.disarm(name)
    return switches.records(log_name)[before:]


def throttle(ready: dict[str, Any], hold: float, rate: float, seed: int) -> str:
    """Throttle a share ``rate`` (0..1) of ``TransactWriteItems`` and ``SendMessage`` for
    ``hold`` seconds."""
    doc = {"rate": rate, "until": time.time() + hold, "seed": seed}
    answers = _hold(switches_of(ready), "throttle", doc, hold, "throttled")
    if not answers:
        raise NotInjected(f"no TransactWriteItems or SendMessage arrived in {hold:.1f} s")
    counts = Counter(f"{a['op']} {a['code']}" for a in answers)
    listed = ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
    return f"{len(answers)} answers throttled in {hold:.1f} s at rate {rate:g} ({listed})"


def crash(ready: dict[str, Any], point: str) -> str:
    """Arm crash point ``point`` (``crash-before-write`` / ``crash-after-write``) for the
    processor and wait until a worker took it."""
    switches = switches_of(ready)
    before = set(switches.takers(point))
    switches.arm(point, {"function": PROCESSOR})
    deadline = time.monotonic() + CRASH_WAIT_SECONDS
    while time.monotonic() < deadline:
        taken = [p for p in switches.takers(point) if p not in before]
        if taken:
            return f"processor worker pid {taken[0]} exited at {point}"
        time.sleep(0.05)
    switches.disarm(point)
    raise NotInjected(f"no processor invocation reached {point} in {CRASH_WAIT_SECONDS:.0f} s")


def hook_failing(ready: dict[str, Any], hold: float) -> str:
    """Make the ledger hook raise for ``hold`` seconds."""
    doc = {"until": time.time() + hold}
    failures = _hold(switches_of(ready), "hook-failing", doc, hold, "hook-failures")
    if not failures:
        raise NotInjected(
            f"no hook ran in {hold:.1f} s (is the ledger hook loaded? "
            "WEBHOOK_PIPELINE_LOCAL_HOOKS_MODULE=webhook_pipeline_ops.ledger)"
        )
    deliveries = {(f["source"], f["delivery_id"]) for f in failures}
    return f"the hook failed {len(failures)} times ({len(deliveries)} deliveries) in {hold:.1f} s"
