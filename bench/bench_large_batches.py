"""Large batched POSTs benchmark (not a test): a signed SendGrid batch of 1,000 and of 5,000 events
through the real ingest handler, against a real redis-server (started here on a free port), with
the sender's retries, until the batch is answered 2xx.

Per batch size and modelled SQS latency: the attempts and their statuses, the handler's time to
2xx (the sum of its attempts; the sender's ``Retry-After`` waits are not counted), the
``SendMessageBatch`` calls and entries (entries = events: each sent exactly once over all
attempts) and the Redis round trips. The function runs as deployed: ``INGEST_TIME_BUDGET_MS`` 4,000
and a Lambda context whose remaining time starts at the 5 s timeout.

SQS is answered in process (moto's ``SendMessageBatch`` scans its whole queue on every call, which
would measure moto): every entry is accepted after a modelled per-call latency, 0 ms (the handler's
own cost) and 20 ms (an in-region ``SendMessageBatch``, an assumption, not a measurement).
Secrets Manager and S3 are moto. The events are compact SendGrid events (about 130 bytes) so that
5,000 fit the 1 MiB body limit.

Run: ``.venv/bin/python bench/bench_large_batches.py`` (``--quick``: 1,000 events only, written
to ``bench/results/large_batches.quick.json``, git-ignored; ``--hog=N``: the same beside N
busy-looping processes of its own, started and stopped here, up to 60 attempts, written to
``bench/results/large_batches.hog.json``); figures go to ``bench/results/large_batches.json``
and are printed.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUICK = "--quick" in sys.argv
HOGS = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--hog=")), 0)
NAME = "large_batches.quick.json" if QUICK else "large_batches.json"
RESULTS = ROOT / "bench" / "results" / ("large_batches.hog.json" if HOGS else NAME)
SIZES = (1_000,) if QUICK else (1_000, 5_000)
SQS_LATENCIES_MS = (0, 20)
FUNCTION_TIMEOUT_MS = 5_000
MAX_ATTEMPTS = 60 if HOGS else 20

ENV = {
    "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/main",
    "PAYLOAD_BUCKET": "payloads",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "POWERTOOLS_SERVICE_NAME": "ingest",
    "POWERTOOLS_METRICS_NAMESPACE": "WebhookPipeline",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "GATE_COOLDOWN_SECONDS": "0",
    "INGEST_TIME_BUDGET_MS": "4000",
    "SOURCES_CATALOGUE": "true",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def compact_events(n: int, run: str) -> list[dict[str, Any]]:
    return [
        {
            "email": f"r{i}@example.com",
            "timestamp": 1_764_650_000 + i,
            "event": "open",
            "sg_event_id": f"{run}-{i:05d}-rWVYmVk9bWFil",
            "sg_message_id": f"m-{i:05d}",
        }
        for i in range(n)
    ]


class Context:
    """A Lambda context whose remaining time starts at the function timeout."""

    function_name = "IngestFunction"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:IngestFunction"
    aws_request_id = "bench"

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def get_remaining_time_in_millis(self) -> int:
        return int(FUNCTION_TIMEOUT_MS - (time.perf_counter() - self.started) * 1000)


def run_batch(app: Any, n: int, latency_ms: int, calls: dict[str, Any]) -> dict[str, Any]:
    from webhook_pipeline_ops.simulator.deliveries import (
        example_sources,
        http_api_event,
        signed_delivery,
    )

    events = compact_events(n, f"n{n}-l{latency_ms}")
    body = (json.dumps(events, separators=(",", ":")) + "\r\n").encode()
    event = http_api_event(signed_delivery(example_sources()["sendgrid"], body=body))
    calls.update(latency_ms=latency_ms, batch_calls=0, entries=[], redis=0)
    attempts = []
    for _ in range(MAX_ATTEMPTS):
        started = time.perf_counter()
        response = app.lambda_handler(event, Context())
        seconds = time.perf_counter() - started
        answer = json.loads(response["body"])
        attempts.append(
            {
                "status": response["statusCode"],
                "reason": answer.get("reason"),
                "seconds": round(seconds, 3),
                "sqs_calls_so_far": calls["batch_calls"],
            }
        )
        if response["statusCode"] < 300:
            break
    entries = calls["entries"]
    assert attempts[-1]["status"] == 202, attempts
    assert len(entries) == n and set(entries) == {e["sg_event_id"] for e in events}
    return {
        "events": n,
        "body_bytes": len(body),
        "sqs_latency_ms_modelled": latency_ms,
        "attempts": len(attempts),
        "statuses": [a["status"] for a in attempts],
        "handler_seconds_to_2xx": round(sum(a["seconds"] for a in attempts), 3),
        "longest_attempt_seconds": max(a["seconds"] for a in attempts),
        "send_message_batch_calls": calls["batch_calls"],
        "entries_sent": len(entries),
        "each_event_sent_once": len(set(entries)) == len(entries) == n,
        "redis_round_trips": calls["redis"],
        "per_attempt": attempts,
    }


def measure() -> list[dict[str, Any]]:
    import boto3
    import botocore.client
    import redis
    from moto import mock_aws

    sys.path.insert(0, str(ROOT))
    from webhook_pipeline_ops.simulator.deliveries import DEV_SECRETS, dev_secret_value

    from tests.integration.ingest_harness import SECRETS_PREFIX

    port = free_port()
    server = subprocess.Popen(
        [
            *(shutil.which("redis-server") or "redis-server", "--port", str(port)),
            *("--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
        ],
        stdout=subprocess.DEVNULL,
    )
    calls: dict[str, Any] = {}
    original = botocore.client.BaseClient._make_api_call
    pipelined = redis.client.Pipeline.execute
    single = redis.Redis.execute_command

    def sqs_answered(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation != "SendMessageBatch":
            return original(self, operation, params)
        time.sleep(calls["latency_ms"] / 1000)
        calls["batch_calls"] += 1
        calls["entries"].extend(
            json.loads(e["MessageBody"])["delivery_id"] for e in params["Entries"]
        )
        ok = [
            {"Id": e["Id"], "MessageId": f"m{e['Id']}", "MD5OfMessageBody": ""}
            for e in params["Entries"]
        ]
        return {"Successful": ok, "Failed": []}

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls["redis"] = calls.get("redis", 0) + 1
        return pipelined(self, *args, **kwargs)

    def counted_single(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls["redis"] = calls.get("redis", 0) + 1
        return single(self, *args, **kwargs)

    try:
        for _ in range(100):
            try:
                redis.Redis(port=port).ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        with mock_aws():
            boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="payloads")
            sm = boto3.client("secretsmanager", region_name="us-east-1")
            for source in DEV_SECRETS:
                sm.create_secret(
                    Name=f"{SECRETS_PREFIX}{source}", SecretString=dev_secret_value(source)
                )
            os.environ.update(
                ENV, SECRETS_PREFIX=SECRETS_PREFIX, REDIS_URL=f"redis://127.0.0.1:{port}/0"
            )
            sys.path.insert(0, str(ROOT / "functions" / "ingest"))
            import app  # the real handler module

            botocore.client.BaseClient._make_api_call = sqs_answered  # type: ignore[method-assign]
            redis.client.Pipeline.execute = counted  # type: ignore[method-assign]
            redis.Redis.execute_command = counted_single  # type: ignore[method-assign]
            try:
                return [
                    run_batch(app, n, latency, calls) for n in SIZES for latency in SQS_LATENCIES_MS
                ]
            finally:
                botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]
                redis.client.Pipeline.execute = pipelined  # type: ignore[method-assign]
                redis.Redis.execute_command = single  # type: ignore[method-assign]
    finally:
        server.terminate()
        server.wait()


def with_hogs() -> list[dict[str, Any]]:
    """:func:`measure`, beside ``HOGS`` busy-looping processes started and stopped here."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]
    try:
        return measure()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def main() -> None:
    results = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_1m": round(os.getloadavg()[0], 2),
        },
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": {
            "INGEST_TIME_BUDGET_MS": int(ENV["INGEST_TIME_BUDGET_MS"]),
            "function_timeout_ms": FUNCTION_TIMEOUT_MS,
            "batch_chunk_reserve_ms": "1800 (1 x SQS call 1.0 s + 2 x Redis 0.4 s, the defaults)",
            "batch_claim_reserve_ms": "400 (1 x Redis 0.4 s, before each window's claim)",
            "cpu_hogs": HOGS,
            "sqs": "answered in process after the modelled latency; not moto, not AWS",
        },
        "batches": with_hogs(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: v for k, v in results.items() if k != "batches"}, indent=2))
    for b in results["batches"]:
        print(
            f"{b['events']:>5} events, SQS {b['sqs_latency_ms_modelled']:>2} ms/call: "
            f"{b['attempts']} attempt(s) {b['statuses']}, {b['handler_seconds_to_2xx']} s to 2xx "
            f"(longest attempt {b['longest_attempt_seconds']} s), "
            f"{b['send_message_batch_calls']} SendMessageBatch calls, "
            f"{b['redis_round_trips']} Redis round trips"
        )
    print(f"written to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
