"""The chaos run's report: its sections, the figures table printed at the end of a run and the
reasons a proof failed."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.chaos.archive_checks import ARCHIVE_VERDICTS, REPROCESS_VERDICTS
from webhook_pipeline_ops.chaos.faults import FAULT_DESCRIPTIONS, NOT_INJECTED


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
    rows += archive_rows(report.get("archive"))
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


def archive_rows(archive: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """The archive leg's rows of the figures table (none for a report without one)."""
    if not archive:
        return []
    rows: list[tuple[str, Any]] = [
        (
            "archived (identities / deliveries / objects)",
            f"{archive['identities']} / {archive['deliveries']} / {archive['objects_read']}",
        ),
        ("archive queue drained (s)", archive.get("queue_drained_seconds")),
        ("ARCHIVE MISSING", archive["archive_missing"]),
        ("archive unexpected", archive["archive_unexpected"]),
        ("archive corrupt", archive["archive_corrupt"]),
    ]
    rep = archive.get("reprocess") or {}
    if "not_run" in rep or not rep:
        return [*rows, ("reprocess leg", rep.get("not_run", "not run"))]
    kills = sum(1 for k in rep["kills"] if k.get("cursor_seen") is not None)
    mid_job = sum(1 for k in rep["kills"] if k.get("status_after") == "running")
    return [
        *rows,
        (
            "reprocess (archived in window / due / entries)",
            f"{rep['archived_in_window']} / {rep.get('due')} / {rep.get('entries')}",
        ),
        (
            "reprocess job (generation, status, SIGKILLs, runs)",
            f"g{rep['generation']}, {rep['status']}, {kills} killed ({mid_job} mid-job), "
            f"{rep['runs']} runs",
        ),
        ("REPROCESS MISSING", rep["reprocess_missing"]),
        ("REPROCESS TWICE", rep["reprocess_twice"]),
        ("reprocess outside the window", rep["reprocess_outside_window"]),
        ("watermark moved by the reprocess", rep["watermark_moved"]),
    ]


def archive_examples(report: Mapping[str, Any]) -> dict[str, list[str]]:
    """The archive leg's examples of each finding (empty without an archive leg)."""
    archive = report.get("archive") or {}
    reprocess = archive.get("reprocess") or {}
    return {
        k: v
        for k, v in {**archive.get("examples", {}), **reprocess.get("examples", {})}.items()
        if v
    }


def archive_failures(archive: Mapping[str, Any] | None) -> list[str]:
    """The archive leg's failing findings (see :data:`ARCHIVE_VERDICTS`,
    :data:`REPROCESS_VERDICTS`), a queue that did not drain and a job that did not complete."""
    if not archive:
        return []
    why = [k for k in ARCHIVE_VERDICTS if archive[k] != 0]
    if archive.get("queue_drained_seconds") is None:
        why.append(f"archive queue not drained: {archive.get('queue_at_end')}")
    rep = archive.get("reprocess") or {}
    if "not_run" in rep:
        return why
    why += [k for k in REPROCESS_VERDICTS if rep.get(k) != 0]
    if rep.get("status") != "complete" or rep.get("failed"):
        why.append(f"reprocess job {rep.get('status')}: failed {rep.get('failed')}")
    if rep.get("settle_seconds") is None:
        why.append(f"queue not settled after the reprocess: {rep.get('queue_at_end')}")
    return why


def stack_section(state: Path, ready: Mapping[str, Any], started_here: bool) -> dict[str, Any]:
    """The report's ``stack``: where it ran, its queue settings and which PIDs it recorded."""
    return {
        "started_here": started_here,
        "state_dir": str(state),
        "visibility_timeout": ready.get("visibility_timeout"),
        "max_receive_count": ready.get("max_receive_count"),
        "moto_pid_recorded": bool(ready.get("moto_pid")),
        "worker_pids_recorded": bool(ready.get("worker_pids")),
    }


def machine_section() -> dict[str, Any]:
    """The report's ``machine``: CPUs, platform and Python version."""
    return {"cpus": os.cpu_count(), "platform": sys.platform, "python": sys.version.split()[0]}


def not_injected(kinds: Sequence[str], faults: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each kind asked for and not injected: its description and why (the fault's detail),
    then :data:`~webhook_pipeline_ops.chaos.faults.NOT_INJECTED`."""
    injected = {e["kind"] for e in faults if e["injected"]}
    return {
        **{
            k: FAULT_DESCRIPTIONS[k] + " -- " + next(e["detail"] for e in faults if e["kind"] == k)
            for k in kinds
            if k not in injected
        },
        **NOT_INJECTED,
    }


def poison_lost(
    poison: Iterable[tuple[str, str]],
    items: Iterable[Mapping[str, Any]],
    dlq: Iterable[Mapping[str, Any]],
) -> list[str]:
    """``source/delivery id`` of each poison message neither recorded nor in the DLQ."""
    recorded = {
        (str(i.get("source")), str(i.get("delivery_id")))
        for i in items
        if str(i.get("pk", "")).startswith("DELIVERY#")
    }
    in_dlq = {(d.get("source"), d.get("delivery_id")) for d in dlq}
    return [f"{s}/{d}" for s, d in poison if (s, d) not in recorded | in_dlq]


#: The findings that fail the proof, in the order the failure message names them.
VERDICTS = (
    "lost",
    "double_applied",
    "out_of_order_applied",
    "watermark_mismatches",
    "recorded_after_4xx",
    "applied_without_ledger",
)


def failure_reasons(report: Mapping[str, Any], settle_timeout: float) -> list[str]:
    """Why the proof failed (empty: it holds): each failing finding of the reconciliation, a
    queue that did not settle within ``settle_timeout`` s, poison neither recorded nor in the
    DLQ, and the archive leg's (:func:`archive_failures`)."""
    rec = report["reconciliation"]
    why = [k for k in VERDICTS if rec[k] not in (0, "not measured")]
    if report["settle_seconds"] is None:
        why.append(f"queue not settled within {settle_timeout:.0f} s: {report['queue_at_end']}")
    lost = report["poison"]["not_recorded_nor_in_dlq"]
    if lost:
        why.append(f"poison not recorded nor in the DLQ: {lost}")
    return why + archive_failures(report.get("archive"))
