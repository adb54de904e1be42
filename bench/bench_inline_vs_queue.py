"""Why a queue: processing inline turns a slow downstream into duplicate deliveries.

A webhook sender waits ``--timeout`` seconds (2 s by default) for an answer and retries on a
timeout or any non-2xx answer on its own schedule (``--retry-delays``, seconds before each
retry; 0.25, 0.5, 1 by default: four attempts). It sends the same signed GitHub delivery (same
delivery id) every time. Three receivers, each its own process behind a local HTTP server, do the
same processing: check a "done" mark, wait the downstream delay D (a call to a slow system),
append the delivery id to an append-only ledger (one entry per processing: what "processed
twice" means, I9), set the mark.

- ``inline``  (A): processes, then answers 200. A retry that arrives while the first attempt is
  still processing finds no mark yet and processes again.
- ``inline+lock`` (A'): the same, with a processing lock (``SET lock NX EX``): a retry that finds
  the lock answers 409, so the sender counts a failed attempt instead of a second processing.
- ``queue`` (B): the real ingest function (functions/ingest/app.py, loaded as the tests do)
  behind the same HTTP-to-API-Gateway-event mapping as the local stack, against a real
  redis-server (the gate) and a moto server subprocess (SQS, S3, Secrets Manager over HTTP, as in
  AWS); a processor process consumes the queue like the event source mapping (batches of 10,
  10 concurrent batches, records of a batch one after the other, delete after processing) and
  does the same processing with the same D.

Every process is separate (sender, receiver, processor, Redis, moto), so no two share an
interpreter lock. Webhooks are sent open-loop at ``--rate`` per second, each by its own sender
thread. Reported per receiver and D:

- ``duplicate_processings_per_100``: ledger entries beyond the first per delivery, per 100;
- ``gave_up_per_100``: deliveries the sender never saw a 2xx for after its last attempt;
- ``ack_p50_ms`` / ``ack_p99_ms``: per attempt, the time until the sender had an answer or
  stopped waiting (a timed-out attempt counts as the time it waited);
- attempts, timeouts and non-2xx answers per 100, deliveries processed at least once per 100,
  deliveries acknowledged but never processed (must be 0), and
  the time until the last processing ended (the queue still takes D per delivery: it moves the
  wait off the sender, it does not make the downstream faster).

    .venv/bin/python bench/bench_inline_vs_queue.py            # full: 100 webhooks per D
    .venv/bin/python bench/bench_inline_vs_queue.py --quick    # 20 webhooks per D

Writes bench/results/inline_vs_queue.json (with the command and the machine) and
docs/inline-vs-queue.png, and prints the table (Markdown); ``--quick`` writes
inline_vs_queue.quick.json and inline-vs-queue.quick.png in bench/results/ instead (git-ignored),
so the committed figures stay the full run's.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import http.client
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "inline_vs_queue.json"
PLOT = ROOT / "docs" / "inline-vs-queue.png"
QUICK_PLOT = ROOT / "bench" / "results" / "inline-vs-queue.quick.png"
DELAYS = (0.1, 0.5, 1.0, 2.0, 3.0, 5.0)
MODES = ("inline", "inline+lock", "queue")
REGION = "us-east-1"
SECRETS_PREFIX = "webhook-pipeline/bench/"
LOCK_TTL_SECONDS = 60


# ------------------------------------------------------------------------------ shared pieces


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on port {port}") from None
            time.sleep(0.05)


def redis_client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=5)


def process_delivery(store: Any, run: str, delivery_id: str, delay: float) -> bool:
    """The processing every receiver does: check the mark, the downstream call, ledger, mark.

    Returns False when the mark says the delivery was processed already.
    """
    if store.exists(f"{run}:done:{delivery_id}"):
        return False
    store.incr(f"{run}:inflight")
    try:
        time.sleep(delay)  # the downstream call (an API, a database, a payment system)
        store.rpush(f"{run}:ledger", delivery_id)
        store.set(f"{run}:done:{delivery_id}", 1)
    finally:
        store.decr(f"{run}:inflight")
    return True


# ------------------------------------------------------------------------------ receivers A, A'


def serve_inline(args: argparse.Namespace) -> None:
    """Receiver A (``--lock``: A'): verify the GitHub signature, process inline, then answer."""
    store = redis_client(args.redis)
    secret = args.secret.encode()
    lock = args.mode == "inline+lock"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *a: Any) -> None:
            pass

        def answer(self, status: int, doc: dict[str, str]) -> None:
            body = json.dumps(doc).encode()
            with contextlib.suppress(OSError):  # the sender may have stopped waiting
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(expected, self.headers.get("x-hub-signature-256", "")):
                self.answer(401, {"status": "rejected"})
                return
            delivery_id = self.headers["x-github-delivery"]
            if lock:
                if store.exists(f"{args.run}:done:{delivery_id}"):
                    self.answer(200, {"status": "duplicate"})
                    return
                token = uuid.uuid4().hex
                key = f"{args.run}:lock:{delivery_id}"
                if not store.set(key, token, nx=True, ex=LOCK_TTL_SECONDS):
                    self.answer(409, {"status": "in_progress"})
                    return
                try:
                    processed = process_delivery(store, args.run, delivery_id, args.delay)
                finally:
                    if store.get(key) == token.encode():
                        store.delete(key)
            else:
                processed = process_delivery(store, args.run, delivery_id, args.delay)
            self.answer(200, {"status": "processed" if processed else "duplicate"})

    run_server(args, Handler)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


def ready(args: argparse.Namespace, port: int) -> None:
    """Tell the parent this process serves (on ``port``; 0 for the processor)."""
    Path(args.ready_file).write_text(str(port))


def run_server(args: argparse.Namespace, handler: type[BaseHTTPRequestHandler]) -> None:
    server = _Server(("127.0.0.1", 0), handler)
    ready(args, int(server.server_address[1]))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()


# ------------------------------------------------------------------------------ receiver B


def serve_queue(args: argparse.Namespace) -> None:
    """Receiver B: the real ingest function behind the local stack's HTTP-to-event mapping.

    One warm instance (invocations one at a time, as one Lambda execution environment).
    """
    import importlib.util

    from webhook_pipeline_ops.local.http_gateway import build_event, response_from_result
    from webhook_pipeline_ops.local.runtime import FakeLambdaContext

    spec = importlib.util.spec_from_file_location(
        "bench_ingest_app", ROOT / "functions" / "ingest" / "app.py"
    )
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    instance = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *a: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            source = self.path.rstrip("/").rsplit("/", 1)[-1]
            event = build_event(
                method="POST",
                target=self.path,
                headers=list(self.headers.items()),
                body=body,
                route_key="POST /webhooks/{source}",
                path_parameters={"source": source},
                source_ip=self.client_address[0],
                host=self.headers.get("host") or "127.0.0.1",
            )
            context = FakeLambdaContext(
                function_name="IngestFunction",
                memory_limit_in_mb=512,
                invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:ingest",
                timeout_seconds=5,
            )
            with instance:
                result = app.lambda_handler(event, context)
            status, headers, out = response_from_result(result)
            with contextlib.suppress(OSError):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

    run_server(args, Handler)


def run_processor(args: argparse.Namespace) -> None:
    """The consumer of B: receive batches like the event source mapping, process, delete."""
    import boto3

    store = redis_client(args.redis)
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=args.endpoint)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def poller() -> None:
        while not stop.is_set():
            got = sqs.receive_message(
                QueueUrl=args.queue_url, MaxNumberOfMessages=args.batch_size, WaitTimeSeconds=1
            )
            done = []
            for message in got.get("Messages", []):
                envelope = json.loads(message["Body"])
                process_delivery(store, args.run, envelope["delivery_id"], args.delay)
                done.append(message)
            if done:
                sqs.delete_message_batch(
                    QueueUrl=args.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(done)
                    ],
                )

    threads = [threading.Thread(target=poller, daemon=True) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    ready(args, 0)
    for t in threads:
        t.join()


# ------------------------------------------------------------------------------ the sender


@dataclass
class Attempt:
    seconds: float
    status: int | None  # None: timed out or connection error
    timed_out: bool


@dataclass
class Delivery:
    delivery_id: str
    body: bytes
    headers: dict[str, str]
    attempts: list[Attempt] = field(default_factory=list)
    acknowledged_after: float | None = None  # seconds from the first attempt to the 2xx

    @property
    def gave_up(self) -> bool:
        return self.acknowledged_after is None


def post(port: int, delivery: Delivery, timeout: float) -> Attempt:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", "/webhooks/github", body=delivery.body, headers=delivery.headers)
        response = connection.getresponse()
        response.read()
        return Attempt(time.perf_counter() - started, response.status, False)
    except TimeoutError:
        return Attempt(time.perf_counter() - started, None, True)
    except OSError:
        return Attempt(time.perf_counter() - started, None, False)
    finally:
        connection.close()


def deliver(port: int, delivery: Delivery, timeout: float, retry_delays: Sequence[float]) -> None:
    """Send until a 2xx or the schedule is used up (a timeout or non-2xx means: retry)."""
    first = time.perf_counter()
    for attempt in range(1 + len(retry_delays)):
        if attempt:
            time.sleep(retry_delays[attempt - 1])
        result = post(port, delivery, timeout)
        delivery.attempts.append(result)
        if result.status is not None and 200 <= result.status < 300:
            delivery.acknowledged_after = time.perf_counter() - first
            return


def make_deliveries(n: int) -> list[Delivery]:
    from webhook_pipeline_ops.simulator.deliveries import example_sources, signed_delivery

    github = example_sources()["github"]
    out = []
    for _ in range(n):
        sample = signed_delivery(github)
        out.append(Delivery(sample.delivery_id, sample.body, dict(sample.headers)))
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


# ------------------------------------------------------------------------------ orchestration


@contextlib.contextmanager
def child(argv: list[str], env: dict[str, str], log: Path) -> Iterator[int]:
    """Start a process of this script (its output to ``log``); yield the port it serves on once
    it is ready; stop it by its PID."""
    ready_file = log.with_suffix(".ready")
    ready_file.unlink(missing_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, __file__, *argv, "--ready-file", str(ready_file)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready_file.exists() or not ready_file.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield int(ready_file.read_text())
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def server_process(argv: list[str], port: int, log: Path) -> Iterator[None]:
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process)
        yield
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@dataclass
class Services:
    redis_url: str
    endpoint: str
    queue_url: str
    workdir: Path


@contextlib.contextmanager
def services(workdir: Path) -> Iterator[Services]:
    """A redis-server and a moto server (queue, bucket, GitHub dev secret), stopped after."""
    import boto3
    from webhook_pipeline_ops.simulator.deliveries import dev_secret_value

    redis_port, moto_port = free_port(), free_port()
    redis_server = shutil.which("redis-server") or "redis-server"
    moto = Path(sys.executable).parent / "moto_server"
    moto_cmd = [str(moto)] if moto.exists() else [sys.executable, "-m", "moto.server"]
    with (
        server_process(
            [redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"],
            redis_port, workdir / "redis.log",
        ),
        server_process(
            [*moto_cmd, "-H", "127.0.0.1", "-p", str(moto_port)], moto_port, workdir / "moto.log"
        ),
    ):  # fmt: skip
        endpoint = f"http://127.0.0.1:{moto_port}"
        sqs = boto3.client("sqs", region_name=REGION, endpoint_url=endpoint)
        queue_url = sqs.create_queue(QueueName="main", Attributes={"VisibilityTimeout": "390"})[
            "QueueUrl"
        ]
        boto3.client("s3", region_name=REGION, endpoint_url=endpoint).create_bucket(
            Bucket="payloads"
        )
        boto3.client("secretsmanager", region_name=REGION, endpoint_url=endpoint).create_secret(
            Name=f"{SECRETS_PREFIX}github", SecretString=dev_secret_value("github")
        )
        yield Services(f"redis://127.0.0.1:{redis_port}/0", endpoint, queue_url, workdir)


def child_env(svc: Services) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_"))},
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": svc.endpoint,
        # the ingest function's configuration, as template.yaml sets it
        "QUEUE_URL": svc.queue_url,
        "PAYLOAD_BUCKET": "payloads",
        "SECRETS_PREFIX": SECRETS_PREFIX,
        "REDIS_URL": svc.redis_url,
        "CLAIM_TTL_SECONDS": "6",
        "POWERTOOLS_SERVICE_NAME": "bench-ingest",
        "POWERTOOLS_METRICS_NAMESPACE": "WebhookPipeline",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon here
    }


def run_case(
    svc: Services, mode: str, delay: float, n: int, rate: float, timeout: float,
    retry_delays: Sequence[float],
) -> dict[str, Any]:  # fmt: skip
    """Send ``n`` webhooks to a fresh receiver of ``mode`` with downstream delay ``delay``."""
    from webhook_pipeline_ops.simulator.deliveries import DEV_SECRETS

    run = f"{mode}:{delay}:{uuid.uuid4().hex[:8]}"
    store = redis_client(svc.redis_url)
    env = child_env(svc)
    common = ["--run", run, "--delay", str(delay), "--redis", svc.redis_url]
    log = svc.workdir / f"{mode.replace('+', '-')}-{delay}"
    with contextlib.ExitStack() as stack:
        if mode == "queue":
            stack.enter_context(
                child(
                    ["process", *common, "--endpoint", svc.endpoint, "--queue-url", svc.queue_url],
                    env,
                    log.with_name(log.name + "-processor.log"),
                )
            )
            port = stack.enter_context(
                child(["serve", "--mode", mode, *common], env, log.with_name(log.name + ".log"))
            )
        else:
            port = stack.enter_context(
                child(
                    ["serve", "--mode", mode, *common, "--secret", DEV_SECRETS["github"]],
                    env,
                    log.with_name(log.name + ".log"),
                )
            )
        if mode == "queue":
            # one warm instance: its first invocation (clients, the secret read) is a cold
            # start, which bench_cold_start.py measures; not counted here
            (warm,) = make_deliveries(1)
            deliver(port, warm, 30.0, [])
            assert not warm.gave_up, warm.attempts
        deliveries = make_deliveries(n)
        started = time.perf_counter()
        threads = []
        for i, delivery in enumerate(deliveries):
            pause = started + i / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            t = threading.Thread(target=deliver, args=(port, delivery, timeout, retry_delays))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        senders_done = time.perf_counter() - started
        # wait until every accepted delivery is processed and nothing is still processing
        accepted = {d.delivery_id for d in deliveries if not d.gave_up}
        deadline = time.monotonic() + max(120.0, 3 * n * delay)
        while time.monotonic() < deadline:
            processed = {x.decode() for x in store.lrange(f"{run}:ledger", 0, -1)}
            if accepted <= processed and int(store.get(f"{run}:inflight") or 0) == 0:
                break
            time.sleep(0.1)
        processing_done = time.perf_counter() - started
    ledger = [x.decode() for x in store.lrange(f"{run}:ledger", 0, -1)]
    attempts = [a for d in deliveries for a in d.attempts]
    per_100 = 100 / n
    acked = [d.acknowledged_after for d in deliveries if d.acknowledged_after is not None]
    return {
        "mode": mode,
        "delay_s": delay,
        "webhooks": n,
        "duplicate_processings_per_100": round((len(ledger) - len(set(ledger))) * per_100, 1),
        "gave_up_per_100": round(sum(d.gave_up for d in deliveries) * per_100, 1),
        "ack_p50_ms": round(percentile([a.seconds for a in attempts], 50) * 1000, 1),
        "ack_p99_ms": round(percentile([a.seconds for a in attempts], 99) * 1000, 1),
        "attempts_per_100": round(len(attempts) * per_100, 1),
        "timeouts_per_100": round(sum(a.timed_out for a in attempts) * per_100, 1),
        "non_2xx_answers_per_100": round(
            sum(a.status is not None and not 200 <= a.status < 300 for a in attempts) * per_100, 1
        ),
        "acknowledged_but_not_processed": len(accepted - set(ledger)),
        "processed_per_100": round(
            len({d.delivery_id for d in deliveries} & set(ledger)) * per_100, 1
        ),
        "time_to_2xx_p50_ms": round(percentile(acked, 50) * 1000, 1) if acked else None,
        "senders_done_s": round(senders_done, 2),
        "last_processing_done_s": round(processing_done, 2),
    }


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The results as a Markdown table (README, docs)."""

    def seconds(ms: float | None) -> str:
        return "never" if ms is None else f"{ms / 1000:.2f}"

    lines = [
        "| D (s) | receiver | duplicate processings / 100 | sender gave up / 100 | "
        "ack p50 / p99 (ms) | attempts / 100 | 2xx after, p50 (s) | last processed after (s) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['delay_s']:g} | {r['mode']} | {r['duplicate_processings_per_100']:g} | "
            f"{r['gave_up_per_100']:g} | {r['ack_p50_ms']:g} / {r['ack_p99_ms']:g} | "
            f"{r['attempts_per_100']:g} | {seconds(r['time_to_2xx_p50_ms'])} | "
            f"{r['last_processing_done_s']:g} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], timeout: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4), constrained_layout=True)
    styles = {"inline": "o-", "inline+lock": "s--", "queue": "^-"}
    panels = [
        ("duplicate_processings_per_100", "duplicate processings per 100 webhooks"),
        ("gave_up_per_100", "deliveries the sender gave up on, per 100"),
        ("ack_p99_ms", "ack p99 per attempt (ms, log)"),
    ]
    for ax, (key, title) in zip(axes, panels, strict=True):
        for mode in MODES:
            points = sorted((r["delay_s"], r[key]) for r in rows if r["mode"] == mode)
            ax.plot([p[0] for p in points], [p[1] for p in points], styles[mode], label=mode)
        ax.axvline(timeout, color="grey", linewidth=0.8, linestyle=":")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("downstream delay D (s)")
        ax.grid(alpha=0.3)
    axes[2].set_yscale("log")
    axes[0].legend()
    fig.suptitle(f"sender timeout {timeout:g} s (dotted line), same delivery id on every retry")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


def run_all(args: argparse.Namespace, argv: Sequence[str]) -> int:
    n = args.webhooks or (20 if args.quick else 100)
    # fake credentials: every AWS call goes to the moto server started here
    os.environ.pop("AWS_PROFILE", None)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
    retry_delays = [float(x) for x in args.retry_delays.split(",") if x.strip()]
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-inline-vs-queue-") as scratch,
        services(Path(scratch)) as svc,
    ):
        for delay in args.delays:
            for mode in MODES:
                row = run_case(svc, mode, delay, n, args.rate, args.timeout, retry_delays)
                rows.append(row)
                print(json.dumps(row), flush=True)
    results = {
        "command": " ".join(["python", "bench/bench_inline_vs_queue.py", *argv]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "sender": {
            "timeout_s": args.timeout,
            "retry_delays_s": retry_delays,
            "rate_per_s": args.rate,
            "webhooks_per_case": n,
            "retries_on": "timeout, connection error, any non-2xx",
        },
        "receivers": {
            "inline": "process (check mark, sleep D, ledger, mark), then 200",
            "inline+lock": "the same under SET lock NX EX; lock held -> 409",
            "queue": "functions/ingest/app.py (real Redis gate, SQS on a moto server) -> 202; "
            "processor: batches of 10, 10 concurrent, same processing",
        },
        "rows": rows,
        "table_markdown": markdown_table(rows),
    }
    # a quick run never overwrites the committed (full) figures
    out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    if not args.no_plot:
        plot(rows, args.timeout, args.plot or (QUICK_PLOT if args.quick else PLOT))
    print(markdown_table(rows))
    print(f"written to {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role")
    serve = sub.add_parser("serve")
    serve.add_argument("--mode", choices=MODES, required=True)
    serve.add_argument("--secret", default="")
    process = sub.add_parser("process")
    process.add_argument("--endpoint", required=True)
    process.add_argument("--queue-url", required=True)
    process.add_argument("--batch-size", type=int, default=10)
    process.add_argument("--concurrency", type=int, default=10)
    for p in (serve, process):
        p.add_argument("--ready-file", required=True)
        p.add_argument("--run", required=True)
        p.add_argument("--delay", type=float, required=True)
        p.add_argument("--redis", required=True)
    parser.add_argument("--quick", action="store_true", help="20 webhooks per case (default 100)")
    parser.add_argument("--webhooks", type=int, help="webhooks per receiver and D")
    parser.add_argument("--rate", type=float, default=20.0, help="webhooks sent per second")
    parser.add_argument("--timeout", type=float, default=2.0, help="sender timeout, seconds")
    parser.add_argument("--retry-delays", default="0.25,0.5,1", help="seconds before each retry")
    parser.add_argument(
        "--delays", type=lambda s: [float(x) for x in s.split(",")], default=list(DELAYS)
    )
    parser.add_argument("--out", type=Path, help=f"results file (default {RESULTS})")
    parser.add_argument("--plot", type=Path, help=f"plot file (default {PLOT})")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    if args.role == "serve":
        (serve_queue if args.mode == "queue" else serve_inline)(args)
        return 0
    if args.role == "process":
        run_processor(args)
        return 0
    return run_all(args, argv)


if __name__ == "__main__":
    sys.exit(main())
