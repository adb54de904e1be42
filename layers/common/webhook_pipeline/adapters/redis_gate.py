"""The dedup gate on Redis / Valkey / ElastiCache: claim a delivery id with one atomic command.

Redis is a fast filter in front of the queue, never the guarantee (the processor's DynamoDB
conditional writes are): it may be flushed, evicted, restarted or unreachable at any moment.

Key and value
-------------
Key ``{prefix}{source}:{id}`` (no time in it; ids outside ``[A-Za-z0-9._-]{1,64}`` are replaced
by ``#`` + their hex SHA-256). Value ``p:<token>:<digest>`` while the delivery is being enqueued
(a *pending* claim, short TTL: a crashed invocation's claim expires quickly) and
``d:<token>:<digest>`` once SQS accepted it (*done*, the source's TTL: its sender's retry
horizon). ``<digest>`` is the content hash a later duplicate is compared with.

Commands per webhook (all Lua scripts, one ``EVALSHA`` each: they work on every server the gate
accepts, Redis OSS 6.2 and later, Valkey 7/8, ElastiCache Serverless, tested on 6.0.16 and
7.x; ``SET ... NX GET``, which would do the claim natively, is a syntax error before Redis 7.0)
--------------------------------------------------------------------------------------------
- claim: ``GET`` and, when empty, ``SET value EX ttl``, atomically. The answer is what stood
  there: nothing means this invocation holds the claim; a ``d:`` value is a duplicate of an
  enqueued delivery; a ``p:`` value is a delivery another invocation is still enqueueing (or that
  crashed): not yet durable, so the sender must retry later (invariant I1), never be told
  "duplicate". (Case C06: plain ``SET NX`` answers ``True``/``None``; here ``None`` is the success
  case; :meth:`ClaimResult.from_previous` reads the answer in one place.)
- confirm after SQS accepted: compare-and-set ``p:..`` -> ``d:..`` with the long TTL; a claim that
  expired before the confirm is set again (the delivery is enqueued, so later copies are
  duplicates). Accepted webhook: 2 commands. Duplicate: 1 command.
- release when the enqueue failed: compare-and-delete on our ``p:..`` value, so a claim another
  invocation took over after expiry is never deleted.
- batched deliveries: the same scripts pipelined, one round trip per step for all events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from webhook_pipeline.errors import GateUnavailableError
from webhook_pipeline.ingest.claims import Claim, ClaimResult

CLAIM_SCRIPT = """
local v = redis.call('GET', KEYS[1])
if v then
  return v
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return false
"""

CONFIRM_SCRIPT = """
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

# A one-time token bound to the deliveries it first came with: 1 when it is (now) ours.
BIND_SCRIPT = """
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  return 1
end
if v == ARGV[1] then
  return 1
end
return 0
"""

RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisGate:
    """The dedup gate on a redis-py client (:class:`~webhook_pipeline.ingest.ports.DedupGate`).

    Every Redis error (connection refused, timeout, TLS failure, cluster errors, a refused
    script) is raised as :class:`GateUnavailableError`; the caller decides whether to fail open
    or closed (invariant I7).

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
        self._scripts: dict[str, Any] = {}

    @property
    def client(self) -> Any:
        """The redis-py client (built on first use when a factory was given)."""
        if self._client is None and self._factory is not None:
            self._client = self._factory()
        return self._client

    def connect(self) -> None:
        """Build the client and open its first connection (one ``PING``): during a function's
        init, so that the first claim does not pay for the connection and its TLS handshake.

        Raises
        ------
        GateUnavailableError
            Redis did not answer within its timeouts; the next command connects again.
        """
        self._call(lambda: self.client.ping())

    def _script(self, source: str) -> Any:
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self.client.register_script(source)
        return script

    # -- one delivery -----------------------------------------------------------------------

    def claim(self, claim: Claim, ttl_seconds: int) -> ClaimResult:
        """Claim ``claim.key`` as pending for ``ttl_seconds`` (one ``EVALSHA``).

        Raises
        ------
        GateUnavailableError
            Redis did not answer within its timeouts or refused the command.
        """
        previous = self._call(
            lambda: self._script(CLAIM_SCRIPT)(
                keys=[claim.key], args=[claim.pending_value, ttl_seconds]
            )
        )
        return ClaimResult.from_previous(previous)

    def confirm(self, claim: Claim, ttl_seconds: int) -> bool:
        """Mark the claim done and keep it ``ttl_seconds`` seconds (the dedup window).

        Returns ``False`` when another invocation holds the key now (our claim had expired and
        was taken over), which leaves that claim alone.

        Raises
        ------
        GateUnavailableError
        """
        return bool(
            self._call(
                lambda: self._script(CONFIRM_SCRIPT)(
                    keys=[claim.key], args=[claim.pending_value, claim.done_value, ttl_seconds]
                )
            )
        )

    def release(self, claim: Claim) -> bool:
        """Delete the claim if it is still this invocation's pending claim (compare-and-delete).

        Raises
        ------
        GateUnavailableError
        """
        return bool(
            self._call(
                lambda: self._script(RELEASE_SCRIPT)(keys=[claim.key], args=[claim.pending_value])
            )
        )

    def claim_once(self, key: str, ttl_seconds: int, owner: str) -> bool:
        """``SET key owner NX EX ttl``, or compare the owner already there, in one script (every
        Redis version): ``False`` when ``key`` is bound to another owner.

        Raises
        ------
        GateUnavailableError
        """
        return bool(
            self._call(lambda: self._script(BIND_SCRIPT)(keys=[key], args=[owner, ttl_seconds]))
        )

    # -- many deliveries of one POST: one round trip each ------------------------------------

    def claim_many(self, claims: Sequence[Claim], ttl_seconds: int) -> list[ClaimResult]:
        """:meth:`claim` for every claim in one pipelined round trip (results in order).

        Raises
        ------
        GateUnavailableError
        """
        answers = self._pipelined(
            CLAIM_SCRIPT, [([c.key], [c.pending_value, ttl_seconds]) for c in claims]
        )
        return [ClaimResult.from_previous(a) for a in answers]

    def confirm_many(self, claims: Sequence[Claim], ttl_seconds: int) -> None:
        """:meth:`confirm` for every claim in one round trip.

        Raises
        ------
        GateUnavailableError
        """
        self._pipelined(
            CONFIRM_SCRIPT,
            [([c.key], [c.pending_value, c.done_value, ttl_seconds]) for c in claims],
        )

    def release_many(self, claims: Sequence[Claim]) -> None:
        """:meth:`release` for every claim in one round trip.

        Raises
        ------
        GateUnavailableError
        """
        self._pipelined(RELEASE_SCRIPT, [([c.key], [c.pending_value]) for c in claims])

    def _pipelined(self, source: str, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """Run ``source`` once per ``(keys, args)`` in one non-transactional pipeline.

        ``EVALSHA`` is sent directly (redis-py's pipelined scripts add a ``SCRIPT EXISTS`` round
        trip per execute); a server that lost its scripts (restart, flush) answers
        ``NOSCRIPT``, and only then the script is loaded and those calls are sent again.
        """
        from redis.exceptions import NoScriptError

        if not calls:
            return []
        sha = self._script(source).sha

        def run(indexes: list[int]) -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for i in indexes:
                keys, args = calls[i]
                pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)
            return list(pipe.execute(raise_on_error=False))

        def attempt() -> list[Any]:
            results = run(list(range(len(calls))))
            missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
            if missing:
                self.client.script_load(source)
                for i, again in zip(missing, run(missing), strict=True):
                    results[i] = again
            for result in results:
                if isinstance(result, Exception):
                    raise result
            return results

        answer: list[Any] = self._call(attempt)
        return answer

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
