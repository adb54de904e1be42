"""Hot resource benchmark (not a test): 200 events for one resource spread over concurrent
batches, against 200 events over 200 resources.

The real processor handler (``functions/processor/app.py``, one module copy per concurrent
invocation, as separate Lambda containers would be) drains a simulated standard SQS queue:
``--workers`` invocations at a time each take up to ``--batch`` messages, in random order (a
standard queue does not keep order); the messages an invocation reports in ``batchItemFailures``
are received again after ``--visibility-ms`` (the visibility timeout, shortened so a run takes
seconds). It runs until the queue is empty.

DynamoDB is in-process moto with its backend calls serialised, behind a fixed delay before each
request is sent (``--delay-ms``, default 20 ms: the service's latency dominates, not the
emulator's CPU). moto never raises ``TransactionConflict``; DynamoDB does when a transaction
touches an item another transaction is writing at that moment. That rule is modelled in front
of moto: a ``TransactWriteItems`` whose resource item is in a transaction still in flight is
cancelled with ``TransactionConflict`` on that item, as DynamoDB answers it.

Cases: one transaction per delivery (a conflict left to SQS, then tried again in place), and
coalesced (``ProcessorService.coalesce``: a resource's deliveries of one batch in one
transaction, the per-delivery path whenever that one does not commit).

Reported per case: time to settle (seconds until the queue is empty), invocations,
``TransactWriteItems`` sent, ``TransactionConflict`` cancellations, group writes sent and not
committed, redeliveries, outcomes (applied / stale / duplicate) and whether every resource's
final watermark is its highest sequence.

Run: ``.venv/bin/python bench/bench_hot_resource.py [--quick]``; figures go to
``bench/results/hot_resource.json`` (``--quick``: ``hot_resource.quick.json``, git-ignored).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import random
import sys
import threading
import time
import uuid
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_processor import Context, envelope, make_atomic  # noqa: E402  (sets the environment)

from tests.helpers import create_deliveries_table  # noqa: E402

TABLE = os.environ["TABLE_NAME"]
BUCKET = os.environ["PAYLOAD_BUCKET"]


def record(body: str, receive_count: int) -> dict[str, Any]:
    return {
        "messageId": hashlib.md5(body.encode()).hexdigest(),
        "receiptHandle": "AQEB",
        "body": body,
        "attributes": {"ApproximateReceiveCount": str(receive_count)},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:MainQueue",
        "awsRegion": "us-east-1",
    }


class ConflictModel:
    """DynamoDB's rule in front of moto: a transaction on a resource item another transaction
    is writing is cancelled with ``TransactionConflict``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight: set[str] = set()
        self.mine = threading.local()
        self.conflicts = 0
        self.transactions = 0
        self.group_writes = 0
        self.groups_not_committed = 0

    def parameters(self, params: dict[str, Any], **_: Any) -> None:
        """``before-parameter-build``: note the resource items this call's transaction writes."""
        items = params.get("TransactItems", [])
        self.mine.wanted = {item["Update"]["Key"]["pk"]["S"] for item in items if "Update" in item}
        # a group write (coalesced) conditions the watermark on the value read, never "<= :seq",
        # and a group of only stale deliveries has no Update at all
        self.mine.group = not any(
            "<= :seq" in item.get("Update", {}).get("ConditionExpression", "") for item in items
        )

    def before(self, **_: Any) -> Any:
        """``before-call``: answer ``TransactionConflict`` (without sending) when one of them is
        in another transaction in flight; otherwise mark them in flight."""
        keys = getattr(self.mine, "wanted", set())
        with self.lock:
            self.transactions += 1
            self.group_writes += self.mine.group
            if keys & self.in_flight:
                self.conflicts += 1
                self.mine.keys = set()
                return _conflict()
            self.in_flight |= keys
            self.mine.keys = keys
        return None

    def after(self, parsed: dict[str, Any], **_: Any) -> None:
        with self.lock:
            self.in_flight -= getattr(self.mine, "keys", set())
            self.mine.keys = set()
            self.groups_not_committed += bool(self.mine.group and "Error" in parsed)


def _conflict() -> tuple[Any, dict[str, Any]]:
    from botocore.awsrequest import AWSResponse

    http = AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, {}, None)
    parsed = {
        "Error": {
            "Code": "TransactionCanceledException",
            "Message": "Transaction cancelled, please refer cancellation reasons for specific "
            "reasons [None, TransactionConflict]",
        },
        "CancellationReasons": [
            {"Code": "None"},
            {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
        ],
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }
    return http, parsed


def load_apps(n: int, delay: float, model: ConflictModel) -> list[Any]:
    apps = []
    for i in range(n):
        spec = importlib.util.spec_from_file_location(
            f"processor_app_{i}", ROOT / "functions" / "processor" / "app.py"
        )
        assert spec is not None and spec.loader is not None
        app = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(app)
        client = app.dynamodb_client()
        client.meta.events.register(
            "before-parameter-build.dynamodb.TransactWriteItems", model.parameters
        )
        client.meta.events.register("before-call.dynamodb.TransactWriteItems", model.before)
        client.meta.events.register("after-call.dynamodb.TransactWriteItems", model.after)
        client.meta.events.register_first(
            "before-send.dynamodb.*", lambda delay=delay, **_: time.sleep(delay)
        )
        apps.append(app)
    return apps


def run_case(
    name: str,
    events: list[tuple[str, str, int]],
    apps: list[Any],
    batch: int,
    seed: int,
    visibility: float,
    coalesce: bool,
) -> dict[str, Any]:
    import boto3

    ddb = boto3.client("dynamodb")
    if TABLE in ddb.list_tables()["TableNames"]:
        ddb.delete_table(TableName=TABLE)
    create_deliveries_table(ddb, TABLE)
    model: ConflictModel = apps[0]._bench_model
    model.conflicts = model.transactions = model.group_writes = model.groups_not_committed = 0
    for app in apps:
        app.service().coalesce = coalesce
    rng = random.Random(seed)
    bodies = [envelope(d, r, s) for d, r, s in events]
    rng.shuffle(bodies)
    # (visible at, body, receive count): a redelivered message is visible again after the
    # visibility timeout, as on SQS
    queue: list[tuple[float, str, int]] = [(0.0, b, 1) for b in bodies]
    lock = threading.Lock()
    stats: Counter[str] = Counter()
    busy = [0]

    def worker(app: Any) -> None:
        while True:
            with lock:
                now = time.perf_counter()
                visible = [m for m in queue if m[0] <= now]
                if not queue and busy[0] == 0:
                    return
                taken = [(b, c) for _, b, c in visible[:batch]]
                if taken:
                    chosen = {id(m) for m in visible[:batch]}
                    queue[:] = [m for m in queue if id(m) not in chosen]
                    busy[0] += 1
            if not taken:
                time.sleep(0.002)
                continue
            records = [record(b, c) for b, c in taken]
            response = app.lambda_handler({"Records": records}, Context())
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
            with lock:
                stats["invocations"] += 1
                stats["redeliveries"] += len(failed)
                again = time.perf_counter() + visibility
                queue.extend(
                    (again, b, c + 1)
                    for (b, c), r in zip(taken, records, strict=True)
                    if r["messageId"] in failed
                )
                busy[0] -= 1

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(app,)) for app in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    settle = time.perf_counter() - started
    outcomes: Counter[str] = Counter()
    for d, _, _ in events:
        item = ddb.get_item(
            TableName=TABLE, Key={"pk": {"S": f"DELIVERY#stripe#{d}"}, "sk": {"S": "DELIVERY"}}
        ).get("Item")
        outcomes[item["outcome"]["S"] if item else "missing"] += 1
    expected: dict[str, int] = {}
    for _, r, s in events:
        expected[r] = max(expected.get(r, 0), s)
    wrong = 0
    for r, top in expected.items():
        item = ddb.get_item(
            TableName=TABLE, Key={"pk": {"S": f"RESOURCE#stripe#{r}"}, "sk": {"S": "RESOURCE"}}
        ).get("Item")
        if item is None or int(item["watermark"]["N"]) != top:
            wrong += 1
    return {
        "case": name,
        "events": len(events),
        "resources": len(expected),
        "settle_s": round(settle, 2),
        "invocations": stats["invocations"],
        "transactions": model.transactions,
        "transaction_conflicts": model.conflicts,
        "group_writes": model.group_writes,
        "group_writes_not_committed": model.groups_not_committed,
        "redeliveries": stats["redeliveries"],
        "outcomes": dict(outcomes),
        "final_watermarks_correct": wrong == 0,
        "resources_with_wrong_watermark": wrong,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument(
        "--visibility-ms",
        type=float,
        default=500.0,
        help="delay before a failed message is received again (SQS: the visibility timeout)",
    )
    args = parser.parse_args()
    n = 60 if args.quick else 200
    warnings.filterwarnings("ignore", message="No application metrics to publish")

    import boto3
    from moto import mock_aws

    with mock_aws():
        make_atomic()
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        model = ConflictModel()
        apps = load_apps(args.workers, args.delay_ms / 1000, model)
        apps[0]._bench_model = model
        from webhook_pipeline.adapters import dynamodb

        def hot(tag: str) -> list[tuple[str, str, int]]:
            return [(f"evt_{tag}_{i:04d}_{uuid.uuid4().hex[:6]}", f"cus_{tag}", i + 1)
                    for i in range(n)]  # fmt: skip

        spread = [(f"evt_cold_{i:04d}_{uuid.uuid4().hex[:6]}", f"cus_{i:04d}", 1) for i in range(n)]
        visibility = args.visibility_ms / 1000
        results = []
        # Side by side: a conflict left to SQS's redelivery (1 attempt) against the store trying
        # it again in place (CONFLICT_ATTEMPTS, jittered backoff), one transaction per delivery;
        # then a resource's deliveries of one batch coalesced into one transaction (falling back
        # to the per-delivery path with CONFLICT_ATTEMPTS); then the spread case both ways.
        attempts_in_place = dynamodb.CONFLICT_ATTEMPTS
        for attempts in (1, attempts_in_place):
            dynamodb.CONFLICT_ATTEMPTS = attempts
            case = f"one resource, {attempts} transaction attempt(s) in place"
            events = hot(f"hot{attempts}")
            results.append(run_case(case, events, apps, args.batch, 1, visibility, False))
        case = f"one resource, coalesced ({attempts_in_place} attempts in place on fallback)"
        events = hot("coalesced")
        results.append(run_case(case, events, apps, args.batch, 1, visibility, True))
        for coalesce in (False, True):
            case = f"{n} resources" + (", coalesced" if coalesce else "")
            results.append(run_case(case, spread, apps, args.batch, 1, visibility, coalesce))
    out = {
        "command": " ".join(
            [".venv/bin/python", str(Path(sys.argv[0]).resolve().relative_to(ROOT)), *sys.argv[1:]]
        ),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "workers": args.workers,
        "batch_size": args.batch,
        "per_request_delay_ms": args.delay_ms,
        "visibility_timeout_ms": args.visibility_ms,
        "max_workers_per_invocation": apps[0].settings.max_workers,
        "conflict_model": ConflictModel.__doc__,
        "results": results,
    }
    path = (
        ROOT
        / "bench"
        / "results"
        / ("hot_resource.quick.json" if args.quick else "hot_resource.json")
    )
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
