"""First request of a fresh ingest container (not a test): init + first invocation, before/after.

Where the clients are built decides which clock pays for them: work done during the init runs
under Lambda's init limit (10 s), work done on the first request runs under the function's
``Timeout`` (5 s for ingest) and in that request's latency. This bench times both halves of a
cold start of ``functions/ingest/app.py`` in fresh interpreters (this one's executable, with
``.pyc`` files), against a real redis-server and a moto server in its own process (both started
here on free ports):

- ``init``: ``import app`` (settings, sources, and whatever the tree builds during the init);
- ``first``: the first ``lambda_handler`` call, a signed GitHub delivery (new, so it claims in
  Redis, reads the secret from Secrets Manager and sends to SQS);
- ``second``: a second new delivery on the same container (the warm figure);
- ``init + first``: what the first sender waits for when the request starts the container.

With ``--before REV`` that revision's tree (a temporary worktree) is measured side by side with
this one, samples interleaved; ``--hog N`` runs N busy-loop processes meanwhile (the busy machine
of issue 21: load 10-25 on 2 cores), started and stopped here by their PIDs.

Run: ``.venv/bin/python bench/bench_first_request.py --before REV [--runs 11] [--hog 5]``;
figures go to ``bench/results/first_request.json`` (with ``--hog``: ``first_request_hog.json``;
``--quick``: ``first_request.quick.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench_import import ROOT, compile_tree, write_results

PROBE = """
import json, sys, time
t0 = time.perf_counter()
import app
t1 = time.perf_counter()

class Context:
    function_name = "IngestFunction"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:IngestFunction"
    aws_request_id = "bench"
    def get_remaining_time_in_millis(self):
        return 5000

events = json.loads(sys.argv[1])
first = app.lambda_handler(events[0], Context())
t2 = time.perf_counter()
second = app.lambda_handler(events[1], Context())
t3 = time.perf_counter()
print(json.dumps([t1 - t0, t2 - t1, t3 - t2, first["statusCode"], second["statusCode"]]))
"""

BODY = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()


def github_event(secret: str) -> dict[str, Any]:
    """A new GitHub ping delivery (API Gateway HTTP API 2.0 event), signed with ``secret``."""
    signature = hmac.new(secret.encode(), BODY, hashlib.sha256).hexdigest()
    return {
        "version": "2.0",
        "routeKey": "POST /webhooks/{source}",
        "rawPath": "/webhooks/github",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "x-github-event": "ping",
            "x-github-delivery": str(uuid.uuid4()),
            "x-hub-signature-256": f"sha256={signature}",
        },
        "pathParameters": {"source": "github"},
        "requestContext": {"http": {"method": "POST", "path": "/webhooks/github"}},
        "body": BODY.decode(),
        "isBase64Encoded": False,
    }


class Backends:
    """A redis-server and a moto server with the ingest function's queue and secrets."""

    def __init__(self) -> None:
        from webhook_pipeline_ops.local.moto_server import MotoProcess
        from webhook_pipeline_ops.local.redis_runtime import start_redis_server

        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not on PATH")
        self.redis = start_redis_server(binary)
        self.moto = MotoProcess()
        self.moto.start()
        self.endpoint = f"http://127.0.0.1:{self.moto.get_host_and_port()[1]}"
        self.prefix = "webhook-pipeline/bench/"
        import boto3

        def client(service: str) -> Any:
            make: Any = boto3.client
            return make(
                service,
                endpoint_url=self.endpoint,
                region_name="us-east-1",
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )

        self.queue_url = client("sqs").create_queue(QueueName="main")["QueueUrl"]
        client("s3").create_bucket(Bucket="payloads")
        from webhook_pipeline_ops.local.dev_secrets import seed_secrets

        doc = seed_secrets(client("secretsmanager"), self.prefix, None, random=False)
        self.secret = doc["sources"]["github"]["secret"]

    def environment(self, tree: Path) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("POWERTOOLS_", "AWS_", "PYTHONDONTWRITEBYTECODE"))
        }
        env.update(
            {
                "PYTHONPATH": str(tree / "layers" / "common"),
                "LAMBDA_TASK_ROOT": str(tree / "functions" / "ingest"),
                "AWS_LAMBDA_FUNCTION_NAME": "IngestFunction",
                "AWS_REGION": "us-east-1",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_ENDPOINT_URL": self.endpoint,
                "POWERTOOLS_SERVICE_NAME": "ingest",
                "POWERTOOLS_METRICS_NAMESPACE": "WebhookPipeline",
                "POWERTOOLS_TRACE_DISABLED": "true",
                "QUEUE_URL": self.queue_url,
                "PAYLOAD_BUCKET": "payloads",
                "SECRETS_PREFIX": self.prefix,
                "REDIS_URL": self.redis.url,
                "REDIS_CLUSTER_MODE": "false",
            }
        )
        return env

    def probe(self, tree: Path) -> list[float]:
        events = [github_event(self.secret), github_event(self.secret)]
        out = subprocess.run(
            [sys.executable, "-c", PROBE, json.dumps(events)],
            cwd=tree / "functions" / "ingest",
            env=self.environment(tree),
            check=True,
            capture_output=True,
            text=True,
        )
        init, first, second, status1, status2 = json.loads(out.stdout.strip().splitlines()[-1])
        if (status1, status2) != (202, 202):
            raise SystemExit(f"{tree}: answers {status1}, {status2}: {out.stdout[-2000:]}")
        return [init, first, second]

    def close(self) -> None:
        self.moto.stop()
        self.redis.stop()


def summary(samples: list[list[float]]) -> dict[str, float]:
    def med(values: list[float]) -> float:
        return round(statistics.median(values) * 1000, 1)

    return {
        "init_ms": med([s[0] for s in samples]),
        "first_invocation_ms": med([s[1] for s in samples]),
        "init_plus_first_ms": med([s[0] + s[1] for s in samples]),
        "second_invocation_ms": med([s[2] for s in samples]),
        "first_invocation_max_ms": round(max(s[1] for s in samples) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default=None, help="revision to measure side by side")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--hog", type=int, default=0, help="busy-loop processes meanwhile")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 11)
    trees = {"after": ROOT}
    before_dir = None
    if args.before:
        before_dir = Path(tempfile.mkdtemp(prefix="bench-before-")) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(before_dir), args.before],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        trees = {"before": before_dir, **trees}
    backends = Backends()
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for tree in trees.values():
            compile_tree(tree)
            backends.probe(tree)  # warm the page cache
        hogs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hog)
        ]
        samples: dict[str, list[list[float]]] = {name: [] for name in trees}
        for _ in range(runs):
            for name, tree in trees.items():
                samples[name].append(backends.probe(tree))
        load = os.getloadavg()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        backends.close()
        if before_dir is not None:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(before_dir)], cwd=ROOT, check=False
            )
    report: dict[str, Any] = {name: summary(s) for name, s in samples.items()}
    if "before" in report:
        report["after_over_before_init_plus_first"] = round(
            report["after"]["init_plus_first_ms"] / report["before"]["init_plus_first_ms"], 3
        )
    write_results(
        "first_request.quick.json"
        if args.quick
        else ("first_request_hog.json" if args.hog else "first_request.json"),
        {
            "runs_each": runs,
            "before_revision": args.before,
            "cpu_hogs": args.hog,
            "load_average_1min_at_end": round(load[0], 1),
            "results": report,
        },
    )


if __name__ == "__main__":
    main()
