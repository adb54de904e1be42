"""The SAM functions of a template as the local stack runs them (:func:`function_spec`): handler,
code folder, timeout and memory (``Globals`` merged), the environment resolved to the local
resources (what cannot resolve is listed, not guessed), the SQS event sources and HTTP routes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webhook_pipeline_ops.local.resources import (
    HTTP_API_INTEGRATION_TIMEOUT_MS,
    FunctionSpec,
    HttpRoute,
    SqsEventSource,
)
from webhook_pipeline_ops.local.template import NO_VALUE, Resolver, UnresolvableError, attr_str

#: The logger of :mod:`.provision`, whose part this was.
log = logging.getLogger("webhook_pipeline_ops.local.provision")


def function_spec(
    resolver: Resolver,
    template: Mapping[str, Any],
    template_dir: Path,
    logical_id: str,
    props: Mapping[str, Any],
) -> FunctionSpec:
    """The :class:`FunctionSpec` of the ``AWS::Serverless::Function`` ``logical_id`` (its
    ``Properties`` are ``props``); its name is what ``resolver`` already holds for it."""
    globals_fn = dict((template.get("Globals") or {}).get("Function") or {})
    merged: dict[str, Any] = {**globals_fn, **props}
    variables: dict[str, Any] = {
        **((globals_fn.get("Environment") or {}).get("Variables") or {}),
        **((props.get("Environment") or {}).get("Variables") or {}),
    }
    environment, unresolved = _environment(resolver, logical_id, variables)
    sqs_events, routes = _event_sources(resolver, logical_id, props.get("Events") or {})
    code_uri = _resolve_or(resolver, merged.get("CodeUri"), ".")
    return FunctionSpec(
        logical_id=logical_id,
        name=resolver.resources[logical_id].ref,
        code_dir=(template_dir / str(code_uri)).resolve(),
        handler=str(_resolve_or(resolver, merged.get("Handler"), "app.lambda_handler")),
        timeout_seconds=int(_resolve_or(resolver, merged.get("Timeout"), 3)),
        memory_mb=int(_resolve_or(resolver, merged.get("MemorySize"), 128)),
        environment=environment,
        unresolved_environment=unresolved,
        sqs_events=sqs_events,
        http_routes=routes,
        declared_environment=list(variables),
    )


def _environment(
    resolver: Resolver, logical_id: str, variables: Mapping[str, Any]
) -> tuple[dict[str, str], list[str]]:
    """``(resolved variables, names not resolvable locally)``; ``AWS::NoValue`` drops one."""
    environment: dict[str, str] = {}
    unresolved: list[str] = []
    for key, raw in variables.items():
        try:
            value = resolver.resolve(raw)
        except UnresolvableError as exc:
            log.debug("%s: env %s not resolvable locally (%s)", logical_id, key, exc)
            unresolved.append(key)
            continue
        if value is not NO_VALUE:
            environment[key] = attr_str(value)
    return environment, unresolved


def _event_sources(
    resolver: Resolver, logical_id: str, events: Mapping[str, Any]
) -> tuple[list[SqsEventSource], list[HttpRoute]]:
    """The function's SQS event sources and HTTP routes; other event types are not emulated."""
    sqs_events: list[SqsEventSource] = []
    routes: list[HttpRoute] = []
    for event_id, event in events.items():
        kind = event.get("Type")
        try:
            ep = resolver.resolve(event.get("Properties") or {})
        except UnresolvableError as exc:
            log.debug("%s: event %s not resolvable locally (%s)", logical_id, event_id, exc)
            continue
        if kind == "SQS":
            sqs_events.append(
                SqsEventSource(
                    queue_arn=str(ep["Queue"]),
                    batch_size=int(ep.get("BatchSize", 10)),
                    maximum_batching_window_seconds=int(
                        ep.get("MaximumBatchingWindowInSeconds", 0)
                    ),
                    report_batch_item_failures="ReportBatchItemFailures"
                    in (ep.get("FunctionResponseTypes") or []),
                    enabled=str(ep.get("Enabled", True)).lower() != "false",
                )
            )
        elif kind in ("HttpApi", "Api"):
            timeout = ep.get("TimeoutInMillis")
            routes.append(
                HttpRoute(
                    method=str(ep.get("Method", "ANY")).upper(),
                    path=str(ep.get("Path", "/{proxy+}")),
                    timeout_ms=int(_resolve_or(resolver, timeout, HTTP_API_INTEGRATION_TIMEOUT_MS)),
                )
            )
        else:
            log.debug("%s: event %s of type %s not emulated locally", logical_id, event_id, kind)
    return sqs_events, routes


def _resolve_or(resolver: Resolver, value: Any, default: Any) -> Any:
    if value is None:
        return default
    try:
        return resolver.resolve(value)
    except UnresolvableError:
        return default
