"""The items the processor recorded, read by key with its own adapter
(:mod:`webhook_pipeline.adapters.dynamodb`, strongly consistent): a delivery record
(:func:`get_delivery`), a resource item (:func:`get_resource`); and the sources a stack serves,
to say when a looked-up source is not one of them (:func:`unknown_source_hint`)."""

from __future__ import annotations

from typing import Any

from webhook_pipeline_ops.aws import Aws


def _store(aws: Aws) -> Any:
    from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore

    return DynamoDBDeliveryStore(aws.client("dynamodb"), aws.resources.require("table"))


def get_delivery(aws: Aws, source: str, delivery_id: str) -> dict[str, Any] | None:
    """The delivery record, or ``None``."""
    item: dict[str, Any] | None = _store(aws).get_delivery(source, delivery_id)
    return item


def get_resource(aws: Aws, source: str, key: str) -> dict[str, Any] | None:
    """The resource item, or ``None``."""
    item: dict[str, Any] | None = _store(aws).get_resource(source, key)
    return item


def known_sources(*, local: bool = False) -> list[str] | None:
    """Names of the sources file's sources, and with ``local`` every source the local stack
    serves (one per provider the file leaves unused); ``None`` when the file cannot be read."""
    from webhook_pipeline.errors import ConfigurationError
    from webhook_pipeline.sources import load_sources

    try:
        if local:
            from webhook_pipeline_ops.simulator.deliveries import example_sources

            return sorted(example_sources())
        return sorted(load_sources())
    except ConfigurationError:
        return None


def unknown_source_hint(source: str, *, local: bool = False) -> str:
    """``": source 'x' is unknown (sources: a, b)"`` when ``source`` is not a source the stack
    serves (:func:`known_sources`), else ``""``."""
    names = known_sources(local=local)
    if names is None or source in names:
        return ""
    return f": source {source!r} is unknown (sources: {', '.join(names)})"
