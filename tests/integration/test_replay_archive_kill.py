"""A replay-from-archive job killed (SIGKILL) half way and started again goes on from its cursor:
every candidate sent, and nothing sent twice but the messages sent after the last checkpoint
(at most one chunk). The CLI runs as a real process against a moto server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer
from webhook_pipeline.replay.archive_job import CHUNK
from webhook_pipeline.replay.archive_state import JobStore

from tests.conftest import free_port
from tests.replay_archive_fixtures import (
    ARCHIVE_BUCKET,
    PAYLOAD_BUCKET,
    TABLE,
    ArchiveStack,
    make_stack,
    put_archive,
    record,
)

pytestmark = pytest.mark.integration
CLI = Path(sys.executable).parent / "webhook-pipeline"
CANDIDATES = 60


@pytest.fixture
def server_stack() -> Iterator[tuple[str, ArchiveStack]]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        clients = {
            n: boto3.client(
                n,
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
            for n in ("s3", "dynamodb", "sqs")
        }
        yield endpoint, make_stack(clients)
    finally:
        server.stop()


def start_job(endpoint: str, stack: ArchiveStack) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "WEBHOOK_PIPELINE_ARCHIVE_BUCKET": ARCHIVE_BUCKET,
        "WEBHOOK_PIPELINE_TABLE": TABLE,
        "WEBHOOK_PIPELINE_QUEUE_URL": stack.queue_url,
        "WEBHOOK_PIPELINE_PAYLOAD_BUCKET": PAYLOAD_BUCKET,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    argv = [
        str(CLI),
        "replay",
        "--from-archive",
        "--mode",
        "redeliver",
        "--from",
        "2026-11-30T10:00:00Z",
        "--to",
        "2026-11-30T12:00:00Z",
        "--job",
        "kill-1",
        "--rate",
        "40",
        "--endpoint-url",
        endpoint,
        "--region",
        "us-east-1",
        "--json",
        "--no-progress",
    ]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def queued(stack: ArchiveStack) -> int:
    attributes = stack.sqs.get_queue_attributes(
        QueueUrl=stack.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_a_job_killed_half_way_resumes_from_its_cursor(
    server_stack: tuple[str, ArchiveStack],
) -> None:
    endpoint, stack = server_stack
    put_archive(stack.s3, [record(f"evt_{i:03d}", i) for i in range(CANDIDATES)])
    process = start_job(endpoint, stack)
    try:
        deadline = time.monotonic() + 60
        while queued(stack) < 25:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the job sent too little in 60 s"
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    sent_before_kill = queued(stack)
    state = JobStore(stack.s3, ARCHIVE_BUCKET).load("kill-1")
    assert state is not None
    assert state.status == "running" and 0 < state.cursor < CANDIDATES
    assert sent_before_kill < CANDIDATES
    resend = sent_before_kill - state.cursor  # sent after the last checkpoint
    assert 0 <= resend <= CHUNK

    again = start_job(endpoint, stack)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    report = json.loads(out)
    assert (report["status"], report["resumed_from"]) == ("complete", state.cursor)
    assert report["sent"] == CANDIDATES - state.cursor

    counts = Counter(e.delivery_id for e in stack.drain())
    assert set(counts) == {f"evt_{i:03d}" for i in range(CANDIDATES)}
    assert sum(counts.values()) == CANDIDATES + resend
    assert sum(1 for n in counts.values() if n > 1) == resend
    assert max(counts.values()) <= 2
