"""Ingest benchmark (not a test): per-webhook cost and cold import time.

1. Redis commands sent (round trips) and AWS calls per accepted and per duplicate webhook,
   counted through the real handler against a real redis-server (started here on a free port)
   and in-process moto. Targets: <= 2 Redis + 1 SQS per accepted; 1 Redis + 0 SQS per duplicate.
2. Cold import time of functions/ingest/app.py as a ratio to a process that only imports its
   dependencies (boto3 SQS client, redis, Powertools Logger/Metrics). Target <= 1.15. Variants
   are run interleaved, side by side in one run, and compared by their medians (the machine is
   shared and noisy: ratios, not absolute times). Measured with tracing enabled, as deployed
   (``Tracing: Active``: botocore patched for X-Ray), and disabled; Powertools imports the X-Ray
   SDK in both cases. ``ingest_import_and_clients`` adds building the SQS, S3 and Secrets
   Manager clients and the Redis client (the first invocation's work), for information.

Figures go to bench/results/ingest.json and are printed.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "ingest.json"
PY = sys.executable
N_WEBHOOKS = 200
N_IMPORT_RUNS = int(os.environ.get("BENCH_IMPORT_RUNS", "21"))

ENV = {
    "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/main",
    "PAYLOAD_BUCKET": "payloads",
    "SECRETS_PREFIX": "webhook-pipeline/bench/",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "POWERTOOLS_SERVICE_NAME": "ingest",
    "POWERTOOLS_METRICS_NAMESPACE": "WebhookPipeline",
    "GATE_COOLDOWN_SECONDS": "0",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def per_webhook_costs() -> dict[str, object]:
    import boto3
    import botocore.client
    import redis
    from moto import mock_aws

    sys.path.insert(0, str(ROOT))
    from tests.integration.ingest_harness import FakeContext, SECRETS_PREFIX  # noqa: I001
    from webhook_pipeline_ops.simulator.deliveries import (
        DEV_SECRETS,
        example_sources,
        http_api_event,
        signed_delivery,
    )

    port = free_port()
    server = subprocess.Popen(
        [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                redis.Redis(port=port).ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        with mock_aws():
            sqs = boto3.client("sqs", region_name="us-east-1")
            queue_url = sqs.create_queue(QueueName="main")["QueueUrl"]
            boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="payloads")
            sm = boto3.client("secretsmanager", region_name="us-east-1")
            for source, secret in DEV_SECRETS.items():
                sm.create_secret(Name=f"{SECRETS_PREFIX}{source}", SecretString=secret)
            os.environ.update(
                ENV,
                QUEUE_URL=queue_url,
                SECRETS_PREFIX=SECRETS_PREFIX,
                REDIS_URL=f"redis://127.0.0.1:{port}/0",
            )
            sys.path.insert(0, str(ROOT / "functions" / "ingest"))
            import app  # the real handler module

            aws_calls: list[tuple[str, str]] = []
            original = botocore.client.BaseClient._make_api_call

            def recording(self, op, params):  # type: ignore[no-untyped-def]
                aws_calls.append((self.meta.service_model.service_name, op))
                return original(self, op, params)

            botocore.client.BaseClient._make_api_call = recording  # type: ignore[method-assign]
            sources = example_sources()
            events = [http_api_event(signed_delivery(sources["github"])) for _ in range(N_WEBHOOKS)]
            app.lambda_handler(http_api_event(signed_delivery(sources["github"])), FakeContext())
            client = app.service().gate.client
            sent: list[str] = []
            send = client.execute_command

            def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
                sent.append(str(args[0]))
                return send(*args, **kwargs)

            client.execute_command = counting
            with open(os.devnull, "w") as devnull:
                stdout, sys.stdout = sys.stdout, devnull
                try:
                    aws_calls.clear()
                    statuses = [app.lambda_handler(e, FakeContext())["statusCode"] for e in events]
                    accepted = (len(sent), list(aws_calls))
                    sent.clear()
                    aws_calls.clear()
                    dup_statuses = [
                        app.lambda_handler(e, FakeContext())["statusCode"] for e in events
                    ]
                    duplicate = (len(sent), list(aws_calls))
                finally:
                    sys.stdout = stdout
            botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]
    finally:
        server.terminate()
        server.wait()
    assert set(statuses) == {202} and set(dup_statuses) == {200}, (set(statuses), set(dup_statuses))
    n = N_WEBHOOKS
    return {
        "webhooks_each": n,
        "accepted": {
            "redis_commands_per_webhook": accepted[0] / n,
            "sqs_calls_per_webhook": sum(1 for s, _ in accepted[1] if s == "sqs") / n,
            "other_aws_calls": sorted({f"{s}:{o}" for s, o in accepted[1] if s != "sqs"}),
        },
        "duplicate": {
            "redis_commands_per_webhook": duplicate[0] / n,
            "sqs_calls_per_webhook": sum(1 for s, _ in duplicate[1] if s == "sqs") / n,
            "other_aws_calls": sorted({f"{s}:{o}" for s, o in duplicate[1] if s != "sqs"}),
        },
        "targets": {"accepted": "<= 2 Redis + 1 SQS", "duplicate": "1 Redis + 0 SQS"},
    }


BASELINE = (
    "import boto3; boto3.client('sqs'); import redis; "
    "from aws_lambda_powertools import Logger, Metrics; Logger(); Metrics()"
)
INGEST = "import app"
INGEST_COLD_START = "import app; app.service()"


def time_process(code: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([PY, "-c", code], cwd=ROOT / "functions" / "ingest", env=env, check=True)
    return time.perf_counter() - started


def import_ratios() -> dict[str, object]:
    base_env = {
        **os.environ,
        **ENV,
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    lambda_env = {
        **base_env,
        "LAMBDA_TASK_ROOT": str(ROOT / "functions" / "ingest"),
        "AWS_LAMBDA_FUNCTION_NAME": "IngestFunction",
    }
    variants = {
        "baseline_deps_only": (BASELINE, {**lambda_env, "POWERTOOLS_TRACE_DISABLED": "true"}),
        "ingest_import_tracing_disabled": (
            INGEST,
            {**lambda_env, "POWERTOOLS_TRACE_DISABLED": "true"},
        ),
        "ingest_import_tracing_enabled": (
            INGEST,
            {**lambda_env, "POWERTOOLS_TRACE_DISABLED": "false"},
        ),
        "ingest_import_and_clients_tracing_disabled": (
            INGEST_COLD_START,
            {**lambda_env, "POWERTOOLS_TRACE_DISABLED": "true"},
        ),
    }
    for code, env in variants.values():  # warm the OS page cache and .pyc files once
        time_process(code, env)
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(N_IMPORT_RUNS):
        for name, (code, env) in variants.items():
            samples[name].append(time_process(code, env))
    medians = {k: statistics.median(v) for k, v in samples.items()}
    base = medians["baseline_deps_only"]
    return {
        "runs_each": N_IMPORT_RUNS,
        "median_seconds": {k: round(v, 4) for k, v in medians.items()},
        "ratio_to_baseline": {k: round(v / base, 3) for k, v in medians.items()},
        "target": "ingest_import_tracing_enabled <= 1.15 (as deployed)",
    }


def main() -> None:
    results = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "per_webhook": per_webhook_costs(),
        "cold_import": import_ratios(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"written to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
