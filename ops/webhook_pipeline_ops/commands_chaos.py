"""``webhook-pipeline chaos``: traffic with faults injected on a seeded schedule, then the proof.

Against the local stack (started here as a subprocess on free ports with its own state folder
and a redis-server this command starts and owns, or a running one with ``--state-dir``), the
simulator's deliveries across several providers are sent: about 30 % duplicate copies (some
right behind their original, some minutes later), each resource's events in swapped pairs with
real sequence values, paced sends with bursts, and senders that time out and resend the same
delivery with backoff. While traffic flows, the faults of ``--faults`` are injected at seeded
points of it (``--seed``), each logged with its kind and time. After the traffic, the run waits
until the main queue is empty (the settle time), reads the deliveries table and the DLQ and
reconciles them with the sender's own log (:func:`webhook_pipeline_ops.chaos.reconcile`).

Prints a table, writes the report (``--out``, default ``bench/results/chaos.json``) and the
sender's log (``chaos-sender.jsonl`` in the state folder). Exit codes: 0 the proof holds;
1 lost, double-applied, out-of-order applied, a wrong final watermark or a 4xx recorded is not
0 (or the queue did not settle); 2 usage error.

Against a running stack (``--state-dir`` with a live ``ready`` file), the redis-server that
``redis-kill`` restarts on the stack's Redis port is this command's child and stops with it:
restart the stack afterwards.

Test-only switch: ``WEBHOOK_PIPELINE_CHAOS_NEGATIVE_CONTROL=delete-record`` deletes one
acknowledged delivery's record once the queue has settled (a simulated loss): the
reconciliation must then report lost = 1 and exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from webhook_pipeline_ops import chaos_switches
from webhook_pipeline_ops.chaos import (
    FAULT_DESCRIPTIONS,
    FAULT_KINDS,
    NOT_INJECTED,
    AttemptLog,
    Copy,
    NotInjected,
    ScheduledFault,
    answer_class,
    interleave,
    progress_step,
    reconcile,
    render,
    schedule_faults,
    send_offsets,
    traffic_progress,
    with_duplicates,
)

DEFAULT_SOURCES = ("stripe", "github", "shopify", "slack", "standard-webhooks")
NEGATIVE_CONTROL_ENV = "WEBHOOK_PIPELINE_CHAOS_NEGATIVE_CONTROL"
LEDGER_HOOKS_ENV = "WEBHOOK_PIPELINE_LOCAL_HOOKS_MODULE"
MAX_RETRY_WAIT_SECONDS = 5.0
ROOT = Path(__file__).resolve().parents[2]


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
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "chaos.json"))
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


# ------------------------------------------------------------------------------------------------
# processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def listening_pid(port: int) -> int | None:
    """The PID of the process listening on 127.0.0.1/0.0.0.0 ``port`` (from ``/proc``, read only),
    or ``None`` when it cannot be told."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(cols[9])
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return int(proc.name)
    return None


class RedisControl:
    """The stack's Redis: signals, FLUSHALL, memory limits, and restart empty on its port.

    A redis-server this command started (or restarted) is its child and stopped by its PID at
    :meth:`close`.
    """

    def __init__(self, url: str, pid: int | None) -> None:
        self.url = url
        self.port = int(url.rsplit(":", 1)[1].split("/")[0])
        self.pid = pid
        self.child: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(cls) -> RedisControl:
        control = cls(f"redis://127.0.0.1:{free_port()}/0", None)
        control._spawn()
        return control

    def _spawn(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH")
        self.child = subprocess.Popen(  # noqa: S603 - fixed argv
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.pid = self.child.pid
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._client().ping():
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not answer")

    def _client(self) -> Any:
        import redis

        class Quiet(redis.Redis):
            def ping(self, **kwargs: Any) -> bool:
                try:
                    return bool(super().ping(**kwargs))
                except redis.RedisError:
                    return False

        return Quiet.from_url(self.url, socket_timeout=2, socket_connect_timeout=1)

    def kill_restart(self, down: float) -> str:
        old = self.require_pid()
        os.kill(old, signal.SIGKILL)
        if self.child is not None and self.child.pid == old:
            self.child.wait(timeout=10)
        time.sleep(down)
        self._spawn()
        return f"pid {old} SIGKILLed, down {down:.1f} s, restarted empty as pid {self.pid}"

    def stop_cont(self, hold: float) -> str:
        pid = self.require_pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(hold)
        finally:
            os.kill(pid, signal.SIGCONT)
        return f"pid {pid} stopped {hold:.1f} s"

    def flush(self) -> str:
        client = self._client()
        keys = client.dbsize()
        client.flushall()
        return f"FLUSHALL ({keys} keys)"

    def full(self, hold: float) -> str:
        client = self._client()
        saved = client.config_get("maxmemory") | client.config_get("maxmemory-policy")
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1")
        try:
            time.sleep(hold)
        finally:
            client.config_set("maxmemory", saved["maxmemory"])
            client.config_set("maxmemory-policy", saved["maxmemory-policy"])
        return f"maxmemory 1 byte + noeviction for {hold:.1f} s (restored {saved})"

    def require_pid(self) -> int:
        if not self.pid:
            raise RuntimeError("the Redis server's PID is unknown")
        return self.pid

    def close(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()


def _cli_command() -> list[str]:
    script = Path(sys.executable).parent / "webhook-pipeline"
    return [str(script)] if script.exists() else [sys.executable, "-m", "webhook_pipeline_ops.cli"]


def _health(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - loopback
            return bool(response.status == 200)
    except OSError:
        return False


def _read_ready(state: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((state / "ready").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and pid_alive(int(doc.get("pid", 0))) else None


@contextlib.contextmanager
def local_stack(
    args: argparse.Namespace,
) -> Iterator[tuple[Path, dict[str, Any], RedisControl, bool]]:
    """A running local stack: ``(state folder, ready document, Redis control, started here)``."""
    given = Path(args.state_dir) if args.state_dir else None
    ready = _read_ready(given) if given else None
    if ready is not None and given is not None:
        redis = RedisControl(ready["redis_url"], ready.get("redis_pid"))
        if not redis.pid:
            redis.pid = listening_pid(redis.port)
        try:
            yield given, ready, redis, False
        finally:
            redis.close()
        return
    state = given or Path(tempfile.mkdtemp(prefix="chaos-stack-"))
    state.mkdir(parents=True, exist_ok=True)
    redis = RedisControl.start()
    port = free_port()
    command = [*_cli_command(), "local", "run", "--state-dir", str(state)]
    command += ["--port", str(port), "--moto-port", str(free_port()), "--redis-url", redis.url]
    command += ["--visibility-timeout", str(args.visibility_timeout)]
    command += ["--parameter", f"MaxReceiveCount={args.max_receive_count}"]
    command += ["--parameter", f"PublicBaseUrl=http://127.0.0.1:{port}"]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AWS_ENDPOINT_URL")}
    env["WEBHOOK_PIPELINE_LOCAL_DIR"] = str(state)
    # The hook ledger (one item per hook invocation) where the stack can load it: the processor
    # then measures double-applied. A stack that does not know the variable ignores it.
    env.setdefault(LEDGER_HOOKS_ENV, "webhook_pipeline_ops.ledger")
    log_path = state / "stack.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(  # noqa: S603 - our own CLI
            command,
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the local stack exited with {process.returncode}; see {log_path}"
                )
            ready = _read_ready(state)
            if ready and ready.get("pid") == process.pid and _health(ready["health_url"]):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local stack was not ready within 120 s; see {log_path}")
            time.sleep(0.2)
        yield state, ready, redis, True
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        redis.close()


# ------------------------------------------------------------------------------------------------
# the run


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
        self.poison_keys: list[tuple[str, str]] = []
        self.poison_fix: list[tuple[str, str, bytes]] = []
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
            _cli_command() + list(argv),
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

    def send(self, order: list[tuple[Any, bool]]) -> tuple[list[Copy], float]:
        from webhook_pipeline_ops.simulator.sender import recorded_resource_key

        rng = random.Random(self.args.seed + 1)  # noqa: S311
        offsets = send_offsets(
            len(order), self.args.rate, max(1, len(order) // 2000), self.args.burst_size, rng
        )
        bursting = [i > 0 and offsets[i] == offsets[i - 1] for i in range(len(order))]
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
                with self.lock:
                    self.done += 1
                    self.finals[answer_class(copies[i].final)] += 1
                    line = None
                    if self.done % step == 0 or self.done == self.total:
                        line = traffic_progress(
                            self.done, self.total, time.monotonic() - started, expected, self.finals
                        )
                if line is not None:
                    print(line, file=sys.stderr, flush=True)

        pool = ThreadPoolExecutor(max_workers=max(self.args.concurrency, 64))
        try:
            for i in range(len(order)):
                wait = started + offsets[i] - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                hold = not bursting[i]
                if hold:
                    paced.acquire()
                pool.submit(job, i, hold)
        except KeyboardInterrupt:
            # Ctrl-C: the queued sends are dropped and the ones in flight end after their
            # current attempt, so the run stops within seconds instead of sending them all.
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
            copy.attempts.append(AttemptLog(status, self.now(), round(ms, 1), error))
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
            return self.stop_moto(fault.hold)
        if kind == "processor-kill":
            return self.kill_processor()
        if kind == "aws-throttle":
            return chaos_switches.throttle(
                self.ready, fault.hold, self.args.throttle_rate, self.args.seed
            )
        if kind in ("processor-crash-before-write", "processor-crash-after-write"):
            return chaos_switches.crash(self.ready, kind.removeprefix("processor-"))
        if kind == "hook-failing":
            return chaos_switches.hook_failing(self.ready, fault.hold)
        if kind == "poison":
            return self.send_poison()
        if kind == "replay":
            return self.replay()
        raise NotInjected(f"unknown kind {kind}")

    def stop_moto(self, hold: float) -> str:
        pid = self.ready.get("moto_pid")
        how = "the ready file's moto_pid"
        if not pid:
            port = int(str(self.outputs["EndpointUrl"]).rsplit(":", 1)[1].split("/")[0])
            pid, how = listening_pid(port), f"the process listening on port {port}"
        if not pid:
            raise NotInjected("the moto server's PID is unknown")
        if int(pid) == int(self.ready["pid"]):
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

    def kill_processor(self) -> str:
        pids = (self.ready.get("worker_pids") or {}).get("ProcessorFunction") or []
        live = [int(p) for p in pids if pid_alive(int(p))]
        if not live:
            raise NotInjected(
                "no processor worker process is known (the ready file names no live "
                "ProcessorFunction worker PID: functions run inside the stack's process)"
            )
        os.kill(live[0], signal.SIGKILL)
        return f"processor worker pid {live[0]} SIGKILLed"

    def send_poison(self) -> str:
        """Envelopes whose claim-check body is missing from the payload bucket: the processor
        finds them malformed until the object exists (the "fix" the replay fault makes)."""
        from webhook_pipeline.envelope import BodyPointer, Envelope

        sqs = self.client("sqs")
        bucket = self.outputs["PayloadBucketName"]
        source = (self.args.sources or list(DEFAULT_SOURCES))[0]
        for i in range(self.args.poison):
            delivery_id = f"chaos-poison-{self.args.seed}-{i}"
            body = json.dumps({"chaos": "poison", "n": i}).encode()
            key = f"bodies/{source}/chaos-poison/{self.args.seed}-{i}"
            envelope = Envelope(
                source=source,
                delivery_id=delivery_id,
                received_at=datetime.now(UTC),
                body_ref=BodyPointer(bucket=bucket, key=key),
                body_size=len(body),
                body_sha256=hashlib.sha256(body).hexdigest(),
            )
            sqs.send_message(QueueUrl=self.outputs["MainQueueUrl"], MessageBody=envelope.to_json())
            self.poison_keys.append((source, delivery_id))
            self.poison_fix.append((bucket, key, body))
        return (
            f"{self.args.poison} envelopes with a missing claim-check body sent to the main queue"
        )

    def replay(self) -> str:
        sqs = self.client("sqs")
        dlq_url = self.outputs["DeadLetterQueueUrl"]
        deadline = time.monotonic() + 120
        depth = 0
        while time.monotonic() < deadline:  # the poison reaches the DLQ after its receives
            attrs = sqs.get_queue_attributes(
                QueueUrl=dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
            )
            depth = int(attrs["Attributes"]["ApproximateNumberOfMessages"])
            if depth >= len(self.poison_keys):
                break
            time.sleep(1)
        s3 = self.client("s3")
        for bucket, key, body in self.poison_fix:  # the fix: the missing bodies now exist
            s3.put_object(Bucket=bucket, Key=key, Body=body)
        result = self.cli("replay", "--local", "--json", "--no-progress", "--max-messages", "1000")
        if result.returncode not in (0, 1):
            raise RuntimeError(f"replay exited {result.returncode}: {result.stderr.strip()[-300:]}")
        report = json.loads(result.stdout)
        self.replayed += int(report.get("replayed", 0))
        return (
            f"DLQ depth {depth}; bodies restored; replayed {report.get('replayed')}, "
            f"skipped {report.get('skipped')}, failed {report.get('failed')}"
        )

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
        if mode != "delete-record":
            raise ValueError(f"{NEGATIVE_CONTROL_ENV}={mode!r}: only 'delete-record' is known")
        ddb = self.client("dynamodb")
        for c in copies:
            if any(a.status == 202 for a in c.attempts):
                key = {"pk": {"S": f"DELIVERY#{c.source}#{c.delivery_id}"}, "sk": {"S": "DELIVERY"}}
                ddb.delete_item(TableName=self.outputs["DeliveriesTableName"], Key=key)
                return {"mode": mode, "deleted": f"{c.source}/{c.delivery_id}"}
        return {"mode": mode, "deleted": None}


def sender_summary(copies: list[Copy], elapsed: float) -> dict[str, Any]:
    finals = Counter[str]()
    for c in copies:
        s = c.final
        finals[
            "final_2xx"
            if s and 200 <= s < 300
            else "final_4xx"
            if s and 400 <= s < 500
            else "final_5xx"
            if s and s >= 500
            else "final_no_answer"
        ] += 1
    latencies = sorted(a.ms for c in copies for a in c.attempts if a.status is not None)

    def pct(p: float) -> float | None:
        return (
            latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] if latencies else None
        )

    return {
        "copies": len(copies),
        "duplicate_copies": sum(1 for c in copies if c.duplicate),
        "requests": sum(len(c.attempts) for c in copies),
        "retries": sum(max(0, len(c.attempts) - 1) for c in copies),
        **{k: finals[k] for k in ("final_2xx", "final_4xx", "final_5xx", "final_no_answer")},
        "statuses": dict(Counter(str(a.status) for c in copies for a in c.attempts)),
        "no_answer_reasons": dict(Counter(a.error for c in copies for a in c.attempts if a.error)),
        "ack_p50_ms": pct(50),
        "ack_p99_ms": pct(99),
        "elapsed_seconds": round(elapsed, 1),
        "throughput_per_second": round(len(copies) / elapsed, 1) if elapsed else None,
    }


def _kinds(text: str) -> list[str]:
    if text.strip() == "all":
        return list(FAULT_KINDS)
    if text.strip() in ("", "none"):
        return []
    return [k.strip() for k in text.split(",") if k.strip()]


def run(args: argparse.Namespace) -> int:
    from webhook_pipeline_ops.simulator.deliveries import example_sources

    names = [n.strip() for item in (args.source or []) for n in item.split(",") if n.strip()]
    args.sources = names or list(DEFAULT_SOURCES)
    known = example_sources()
    unknown = [n for n in args.sources if n not in known]
    kinds = _kinds(args.faults)
    try:
        schedule = schedule_faults(kinds, args.seed)
    except ValueError as exc:
        print(f"webhook-pipeline chaos: {exc}", file=sys.stderr)
        return 2
    if not 0.0 < args.throttle_rate <= 1.0:
        print(
            f"webhook-pipeline chaos: --throttle-rate {args.throttle_rate}: a share in (0, 1]",
            file=sys.stderr,
        )
        return 2
    if unknown or args.count < 1:
        print(
            f"webhook-pipeline chaos: unknown source(s) {unknown} or --count < 1", file=sys.stderr
        )
        return 2
    print(
        f"chaos: {args.count} copies at {args.rate:g}/s: the traffic takes about "
        f"{args.count / args.rate:.0f} s at most (bursts shorten it, retries lengthen it), after "
        "starting a local stack (about 10-60 s) and before the settle (seconds when the stack "
        f"keeps up, at most --settle-timeout {args.settle_timeout:.0f} s) and the reconciliation",
        file=sys.stderr,
        flush=True,
    )
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
        control = chaos.negative_control(copies)
        items = chaos.table_items()
        dlq = chaos.dlq_entries()
        poison = set(chaos.poison_keys)
        rec = reconcile(
            copies, items, [d for d in dlq if (d.get("source"), d.get("delivery_id")) not in poison]
        )
        recorded = {
            (str(i.get("source")), str(i.get("delivery_id")))
            for i in items
            if str(i.get("pk", "")).startswith("DELIVERY#")
        }
        in_dlq = {(d.get("source"), d.get("delivery_id")) for d in dlq}
        poison_lost = [f"{s}/{d}" for s, d in chaos.poison_keys if (s, d) not in recorded | in_dlq]
        with (state / "chaos-sender.jsonl").open("w") as log:
            for c in copies:
                log.write(json.dumps(c.as_dict()) + "\n")
        injected = {e["kind"] for e in chaos.faults if e["injected"]}
        report = {
            "command": "webhook-pipeline chaos "
            + " ".join(sys.argv[2:] if sys.argv[1:2] == ["chaos"] else []),
            "seed": args.seed,
            "sources": args.sources,
            "stack": {
                "started_here": started_here,
                "state_dir": str(state),
                "visibility_timeout": ready.get("visibility_timeout"),
                "max_receive_count": ready.get("max_receive_count"),
                "moto_pid_recorded": bool(ready.get("moto_pid")),
                "worker_pids_recorded": bool(ready.get("worker_pids")),
            },
            "machine": {
                "cpus": os.cpu_count(),
                "platform": sys.platform,
                "python": sys.version.split()[0],
            },
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "sender": sender_summary(copies, elapsed),
            "faults": chaos.faults,
            "faults_by_kind": dict(Counter(e["kind"] for e in chaos.faults if e["injected"])),
            "not_injected": {
                **{
                    k: FAULT_DESCRIPTIONS[k]
                    + " -- "
                    + next(e["detail"] for e in chaos.faults if e["kind"] == k)
                    for k in kinds
                    if k not in injected
                },
                **NOT_INJECTED,
            },
            "poison": {"sent": len(chaos.poison_keys), "not_recorded_nor_in_dlq": poison_lost},
            "replayed": chaos.replayed,
            "settle_seconds": settle_seconds,
            "queue_at_end": queue_left,
            "negative_control": control,
            "reconciliation": rec.as_dict(),
            "sender_log": str(state / "chaos-sender.jsonl"),
        }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(render(report))
        print(f"\nreport: {out}")
    failed = rec.failed() or bool(poison_lost) or settle_seconds is None
    if failed:
        why = [
            k
            for k in (
                "lost",
                "double_applied",
                "out_of_order_applied",
                "watermark_mismatches",
                "recorded_after_4xx",
                "applied_without_ledger",
            )
            if rec.as_dict()[k] not in (0, "not measured")
        ]
        if settle_seconds is None:
            why.append(f"queue not settled within {args.settle_timeout:.0f} s: {queue_left}")
        if poison_lost:
            why.append(f"poison not recorded nor in the DLQ: {poison_lost}")
        print(
            f"webhook-pipeline chaos: the proof FAILED: {', '.join(why)}; examples: "
            f"{json.dumps(rec.examples)}",
            file=sys.stderr,
        )
    return 1 if failed else 0


__all__ = ["register", "run"]
