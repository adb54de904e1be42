"""End to end under stress: concurrent bursts of one delivery, and the local stack's own
redis-server killed in the middle of a burst.

These tests start a private local stack (not the session one other e2e tests share), because one
of them kills that stack's redis-server. Every unique delivery must end recorded exactly once in
DynamoDB, and every HTTP answer must be a definite 200/202/503 (a 503 is retried, as a sender
would).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from webhook_pipeline_ops.simulator.deliveries import example_sources, signed_delivery

from tests.conftest import free_port
from tests.e2e.conftest import LocalStack, running_local_stack, wait_for
from tests.helpers import pid_alive

pytestmark = pytest.mark.e2e

SOURCES = example_sources()
RECORD_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def private_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """``webhook-pipeline local run`` with its own redis-server, for this module only."""
    options = ["--port", str(free_port()), "--moto-port", str(free_port()),
               "--visibility-timeout", "5"]  # fmt: skip
    with running_local_stack(tmp_path_factory.mktemp("hostile-local-stack"), *options) as stack:
        yield stack


def post(stack: LocalStack, source: str, delivery: Any) -> int:
    response = requests.post(
        stack.url(source), data=delivery.body, headers=delivery.headers, timeout=30
    )
    return response.status_code


def post_until_acknowledged(stack: LocalStack, source: str, delivery: Any) -> list[int]:
    """Post like a sender: retry 503 (Retry-After) until a 2xx; return every status seen."""
    seen = [post(stack, source, delivery)]
    deadline = time.monotonic() + 60
    while seen[-1] == 503 and time.monotonic() < deadline:
        time.sleep(0.5)
        seen.append(post(stack, source, delivery))
    return seen


def records(stack: LocalStack, marker: str) -> Counter[str]:
    """Delivery ids containing ``marker`` in the table, with how many records each has."""
    ddb = stack.client("dynamodb")
    found: Counter[str] = Counter()
    kwargs: dict[str, Any] = {"TableName": stack.outputs["DeliveriesTableName"]}
    while True:
        page = ddb.scan(**kwargs)
        for item in page["Items"]:
            did = item.get("delivery_id", {}).get("S", "")
            if item.get("type", {}).get("S") == "delivery" and marker in did:
                found[did] += 1
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def with_stack_secret(stack: LocalStack, source: str, **kw: Any) -> Any:
    return signed_delivery(SOURCES[source], secret=stack.secrets[source], **kw)


def test_same_delivery_from_20_threads_is_recorded_exactly_once(private_stack: LocalStack) -> None:
    marker = f"burst-{uuid.uuid4().hex[:8]}"
    delivery = with_stack_secret(
        private_stack, "stripe", delivery_id=f"evt_{marker}", resource=f"cus_{marker}", sequence=5
    )
    start = threading.Barrier(20)

    def fire(_: int) -> int:
        start.wait()
        return post(private_stack, "stripe", delivery)

    with ThreadPoolExecutor(max_workers=20) as pool:
        statuses = list(pool.map(fire, range(20)))
    assert set(statuses) <= {200, 202, 503}, statuses
    assert statuses.count(202) == 1, statuses
    # Every 503 sender retries and is then told "duplicate"
    for code in statuses:
        if code == 503:
            assert post_until_acknowledged(private_stack, "stripe", delivery)[-1] == 200
    wait_for(lambda: records(private_stack, marker), RECORD_TIMEOUT, what="the burst recorded")
    # the poller has processed everything (no message left, visible or in flight)
    wait_for(private_stack.main_queue_drained, RECORD_TIMEOUT, what="the main queue to drain")
    assert records(private_stack, marker) == Counter({f"evt_{marker}": 1})
    assert private_stack.settled_ledger("stripe", f"evt_{marker}") == 1  # applied once in effect
    resource = private_stack.resource("stripe", f"cus_{marker}")
    assert resource is not None and resource["watermark"] == 5


def test_redis_killed_mid_burst_every_unique_delivery_recorded_once(
    private_stack: LocalStack,
) -> None:
    redis_pid = private_stack.ready.get("redis_pid")
    assert private_stack.ready["redis_kind"] == "redis-server" and redis_pid
    cmdline = Path(f"/proc/{redis_pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    port = private_stack.outputs["RedisUrl"].rsplit(":", 1)[1].split("/")[0]
    # The redis-server this private stack started (never the machine's own)
    assert "redis-server" in cmdline and port in cmdline and port != "6379"

    marker = f"kill-{uuid.uuid4().hex[:8]}"
    uniques = [
        with_stack_secret(private_stack, "github", delivery_id=f"{marker}-{i:03d}")
        for i in range(30)
    ]
    # Each unique delivery sent three times, interleaved, from 8 threads
    plan = [d for _ in range(3) for d in uniques]
    killed = threading.Event()
    sent = 0
    lock = threading.Lock()

    def fire(delivery: Any) -> list[int]:
        nonlocal sent
        with lock:
            sent += 1
            if sent == len(plan) // 3 and not killed.is_set():
                os.kill(int(redis_pid), signal.SIGKILL)
                killed.set()
        return post_until_acknowledged(private_stack, "github", delivery)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(fire, plan))
    assert killed.is_set()
    wait_for(lambda: not pid_alive(int(redis_pid)), timeout=10, what="redis-server gone")
    every_status = [code for seen in results for code in seen]
    assert set(every_status) <= {200, 202, 503}, Counter(every_status)
    assert all(seen[-1] in (200, 202) for seen in results)

    expected = {d.delivery_id for d in uniques}
    wait_for(
        lambda: set(records(private_stack, marker)) == expected,
        RECORD_TIMEOUT,
        what="every unique delivery recorded",
    )
    # duplicates that passed the dead gate are processed too: the main queue holds none of them
    wait_for(private_stack.main_queue_drained, RECORD_TIMEOUT, what="the main queue to drain")
    counts = records(private_stack, marker)
    assert set(counts) == expected
    assert set(counts.values()) == {1}
    # ... and applied once in effect: the copies that passed the dead gate reached the
    # processor, which ran the hook once per delivery (the ledger counts runs, not keys). The
    # copies of one id are sent seconds apart, so none overlaps the first one's hook run (a
    # copy processed during that run may run the hook again: hooks are at least once).
    wait_for(private_stack.main_queue_drained, RECORD_TIMEOUT, what="the main queue to drain")
    ledger = {did: private_stack.ledger("github", did) for did in sorted(expected)}
    assert ledger == dict.fromkeys(sorted(expected), 1)
    # Nothing went to the DLQ
    sqs = private_stack.client("sqs")
    attrs = sqs.get_queue_attributes(
        QueueUrl=private_stack.outputs["DeadLetterQueueUrl"],
        AttributeNames=["ApproximateNumberOfMessages"],
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "0"
    # After the outage the stack still answers (gate bypassed: fail open)
    late = with_stack_secret(private_stack, "github", delivery_id=f"{marker}-late")
    assert post(private_stack, "github", late) == 202
