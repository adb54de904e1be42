"""Replay-from-archive rate benchmark (not a test): does a job hold its ``--rate``?

A redeliver job (:func:`webhook_pipeline.replay.archive_job.run_archive_replay`) runs against
in-process moto (S3 archive and job state, DynamoDB table) over ``rate x duration + 1`` archived
deliveries whose records are missing, at 50/s and 200/s (``--duration`` 10 s each; ``--quick``
3 s). The main queue is a recorder that answers each ``SendMessageBatch`` after
``--sqs-latency-ms`` (default 20, SQS's usual latency in a region): in-process moto spends 30 ms
and more of CPU per call of 10 on this 2-core machine, which would measure the emulator, not the
job (``--moto-sqs`` uses it anyway). The job works through a chunk in sequence (read records,
send, checkpoint), so it can hold at most ``10 / (time of one chunk)`` messages per second: the
rate limit holds below that. Every ``SendMessageBatch`` call is timed as it returns; the
achieved rate is the messages sent after the first call divided by the time from the first
call to the last (the job sends in chunks of 10, so this counts whole chunk intervals). Also
reported: the job's own ``achieved_rate`` and the deviation from the requested rate
(target: within 5 %).

Run: ``.venv/bin/python bench/bench_replay_rate.py [--quick]``; figures go to
``bench/results/replay_rate.json`` (``--quick``: ``replay_rate.quick.json``, git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "layers" / "common"))
os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_DEFAULT_REGION="us-east-1",
)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402
from webhook_pipeline.archive.record import format_time  # noqa: E402
from webhook_pipeline.replay.archive_job import (  # noqa: E402
    ArchiveReplayTarget,
    run_archive_replay,
)
from webhook_pipeline.replay.archive_request import ArchiveReplayRequest  # noqa: E402

from tests.replay_archive_fixtures import (  # noqa: E402
    ARCHIVE_BUCKET,
    PAYLOAD_BUCKET,
    TABLE,
    WINDOW_START,
    make_stack,
    put_archive,
    record,
)

RESULTS = ROOT / "bench" / "results"
RATES = (50.0, 200.0)
TOLERANCE = 0.05


class _Recorder:
    """The main queue: ``send_message_batch`` answers after ``latency`` seconds, timed."""

    def __init__(self, calls: list[tuple[float, int]], latency: float) -> None:
        self.calls = calls
        self.latency = latency

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:
        time.sleep(self.latency)
        self.calls.append((time.monotonic(), len(Entries)))
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}


def measure(
    rate: float, duration: float, latency: float = 0.02, moto_sqs: bool = False
) -> dict[str, Any]:
    """One job at ``rate`` over ``rate x duration + 1`` deliveries, in a fresh moto."""
    count = int(rate * duration) + 1
    with mock_aws():
        stack = make_stack({n: boto3.client(n) for n in ("s3", "dynamodb", "sqs")})
        # spread over the two hours of the window, one record each 7 s at most
        step = timedelta(seconds=7_200 / count)
        records = [
            record(f"evt_{i:06d}", 0).model_copy(
                update={"received_at": format_time(WINDOW_START + i * step)}
            )
            for i in range(count)
        ]
        put_archive(stack.s3, records)
        calls: list[tuple[float, int]] = []
        original = stack.sqs.send_message_batch

        def timed(**kwargs: Any) -> Any:
            response = original(**kwargs)
            calls.append((time.monotonic(), len(response.get("Successful", []))))
            return response

        if moto_sqs:
            stack.sqs.send_message_batch = timed
        else:
            stack.sqs = _Recorder(calls, latency)
        request = ArchiveReplayRequest.parse(
            {
                "mode": "redeliver",
                "start": "2026-11-30T10:00:00Z",
                "end": "2026-11-30T12:00:00Z",
                "rate_per_second": rate,
                "job": f"bench-{int(rate)}",
            }
        )
        target = ArchiveReplayTarget(
            s3=stack.s3,
            dynamodb=stack.dynamodb,
            sqs=stack.sqs,
            archive_bucket=ARCHIVE_BUCKET,
            table=TABLE,
            queue_url=stack.queue_url,
            payload_bucket=PAYLOAD_BUCKET,
        )
        report = run_archive_replay(request, target)
    span = calls[-1][0] - calls[0][0]
    after_first = sum(n for _, n in calls[1:])
    achieved = after_first / span if span > 0 else 0.0
    return {
        "requested_per_second": rate,
        "deliveries": count,
        "sent": report.sent,
        "send_calls": len(calls),
        "seconds_first_to_last_call": round(span, 3),
        "achieved_per_second": round(achieved, 2),
        "job_achieved_rate": round(report.achieved_rate, 2),
        "deviation": round(achieved / rate - 1, 4),
        "within_5_percent": abs(achieved / rate - 1) <= TOLERANCE,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 s per rate, .quick.json")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per rate")
    parser.add_argument("--sqs-latency-ms", type=float, default=20.0, help="recorder latency")
    parser.add_argument("--moto-sqs", action="store_true", help="in-process moto SQS instead")
    args = parser.parse_args()
    duration = 3.0 if args.quick else args.duration
    cases = []
    for rate in RATES:
        case = measure(rate, duration, args.sqs_latency_ms / 1000, args.moto_sqs)
        print(
            f"rate {rate:g}/s: achieved {case['achieved_per_second']}/s "
            f"({case['deviation']:+.2%}), job says {case['job_achieved_rate']}/s, "
            f"{case['sent']} sent"
        )
        cases.append(case)
    out = RESULTS / ("replay_rate.quick.json" if args.quick else "replay_rate.json")
    data = {
        "duration_seconds": duration,
        "tolerance": TOLERANCE,
        "sqs": "moto in-process" if args.moto_sqs else f"recorder, {args.sqs_latency_ms:g} ms",
        "cases": cases,
    }
    out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"written {out.relative_to(ROOT)}")
    return 0 if all(c["within_5_percent"] for c in cases) else 1


if __name__ == "__main__":
    raise SystemExit(main())
