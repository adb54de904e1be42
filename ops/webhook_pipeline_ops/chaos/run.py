"""One chaos run against a running local stack: the sender, the fault thread and the read-back.

:class:`Run` sends the planned traffic (paced, with bursts, each copy resent with backoff after
a timeout or a 5xx), injects the scheduled faults from its own thread as the traffic's progress
reaches them, waits for the main queue to settle and reads the deliveries table and the DLQ for
:func:`webhook_pipeline_ops.chaos.reconcile.reconcile`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.chaos import archive_leg, injection
from webhook_pipeline_ops.chaos import faults as switches
from webhook_pipeline_ops.chaos.faults import NotInjected, ScheduledFault
from webhook_pipeline_ops.chaos.stack import ROOT, RedisControl, cli_command
from webhook_pipeline_ops.chaos.traffic import (
    DEFAULT_SOURCES,
    AttemptLog,
    Copy,
    answer_class,
    interleave,
    progress_step,
    send_offsets,
    traffic_progress,
    with_duplicates,
)

#: The test-only switch of a simulated loss (``delete-record``: a record; ``delete-archive-record``:
#: an archived delivery).
NEGATIVE_CONTROL_ENV = "WEBHOOK_PIPELINE_CHAOS_NEGATIVE_CONTROL"
#: The longest a sender waits before resending a copy, seconds.
MAX_RETRY_WAIT_SECONDS = 5.0


class Run:
    """One chaos run's state shared by the sender, the fault thread and the settle wait."""

    def __init__(
        self, args: argparse.Namespace, state: Path, ready: dict[str, Any], redis: RedisControl
    ) -> None:
        self.args = args
        self.state = state
        self.ready = ready
        self.redis = redis
        self.outputs = json.loads((state / "outputs.json").read_text())
        self.secrets = {
            name: entry["secret"]
            for name, entry in json.loads((state / "secrets.json").read_text())["sources"].items()
        }
        self.t0 = time.monotonic()
        self.done = 0
        self.total = 0
        self.traffic_over = threading.Event()
        self.interrupted = threading.Event()  # Ctrl-C: no new send, no resend
        self.faults: list[dict[str, Any]] = []
        self.poison = injection.Poison()
        self.replayed = 0
        self.lock = threading.Lock()
        self.finals: Counter[str] = Counter()

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    def client(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        make: Any = boto3.client  # any service by name: the stubs' overloads want a literal
        return make(
            service,
            endpoint_url=self.outputs["EndpointUrl"],
            region_name=self.outputs["Region"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - moto
            config=Config(retries={"max_attempts": 10, "mode": "standard"}, read_timeout=60),
        )

    def cli(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, WEBHOOK_PIPELINE_LOCAL_DIR=str(self.state))
        env.pop("AWS_ENDPOINT_URL", None)
        return subprocess.run(  # noqa: S603 - our own CLI
            cli_command() + list(argv),
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
            cwd=ROOT,
        )

    # -- traffic -------------------------------------------------------------------------------
    def plan(self, names: list[str]) -> list[tuple[Any, bool]]:
        from webhook_pipeline_ops.simulator.deliveries import example_sources
        from webhook_pipeline_ops.simulator.sender import plan

        rng = random.Random(self.args.seed)  # noqa: S311 - traffic shaping
        sources = example_sources()
        share = max(0.0, min(0.9, self.args.duplicates))
        unique = max(1, round(self.args.count * (1 - share)))
        per_source = [
            unique // len(names) + (1 if i < unique % len(names) else 0) for i in range(len(names))
        ]
        streams = [
            plan(
                [sources[name]],
                count=n,
                resources=max(1, n // 25),
                out_of_order=True,
                rng=rng,
                base_url=self.outputs["ApiUrl"],
            )
            for name, n in zip(names, per_source, strict=True)
            if n
        ]
        merged = interleave(streams, rng)
        return with_duplicates(merged, share / (1 - share), immediate=0.35, rng=rng)

    def copies_of(self, order: list[tuple[Any, bool]]) -> list[Copy]:
        """One :class:`Copy` per planned send, with the resource key the pipeline records."""
        from webhook_pipeline_ops.simulator.sender import recorded_resource_key

        keys: dict[int, str | None] = {}
        copies: list[Copy] = []
        for planned, dup in order:
            if id(planned) not in keys:
                keys[id(planned)] = recorded_resource_key(planned)
            copies.append(
                Copy(
                    planned.source.name,
                    planned.delivery_id,
                    keys[id(planned)],
                    planned.sequence,
                    dup,
                )
            )
        return copies

    def answered(self, copy: Copy, started: float, expected: float, step: int) -> None:
        """Count ``copy``'s final answer; print a progress line every ``step`` answers."""
        with self.lock:
            self.done += 1
            self.finals[answer_class(copy.final)] += 1
            line = None
            if self.done % step == 0 or self.done == self.total:
                line = traffic_progress(
                    self.done, self.total, time.monotonic() - started, expected, self.finals
                )
        if line is not None:
            print(line, file=sys.stderr, flush=True)

    def send(self, order: list[tuple[Any, bool]]) -> tuple[list[Copy], float]:
        """Send every copy of ``order`` on its schedule: ``(the sender's log, seconds)``. On
        Ctrl-C the queued sends are dropped and the ones in flight end after their current
        attempt, so the run stops within seconds instead of sending them all."""
        rng = random.Random(self.args.seed + 1)  # noqa: S311
        offsets = send_offsets(
            len(order), self.args.rate, max(1, len(order) // 2000), self.args.burst_size, rng
        )
        bursting = [i > 0 and offsets[i] == offsets[i - 1] for i in range(len(order))]
        copies = self.copies_of(order)
        self.total = len(order)
        expected = offsets[-1] if offsets else 0.0
        step = progress_step(self.total)
        print(
            f"[{self.now():7.1f} s] traffic: {self.total} copies at {self.args.rate:g}/s with "
            f"bursts: about {expected:.0f} s (retries of 5xx and timeouts add to it); progress "
            f"every {step} answered copies",
            file=sys.stderr,
            flush=True,
        )
        paced = threading.BoundedSemaphore(self.args.concurrency)
        started = time.monotonic()

        def job(i: int, hold: bool) -> None:
            try:
                self.deliver(order[i][0], copies[i])
            finally:
                if hold:
                    paced.release()
                self.answered(copies[i], started, expected, step)

        pool = ThreadPoolExecutor(max_workers=max(self.args.concurrency, 64))
        try:
            for i in range(len(order)):
                wait = started + offsets[i] - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                hold = not bursting[i]
                if hold:
                    # a timed wait, again and again: Python runs a Ctrl-C's handler in this
                    # thread only once it wakes, and the kernel may deliver SIGINT to a sender
                    # thread, which leaves an untimed acquire blocked until a copy is done
                    while not paced.acquire(timeout=0.2):
                        pass
                pool.submit(job, i, hold)
        except KeyboardInterrupt:
            self.interrupted.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return copies, time.monotonic() - started

    def deliver(self, planned: Any, copy: Copy) -> None:
        from webhook_pipeline_ops.simulator.sender import post, signed_request, source_url

        url = source_url(self.outputs["ApiUrl"], planned.source.name)
        secret = self.secrets[planned.source.name]
        for attempt in range(self.args.retries + 1):
            sent = signed_request(planned, secret, attempt, url)
            status, headers, _text, ms, error = post(
                sent.url, sent.body, sent.headers, self.args.timeout
            )
            digest = hashlib.sha256(sent.body).hexdigest()
            copy.attempts.append(AttemptLog(status, self.now(), round(ms, 1), error, digest))
            if (status is not None and status < 500) or self.interrupted.is_set():
                return
            if attempt < self.args.retries:
                wait = min(MAX_RETRY_WAIT_SECONDS, 0.25 * 2**attempt)
                retry_after = {k.lower(): v for k, v in headers.items()}.get("retry-after", "")
                if retry_after.isdigit():
                    wait = min(MAX_RETRY_WAIT_SECONDS, float(retry_after))
                self.interrupted.wait(wait)

    # -- faults --------------------------------------------------------------------------------
    def run_faults(self, schedule: list[ScheduledFault]) -> None:
        for fault in schedule:
            while not self.traffic_over.is_set():
                with self.lock:
                    progress = self.done / self.total if self.total else 0.0
                if progress >= fault.at_progress:
                    break
                time.sleep(0.05)
            event: dict[str, Any] = {
                "kind": fault.kind,
                "at": self.now(),
                "at_progress": fault.at_progress,
                "hold_seconds": fault.hold,
                "during_traffic": not self.traffic_over.is_set(),
            }
            try:
                event["detail"] = self.inject(fault)
                event["injected"] = True
            except NotInjected as exc:
                event["injected"], event["detail"] = False, str(exc)
            except Exception as exc:
                event["injected"], event["detail"] = False, f"failed: {type(exc).__name__}: {exc}"
            event["ended_at"] = self.now()
            self.faults.append(event)
            print(
                f"[{event['at']:7.1f} s] {fault.kind}: "
                f"{'' if event['injected'] else 'NOT injected: '}{event['detail']}",
                file=sys.stderr,
                flush=True,
            )

    def inject(self, fault: ScheduledFault) -> str:
        kind = fault.kind
        if kind == "redis-kill":
            return self.redis.kill_restart(fault.hold)
        if kind == "redis-stop":
            return self.redis.stop_cont(fault.hold)
        if kind == "redis-flush":
            return self.redis.flush()
        if kind == "redis-full":
            return self.redis.full(fault.hold)
        if kind == "moto-stop":
            return injection.stop_moto(self.ready, self.outputs, fault.hold)
        if kind == "processor-kill":
            return injection.kill_processor(self.ready)
        if kind == "aws-throttle":
            return switches.throttle(
                self.ready, fault.hold, self.args.throttle_rate, self.args.seed
            )
        if kind in ("processor-crash-before-write", "processor-crash-after-write"):
            return switches.crash(self.ready, kind.removeprefix("processor-"))
        if kind == "hook-failing":
            return switches.hook_failing(self.ready, fault.hold)
        if kind == "poison":
            source = (self.args.sources or list(DEFAULT_SOURCES))[0]
            sqs = self.client("sqs")
            return injection.send_poison(
                sqs, self.outputs, source, self.args.poison, self.args.seed, self.poison
            )
        if kind == "replay":
            return self.replay()
        raise NotInjected(f"unknown kind {kind}")

    def replay(self) -> str:
        account, replayed = injection.replay(
            self.client("sqs"), self.client("s3"), self.outputs, self.poison, self.cli
        )
        self.replayed += replayed
        return account

    # -- settle and read -----------------------------------------------------------------------
    def settle(self) -> tuple[float | None, dict[str, int]]:
        sqs = self.client("sqs")
        from webhook_pipeline.adapters.sqs_replay import DEPTH_ATTRIBUTES

        names = list(DEPTH_ATTRIBUTES)
        started = time.monotonic()
        quiet = 0
        report_at = 10.0
        last: dict[str, int] = {}
        while time.monotonic() - started < self.args.settle_timeout:
            attrs = sqs.get_queue_attributes(
                QueueUrl=self.outputs["MainQueueUrl"], AttributeNames=names
            )
            last = {k: int(v) for k, v in attrs["Attributes"].items()}
            quiet = quiet + 1 if not any(last.values()) else 0
            if quiet >= 3:
                return round(time.monotonic() - started, 1), last
            waited = time.monotonic() - started
            if waited >= report_at:
                report_at += 10
                queued = ", ".join(f"{k} {v}" for k, v in sorted(last.items()))
                print(
                    f"[{self.now():7.1f} s] settling {waited:.0f} s (up to "
                    f"{self.args.settle_timeout:.0f} s): main queue {queued}",
                    file=sys.stderr,
                    flush=True,
                )
            time.sleep(1)
        return None, last

    def table_items(self) -> list[dict[str, Any]]:
        from boto3.dynamodb.types import TypeDeserializer

        des = TypeDeserializer()
        ddb = self.client("dynamodb")
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.outputs["DeliveriesTableName"]}
        while True:
            page = ddb.scan(**kwargs)
            items.extend({k: des.deserialize(v) for k, v in it.items()} for it in page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def dlq_entries(self) -> list[dict[str, Any]]:
        result = self.cli("dlq", "peek", "--local", "--json", "--max", "10000")
        if result.returncode != 0:
            raise RuntimeError(
                f"dlq peek exited {result.returncode}: {result.stderr.strip()[-300:]}"
            )
        rows = json.loads(result.stdout or "[]")
        return [r for r in rows if isinstance(r, dict)]

    def negative_control(self, copies: list[Copy]) -> dict[str, Any] | None:
        mode = os.environ.get(NEGATIVE_CONTROL_ENV, "")
        if not mode:
            return None
        if mode == archive_leg.DELETE_ARCHIVE_RECORD:
            return archive_leg.delete_archive_record(self, copies)
        if mode != "delete-record":
            raise ValueError(
                f"{NEGATIVE_CONTROL_ENV}={mode!r}: 'delete-record' or "
                f"{archive_leg.DELETE_ARCHIVE_RECORD!r}"
            )
        ddb = self.client("dynamodb")
        for c in copies:
            if any(a.status == 202 for a in c.attempts):
                key = {"pk": {"S": f"DELIVERY#{c.source}#{c.delivery_id}"}, "sk": {"S": "DELIVERY"}}
                ddb.delete_item(TableName=self.outputs["DeliveriesTableName"], Key=key)
                return {"mode": mode, "deleted": f"{c.source}/{c.delivery_id}"}
        return {"mode": mode, "deleted": None}
