"""The deliveries table's item layout: keys, the time index and the delivery record item.

One table (single-table design, ``docs/data-model.md``): ``DELIVERY#<source>#<delivery id>``
records, ``RESOURCE#<source>#<resource key>`` watermarks, ``FAILURE#<message id>`` notes and
``REPROCESS#<source>#<delivery id>`` marks (sort key ``GENERATION#<n>``, one per replay generation
whose hook ran again), each with its own sort key; delivery records carry the ``ByReceivedTime``
index attributes.

Key sizes (UTF-8 bytes; DynamoDB refuses a partition key over 2,048 and a sort key over 1,024,
the index keys included). A source name is at most 64 bytes (``sources.SOURCE_NAME_PATTERN``), a
delivery id 256, a resource key 1,024 (``webhook_pipeline.bounds``, checked at ingest and again
by the envelope), so the longest keys are: ``pk`` of a delivery record 9 + 64 + 1 + 256 = 330,
of a resource item 9 + 64 + 1 + 1,024 = 1,098, of a reprocess mark 10 + 64 + 1 + 256 = 331; the
time index sort key ``received_key`` 32 (ISO-8601 with microseconds and ``+00:00``) + 1 + 64 + 1 +
256 = 354; ``sk`` at most 11 + 19 = 30 (a mark's generation, a 64-bit integer).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from webhook_pipeline.process.model import DeliveryRecord, HookState, Outcome

DELIVERY_SK = "DELIVERY"
RESOURCE_SK = "RESOURCE"
FAILURE_SK = "FAILURE"
# Failure notes live as long as a message can stay in the DLQ (its retention, 14 days).
FAILURE_NOTE_TTL = timedelta(days=14)
WATERMARK = "watermark"
#: The time index of delivery records (template.yaml ``DeliveriesTable`` ``ByReceivedTime``).
TIME_INDEX = "ByReceivedTime"
TIME_INDEX_SHARDS = 8
TIME_SHARD = "received_shard"
TIME_KEY = "received_key"


def delivery_key(source: str, delivery_id: str) -> dict[str, dict[str, str]]:
    """Primary key of the delivery record of (source, delivery id): ``pk`` at most 330 bytes
    for the bounded source name and delivery id (module docstring)."""
    return {"pk": {"S": f"DELIVERY#{source}#{delivery_id}"}, "sk": {"S": DELIVERY_SK}}


def failure_key(message_id: str) -> dict[str, dict[str, str]]:
    """Primary key of the failure note of an SQS message id."""
    return {"pk": {"S": f"FAILURE#{message_id}"}, "sk": {"S": FAILURE_SK}}


def reprocess_key(source: str, delivery_id: str, generation: int) -> dict[str, dict[str, str]]:
    """Primary key of the mark of one replay generation of a delivery: ``pk`` at most 331 bytes
    for the bounded source name and delivery id (module docstring)."""
    return {
        "pk": {"S": f"REPROCESS#{source}#{delivery_id}"},
        "sk": {"S": f"GENERATION#{generation}"},
    }


def resource_key(source: str, key: str) -> dict[str, dict[str, str]]:
    """Primary key of the resource item of (source, resource key): ``pk`` at most 1,098 bytes
    for the bounded source name and resource key (module docstring)."""
    return {"pk": {"S": f"RESOURCE#{source}#{key}"}, "sk": {"S": RESOURCE_SK}}


def time_index_shard(source: str, delivery_id: str, received_at: datetime) -> str:
    """The time index partition of a delivery: ``<YYYY-MM-DD>#<shard>`` (UTC day of receipt,
    shard 0..7 from a hash of the delivery's identity)."""
    digest = hashlib.sha256(f"{source}#{delivery_id}".encode()).digest()
    day = received_at.astimezone(UTC).date().isoformat()
    return f"{day}#{digest[0] % TIME_INDEX_SHARDS}"


def time_index_key(source: str, delivery_id: str, received_at: datetime) -> str:
    """The time index sort key: ``<received_at ISO-8601 UTC>#<source>#<delivery id>``, at most
    354 bytes for the bounded source name and delivery id (an index sort key may hold 1,024)."""
    return f"{received_at.astimezone(UTC).isoformat()}#{source}#{delivery_id}"


def delivery_item(
    record: DeliveryRecord, outcome: Outcome, watermark: int | None = None
) -> dict[str, Any]:
    """The delivery record item (DynamoDB JSON) for ``outcome`` (``applied`` or ``stale``)."""
    item: dict[str, Any] = {
        **delivery_key(record.source, record.delivery_id),
        "type": {"S": "delivery"},
        "source": {"S": record.source},
        "delivery_id": {"S": record.delivery_id},
        "outcome": {"S": outcome.value},
        "received_at": {"S": record.received_at.isoformat()},
        "recorded_at": {"S": record.recorded_at.isoformat()},
        "expires_at": {"N": str(record.expires_at)},
        "body_size": {"N": str(record.body_size)},
        "body_sha256": {"S": record.body_sha256},
        "content_sha256": {"S": record.content_digest},
        "message_id": {"S": record.message_id},
        "replay_count": {"N": str(record.replay_count)},
        TIME_SHARD: {"S": time_index_shard(record.source, record.delivery_id, record.received_at)},
        TIME_KEY: {"S": time_index_key(record.source, record.delivery_id, record.received_at)},
    }
    if record.event_type is not None:
        item["event_type"] = {"S": record.event_type}
    if record.resource_key is not None:
        item["resource_key"] = {"S": record.resource_key}
    if record.sequence is not None:
        item["sequence"] = {"N": str(record.sequence)}
    if watermark is not None:
        item["watermark_at_receipt"] = {"N": str(watermark)}
    if outcome is Outcome.APPLIED and record.hook_pending:
        item["hook_state"] = {"S": HookState.PENDING.value}
    return item


def watermark_update(
    table: str,
    delivery: DeliveryRecord,
    condition: str,
    values: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``Update`` of a transaction that moves the resource item of ``delivery`` to its
    sequence (``#wm = :seq``, the last delivery's id, event type and times) on ``condition``.

    ``condition`` may use ``#wm`` (the watermark) and ``:seq`` (``delivery.sequence``), and the
    placeholders of ``values`` (extra expression attribute values).
    """
    assert delivery.resource_key is not None and delivery.sequence is not None
    resource_values: dict[str, Any] = {
        ":seq": {"N": str(delivery.sequence)},
        ":did": {"S": delivery.delivery_id},
        ":at": {"S": delivery.recorded_at.isoformat()},
        ":rat": {"S": delivery.received_at.isoformat()},
        ":src": {"S": delivery.source},
        ":rk": {"S": delivery.resource_key},
        ":res": {"S": "resource"},
        **(values or {}),
    }
    update = (
        "SET #wm = :seq, last_delivery_id = :did, updated_at = :at, last_received_at = :rat, "
        "#src = :src, resource_key = :rk, #type = :res"
    )
    if delivery.event_type is not None:
        update += ", last_event_type = :et"
        resource_values[":et"] = {"S": delivery.event_type}
    else:
        update += " REMOVE last_event_type"
    return {
        "TableName": table,
        "Key": resource_key(delivery.source, delivery.resource_key),
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#wm": WATERMARK, "#src": "source", "#type": "type"},
        "ExpressionAttributeValues": resource_values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
