"""The chaos faults made from outside the stack's processes: signals to the AWS endpoint and a
processor worker, poison messages on the main queue and a replay of the DLQ.

Each returns a one-line account of what it did; one that cannot act on this stack raises
:class:`~webhook_pipeline_ops.chaos.faults.NotInjected` with the reason. The Redis faults are
:class:`~webhook_pipeline_ops.chaos.stack.RedisControl`'s, the ones made inside the stack's
processes :mod:`webhook_pipeline_ops.chaos.faults`'.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from webhook_pipeline_ops.chaos.faults import PROCESSOR, NotInjected
from webhook_pipeline_ops.chaos.stack import listening_pid, pid_alive

#: Runs the CLI with these arguments against the run's stack.
Cli = Callable[..., subprocess.CompletedProcess[str]]


@dataclass
class Poison:
    """The poison messages sent: their (source, delivery id), and per message the payload
    bucket, key and body whose absence makes it poison (the replay's "fix" writes them)."""

    keys: list[tuple[str, str]] = field(default_factory=list)
    fixes: list[tuple[str, str, bytes]] = field(default_factory=list)


def stop_moto(ready: dict[str, Any], outputs: dict[str, Any], hold: float) -> str:
    """SIGSTOP the moto server for ``hold`` seconds, then SIGCONT; its PID from the ready file,
    else from the process listening on the AWS endpoint's port."""
    pid = ready.get("moto_pid")
    how = "the ready file's moto_pid"
    if not pid:
        port = int(str(outputs["EndpointUrl"]).rsplit(":", 1)[1].split("/")[0])
        pid, how = listening_pid(port), f"the process listening on port {port}"
    if not pid:
        raise NotInjected("the moto server's PID is unknown")
    if int(pid) == int(ready["pid"]):
        raise NotInjected(
            "the moto server runs inside the stack's own process (pid "
            f"{pid}): a SIGSTOP would freeze the ingest gateway and the pollers too"
        )
    os.kill(int(pid), signal.SIGSTOP)
    try:
        time.sleep(hold)
    finally:
        os.kill(int(pid), signal.SIGCONT)
    return f"pid {pid} ({how}) stopped {hold:.1f} s"


def kill_processor(ready: dict[str, Any]) -> str:
    """SIGKILL the first live processor worker the ready file names."""
    pids = (ready.get("worker_pids") or {}).get(PROCESSOR) or []
    live = [int(p) for p in pids if pid_alive(int(p))]
    if not live:
        raise NotInjected(
            "no processor worker process is known (the ready file names no live "
            "ProcessorFunction worker PID: functions run inside the stack's process)"
        )
    os.kill(live[0], signal.SIGKILL)
    return f"processor worker pid {live[0]} SIGKILLed"


def send_poison(
    sqs: Any, outputs: dict[str, Any], source: str, count: int, seed: int, poison: Poison
) -> str:
    """Envelopes whose claim-check body is missing from the payload bucket: the processor
    finds them malformed until the object exists (the "fix" the replay fault makes)."""
    from webhook_pipeline.envelope import BodyPointer, Envelope

    bucket = outputs["PayloadBucketName"]
    for i in range(count):
        delivery_id = f"chaos-poison-{seed}-{i}"
        body = json.dumps({"chaos": "poison", "n": i}).encode()
        key = f"bodies/{source}/chaos-poison/{seed}-{i}"
        envelope = Envelope(
            source=source,
            delivery_id=delivery_id,
            received_at=datetime.now(UTC),
            body_ref=BodyPointer(bucket=bucket, key=key),
            body_size=len(body),
            body_sha256=hashlib.sha256(body).hexdigest(),
        )
        sqs.send_message(QueueUrl=outputs["MainQueueUrl"], MessageBody=envelope.to_json())
        poison.keys.append((source, delivery_id))
        poison.fixes.append((bucket, key, body))
    return f"{count} envelopes with a missing claim-check body sent to the main queue"


def _dlq_depth(sqs: Any, dlq_url: str, want: int) -> int:
    """The DLQ's depth once it holds ``want`` messages (the poison reaches it after its
    receives), or after 120 s."""
    deadline = time.monotonic() + 120
    depth = 0
    while time.monotonic() < deadline:
        attrs = sqs.get_queue_attributes(
            QueueUrl=dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
        )
        depth = int(attrs["Attributes"]["ApproximateNumberOfMessages"])
        if depth >= want:
            break
        time.sleep(1)
    return depth


def replay(sqs: Any, s3: Any, outputs: dict[str, Any], poison: Poison, cli: Cli) -> tuple[str, int]:
    """Restore the poison's bodies, then ``replay --local``: ``(account, messages replayed)``.
    :class:`RuntimeError` when the replay exits with neither 0 nor 1."""
    depth = _dlq_depth(sqs, outputs["DeadLetterQueueUrl"], len(poison.keys))
    for bucket, key, body in poison.fixes:  # the fix: the missing bodies now exist
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    result = cli("replay", "--local", "--json", "--no-progress", "--max-messages", "1000")
    if result.returncode not in (0, 1):
        raise RuntimeError(f"replay exited {result.returncode}: {result.stderr.strip()[-300:]}")
    report = json.loads(result.stdout)
    account = (
        f"DLQ depth {depth}; bodies restored; replayed {report.get('replayed')}, "
        f"skipped {report.get('skipped')}, failed {report.get('failed')}"
    )
    return account, int(report.get("replayed", 0))
