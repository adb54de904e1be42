"""The ledger hook: one DynamoDB item per hook invocation, to measure "exactly once in effect".

A delivery record is keyed by ``DELIVERY#<source>#<delivery id>``, so counting records can never
show a second application: an overwrite still counts one. The ledger counts side effects instead.
Loaded as the processor's hooks module (``HOOKS_MODULE=webhook_pipeline_ops.ledger``; the local
stack does so when ``WEBHOOK_PIPELINE_LOCAL_HOOKS_MODULE`` names it), it registers one hook for
every source and every event type that appends, on each call, an item with a fresh unique key to
the deliveries table (``TABLE_NAME``)::

    pk = "LEDGER#<source>#<delivery id>"   sk = <uuid4 hex>
    type = "ledger", source, delivery_id, at (ISO 8601 UTC), expires_at (epoch seconds, 1 day)

Nothing is ever overwritten, so ``len(entries(source, id))`` is the number of times the hook ran
for that delivery: 1 when the pipeline applied it exactly once in effect, 2 or more when a
duplicate or a redelivery ran it again. This is a test and demonstration instrument: it adds one
write per applied delivery and is not meant for a deployed stack.
"""

from __future__ import annotations

import functools
import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from webhook_pipeline.hooks import ANY_SOURCE, HookEvent, hook

LEDGER_TTL = timedelta(days=1)


def ledger_pk(source: str, delivery_id: str) -> str:
    """The partition key of the ledger entries of one delivery."""
    return f"LEDGER#{source}#{delivery_id}"


@functools.cache
def _client() -> Any:
    return boto3.client("dynamodb")


@hook(ANY_SOURCE)
def append_entry(event: HookEvent) -> None:
    """Append one ledger item for this invocation (raises the client's error when it fails: the
    record is then retried, as for any failing hook)."""
    now = datetime.now(UTC)
    _client().put_item(
        TableName=os.environ["TABLE_NAME"],
        Item={
            "pk": {"S": ledger_pk(event.source, event.delivery_id)},
            "sk": {"S": uuid.uuid4().hex},
            "type": {"S": "ledger"},
            "source": {"S": event.source},
            "delivery_id": {"S": event.delivery_id},
            "at": {"S": now.isoformat()},
            "expires_at": {"N": str(int((now + LEDGER_TTL).timestamp()))},
        },
        ConditionExpression="attribute_not_exists(pk)",
    )


def entries(client: Any, table_name: str, source: str, delivery_id: str) -> list[dict[str, Any]]:
    """Every ledger item of one delivery (a strongly consistent query; raw DynamoDB items)."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": ledger_pk(source, delivery_id)}},
        "ConsistentRead": True,
    }
    while True:
        page = client.query(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
