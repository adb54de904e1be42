"""The dedup gate: claim a delivery id in Redis (ElastiCache) with one atomic command.

Redis is a fast filter in front of the queue, never the guarantee (the processor's DynamoDB
conditional writes are): it may be flushed, evicted, restarted or unreachable at any moment.

Key and value
-------------
Key ``{prefix}{source}:{id}`` (no time in it; ids outside ``[A-Za-z0-9._-]{1,64}`` are replaced
by ``#`` + their hex SHA-256). Value ``p:<token>`` while the delivery is being enqueued (a
*pending* claim, short TTL: a crashed invocation's claim expires quickly) and ``d:<token>`` once
SQS accepted it (*done*, long TTL covering the senders' retry horizons).

Commands per webhook
--------------------
- claim: ``SET key p:<token> NX EX <claim_ttl> GET`` (Redis >= 7.0 / Valkey). One round trip
  that both claims and tells what stood there: ``None`` means this invocation holds the claim; a
  ``d:`` value is a duplicate of an enqueued delivery; a ``p:`` value is a delivery another
  invocation is still enqueueing (or that crashed): not yet durable, so the sender must retry
  later (invariant I1), never be told "duplicate".
  Note (case C06): plain ``SET NX`` answers ``True``/``None``, but with ``GET`` the answer is the
  *previous value*, so ``None`` is the success case here. :meth:`RedisGate.claim` maps both
  forms to :class:`ClaimOutcome` in one place.
- confirm after SQS accepted: compare-and-set ``p:<token>`` -> ``d:<token>`` with the long TTL
  (a Lua script; one ``EVALSHA``). Accepted webhook: 2 commands. Duplicate: 1 command.
- release when the enqueue failed: compare-and-delete on ``p:<token>`` (Lua), so a claim that
  another invocation took over after expiry is never deleted.
"""

from __future__ import annotations

import enum
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from webhook_pipeline.errors import GateUnavailableError

_PLAIN_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

_CONFIRM = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  return 1
elseif not v then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  return 2
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class ClaimOutcome(enum.Enum):
    """What a claim attempt found."""

    CLAIMED = "claimed"  # this invocation holds the claim
    DUPLICATE = "duplicate"  # already enqueued by an earlier request
    IN_FLIGHT = "in_flight"  # another request holds a pending claim: not yet durable


def gate_key(prefix: str, source: str, delivery_id: str) -> str:
    """Return the Redis key of ``(source, delivery_id)``.

    Parameters
    ----------
    prefix : str
        Key prefix (``"whd:"`` by default), lets several stacks share one cache.
    source : str
        Source name (``[a-z0-9_-]``, validated by the sources file: contains no ``:``).
    delivery_id : str
        The sender's delivery id, at most 256 characters (longer ones are rejected earlier).

    Returns
    -------
    str
        ``{prefix}{source}:{id}`` for plain ids, ``{prefix}{source}:#{sha256 hex}`` otherwise.
    """
    if _PLAIN_ID.match(delivery_id):
        return f"{prefix}{source}:{delivery_id}"
    digest = hashlib.sha256(delivery_id.encode("utf-8")).hexdigest()
    return f"{prefix}{source}:#{digest}"


class DedupGate(Protocol):
    """Interface of the dedup gate (Redis in production; same semantics elsewhere)."""

    def claim(self, key: str, token: str, ttl_seconds: int) -> ClaimOutcome: ...

    def confirm(self, key: str, token: str, ttl_seconds: int) -> bool: ...

    def release(self, key: str, token: str) -> bool: ...


@dataclass
class RedisGate:
    """The dedup gate on a redis-py client.

    Every Redis error (connection refused, timeout, TLS failure, a server that does not know
    ``SET ... NX GET``) is raised as :class:`GateUnavailableError`; the caller decides whether to
    fail open or closed (invariant I7).
    """

    client: Any  # redis.Redis

    def __post_init__(self) -> None:
        self._confirm = self.client.register_script(_CONFIRM)
        self._release = self.client.register_script(_RELEASE)

    def claim(self, key: str, token: str, ttl_seconds: int) -> ClaimOutcome:
        """Claim ``key`` for ``token`` for ``ttl_seconds`` seconds (one ``SET NX EX GET``).

        Raises
        ------
        GateUnavailableError
            Redis did not answer within its timeouts or refused the command.
        """
        previous = self._call(self.client.set, key, f"p:{token}", nx=True, ex=ttl_seconds, get=True)
        if previous is None:
            return ClaimOutcome.CLAIMED
        if isinstance(previous, bytes) and previous.startswith(b"p:"):
            return ClaimOutcome.IN_FLIGHT
        return ClaimOutcome.DUPLICATE

    def confirm(self, key: str, token: str, ttl_seconds: int) -> bool:
        """Mark the claim done and keep it ``ttl_seconds`` seconds (the dedup window).

        Returns ``False`` when another invocation holds the key now (our claim had expired and
        was taken over), which leaves that claim alone.

        Raises
        ------
        GateUnavailableError
        """
        result = self._call(
            self._confirm, keys=[key], args=[f"p:{token}", f"d:{token}", ttl_seconds]
        )
        return bool(result)

    def release(self, key: str, token: str) -> bool:
        """Delete the claim if it is still this invocation's pending claim (compare-and-delete).

        Raises
        ------
        GateUnavailableError
        """
        return bool(self._call(self._release, keys=[key], args=[f"p:{token}"]))

    @staticmethod
    def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        import redis

        try:
            return fn(*args, **kwargs)
        except redis.RedisError as exc:
            raise GateUnavailableError(f"{type(exc).__name__}: {exc}") from exc


def redis_client(url: str, connect_timeout_ms: int, read_timeout_ms: int) -> Any:
    """Create a redis-py client for the gate (once per container).

    Parameters
    ----------
    url : str
        ``redis://host:port/db`` or ``rediss://host:port/db`` (TLS, as ElastiCache Serverless
        requires).
    connect_timeout_ms, read_timeout_ms : int
        Socket timeouts in milliseconds (100-300 ms suits a gate in the same VPC).

    Notes
    -----
    No client-side retries: a slow or absent Redis must cost at most one timeout before the
    ingest function fails open.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(
        url,
        socket_connect_timeout=connect_timeout_ms / 1000,
        socket_timeout=read_timeout_ms / 1000,
        retry=Retry(NoBackoff(), 0),
        retry_on_timeout=False,
        health_check_interval=0,
    )


@dataclass
class CircuitBreaker:
    """Skips the gate for ``cooldown_seconds`` after it failed, so an outage costs one timeout
    per container per cooldown instead of one per request.

    ``now`` is injectable (seconds, monotonic) for tests.
    """

    cooldown_seconds: float
    now: Callable[[], float] = time.monotonic
    _open_until: float = 0.0

    def allow(self) -> bool:
        return bool(self.now() >= self._open_until)

    def trip(self) -> None:
        self._open_until = self.now() + self.cooldown_seconds

    def reset(self) -> None:
        self._open_until = 0.0
