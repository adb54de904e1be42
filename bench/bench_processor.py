"""Processor benchmark (figures, not a timed test).

1. DynamoDB requests per new delivery (target: 1 TransactWriteItems), counted with a botocore
   ``before-call`` hook on the processor's own client.
2. Wall time of a batch of 10 new deliveries (10 resources) against a DynamoDB endpoint slowed by
   a fixed per-request delay (default 50 ms, a ``before-send`` sleep in front of in-process moto),
   as a ratio to one record alone (target <= 2.5).

Writes bench/results/processor.json and prints it.
Run: ``.venv/bin/python bench/bench_processor.py`` (or ``make bench``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the table comes from template.yaml through the tests' helper

from tests.helpers import create_deliveries_table  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "processor.json"
TABLE = "bench-deliveries"
BUCKET = "bench-payloads"

os.environ.update(
    AWS_ACCESS_KEY_ID="bench",
    AWS_SECRET_ACCESS_KEY="bench",  # moto's fake credentials
    AWS_DEFAULT_REGION="us-east-1",
    TABLE_NAME=TABLE,
    PAYLOAD_BUCKET=BUCKET,
    POWERTOOLS_TRACE_DISABLED="true",
    POWERTOOLS_LOG_LEVEL="WARNING",
    POWERTOOLS_METRICS_NAMESPACE="WebhookPipelineBench",
    POWERTOOLS_METRICS_DISABLED="true",
    POWERTOOLS_SERVICE_NAME="bench",
)
os.environ.pop("AWS_ENDPOINT_URL", None)
sys.path.insert(0, str(ROOT / "layers" / "common"))


class Context:
    function_name = "ProcessorFunction"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:ProcessorFunction"
    aws_request_id = "bench"


def make_atomic() -> None:
    """Serialize moto's DynamoDB operations (the real service is atomic per request; moto's
    in-process backend is not thread-safe). Only the backend step is serialized."""
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()
    for name in ("transact_write_items", "put_item", "update_item", "get_item"):
        original = getattr(DynamoDBBackend, name)

        def locked(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with lock:
                return __original(*args, **kwargs)

        setattr(DynamoDBBackend, name, locked)


ENDPOINTS = {
    "server": (
        "moto server in a separate process (its CPU is not the processor's), empty table per "
        "run, fixed sleep before each DynamoDB request is sent"
    ),
    "in-process": (
        "in-process moto (its CPU shares the processor's GIL), empty table per run, "
        "fixed sleep before each DynamoDB request is sent"
    ),
}


def start_moto_server() -> tuple[subprocess.Popen[bytes], str]:
    """Start ``moto_server`` on a free local port; return the process and its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    binary = Path(sys.executable).with_name("moto_server")
    process = subprocess.Popen(
        [str(binary), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, url
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("moto_server did not start")


def envelope(delivery_id: str, resource: str, seq: int) -> str:
    raw = json.dumps({"id": delivery_id, "data": {"object": {"id": resource}}}).encode()
    return json.dumps(
        {
            "source": "stripe",
            "delivery_id": delivery_id,
            "received_at": "2026-01-15T10:00:00Z",
            "event_type": "customer.updated",
            "resource_key": resource,
            "sequence": seq,
            "body_b64": base64.b64encode(raw).decode(),
            "body_size": len(raw),
            "body_sha256": hashlib.sha256(raw).hexdigest(),
        }
    )


def batch(n: int) -> dict[str, Any]:
    records = []
    for _ in range(n):
        tag = uuid.uuid4().hex[:12]
        body = envelope(f"evt_{tag}", f"cus_{tag}", 1)
        records.append(
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "AQEB",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:MainQueue",
                "awsRegion": "us-east-1",
            }
        )
    return {"Records": records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=50.0, help="per-request DynamoDB delay")
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds per case (median)")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument(
        "--endpoint",
        choices=sorted(ENDPOINTS),
        default="in-process",
        help="in-process moto (default) or a moto server in its own process",
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="No application metrics to publish")

    import boto3
    from moto import mock_aws

    server: subprocess.Popen[bytes] | None = None
    if args.endpoint == "server":
        server, url = start_moto_server()
        os.environ["AWS_ENDPOINT_URL"] = url
        context: Any = contextlib.nullcontext()
    else:
        context = mock_aws()

    with context:
        if args.endpoint == "in-process":
            make_atomic()
        ddb = boto3.client("dynamodb")

        def fresh_table() -> None:
            """An empty table before every timed run: moto copies the whole table on each
            transaction, so a growing table would time moto rather than the processor."""
            if TABLE in ddb.list_tables()["TableNames"]:
                ddb.delete_table(TableName=TABLE)
            create_deliveries_table(ddb, TABLE)

        fresh_table()
        boto3.client("s3").create_bucket(Bucket=BUCKET)

        spec = importlib.util.spec_from_file_location(
            "processor_app", ROOT / "functions" / "processor" / "app.py"
        )
        assert spec is not None and spec.loader is not None
        app = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(app)
        client = app.dynamodb_client()

        requests: Counter[str] = Counter()

        def count_request(model: Any, **_: Any) -> None:
            requests[model.name] += 1

        delay = args.delay_ms / 1000

        def slow_endpoint(**_: Any) -> None:
            time.sleep(delay)

        client.meta.events.register("before-call.dynamodb.*", count_request)
        client.meta.events.register_first("before-send.dynamodb.*", slow_endpoint)

        def run(n: int) -> tuple[float, dict[str, Any]]:
            fresh_table()
            event = batch(n)
            started = time.perf_counter()
            response = app.lambda_handler(event, Context())
            return time.perf_counter() - started, response

        # Warm up (cold-start work: clients, thread pool, imports) outside the figures.
        run(1)
        run(args.batch)

        requests.clear()
        _, response = run(1)
        assert response == {"batchItemFailures": []}, response
        per_delivery = dict(requests)

        singles, batches = [], []
        for _ in range(args.rounds):
            t, response = run(1)
            assert response == {"batchItemFailures": []}
            singles.append(t)
            t, response = run(args.batch)
            assert response == {"batchItemFailures": []}
            batches.append(t)

    if server is not None:
        server.terminate()
        server.wait(timeout=10)
    single, full = statistics.median(singles), statistics.median(batches)
    results = {
        "dynamodb_requests_per_new_delivery": per_delivery,
        "dynamodb_requests_per_new_delivery_total": sum(per_delivery.values()),
        "target_requests_per_new_delivery": 1,
        "per_request_delay_ms": args.delay_ms,
        "batch_size": args.batch,
        "max_workers": app.settings.max_workers,
        "rounds": args.rounds,
        "single_record_ms_median": round(single * 1000, 1),
        "batch_ms_median": round(full * 1000, 1),
        "batch_to_single_ratio": round(full / single, 2),
        "target_ratio_max": 2.5,
        "single_record_ms_all": [round(t * 1000, 1) for t in singles],
        "batch_ms_all": [round(t * 1000, 1) for t in batches],
        "endpoint": ENDPOINTS[args.endpoint],
        "cpus": os.cpu_count(),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
