"""The chaos run's archive leg, against the running stack: wait for the archive queue, read the
archive, a test-only simulated archive loss, and a reprocess job killed at random points.

The checks themselves are pure (:mod:`webhook_pipeline_ops.chaos.archive_checks`); this module
gathers their inputs. The reprocess runs ``webhook-pipeline replay --from-archive --mode
reprocess --local`` as a subprocess, SIGKILLs it by PID when its job's checkpointed cursor
passes seeded points, and starts it again with the same ``--job`` until it reports complete.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from webhook_pipeline.archive.query import ArchiveFilter, SearchResult, search
from webhook_pipeline.archive.record import (
    ArchiveRecord,
    decode_object,
    encode_object,
    format_time,
    parse_time,
)

from webhook_pipeline_ops.chaos.stack import ROOT, cli_command
from webhook_pipeline_ops.chaos.traffic import Copy

if TYPE_CHECKING:
    from webhook_pipeline_ops.chaos.run import Run

#: The negative control (``WEBHOOK_PIPELINE_CHAOS_NEGATIVE_CONTROL``) that removes one
#: acknowledged delivery's line from the archive.
DELETE_ARCHIVE_RECORD = "delete-archive-record"
#: The most times one reprocess job is started (its kills included) before the leg gives up.
MAX_JOB_RUNS = 8


def _log(run: Run, text: str) -> None:
    print(f"[{run.now():7.1f} s] {text}", file=sys.stderr, flush=True)


def drain(run: Run, queue_url: str, timeout: float) -> tuple[float | None, dict[str, int]]:
    """Wait until ``queue_url`` holds nothing (visible, in flight or delayed) at three polls in
    a row, one a second, for at most ``timeout`` s: ``(seconds waited or None, last depths)``."""
    from webhook_pipeline.adapters.sqs_replay import DEPTH_ATTRIBUTES

    sqs = run.client("sqs")
    started = time.monotonic()
    quiet = 0
    last: dict[str, int] = {}
    while time.monotonic() - started < timeout:
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(DEPTH_ATTRIBUTES))
        last = {k: int(v) for k, v in attrs["Attributes"].items()}
        quiet = quiet + 1 if not any(last.values()) else 0
        if quiet >= 3:
            return round(time.monotonic() - started, 1), last
        time.sleep(1)
    return None, last


def read_archive(run: Run) -> SearchResult:
    """Every archived delivery (all sources, any time), deduplicated, with the reader's
    problems."""
    return search(run.client("s3"), run.outputs["ArchiveBucketName"], ArchiveFilter())


def delete_archive_record(run: Run, copies: list[Copy]) -> dict[str, Any]:
    """The test-only simulated archive loss: remove the line of one acknowledged delivery
    (202) archived on exactly one line of one object, rewriting that object without it."""
    from webhook_pipeline.archive.query import list_sources, object_keys

    s3, bucket = run.client("s3"), run.outputs["ArchiveBucketName"]
    lines: dict[tuple[str, str], list[str]] = {}
    objects: dict[str, list[ArchiveRecord]] = {}
    for source in list_sources(s3, bucket):
        for key in object_keys(s3, bucket, source, ArchiveFilter()):
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            objects[key] = decode_object(key, body)[0]
            for record in objects[key]:
                lines.setdefault((record.source, record.delivery_id), []).append(key)
    for c in copies:
        found = lines.get((c.source, c.delivery_id), [])
        if any(a.status == 202 for a in c.attempts) and len(found) == 1:
            key = found[0]
            kept = [r for r in objects[key] if r.delivery_id != c.delivery_id]
            s3.put_object(Bucket=bucket, Key=key, Body=encode_object(kept))
            return {"mode": DELETE_ARCHIVE_RECORD, "deleted": f"{c.source}/{c.delivery_id}"}
    return {"mode": DELETE_ARCHIVE_RECORD, "deleted": None}


def pick_window(
    records: list[ArchiveRecord], size: int
) -> tuple[str, str, list[ArchiveRecord]] | None:
    """A receipt-time window of about ``size`` archived records from the middle of the run:
    ``(start, end exclusive, its records)``; ``None`` when the archive is empty. The whole run
    when it holds fewer than ``2 * size``."""
    ordered = sorted(records, key=lambda r: r.received_at)
    if not ordered:
        return None
    first = 0 if len(ordered) < 2 * size else len(ordered) // 4
    last = min(len(ordered), first + size)
    start = ordered[first].received_at
    if last < len(ordered) and ordered[last].received_at > ordered[last - 1].received_at:
        end = ordered[last].received_at
    else:
        end = format_time(parse_time(ordered[last - 1].received_at) + timedelta(microseconds=1))
    return start, end, [r for r in ordered if start <= r.received_at < end]


def _job_cursor(run: Run, job: str) -> tuple[int, str | None]:
    """The job's checkpointed cursor and status (``(0, None)`` before its state exists)."""
    try:
        body = run.client("s3").get_object(
            Bucket=run.outputs["ArchiveBucketName"], Key=f"replay-jobs/{job}.json"
        )["Body"]
        state = json.loads(body.read())
    except Exception:  # not written yet, or moto busy: poll again
        return 0, None
    return int(state.get("cursor", 0)), state.get("status")


def _start(run: Run, argv: list[str]) -> subprocess.Popen[str]:
    import os

    env = dict(os.environ, WEBHOOK_PIPELINE_LOCAL_DIR=str(run.state))
    env.pop("AWS_ENDPOINT_URL", None)
    return subprocess.Popen(  # noqa: S603 - our own CLI
        cli_command() + argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _kill_at(
    run: Run, process: subprocess.Popen[str], job: str, cursor: int, delay: float
) -> dict[str, Any]:
    """SIGKILL ``process`` by PID ``delay`` s after the job's checkpointed cursor reaches
    ``cursor`` (so the kill lands inside a chunk being sent, not only at a checkpoint), or let
    it end."""
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        seen, _status = _job_cursor(run, job)
        if seen >= cursor:
            time.sleep(delay)
            process.kill()  # SIGKILL to this PID
            process.communicate()
            after, status = _job_cursor(run, job)
            return {
                "pid": process.pid,
                "cursor_seen": seen,
                "target": cursor,
                "delay": delay,
                "cursor_after": after,
                "status_after": status,
            }
        time.sleep(0.05)
    process.communicate()
    return {"pid": process.pid, "cursor_seen": None, "target": cursor, "ended": True}


def run_job(run: Run, window: tuple[str, str], job: str, total: int, kills: int) -> dict[str, Any]:
    """Run the reprocess job of ``window``, SIGKILLed ``kills`` times at seeded cursors in the
    first 70 % of ``total``, then again with the same ``--job`` until its report says complete:
    ``{"kills": [...], "runs": n, "report": the last JSON report, "exit_code": n}``."""
    rng = random.Random(run.args.seed + 2)  # noqa: S311 - kill points
    argv = ["replay", "--local", "--from-archive", "--mode", "reprocess", "--job", job]
    argv += ["--from", window[0], "--to", window[1], "--rate", str(run.args.reprocess_rate)]
    argv += ["--json", "--no-progress"]
    points = range(1, max(2, int(total * 0.7)))  # room left for the kill to land mid-job
    targets = sorted(rng.sample(points, min(kills, len(points))))
    killed: list[dict[str, Any]] = []
    for target in targets:
        delay = round(rng.uniform(0.0, 0.3), 3)
        killed.append(_kill_at(run, _start(run, argv), job, target, delay))
        _log(run, f"reprocess job {job}: {killed[-1]}")
    report: dict[str, Any] = {}
    code, runs = 1, len(targets)
    while runs < MAX_JOB_RUNS:
        runs += 1
        out, err = _start(run, argv).communicate(timeout=600)
        try:
            report = json.loads(out)
        except ValueError:
            report = {"status": "unreadable", "stderr": err.strip()[-500:]}
        code = 0 if report.get("status") == "complete" and not report.get("failed") else 1
        if report.get("status") != "incomplete":
            break
    return {"kills": killed, "runs": runs, "report": report, "exit_code": code}


# ------------------------------------------------------------------------------------------------
# the leg


def prove(
    run: Run,
    copies: list[Copy],
    items: list[dict[str, Any]],
    foreign: set[tuple[str, str]],
    drained: tuple[float | None, dict[str, int]],
) -> dict[str, Any]:
    """The report's ``archive`` section once the archive queue drained (``drained``, from
    :func:`drain`): the archive's checks, then the reprocess leg under ``reprocess`` (``items``:
    the table as the reconciliation read it)."""
    from webhook_pipeline_ops.chaos.archive_checks import check_archive

    found = read_archive(run)
    section: dict[str, Any] = {
        "queue_drained_seconds": drained[0],
        "queue_at_end": drained[1],
        "objects_read": found.objects_read,
        **check_archive(copies, found.records, found.problems, foreign),
    }
    _log(
        run,
        f"archive: {section['identities']} identities in {found.objects_read} objects; missing "
        f"{section['archive_missing']}, unexpected {section['archive_unexpected']}, corrupt "
        f"{section['archive_corrupt']}",
    )
    section["reprocess"] = reprocess(run, found.records, items)
    return section


def reprocess(
    run: Run, records: list[ArchiveRecord], before: list[dict[str, Any]]
) -> dict[str, Any]:
    """The reprocess leg: a window of about ``--reprocess-deliveries`` archived deliveries
    reprocessed by a job killed 2-3 times (seeded), the main queue settled, then the ledger and
    the resources checked (:func:`~webhook_pipeline_ops.chaos.archive_checks.check_reprocess`)."""
    from webhook_pipeline_ops.chaos.archive_checks import REPROCESS_VERDICTS, check_reprocess

    picked = pick_window(records, run.args.reprocess_deliveries)
    if run.args.reprocess_deliveries <= 0 or picked is None:
        return {"not_run": "--reprocess-deliveries 0 or nothing archived"}
    start, end, window = picked
    job = f"chaos-{run.args.seed}-{int(time.time())}"
    kills = random.Random(run.args.seed + 3).randint(2, 3)  # noqa: S311
    _log(run, f"reprocess: job {job}, {len(window)} archived in {start} .. {end}, {kills} kills")
    ran = run_job(run, (start, end), job, len(window), kills)
    settled, left = run.settle()
    report = ran["report"]
    section: dict[str, Any] = {
        "job": job,
        "window": [start, end],
        "archived_in_window": len(window),
        "generation": report.get("generation"),
        "kills": ran["kills"],
        "runs": ran["runs"],
        "status": report.get("status"),
        "last_run": {k: report.get(k) for k in ("resumed_from", "sent", "skipped", "failed")},
        "failed": report.get("failed"),
        "settle_seconds": settled,
        "queue_at_end": left,
    }
    if report.get("generation") is None:
        return section | {name: "not measured" for name in REPROCESS_VERDICTS}
    checks = check_reprocess(window, before, run.table_items(), int(report["generation"]))
    _log(run, f"reprocess: {json.dumps({k: v for k, v in checks.items() if k != 'examples'})}")
    return section | checks
