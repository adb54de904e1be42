"""IngestFunction: POST (and handshake GET) /webhooks/{source} -> verify, claim, enqueue, answer.

Thin handler: settings and sources are validated at cold start (a bad configuration fails the
init loudly; a source reading its delivery id from unsigned material is logged as a warning);
the SQS and Secrets Manager clients and the Redis connection are made during the init too, as
Lambda recommends (the init has its own time limit, the handler's 5 s timeout does not pay for
them; the S3 client waits for the first body over the claim-check threshold); the use case is
:class:`webhook_pipeline.ingest.service.IngestService`, which answers every request with an
:class:`~webhook_pipeline.providers.model.Answer` mapped here to the API Gateway response.
"""

from __future__ import annotations

import functools
import os
from time import perf_counter
from typing import Any

from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.typing import LambdaContext
from webhook_pipeline.adapters.clients import aws_client
from webhook_pipeline.adapters.redis_gate import RedisGate, redis_client
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.adapters.secrets_manager import SecretsManagerStore
from webhook_pipeline.adapters.sqs import SqsQueue
from webhook_pipeline.errors import GateUnavailableError, IngestError
from webhook_pipeline.ingest.claims import CircuitBreaker
from webhook_pipeline.ingest.service import IngestPolicy, IngestService, TimeBudget
from webhook_pipeline.observability import (
    MetricName,
    MetricUnit,
    capture_lambda_handler,
    logger,
    metrics,
)
from webhook_pipeline.providers.model import Answer
from webhook_pipeline.settings import IngestSettings
from webhook_pipeline.sources import load_sources, warn_unsigned
from webhook_pipeline.webhook_request import request_from_event

settings = IngestSettings.load()  # from the environment; fails the init if invalid
SOURCES = load_sources(
    settings.sources_file,
    settings.extra_provider_modules(),
    catalogue=settings.sources_catalogue,
    min_tolerance_seconds=settings.local_min_tolerance_seconds,
)
# Deployed, every cold start warns per source; the local stack prints one summary when it starts
# and sets this, so that its workers (several per function, restarted) do not repeat it.
if os.environ.get("WEBHOOK_PIPELINE_UNSIGNED_SUMMARY") != "printed":
    warn_unsigned(SOURCES)


gate = RedisGate(
    client_factory=functools.partial(
        redis_client,
        settings.redis_url,
        settings.redis_connect_timeout_ms,
        settings.redis_read_timeout_ms,
        settings.redis_cluster_mode,
    )
)


@functools.cache
def service() -> IngestService:
    """The wired use case, built once per container (during the init, below)."""
    return IngestService(
        sources=SOURCES,
        secrets=SecretsManagerStore(
            prefix=settings.secrets_prefix,
            provider=SecretsProvider(boto3_client=aws_client("secretsmanager", settings)),
            max_age_seconds=settings.secrets_max_age_seconds,
        ),
        gate=gate,
        queue=SqsQueue(aws_client("sqs", settings), settings.queue_url),
        # Built on the first body over the claim-check threshold: most never need S3.
        payloads=S3PayloadStore(
            None,
            settings.payload_bucket,
            client_factory=lambda: aws_client("s3", settings),
        ),
        policy=IngestPolicy(
            claim_ttl_seconds=settings.claim_ttl_seconds,
            dedup_ttl_max_seconds=settings.dedup_ttl_max_seconds,
            max_body_bytes=settings.max_body_bytes,
            inline_body_max_bytes=settings.inline_body_max_bytes,
            fail_open=settings.gate_fail_mode == "open",
            redis_key_prefix=settings.redis_key_prefix,
            retry_after_seconds=settings.retry_after_seconds,
            public_base_url=settings.public_base_url,
            batch_chunk_reserve_ms=settings.batch_chunk_reserve_ms(),
            batch_claim_reserve_ms=settings.batch_claim_reserve_ms(),
        ),
        breaker=CircuitBreaker(cooldown_seconds=settings.gate_cooldown_seconds),
    )


def connect_gate(gate: RedisGate) -> None:
    """Open the gate's Redis connection during the init. Redis out of reach is no init failure:
    the gate connects again on first use, and each request fails open or closed (I7)."""
    try:
        gate.connect()
    except GateUnavailableError as exc:
        logger.warning("redis not reachable during the init", extra={"error": str(exc)})


service()  # the SQS and Secrets Manager clients, built during the init
connect_gate(gate)


def api_response(answer: Answer) -> dict[str, Any]:
    """An API Gateway proxy response for ``answer`` (its status, content type and headers, and
    ``x-content-type-options: nosniff``: a handshake answer reflects a caller's token as
    ``text/plain``, which a browser must not sniff as HTML; API Gateway adds no such header)."""
    return {
        "statusCode": answer.status,
        "headers": {
            "content-type": answer.content_type,
            "x-content-type-options": "nosniff",
            **answer.headers,
        },
        "body": answer.text(),
    }


def error_response(error: IngestError) -> dict[str, Any]:
    """The answer to a request that failed before it reached a source (a body API Gateway sent
    as invalid base64)."""
    headers = {"retry-after": str(settings.retry_after_seconds)} if error.status == 503 else {}
    return api_response(
        Answer(error.status, {"status": "rejected", "reason": error.reason}, headers=headers)
    )


def time_budget(started: float, context: LambdaContext) -> TimeBudget:
    """What is left of this request's time (ms): ``INGEST_TIME_BUDGET_MS`` less the time spent
    since ``started`` (``perf_counter()`` seconds), never more than Lambda's own remaining
    time (``context.get_remaining_time_in_millis()``), which is also its hard limit (the first
    ``SendMessageBatch`` of a batched POST needs only that to allow one call)."""

    def remaining_ms() -> float:
        spent_ms = (perf_counter() - started) * 1000
        return min(
            settings.ingest_time_budget_ms - spent_ms, context.get_remaining_time_in_millis()
        )

    return TimeBudget(remaining_ms, context.get_remaining_time_in_millis)


@logger.inject_lambda_context(clear_state=True, log_event=False)  # events carry credentials
@capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Handle one API Gateway (HTTP API 2.0 or REST 1.0) proxy event.

    Returns an API Gateway proxy response: 202/200 with the provider's acknowledgement (by
    default JSON ``{"status", "delivery_id"}``), 200 with a provider handshake's answer, or
    400/401/404/405/413/503 with ``{"status": "rejected", "reason": <code>}`` (503 adds
    ``Retry-After`` in seconds). Unexpected errors propagate (API Gateway answers 500 and the
    sender retries; the ingest 5xx alarm fires).
    """
    started = perf_counter()
    try:
        request = request_from_event(event)
        logger.append_keys(source=request.source)
        response = api_response(service().handle(request, time_budget(started, context)))
    except IngestError as error:
        response = error_response(error)
    metrics.add_metric(
        name=MetricName.ACK_LATENCY,
        unit=MetricUnit.Milliseconds,
        value=round((perf_counter() - started) * 1000, 3),
    )
    return response
