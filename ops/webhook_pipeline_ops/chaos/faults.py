"""The chaos faults made inside the local stack's processes, through its fault switches.

Each function arms a switch of :mod:`webhook_pipeline_ops.local.faults` in the stack's
``faults_dir`` (named by its ``ready`` file), waits for it to act and returns a one-line account
of what happened, counted from the records the stack's processes wrote. A fault that did not act
(a stack without switches, no request of the kind arrived, the ledger hook not loaded) raises
:class:`~webhook_pipeline_ops.chaos.reconcile.NotInjected` with the reason: the report then
says "NOT injected" instead of claiming it.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.chaos.reconcile import NotInjected
from webhook_pipeline_ops.local.faults import FaultSwitches

#: The function whose workers the crash points end (the template's processor).
PROCESSOR = "ProcessorFunction"
#: Seconds a crash switch may wait for a processor invocation to reach its point.
CRASH_WAIT_SECONDS = 60.0


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
