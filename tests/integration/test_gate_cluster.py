"""The gate through the cluster client, against a real single-node Redis Cluster (all 16384
slots on one redis-server this test starts), as ElastiCache Serverless (cluster mode enabled)
requires; and a cluster that cannot be reached at all."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from webhook_pipeline.adapters.redis_gate import RedisGate, redis_client
from webhook_pipeline.errors import GateUnavailableError
from webhook_pipeline.ingest.claims import Claim, ClaimOutcome, gate_key
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.conftest import free_port

pytestmark = pytest.mark.integration

DIGEST = "0" * 64  # content digest carried by the claims of these tests


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is valid and free too."""
    for _ in range(100):
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


def start_node(port: int, folder: Path) -> subprocess.Popen[bytes]:
    """A redis-server in cluster mode; its nodes.conf in ``folder`` keeps the slots on restart."""
    return subprocess.Popen(
        [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(folder / "nodes.conf"),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_cluster_ok(port: int) -> None:
    """Wait for the node, give it every slot (first start), wait for cluster_state:ok."""
    node = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
    deadline = time.monotonic() + 10
    while True:
        try:
            node.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    if b"cluster_slots_assigned:0" in node.execute_command("CLUSTER", "INFO"):
        node.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    while b"cluster_state:ok" not in node.execute_command("CLUSTER", "INFO"):
        if time.monotonic() > deadline:
            pytest.fail("single-node cluster did not reach cluster_state:ok")
        time.sleep(0.05)


@dataclass
class ClusterNode:
    """A single-node Redis Cluster this test started (and alone stops, by its process)."""

    port: int
    folder: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = start_node(self.port, self.folder)
        wait_cluster_ok(self.port)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def cluster_node(tmp_path: Path) -> Iterator[ClusterNode]:
    node = ClusterNode(cluster_port(), tmp_path)
    node.start()
    yield node
    node.stop()


@pytest.fixture
def cluster_url(cluster_node: ClusterNode) -> str:
    return cluster_node.url


def test_claim_confirm_release_through_the_cluster_client(cluster_url: str) -> None:
    gate = RedisGate(client_factory=lambda: redis_client(cluster_url, 500, 500, cluster_mode=True))
    assert type(gate.client).__name__ == "RedisCluster"
    key = gate_key("whd:", "github", "cluster-1")
    assert gate.claim(Claim(key, "t1", DIGEST), 30).outcome is ClaimOutcome.CLAIMED
    assert gate.claim(Claim(key, "t2", DIGEST), 30).outcome is ClaimOutcome.IN_FLIGHT
    assert gate.release(Claim(key, "t1", DIGEST)) is True
    assert gate.claim(Claim(key, "t3", DIGEST), 30).outcome is ClaimOutcome.CLAIMED
    assert gate.confirm(Claim(key, "t3", DIGEST), 600) is True
    assert gate.claim(Claim(key, "t4", DIGEST), 30).outcome is ClaimOutcome.DUPLICATE


def test_ingest_in_cluster_mode_accepts_then_deduplicates(make_ingest, cluster_url: str) -> None:
    harness = make_ingest(REDIS_URL=cluster_url, REDIS_CLUSTER_MODE="true")
    event = http_api_event(signed_delivery(example_sources()["github"]))
    assert harness.invoke(event)["statusCode"] == 202
    assert harness.invoke(event)["statusCode"] == 200
    assert [e["gate"] for e in harness.envelopes()] == ["claimed"]


def test_unreachable_cluster_fails_open_on_first_use(make_ingest) -> None:
    # The cluster client connects while it is built: that must fail open too, not 500.
    harness = make_ingest(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0", REDIS_CLUSTER_MODE="true")
    assert (
        harness.invoke(http_api_event(signed_delivery(example_sources()["github"])))["statusCode"]
        == 202
    )
    assert [e["gate"] for e in harness.envelopes()] == ["bypassed"]


def test_gate_wraps_cluster_errors() -> None:
    gate = RedisGate(
        client_factory=lambda: redis_client(f"redis://127.0.0.1:{free_port()}/0", 100, 100, True)
    )
    with pytest.raises(GateUnavailableError):
        gate.claim(Claim("k", "t", DIGEST), 5)


def test_cluster_stopped_mid_run_fails_open_and_the_gate_recovers(
    make_ingest, cluster_node
) -> None:
    harness = make_ingest(REDIS_URL=cluster_node.url, REDIS_CLUSTER_MODE="true")
    sources = example_sources()
    before = http_api_event(signed_delivery(sources["github"], delivery_id="before"))
    assert harness.invoke(before)["statusCode"] == 202

    cluster_node.stop()  # the test's own node, never the machine's Redis
    during = http_api_event(signed_delivery(sources["github"], delivery_id="during"))
    assert harness.invoke(during)["statusCode"] == 202

    cluster_node.start()  # same port; nodes.conf keeps the slots, the data is gone
    after = http_api_event(signed_delivery(sources["github"], delivery_id="after"))
    assert harness.invoke(after)["statusCode"] == 202
    assert harness.invoke(after)["statusCode"] == 200
    gates = {e["delivery_id"]: e["gate"] for e in harness.envelopes()}
    assert gates == {"before": "claimed", "during": "bypassed", "after": "claimed"}
