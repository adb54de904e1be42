"""The local stack's functions: each one's environment with local stand-ins for what the template
cannot resolve here (:func:`local_environment`), its worker count (:func:`concurrency`), and the
cold starts and stops of all of them in parallel (:func:`cold_start`, :func:`stop_all`)."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.local.containers import container_environment
from webhook_pipeline_ops.local.runtime import LocalFunction

log = logging.getLogger("webhook_pipeline_ops.local")

LOCAL_HOOKS_VARIABLE = "WEBHOOK_PIPELINE_LOCAL_HOOKS_MODULE"
"""Names the processor's ``HOOKS_MODULE`` for the local stack (the e2e tests load the ledger)."""


def local_environment(
    spec: Any, *, redis_url: str, default_sources: Path, stack_name: str, for_containers: bool
) -> None:
    """Complete ``spec.environment`` in place: the local Redis (not a cluster), the ledger hooks
    of :data:`LOCAL_HOOKS_VARIABLE`, every provider served (``SOURCES_CATALOGUE``), the
    container tolerance with ``for_containers``, ``default_sources`` where ``SOURCES_FILE`` does
    not resolve to a file; variables still unresolved are logged."""
    env = spec.environment
    if "REDIS_URL" in env or "REDIS_URL" in spec.unresolved_environment:
        env["REDIS_URL"] = redis_url
        # The local Redis is a single non-cluster server, unlike ElastiCache Serverless.
        env["REDIS_CLUSTER_MODE"] = "false"
    if spec.sqs_events and (hooks := os.environ.get(LOCAL_HOOKS_VARIABLE)):
        env["HOOKS_MODULE"] = hooks  # the processor's; e.g. webhook_pipeline_ops.ledger
    if "SOURCES_CATALOGUE" in env:
        # Serve every provider locally (the simulator, events/ and the dev secrets
        # cover them all); a deployed stack serves only sources.toml.
        env["SOURCES_CATALOGUE"] = "true"
    if for_containers:
        container_environment(env)
    sources_file = env.get("SOURCES_FILE")
    if (
        sources_file is not None and not Path(sources_file).is_file()
    ) or "SOURCES_FILE" in spec.unresolved_environment:
        env["SOURCES_FILE"] = str(default_sources)
    env.setdefault("POWERTOOLS_SERVICE_NAME", f"{stack_name}-{spec.name}")
    still = [k for k in spec.unresolved_environment if k not in env]
    if still:
        log.warning(
            "%s: environment variables not resolvable locally: %s",
            spec.logical_id,
            ", ".join(still),
        )


def concurrency(spec: Any, ingest_workers: int) -> int:
    """Worker processes of a function: ``ingest_workers`` behind the HTTP routes, one per SQS
    event source (as many as its pollers invoke at once), one otherwise."""
    if spec.http_routes:
        return ingest_workers
    return max(1, len([s for s in spec.sqs_events if s.enabled]))


def cold_start(functions: list[LocalFunction]) -> tuple[str, BaseException] | None:
    """Load every function at once; the first failure by logical id, or ``None``."""
    errors: dict[str, BaseException] = {}

    def load(fn: LocalFunction) -> None:
        try:
            fn.load()
        except Exception as exc:
            errors[fn.spec.logical_id] = exc

    threads = [threading.Thread(target=load, args=(fn,)) for fn in functions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return min(errors.items(), key=lambda item: item[0], default=None)


def stop_all(functions: list[LocalFunction]) -> None:
    """Stop every function at once: their workers' grace periods run side by side."""
    threads = [threading.Thread(target=fn.stop) for fn in functions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
