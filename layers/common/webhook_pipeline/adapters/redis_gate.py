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

from collections.abc import Callable
from typing import Any

from webhook_pipeline.errors import GateUnavailableError
from webhook_pipeline.ingest.claims import ClaimOutcome

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


class RedisGate:
    """The dedup gate on a redis-py client.

    Every Redis error (connection refused, timeout, TLS failure, cluster errors, a server that
    does not know ``SET ... NX GET``) is raised as :class:`GateUnavailableError`; the caller
    decides whether to fail open or closed (invariant I7).

    Parameters
    ----------
    client : redis.Redis | redis.cluster.RedisCluster | None
        A ready client, or ``None`` with ``client_factory``.
    client_factory : Callable[[], client] | None
        Builds the client on first use, inside the error handling: a cluster client connects
        while it is built, and Redis being down then must fail open like any other command.
    """

    def __init__(self, client: Any = None, client_factory: Callable[[], Any] | None = None) -> None:
        if (client is None) == (client_factory is None):
            raise ValueError("give exactly one of client and client_factory")
        self._client = client
        self._factory = client_factory
        self._scripts: tuple[Any, Any] | None = None

    @property
    def client(self) -> Any:
        """The redis-py client (built on first use when a factory was given)."""
        if self._client is None and self._factory is not None:
            self._client = self._factory()
        return self._client

    def _script(self, index: int) -> Any:
        if self._scripts is None:
            client = self.client
            self._scripts = (client.register_script(_CONFIRM), client.register_script(_RELEASE))
        return self._scripts[index]

    def claim(self, key: str, token: str, ttl_seconds: int) -> ClaimOutcome:
        """Claim ``key`` for ``token`` for ``ttl_seconds`` seconds (one ``SET NX EX GET``).

        Raises
        ------
        GateUnavailableError
            Redis did not answer within its timeouts or refused the command.
        """
        previous = self._call(
            lambda: self.client.set(key, f"p:{token}", nx=True, ex=ttl_seconds, get=True)
        )
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
            lambda: self._script(0)(keys=[key], args=[f"p:{token}", f"d:{token}", ttl_seconds])
        )
        return bool(result)

    def release(self, key: str, token: str) -> bool:
        """Delete the claim if it is still this invocation's pending claim (compare-and-delete).

        Raises
        ------
        GateUnavailableError
        """
        return bool(self._call(lambda: self._script(1)(keys=[key], args=[f"p:{token}"])))

    def _call(self, fn: Callable[[], Any]) -> Any:
        from redis.exceptions import RedisClusterException, RedisError

        try:
            return fn()
        except (RedisError, RedisClusterException) as exc:
            raise GateUnavailableError(f"{type(exc).__name__}: {exc}") from exc


def redis_client(
    url: str, connect_timeout_ms: int, read_timeout_ms: int, cluster_mode: bool = False
) -> Any:
    """Create a redis-py client for the gate (once per container).

    Parameters
    ----------
    url : str
        ``redis://host:port/0`` or ``rediss://host:port/0`` (TLS, as ElastiCache Serverless
        requires). Database 0 only in cluster mode (``SELECT`` is not allowed there).
    connect_timeout_ms, read_timeout_ms : int
        Socket timeouts in milliseconds (100-300 ms suits a gate in the same VPC).
    cluster_mode : bool
        Use the cluster client (ElastiCache Serverless and cluster-mode-enabled caches). Every
        gate command touches one key, so each goes to the key's slot owner.

    Notes
    -----
    No client-side retries: a slow or absent Redis must cost at most one timeout before the
    ingest function fails open. A cluster client connects (``CLUSTER SLOTS``) when built: give
    :class:`RedisGate` a factory so that happens inside its error handling.
    """
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    options: dict[str, Any] = {
        "socket_connect_timeout": connect_timeout_ms / 1000,
        "socket_timeout": read_timeout_ms / 1000,
        "retry": Retry(NoBackoff(), 0),
    }
    if cluster_mode:
        from redis.cluster import RedisCluster

        return RedisCluster.from_url(url, **options)
    import redis

    return redis.Redis.from_url(url, retry_on_timeout=False, health_check_interval=0, **options)
