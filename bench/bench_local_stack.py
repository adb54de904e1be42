"""Local stack benchmark (not a test): the deliveries the local stack holds, measured from outside.

Starts ``webhook-pipeline local run`` of a checkout (``--repo``, default this one; its own
``.venv``) on free ports with its own redis-server, then sends ``--count`` Stripe deliveries
(2,000 by default) through the simulator at ``--concurrency`` concurrent senders (8), as fast as
the stack acknowledges them, and reports:

* accepted/s over the first and the last thousand deliveries (by completion order) and their
  ratio (the stack slowing as its state grows shows here);
* ack latency p50/p99 (ms), answers by status;
* the stack's resident memory (the stack process and every process below it: workers, moto,
  redis-server), sampled every second: peak and at the end;
* the time until the processor has settled every message (main queue empty, nothing in flight).

``--max-rss-gb`` (6) stops the run when the stack's memory passes it (the machine is shared):
the figures then cover the deliveries answered so far and ``stopped`` says why.

Figures are merged into bench/results/local_stack.json under ``--label`` (``before``: main's
code, ``after``: this branch) and printed. Run ``--repo /path/to/main --label before`` to
measure a checkout without changing it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "local_stack.json"
sys.path.insert(0, str(ROOT / "ops"))
sys.path.insert(0, str(ROOT / "layers" / "common"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants (bytes; Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def start_stack(repo: Path, state: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    python = repo / ".venv" / "bin" / "python"
    port = free_port()
    command = [str(python), "-m", "webhook_pipeline_ops.cli", "local", "run",
               "--state-dir", str(state), "--port", str(port),
               "--parameter", f"PublicBaseUrl=http://127.0.0.1:{port}"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AWS_ENDPOINT_URL")}
    log = (state / "stack.log").open("wb")
    process = subprocess.Popen(
        command, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the stack exited: {(state / 'stack.log').read_text()[-3000:]}")
        with contextlib.suppress(OSError, ValueError):
            ready = json.loads((state / "ready").read_text())
            with urllib.request.urlopen(ready["health_url"], timeout=1) as response:
                if response.status == 200:
                    return process, ready
        time.sleep(0.2)
    process.kill()
    raise SystemExit("the stack was not ready within 180 s")


def queue_settled(outputs: dict[str, Any]) -> bool:
    import boto3

    sqs = boto3.client(
        "sqs",
        endpoint_url=outputs["EndpointUrl"],
        region_name=outputs["Region"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    attrs = sqs.get_queue_attributes(
        QueueUrl=outputs["MainQueueUrl"],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        int(attrs["ApproximateNumberOfMessages"])
        + int(attrs["ApproximateNumberOfMessagesNotVisible"])
        == 0
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run(
    repo: Path, count: int, concurrency: int, settle_timeout: float, max_rss: float
) -> dict[str, Any]:
    from webhook_pipeline_ops.simulator import sender
    from webhook_pipeline_ops.simulator.deliveries import example_sources

    with tempfile.TemporaryDirectory(prefix="bench-local-stack-") as tmp:
        state = Path(tmp)
        process, _ready = start_stack(repo, state)
        outputs = json.loads((state / "outputs.json").read_text())
        secrets = {
            name: entry["secret"]
            for name, entry in json.loads((state / "secrets.json").read_text())["sources"].items()
        }
        base_url = outputs["ApiUrl"]
        rss_samples: list[int] = []
        stop_sampling = threading.Event()
        abort = threading.Event()
        stopped: list[str] = []

        def sample() -> None:
            while not stop_sampling.is_set():
                rss_samples.append(tree_rss_bytes(process.pid))
                if rss_samples[-1] > max_rss and not abort.is_set():
                    stopped.append(
                        f"stack RSS passed {max_rss / 2**30:.1f} GB after "
                        f"{len(done_at)} deliveries ({time.perf_counter() - started:.0f} s)"
                    )
                    abort.set()
                stop_sampling.wait(1.0)

        done_at: list[float] = []
        started = time.perf_counter()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        planned = sender.plan(
            [example_sources(None)["stripe"]],
            count=count,
            resources=max(1, count // 10),
            rng=random.Random(7),
            base_url=base_url,
        )
        statuses: dict[str, int] = {}
        latencies: list[float] = []
        lock = threading.Lock()

        def job(p: Any) -> None:
            if abort.is_set():
                return
            result = sender.deliver(
                p, base_url=base_url, secret=secrets["stripe"], timeout=30.0, retries=0
            )
            with lock:
                done_at.append(time.perf_counter())
                key = str(result.final.status)
                statuses[key] = statuses.get(key, 0) + 1
                if result.final.status is not None:
                    latencies.append(result.final.latency_ms)

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(job, planned))
        elapsed = time.perf_counter() - started
        settle_started = time.perf_counter()
        settled = None
        while not abort.is_set() and time.perf_counter() - settle_started < settle_timeout:
            with contextlib.suppress(Exception):
                if queue_settled(outputs):
                    settled = round(time.perf_counter() - settle_started, 1)
                    break
            time.sleep(1.0)
        rss_end = tree_rss_bytes(process.pid)
        stop_sampling.set()
        sampler.join()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    done_at.sort()
    window = min(1000, len(done_at) // 2)

    def rate(times: list[float], origin: float) -> float:
        return round(len(times) / max(1e-9, times[-1] - origin), 1)

    if window < 1:
        raise SystemExit(f"no deliveries answered: {stopped}")
    first = rate(done_at[:window], started)
    last = rate(done_at[-window:], done_at[-window - 1] if len(done_at) > window else started)
    return {
        "deliveries": count,
        "answered": len(done_at),
        "stopped": stopped[0] if stopped else None,
        "concurrency": concurrency,
        "window": window,
        "elapsed_seconds": round(elapsed, 1),
        "accepted_per_second_overall": round(statuses.get("202", 0) / elapsed, 1),
        "rss_mb_samples_every_30_s": [round(r / 2**20) for r in rss_samples[::30]],
        "accepted_per_second_first_window": first,
        "accepted_per_second_last_window": last,
        "last_over_first": round(last / first, 2),
        "ack_ms_p50": round(statistics.median(latencies), 1) if latencies else None,
        "ack_ms_p99": round(pct(latencies, 99), 1) if latencies else None,
        "answers": statuses,
        "stack_rss_mb_peak": round(max(rss_samples or [rss_end]) / 2**20),
        "stack_rss_mb_end": round(rss_end / 2**20),
        "settle_seconds_after_last_ack": settled,
        "settle_timeout_seconds": settle_timeout,
    }


def sqs_send_by_depth(patched: bool, depths: tuple[int, ...]) -> dict[str, float]:
    """ms per SendMessage (in-process moto, 2 KB body, one attribute) at each queue depth, with
    or without the local stack's moto patches."""
    import boto3
    from moto import mock_aws
    from webhook_pipeline_ops.local import moto_patches

    figures: dict[str, float] = {}
    with mock_aws(), moto_patches.patched() if patched else contextlib.nullcontext():
        sqs = boto3.client(
            "sqs",
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        )
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        attrs = {"delivery_id": {"DataType": "String", "StringValue": "evt_1"}}
        depth = 0
        for target in depths:
            while depth < target:
                batch = min(10, target - depth)
                entries = [{"Id": str(i), "MessageBody": "x" * 2000} for i in range(batch)]
                sqs.send_message_batch(QueueUrl=url, Entries=entries)
                depth += batch
            started = time.perf_counter()
            for _ in range(50):
                sqs.send_message(QueueUrl=url, MessageBody="x" * 2000, MessageAttributes=attrs)
            depth += 50
            figures[str(target)] = round((time.perf_counter() - started) / 50 * 1000, 2)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout to run the stack from")
    parser.add_argument("--label", default="after", help="key in local_stack.json")
    parser.add_argument("--settle-timeout", type=float, default=300.0)
    parser.add_argument("--max-rss-gb", type=float, default=6.0)
    parser.add_argument(
        "--sqs-send",
        action="store_true",
        help="only measure moto's SendMessage by queue depth, with and without the patches",
    )
    args = parser.parse_args()
    if args.sqs_send:
        doc = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        doc["moto_send_message_ms_by_queue_depth"] = {
            "moto": sqs_send_by_depth(False, (0, 500, 1500)),
            "patched": sqs_send_by_depth(True, (0, 500, 1500, 10000)),
        }
        RESULTS.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(json.dumps(doc["moto_send_message_ms_by_queue_depth"], indent=2))
        return 0
    repo = args.repo.resolve()
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    figures = run(repo, args.count, args.concurrency, args.settle_timeout, args.max_rss_gb * 2**30)
    figures.update(
        commit=commit,
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        machine=f"{platform.machine()}, {os.cpu_count()} cores (shared), Python "
        f"{platform.python_version()}",
    )
    doc: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        doc = json.loads(RESULTS.read_text())
    doc[args.label] = figures
    RESULTS.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(json.dumps({args.label: figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
