"""The chaos run's report: the figures table printed at the end of a run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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
