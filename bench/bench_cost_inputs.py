"""Cost inputs (not a test): what one webhook consumes, measured on the real functions.

``webhook-pipeline cost`` multiplies these by prices (docs/cost.md). Measured here, per delivery
and per invocation, with the real handlers (functions/ingest/app.py, functions/processor/app.py,
loaded as the tests do) against a real redis-server and the local stack's moto server in a
subprocess (SQS, DynamoDB, S3, Secrets Manager over HTTP; DynamoDB requests one at a time), both
started on free ports and stopped after:

- ingest: wall-clock duration of the warm handler (mean, mean billed in whole milliseconds,
  p50, p99) and its CPU time, for accepted and duplicate deliveries, and the bytes the function
  writes to its log per invocation (Powertools log lines and EMF metric lines, counted
  separately);
- the envelope as it sits on the queue (body + message attributes, bytes: SQS bills 64 KiB
  chunks);
- processor: duration and CPU time per invocation for batches of 1 and of 10, and log bytes per
  invocation. Its wall time here is moto's, not DynamoDB's: moto copies the whole table for each
  ``TransactWriteItems``, so a transaction takes longer the more items the table holds. The cost
  model therefore takes the processor's CPU time from here and adds a DynamoDB latency per
  invocation as a parameter (the records of a batch are written concurrently);
- DynamoDB: the size of each item the processor writes (DynamoDB's item size rules: attribute
  names plus values), hence write units per delivery;
- Redis: ``MEMORY USAGE`` of a done claim (bytes per accepted delivery while its TTL runs);
- the distinct EMF metrics (name + dimensions) the functions emitted.

Two sources: Stripe (resource key and sequence: the processor's two-item transaction) and
GitHub (no ordering: one conditional put). Tracing is off (no X-Ray daemon here); the Lambda
platform lines (START, END, REPORT) are not written by the handler and are added by the cost
model. Durations are this machine's against emulators, not AWS latencies: docs/cost.md shows
what they weigh and ``webhook-pipeline cost`` takes overrides.

    .venv/bin/python bench/bench_cost_inputs.py [--quick]

Writes bench/results/cost_inputs.json (with the command and the machine; ``--quick``:
cost_inputs.quick.json, git-ignored) and prints it.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib.util
import json
import math
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "cost_inputs.json"
REGION = "us-east-1"
SECRETS_PREFIX = "webhook-pipeline/bench/"
NAMES = {"queue": "main", "table": "deliveries", "bucket": "payloads"}
# The local stack's moto server, in its own process: it serializes DynamoDB requests, because
# moto answers concurrent TransactWriteItems with HTTP 500 now and then (the processor writes a
# batch's resources from a thread pool), and the retries would be measured as processor time.
MOTO_SERVER = (
    "import signal, sys\n"
    "from webhook_pipeline_ops.local.moto_server import LocalMotoServer\n"
    "LocalMotoServer(ip_address='127.0.0.1', port=int(sys.argv[1])).start()\n"
    "signal.sigwait({signal.SIGTERM, signal.SIGINT})\n"
)


# ------------------------------------------------------------------------------ sizes


def attribute_size(value: dict[str, Any]) -> int:
    """Bytes DynamoDB counts for one attribute value (low-level JSON form)."""
    (kind, v), *_ = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        digits = Decimal(v).normalize().as_tuple().digits
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(base64.b64decode(v)) if isinstance(v, str) else len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(x.encode()) for x in v)
    if kind == "NS":
        return sum(attribute_size({"N": x}) for x in v)
    if kind == "L":
        return 3 + sum(1 + attribute_size(x) for x in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + attribute_size(x) for k, x in v.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, dict[str, Any]]) -> int:
    """DynamoDB item size in bytes: attribute names (UTF-8) plus their values."""
    return sum(len(name.encode()) + attribute_size(value) for name, value in item.items())


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "n": len(ms),
        "mean_ms": round(statistics.fmean(ms), 3),
        "billed_mean_ms": round(statistics.fmean(math.ceil(x) for x in ms), 3),
        "p50_ms": round(ms[len(ms) // 2], 3),
        "p99_ms": round(ms[min(len(ms) - 1, math.ceil(0.99 * len(ms)) - 1)], 3),
    }


# ------------------------------------------------------------------------------ the child


def stdout_bytes() -> int:
    sys.stdout.flush()
    return os.fstat(sys.stdout.fileno()).st_size


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"bench_{name}_app", ROOT / "functions" / name / "app.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(args: argparse.Namespace) -> None:
    """Run in a child whose stdout is a file: the functions' log lines land there."""
    import boto3
    import redis
    from webhook_pipeline_ops.local.poller import sqs_record
    from webhook_pipeline_ops.local.runtime import FakeLambdaContext
    from webhook_pipeline_ops.simulator.deliveries import (
        example_sources,
        http_api_event,
        signed_delivery,
    )

    n = args.n
    phases: dict[str, dict[str, Any]] = {}

    def context(function: str) -> Any:
        return FakeLambdaContext(
            function_name=function,
            memory_limit_in_mb=512,
            invoked_function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:{function}",
            timeout_seconds=60,
        )

    def phase(name: str, handler: Any, events: list[Any], function: str) -> list[Any]:
        before = stdout_bytes()
        durations, cpu, results = [], [], []
        for event in events:
            started, cpu_started = time.perf_counter(), time.process_time()
            results.append(handler(event, context(function)))
            cpu.append(time.process_time() - cpu_started)  # every thread of this process
            durations.append(time.perf_counter() - started)
        phases[name] = {
            "invocations": len(events),
            "log_offsets": [before, stdout_bytes()],
            "duration": summary_ms(durations),
            "cpu": summary_ms(cpu),
        }
        return results

    sources = example_sources()
    ingest = load("ingest")
    stripe = [
        http_api_event(signed_delivery(sources["stripe"], resource=f"cus_{i}", sequence=1))
        for i in range(n)
    ]
    github = [http_api_event(signed_delivery(sources["github"])) for _ in range(n)]
    warm = http_api_event(signed_delivery(sources["stripe"], resource="cus_warm", sequence=1))
    phase("ingest_warm_up", ingest.lambda_handler, [warm], "IngestFunction")
    answers = phase("ingest_accepted_stripe", ingest.lambda_handler, stripe, "IngestFunction")
    assert {a["statusCode"] for a in answers} == {202}, answers[:3]
    answers = phase("ingest_duplicate_stripe", ingest.lambda_handler, stripe, "IngestFunction")
    assert {a["statusCode"] for a in answers} == {200}, answers[:3]
    answers = phase("ingest_accepted_github", ingest.lambda_handler, github, "IngestFunction")
    assert {a["statusCode"] for a in answers} == {202}, answers[:3]

    sqs: Any = boto3.client("sqs")
    queue_url = os.environ["QUEUE_URL"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    messages: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=900,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
        ).get("Messages", [])
        if not got:
            break
        messages.extend(got)
    assert len(messages) == 2 * n + 1, len(messages)
    by_source: dict[str, list[dict[str, Any]]] = {"stripe": [], "github": []}
    for m in messages:
        by_source[json.loads(m["Body"])["source"]].append(m)

    def envelope_bytes(m: dict[str, Any]) -> int:
        attributes = sum(
            len(k.encode()) + len(v.get("DataType", "").encode())
            + len((v.get("StringValue") or "").encode()) + len(v.get("BinaryValue") or b"")
            for k, v in (m.get("MessageAttributes") or {}).items()
        )  # fmt: skip
        return len(m["Body"].encode()) + attributes

    envelopes = {
        source: round(statistics.fmean(envelope_bytes(m) for m in ms), 1)
        for source, ms in by_source.items()
    }

    processor = load("processor")

    def batches(ms: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
        return [
            {"Records": [sqs_record(m, queue_arn, REGION) for m in ms[i : i + size]]}
            for i in range(0, len(ms), size)
        ]

    single = max(10, n // 10)
    for source, ms in by_source.items():
        if source == "stripe":  # the warm-up delivery (resource cus_warm) warms the processor
            warm_msg = next(m for m in ms if "cus_warm" in m["Body"])
            ms = [m for m in ms if m is not warm_msg]
            phase("processor_warm_up", processor.lambda_handler, batches([warm_msg], 1), "P")
        results = phase(
            f"processor_batch_1_{source}",
            processor.lambda_handler,
            batches(ms[:single], 1),
            "ProcessorFunction",
        )
        results += phase(
            f"processor_batch_10_{source}",
            processor.lambda_handler,
            batches(ms[single : single + 10 * ((len(ms) - single) // 10)], 10),
            "ProcessorFunction",
        )
        assert all(r == {"batchItemFailures": []} for r in results), results[:3]

    dynamodb = boto3.client("dynamodb")
    items: list[dict[str, Any]] = []
    scan: dict[str, Any] = {"TableName": os.environ["TABLE_NAME"]}
    while True:
        page = dynamodb.scan(**scan)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            break
        scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    kinds: dict[str, list[int]] = {}
    for item in items:
        is_resource = item.get("type", {}).get("S") == "resource"
        kind = "resource" if is_resource else f"delivery_{item['source']['S']}"
        kinds.setdefault(kind, []).append(item_size(item))

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    keys = [k for k in client.scan_iter(match="whd:*", count=1000)]
    memory = [int(client.memory_usage(k) or 0) for k in keys[:200]]

    doc = {
        "phases": phases,
        "envelope_bytes_mean": envelopes,
        "dynamodb_item_bytes": {
            k: {"n": len(v), "mean": round(statistics.fmean(v), 1), "max": max(v)}
            for k, v in kinds.items()
        },
        "redis": {
            "claim_keys": len(keys),
            "memory_usage_bytes_mean": round(statistics.fmean(memory), 1),
            "memory_usage_bytes_max": max(memory),
        },
    }
    Path(args.result_file).write_text(json.dumps(doc))


# ------------------------------------------------------------------------------ the parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(argv: list[str], port: int, log: Path) -> Iterator[None]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[0]} did not start: {log.read_text()}") from None
                time.sleep(0.05)
        yield
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def provision(endpoint: str) -> dict[str, str]:
    """Queue, table (template.yaml's key schema), bucket and dev secrets in the moto server."""
    import boto3
    from webhook_pipeline_ops.simulator.deliveries import DEV_SECRETS, dev_secret_value

    sys.path.insert(0, str(ROOT))
    from tests.helpers import create_deliveries_table

    def client(service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=endpoint)  # type: ignore[call-overload]

    queue_url = client("sqs").create_queue(QueueName=NAMES["queue"])["QueueUrl"]
    create_deliveries_table(client("dynamodb"), NAMES["table"])
    client("s3").create_bucket(Bucket=NAMES["bucket"])
    for source in DEV_SECRETS:
        client("secretsmanager").create_secret(
            Name=f"{SECRETS_PREFIX}{source}", SecretString=dev_secret_value(source)
        )
    return {"QUEUE_URL": queue_url}


def log_breakdown(log: bytes, offsets: list[int], invocations: int) -> dict[str, float]:
    segment = log[offsets[0] : offsets[1]]
    lines = [line for line in segment.splitlines() if line.strip()]
    emf = [line for line in lines if b'"_aws"' in line]
    other = [line for line in lines if b'"_aws"' not in line]
    return {
        "log_bytes_per_invocation": round(len(segment) / invocations, 1),
        "log_lines_per_invocation": round(len(other) / invocations, 2),
        "log_line_bytes_per_invocation": round(sum(len(x) + 1 for x in other) / invocations, 1),
        "emf_lines_per_invocation": round(len(emf) / invocations, 2),
        "emf_bytes_per_invocation": round(sum(len(x) + 1 for x in emf) / invocations, 1),
    }


def emf_metrics(log: bytes) -> list[str]:
    found = set()
    for line in log.splitlines():
        if b'"_aws"' not in line:
            continue
        doc = json.loads(line)
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                labels = ",".join(f"{d}={doc.get(d)}" for d in dims)
                for metric in directive["Metrics"]:
                    found.add(f"{directive['Namespace']}/{metric['Name']}[{labels}]")
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="50 deliveries per phase (200)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result-file", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=f"results file (default {RESULTS})")
    args = parser.parse_args(argv)
    if args.measure:
        measure(args)
        return 0
    n = args.n or (50 if args.quick else 200)
    with tempfile.TemporaryDirectory(prefix="bench-cost-inputs-") as scratch:
        work = Path(scratch)
        redis_port, moto_port = free_port(), free_port()
        moto_cmd = [sys.executable, "-c", MOTO_SERVER, str(moto_port)]
        redis_cmd = [
            shutil.which("redis-server") or "redis-server", "--port", str(redis_port),
            "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        ]  # fmt: skip
        with (
            server(redis_cmd, redis_port, work / "redis.log"),
            server(moto_cmd, moto_port, work / "moto.log"),
        ):
            endpoint = f"http://127.0.0.1:{moto_port}"
            os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
            resources = provision(endpoint)
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWER"))},
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION,
                "AWS_ENDPOINT_URL": endpoint,
                "QUEUE_URL": resources["QUEUE_URL"],
                "PAYLOAD_BUCKET": NAMES["bucket"],
                "SECRETS_PREFIX": SECRETS_PREFIX,
                "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                "CLAIM_TTL_SECONDS": "6",
                "TABLE_NAME": NAMES["table"],
                "DELIVERY_RETENTION_DAYS": "30",
                # as template.yaml sets them (one service name per function in AWS)
                "POWERTOOLS_SERVICE_NAME": "webhook-pipeline-prod-ingest",
                "POWERTOOLS_METRICS_NAMESPACE": "WebhookPipeline",
                "POWERTOOLS_LOG_LEVEL": "INFO",
                "POWERTOOLS_TRACE_DISABLED": "true",
            }
            log_path, result_path = work / "functions.log", work / "result.json"
            with log_path.open("wb") as log:
                subprocess.run(
                    [sys.executable, __file__, "--measure", "--n", str(n),
                     "--result-file", str(result_path)],
                    stdout=log, env=env, check=True,
                )  # fmt: skip
            doc = json.loads(result_path.read_text())
            log_bytes = log_path.read_bytes()
    for data in doc["phases"].values():
        data.update(log_breakdown(log_bytes, data.pop("log_offsets"), data["invocations"]))
    doc["emf_metrics_seen"] = emf_metrics(log_bytes)
    results = {
        "command": "python bench/bench_cost_inputs.py" + (" --quick" if args.quick else ""),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "deliveries_per_phase": n,
        "against": "real redis-server; the local stack's moto server (DynamoDB serialized) in a "
        "subprocess",
        **doc,
    }
    # a quick run never overwrites the committed figures (the cost command reads those)
    out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
