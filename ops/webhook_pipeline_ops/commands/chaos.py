"""``webhook-pipeline chaos``: traffic with faults injected on a seeded schedule, then the proof.

Against the local stack (started here as a subprocess on free ports with its own state folder
and a redis-server this command starts and owns, or a running one with ``--state-dir``), the
simulator's deliveries across several providers are sent: about 30 % duplicate copies (some
right behind their original, some minutes later), each resource's events in swapped pairs with
real sequence values, paced sends with bursts, and senders that time out and resend the same
delivery with backoff. While traffic flows, the faults of ``--faults`` are injected at seeded
points of it (``--seed``), each logged with its kind and time. After the traffic, the run waits
until the main queue is empty (the settle time), reads the deliveries table and the DLQ and
reconciles them with the sender's own log (:mod:`webhook_pipeline_ops.chaos.reconcile`).
Then the archive leg (:mod:`webhook_pipeline_ops.chaos.archive_leg`): once the archive queue is
empty, the archive must hold every accepted delivery's bytes exactly; a reprocess job over a
window of ``--reprocess-deliveries`` archived deliveries, SIGKILLed 2-3 times and resumed, must
run each due hook exactly once more and move no watermark.

Prints a table, writes the report (``--out``, default ``bench/results/chaos.json``) and the
sender's log (``chaos-sender.jsonl`` in the state folder). Exit codes: 0 the proof holds;
1 lost, double-applied, out-of-order applied, a wrong final watermark, a 4xx recorded or a
finding of the archive leg is not 0 (or a queue did not settle, or the reprocess job did not
complete); 2 usage error.

Against a running stack (``--state-dir`` with a live ``ready`` file), the redis-server that
``redis-kill`` restarts on the stack's Redis port is this command's child and stops with it:
restart the stack afterwards.

Test-only switch: ``WEBHOOK_PIPELINE_CHAOS_NEGATIVE_CONTROL=delete-record`` deletes one
acknowledged delivery's record once the queue has settled (a simulated loss): the
reconciliation must then report lost = 1 and exit 1. ``...=delete-archive-record`` removes one
acknowledged delivery's only archived line: archive_missing = 1 and exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.chaos.archive_leg import drain
from webhook_pipeline_ops.chaos.archive_leg import prove as prove_archive
from webhook_pipeline_ops.chaos.faults import (
    FAULT_KINDS,
    ScheduledFault,
    parse_kinds,
    schedule_faults,
)
from webhook_pipeline_ops.chaos.reconcile import Reconciliation, reconcile
from webhook_pipeline_ops.chaos.report import (
    archive_examples,
    failure_reasons,
    machine_section,
    not_injected,
    poison_lost,
    render,
    stack_section,
)
from webhook_pipeline_ops.chaos.run import Run
from webhook_pipeline_ops.chaos.stack import ROOT, local_stack
from webhook_pipeline_ops.chaos.traffic import DEFAULT_SOURCES, Copy, sender_summary


def register(subparsers: Any) -> None:
    """Add ``chaos``."""
    p = subparsers.add_parser(
        "chaos",
        help="send traffic with faults injected, then reconcile every delivery (lost = 0?)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--count", type=int, default=10_000, help="copies to send (10000)")
    p.add_argument(
        "--source",
        action="append",
        metavar="NAME",
        help=f"sources (repeatable or comma-separated; default {','.join(DEFAULT_SOURCES)})",
    )
    p.add_argument(
        "--faults",
        default="all",
        help=f"comma-separated fault kinds, 'all' or 'none' ({','.join(FAULT_KINDS)})",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the traffic and faults (1)")
    p.add_argument(
        "--duplicates", type=float, default=0.3, help="share of copies that are duplicates"
    )
    p.add_argument("--rate", type=float, default=40.0, help="paced sends per second (40)")
    p.add_argument("--concurrency", type=int, default=16, help="parallel senders when paced (16)")
    p.add_argument("--burst-size", type=int, default=100, help="sends of one burst (100)")
    p.add_argument("--timeout", type=float, default=10.0, help="sender timeout, seconds (10)")
    p.add_argument("--retries", type=int, default=8, help="resends after a timeout or 5xx (8)")
    p.add_argument(
        "--state-dir",
        help="a running local stack's folder (used as is), or where to start one "
        "(default: a temporary folder)",
    )
    p.add_argument("--visibility-timeout", type=int, default=5, help="main queue's, seconds (5)")
    p.add_argument("--max-receive-count", type=int, default=3, help="receives before the DLQ (3)")
    p.add_argument(
        "--settle-timeout",
        type=float,
        default=1800.0,
        help="seconds to wait for the main queue to empty after the traffic (1800)",
    )
    p.add_argument("--poison", type=int, default=3, help="poison messages of the poison fault (3)")
    p.add_argument(
        "--throttle-rate",
        type=float,
        default=0.3,
        help="share of TransactWriteItems/SendMessage throttled by aws-throttle (0.3)",
    )
    _archive_options(p)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "chaos.json"))
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def _archive_options(p: argparse.ArgumentParser) -> None:
    """The archive leg's options."""
    p.add_argument(
        "--archive-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for the archive queue to empty after the settle (120)",
    )
    p.add_argument(
        "--reprocess-deliveries",
        type=int,
        default=300,
        help="archived deliveries in the reprocess leg's window (300; 0: no reprocess leg)",
    )
    p.add_argument(
        "--reprocess-rate", type=float, default=100.0, help="the reprocess job's --rate (100)"
    )


def _usage_error(args: argparse.Namespace, kinds: list[str]) -> str | None:
    """What is wrong with the arguments (``None``: nothing); sets ``args.sources``."""
    from webhook_pipeline_ops.simulator.deliveries import example_sources

    names = [n.strip() for item in (args.source or []) for n in item.split(",") if n.strip()]
    args.sources = names or list(DEFAULT_SOURCES)
    known = example_sources()
    unknown = [n for n in args.sources if n not in known]
    try:
        schedule_faults(kinds, args.seed)
    except ValueError as exc:
        return str(exc)
    if not 0.0 < args.throttle_rate <= 1.0:
        return f"--throttle-rate {args.throttle_rate}: a share in (0, 1]"
    if unknown or args.count < 1:
        return f"unknown source(s) {unknown} or --count < 1"
    return None


def _write_sender_log(path: Path, copies: list[Copy]) -> None:
    """One JSON line per copy of the sender's log."""
    with path.open("w") as log:
        for c in copies:
            log.write(json.dumps(c.as_dict()) + "\n")


def _prove(
    args: argparse.Namespace, kinds: list[str], schedule: list[ScheduledFault]
) -> tuple[dict[str, Any], Reconciliation]:
    """Start (or use) the stack, send with faults, settle, read back and reconcile: the report
    and the reconciliation."""
    with local_stack(args) as (state, ready, redis, started_here):
        chaos = Run(args, state, ready, redis)
        order = chaos.plan(args.sources)
        print(
            f"chaos: {len(order)} copies to {chaos.outputs['ApiUrl']} ({', '.join(args.sources)}); "
            f"faults {[f.kind for f in schedule]}; state {state}",
            file=sys.stderr,
            flush=True,
        )
        chaos.t0 = time.monotonic()
        faults = threading.Thread(target=chaos.run_faults, args=(schedule,), daemon=True)
        faults.start()
        copies, elapsed = chaos.send(order)
        chaos.traffic_over.set()
        faults.join()
        settle_seconds, queue_left = chaos.settle()
        drained = drain(chaos, chaos.outputs["ArchiveQueueUrl"], args.archive_timeout)
        control = chaos.negative_control(copies)
        items = chaos.table_items()
        dlq = chaos.dlq_entries()
        poison = set(chaos.poison.keys)
        rec = reconcile(
            copies, items, [d for d in dlq if (d.get("source"), d.get("delivery_id")) not in poison]
        )
        archive = prove_archive(chaos, copies, items, poison, drained)
        _write_sender_log(state / "chaos-sender.jsonl", copies)
        report = {
            "command": "webhook-pipeline chaos "
            + " ".join(sys.argv[2:] if sys.argv[1:2] == ["chaos"] else []),
            "seed": args.seed,
            "sources": args.sources,
            "stack": stack_section(state, ready, started_here),
            "machine": machine_section(),
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "sender": sender_summary(copies, elapsed),
            "faults": chaos.faults,
            "faults_by_kind": dict(Counter(e["kind"] for e in chaos.faults if e["injected"])),
            "not_injected": not_injected(kinds, chaos.faults),
            "poison": {
                "sent": len(chaos.poison.keys),
                "not_recorded_nor_in_dlq": poison_lost(chaos.poison.keys, items, dlq),
            },
            "replayed": chaos.replayed,
            "settle_seconds": settle_seconds,
            "queue_at_end": queue_left,
            "negative_control": control,
            "reconciliation": rec.as_dict(),
            "archive": archive,
            "sender_log": str(state / "chaos-sender.jsonl"),
        }
    return report, rec


def run(args: argparse.Namespace) -> int:
    """Run the chaos proof: 0 it holds, 1 it failed, 2 a usage error."""
    kinds = parse_kinds(args.faults)
    problem = _usage_error(args, kinds)
    if problem is not None:
        print(f"webhook-pipeline chaos: {problem}", file=sys.stderr)
        return 2
    print(
        f"chaos: {args.count} copies at {args.rate:g}/s: the traffic takes about "
        f"{args.count / args.rate:.0f} s at most (bursts shorten it, retries lengthen it), after "
        "starting a local stack (about 10-60 s) and before the settle (seconds when the stack "
        f"keeps up, at most --settle-timeout {args.settle_timeout:.0f} s) and the reconciliation",
        file=sys.stderr,
        flush=True,
    )
    report, rec = _prove(args, kinds, schedule_faults(kinds, args.seed))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(render(report))
        print(f"\nreport: {out}")
    why = failure_reasons(report, args.settle_timeout)
    failed = rec.failed() or bool(why)
    if failed:
        print(
            f"webhook-pipeline chaos: the proof FAILED: {', '.join(why)}; examples: "
            f"{json.dumps(rec.examples | archive_examples(report))}",
            file=sys.stderr,
        )
    return 1 if failed else 0


__all__ = ["register", "run"]
