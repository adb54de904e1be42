"""The gate on the oldest Redis it is run against: redis-server 6.0.16 (case C16).

``SET ... NX GET`` is a syntax error before Redis 7.0 (on 6.0 as on 6.2), so a gate built on it
would fail open forever on an older cache. The gate uses single-key Lua scripts instead; these
tests run every script and form it relies on (claim, confirm, release, their pipelined forms,
the one-time token's bind script), and the whole ingest function, against Debian bullseye's
redis-server 6.0.16. The session's own redis-server (7.x, on PATH) runs the other tests.

The binary comes from ``.ci/fetch-redis6.sh`` (``.ci/run`` calls it): ``REDIS6_SERVER`` names it,
else ``~/.cache/webhook-pipeline/redis-6.0/redis-server``. Without it every test here is skipped
with that reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from webhook_pipeline.adapters.redis_gate import RedisGate
from webhook_pipeline.ingest.claims import Claim, ClaimOutcome, gate_key
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.conftest import RedisServer, free_port
from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

DEFAULT_BINARY = Path.home() / ".cache" / "webhook-pipeline" / "redis-6.0" / "redis-server"
DIGEST = "0" * 64
SOURCES = example_sources()


def redis6_binary() -> Path | None:
    named = os.environ.get("REDIS6_SERVER")
    path = Path(named) if named else DEFAULT_BINARY
    return path if path.is_file() and os.access(path, os.X_OK) else None


@pytest.fixture(scope="module")
def redis6() -> Iterator[RedisServer]:
    """A redis-server 6.0.x on a free port (stopped by its PID at teardown), or a skip."""
    binary = redis6_binary()
    if binary is None:
        pytest.skip(
            f"no redis-server 6.0 at {os.environ.get('REDIS6_SERVER') or DEFAULT_BINARY}: "
            "run .ci/fetch-redis6.sh (fetches Debian bullseye's 6.0.16 with apt-get)"
        )
    server = RedisServer(port=free_port(), binary=str(binary))
    server.start()
    try:
        version = str(server.client().info("server")["redis_version"])
        assert version.startswith("6.0."), version
        yield server
    finally:
        server.stop()


@pytest.fixture
def gate(redis6: RedisServer) -> RedisGate:
    redis6.client().flushdb()
    return RedisGate(redis.Redis.from_url(redis6.url))


def test_the_server_is_6_0_and_refuses_set_nx_get(redis6: RedisServer) -> None:
    # The premise of case C16: the form the gate must not rely on is refused by this server
    client = redis6.client()
    with pytest.raises(redis.ResponseError, match="syntax error"):
        client.set("c16", "v", nx=True, get=True)


def test_claim_confirm_release_on_redis_6_0(gate: RedisGate, redis6: RedisServer) -> None:
    client = redis6.client()
    key = gate_key("whd:", "github", "r6-one")
    mine, other = Claim(key, "tok-1", DIGEST), Claim(key, "tok-2", DIGEST)
    assert gate.claim(mine, 30).outcome is ClaimOutcome.CLAIMED
    assert 0 < client.ttl(key) <= 30
    assert gate.claim(other, 30).outcome is ClaimOutcome.IN_FLIGHT
    assert not gate.release(other)  # not the holder
    assert gate.confirm(mine, 3600)
    assert client.get(key) == mine.done_value.encode() and client.ttl(key) > 3500
    assert gate.claim(other, 30).outcome is ClaimOutcome.DUPLICATE
    # A claim released by its holder is free again
    key2 = gate_key("whd:", "github", "r6-two")
    assert gate.claim(Claim(key2, "tok-3", DIGEST), 30).outcome is ClaimOutcome.CLAIMED
    assert gate.release(Claim(key2, "tok-3", DIGEST))
    assert client.exists(key2) == 0
    # A claim that expired before the confirm is set again as done
    key3 = gate_key("whd:", "github", "r6-three")
    late = Claim(key3, "tok-4", DIGEST)
    assert gate.claim(late, 30).outcome is ClaimOutcome.CLAIMED
    client.delete(key3)
    assert gate.confirm(late, 3600)
    assert client.get(key3) == late.done_value.encode()


def test_pipelined_forms_and_one_time_tokens_on_redis_6_0(
    gate: RedisGate, redis6: RedisServer
) -> None:
    client = redis6.client()
    claims = [Claim(gate_key("whd:", "slack", f"r6-b{i}"), f"tok-{i}", DIGEST) for i in range(3)]
    assert [r.outcome for r in gate.claim_many(claims, 30)] == [ClaimOutcome.CLAIMED] * 3
    gate.confirm_many(claims[:2], 3600)
    gate.release_many(claims[2:])
    assert [client.get(c.key) for c in claims] == [c.done_value.encode() for c in claims[:2]] + [
        None
    ]
    again = [Claim(c.key, "tok-x", DIGEST) for c in claims]
    assert [r.outcome for r in gate.claim_many(again, 30)] == [
        ClaimOutcome.DUPLICATE,
        ClaimOutcome.DUPLICATE,
        ClaimOutcome.CLAIMED,
    ]
    # A one-time token is bound to the first delivery id it came with
    assert gate.claim_once("whd:once:r6", 60, "evt_a") is True
    assert gate.claim_once("whd:once:r6", 60, "evt_a") is True
    assert gate.claim_once("whd:once:r6", 60, "evt_b") is False
    assert 0 < client.ttl("whd:once:r6") <= 60


def test_ingest_dedups_on_redis_6_0(
    make_ingest: Callable[..., IngestHarness], redis6: RedisServer
) -> None:
    # Given the ingest function whose gate is the 6.0 server
    redis6.client().flushdb()
    ingest = make_ingest(REDIS_URL=redis6.url, SOURCES_CATALOGUE="true")
    event: dict[str, Any] = http_api_event(
        signed_delivery(SOURCES["github"], delivery_id="r6-ingest-1")
    )
    # When the same delivery arrives twice
    first, second = ingest.invoke(event), ingest.invoke(event)
    # Then the gate really claimed it there (not bypassed: fail-open would answer 202 twice)
    assert (first["statusCode"], second["statusCode"]) == (202, 200)
    assert json.loads(second["body"])["status"] == "duplicate"
    assert [e["gate"] for e in ingest.envelopes()] == ["claimed"]
    assert redis6.client().get(gate_key("whd:", "github", "r6-ingest-1")) is not None
