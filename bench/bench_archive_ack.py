"""The acknowledgement with the archive against the code before it (not a test).

The archive (issue 23) is written by the processor, never on the acknowledgement's path; what
ingest does more is fill three envelope fields (``provider``, ``verified_with`` and the headers
the provider signs). This benchmark runs the warm ingest handler of two trees side by side in one
run: ``before`` is the commit before the archive (:data:`BASELINE`, extracted with
``git archive`` into a temporary directory), ``after`` is this tree. Each runs in its own worker
process (the two import the same package names), with its own moto server and one shared
redis-server, all started here and stopped by their PIDs.

Rounds alternate (before/after, then after/before, ...); in each, a worker answers ``N`` new
signed GitHub deliveries, then the same ``N`` again as duplicates, and reports each request's
wall and CPU (``time.process_time``) time. The figures are the medians over rounds of each
round's p50, and the ratio after/before of those: on a shared, noisy machine a ratio of two
variants measured in turn is what to read. Target: at most 1.02 for a new delivery. The size of
the SQS message (the envelope) is reported for both.

Run: ``.venv/bin/python bench/bench_archive_ack.py`` (``--quick``: fewer rounds, written to
``bench/results/archive_ack.quick.json``, git-ignored). Figures go to
``bench/results/archive_ack.json``.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
QUICK = "--quick" in sys.argv
#: The last commit before the archive: the acknowledgement as it was.
BASELINE = "e1d8d10"
N_PER_ROUND = 100 if QUICK else 300
ROUNDS = 2 if QUICK else 8
N_COUNTED = 50 if QUICK else 200
SOURCE = "github"
RESULTS = ROOT / "bench" / "results" / ("archive_ack.quick.json" if QUICK else "archive_ack.json")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on port {port}")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- worker: one tree's ingest handler, driven over stdin/stdout ---------------------------------

COUNTER_C = r"""
#include <valgrind/callgrind.h>
void wp_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void wp_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT("requests"); }
"""


class Counter:
    """Instructions executed between :meth:`start` and :meth:`stop` (callgrind client requests
    through a small C library, ``lib``; ``None`` when the worker does not run under callgrind)."""

    def __init__(self, lib: str | None) -> None:
        import ctypes

        self.lib = ctypes.CDLL(lib) if lib else None
        self.out = Path(os.environ.get("BENCH_CALLGRIND_OUT", "."))

    def start(self) -> None:
        if self.lib is not None:
            self.lib.wp_start()

    def stop(self) -> int | None:
        if self.lib is None:
            return None
        before = set(self.out.parent.glob(self.out.name + "*"))
        self.lib.wp_stop()
        (dump,) = set(self.out.parent.glob(self.out.name + "*")) - before
        for line in dump.read_text().splitlines():
            if line.startswith("totals:"):  # the header's ``summary:`` is 0 in a client dump
                return int(line.split()[1])
        raise RuntimeError(f"no total in {dump}")


def worker(tree: Path, moto_port: int, redis_port: int) -> None:
    """Serve ``new N`` / ``dup`` commands with ``tree``'s ingest handler (one JSON line each)."""
    for path in (tree, tree / "ops", tree / "layers" / "common", tree / "functions" / "ingest"):
        sys.path.insert(0, str(path))
    os.environ.update(
        {
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{moto_port}",
            "POWERTOOLS_SERVICE_NAME": "ingest",
            "POWERTOOLS_METRICS_NAMESPACE": "WebhookPipeline",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "GATE_COOLDOWN_SECONDS": "0",
        }
    )
    import boto3

    from tests.integration.ingest_harness import provision

    os.environ.update(provision())
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the handler's log lines and EMF metrics, as CloudWatch would take them
    import app
    from webhook_pipeline_ops.simulator.deliveries import http_api_event, signed_delivery

    assert str(Path(app.__file__).resolve()).startswith(str(tree.resolve())), app.__file__
    source = app.SOURCES[SOURCE]
    sqs = boto3.client("sqs")

    class Ctx:
        function_name = "IngestFunction"
        memory_limit_in_mb = 512
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:IngestFunction"
        function_version = "$LATEST"
        aws_request_id = "bench"

        @staticmethod
        def get_remaining_time_in_millis() -> int:
            return 10_000

    events: list[dict[str, Any]] = []
    counter = Counter(os.environ.get("BENCH_CALLGRIND_LIB"))

    def timed(batch: list[dict[str, Any]]) -> dict[str, Any]:
        walls, cpus, statuses = [], [], []
        counter.start()
        for event in batch:
            c0, w0 = time.process_time(), time.perf_counter()
            response = app.lambda_handler(event, Ctx())
            w1, c1 = time.perf_counter(), time.process_time()
            walls.append(w1 - w0)
            cpus.append(c1 - c0)
            statuses.append(response["statusCode"])
        instructions = counter.stop()
        return {"walls": walls, "cpus": cpus, "statuses": statuses, "instructions": instructions}

    for line in sys.stdin:
        command = line.split()
        if command[0] == "new":
            events = [http_api_event(signed_delivery(source)) for _ in range(int(command[1]))]
            print(json.dumps(timed(events)), file=out)
        elif command[0] == "dup":
            print(json.dumps(timed(events)), file=out)
        elif command[0] == "envelope":
            url = os.environ["QUEUE_URL"]
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"][0]
            print(json.dumps({"bytes": len(got["Body"].encode()), "body": got["Body"]}), file=out)
            sqs.purge_queue(QueueUrl=url)


# --- parent ------------------------------------------------------------------------------------


class Worker:
    def __init__(self, name: str, tree: Path, redis_port: int, counting: Path | None) -> None:
        self.name = name
        self.moto_port = free_port()
        self.moto = subprocess.Popen(
            [str(Path(PY).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(self.moto_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.moto_port)
        command = [PY, __file__, "--worker", str(tree), str(self.moto_port), str(redis_port)]
        env = dict(os.environ)
        if counting is not None:
            out = counting / f"{name}.cg"
            env |= {"BENCH_CALLGRIND_LIB": str(counting / "counter.so")}
            env |= {"BENCH_CALLGRIND_OUT": str(out)}
            command = [
                *("valgrind", "--tool=callgrind", "--instr-atstart=no"),
                *(f"--callgrind-out-file={out}", "--dump-instr=no"),
                *command,
            ]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if counting is not None else None,
            text=True,
            cwd=tree,
            env=env,
        )

    def ask(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"worker {self.name} ended (exit {self.proc.wait()})")
        result: dict[str, Any] = json.loads(answer)
        return result

    def stop(self) -> None:
        for proc in (self.proc, self.moto):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def baseline_tree(into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", BASELINE, "layers", "functions", "ops", "tests"],
        check=True,
        capture_output=True,
    ).stdout
    tree = into / "before"
    tree.mkdir()
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(tree, filter="data")
    return tree


def compile_counter(into: Path) -> Path | None:
    """The callgrind client-request library, or ``None`` without valgrind or its header."""
    if shutil.which("valgrind") is None or not Path("/usr/include/valgrind/callgrind.h").exists():
        return None
    (into / "counter.c").write_text(COUNTER_C)
    subprocess.run(
        ["cc", "-O2", "-shared", "-fPIC", "-o", str(into / "counter.so"), str(into / "counter.c")],
        check=True,
    )
    return into


def measure(
    trees: dict[str, Path], redis_port: int, counting: Path | None, rounds: int, n: int
) -> tuple[dict[str, dict[str, list[dict[str, float]]]], dict[str, int]]:
    """Per round and variant, the p50s (and instructions per request when counting)."""
    workers: dict[str, Worker] = {}
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {"new": [], "duplicate": []} for name in trees
    }
    envelopes: dict[str, int] = {}
    try:
        workers = {name: Worker(name, tree, redis_port, counting) for name, tree in trees.items()}
        for name, w in workers.items():  # warm: connections, secrets, imports
            w.ask("new 30")
            w.ask("dup")
            envelopes[name] = w.ask("envelope")["bytes"]
        for round_ in range(rounds):
            order = list(workers) if round_ % 2 == 0 else list(reversed(workers))
            for name in order:
                for kind, command in (("new", f"new {n}"), ("duplicate", "dup")):
                    got = workers[name].ask(command)
                    expected = 202 if kind == "new" else 200
                    assert set(got["statuses"]) == {expected}, (name, kind, got["statuses"][:5])
                    sample = {"wall_p50": pct(got["walls"], 0.5), "cpu_p50": pct(got["cpus"], 0.5)}
                    if got["instructions"] is not None:
                        sample["instructions"] = got["instructions"] / n
                    samples[name][kind].append(sample)
            print(f"round {round_ + 1}/{rounds}", file=sys.stderr)
    finally:
        for w in workers.values():
            w.stop()
    return samples, envelopes


def summarise(samples: dict[str, dict[str, list[dict[str, float]]]], stats: tuple[str, ...]) -> Any:
    summary = {
        name: {
            kind: {stat: statistics.median(r[stat] for r in rounds) for stat in stats}
            for kind, rounds in kinds.items()
        }
        for name, kinds in samples.items()
    }
    ratios = {
        kind: {
            stat: round(summary["after"][kind][stat] / summary["before"][kind][stat], 3)
            for stat in stats
        }
        for kind in ("new", "duplicate")
    }
    return summary, ratios


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    redis_port = free_port()
    redis = subprocess.Popen(
        [
            *(shutil.which("redis-server") or "redis-server", "--port", str(redis_port)),
            *("--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
        ],
        stdout=subprocess.DEVNULL,
    )
    result: dict[str, Any] = {
        "command": "python bench/bench_archive_ack.py" + (" --quick" if QUICK else ""),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "setup": {
            "baseline": BASELINE,
            "provider": SOURCE,
            "requests_per_round": N_PER_ROUND,
            "rounds": ROUNDS,
            "counted_requests": N_COUNTED,
        },
        "target": {"new_ratio_at_most": 1.02},
    }
    with tempfile.TemporaryDirectory() as tmp:
        try:
            wait_port(redis_port)
            trees = {"before": baseline_tree(Path(tmp)), "after": ROOT}
            counting = compile_counter(Path(tmp))
            if counting is not None:
                samples, _ = measure(trees, redis_port, counting, 1, N_COUNTED)
                summary, ratios = summarise(samples, ("instructions",))
                result["instructions_per_request"] = {
                    name: {kind: round(v["instructions"]) for kind, v in kinds.items()}
                    for name, kinds in summary.items()
                }
                result["instructions_ratio_after_over_before"] = ratios
            samples, envelopes = measure(trees, redis_port, None, ROUNDS, N_PER_ROUND)
            summary, ratios = summarise(samples, ("wall_p50", "cpu_p50"))
            result["per_request_ms"] = {
                name: {
                    kind: {k: round(v * 1000, 4) for k, v in st.items()}
                    for kind, st in kinds.items()
                }
                for name, kinds in summary.items()
            }
            result["timed_ratio_after_over_before"] = ratios
            result["envelope_bytes"] = envelopes
        finally:
            redis.terminate()
            redis.wait(timeout=10)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    shown = {k: v for k, v in result.items() if "ratio" in k or k == "envelope_bytes"}
    print(json.dumps(shown, indent=1))


if __name__ == "__main__":
    main()
