"""A resource's deliveries of one batch in one ``TransactWriteItems`` (coalescing).

The transaction ([0..n-1] then [n]): a Put of each delivery record with
``attribute_not_exists(pk)`` (``outcome`` ``applied`` or ``stale`` as decided by
:func:`webhook_pipeline.process.coalesce.plan_group`), then, when the group applies a sequence,
one Update of the resource item to the last applied delivery on ``#wm = :expected`` (the
watermark read) or ``attribute_not_exists(#wm)`` (none was read). A group that applies no
sequence (only stale deliveries) has no Update: the watermark never moves back (I4), so a
delivery older than the watermark read is older than any later one.

Any failure is answered as a reason string, never raised: the processor then records the
deliveries one by one (:meth:`DynamoDBDeliveryStore.record`), the proven path. No attempt is
repeated here (a conflict included).

The request token is derived from the attempt tokens of the deliveries and a digest of the
transaction's content, so an SDK retry of this request reuses it and nothing else can: a token
is never sent with other content (DynamoDB answers ``IdempotentParameterMismatch`` to that), and
never equals a per-delivery token.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from webhook_pipeline.adapters.dynamodb_errors import classify, error_code
from webhook_pipeline.adapters.dynamodb_items import (
    WATERMARK,
    delivery_item,
    resource_key,
    watermark_update,
)
from webhook_pipeline.errors import TransientError
from webhook_pipeline.process.coalesce import GroupWrite

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: ``TransactWriteItems`` takes at most 100 items: 99 delivery records and the watermark.
TRANSACTION_ITEMS = 100
GROUP_LIMIT = TRANSACTION_ITEMS - 1


def read_watermark(client: DynamoDBClient, table: str, source: str, key: str) -> int | None:
    """The resource item's watermark, strongly consistent; ``None`` when there is none.

    Raises
    ------
    TransientError, StoreBugError
        Classified as every other request of the store.
    """
    try:
        response = client.get_item(
            TableName=table,
            Key=resource_key(source, key),
            ConsistentRead=True,
            ProjectionExpression="#wm",
            ExpressionAttributeNames={"#wm": WATERMARK},
        )
    except ClientError as exc:
        raise classify(exc) from exc
    except BotoCoreError as exc:
        raise TransientError(f"DynamoDB GetItem failed: {type(exc).__name__}") from exc
    attr = (response.get("Item") or {}).get(WATERMARK) or {}
    return int(attr["N"]) if "N" in attr else None


def group_items(table: str, write: GroupWrite) -> list[dict[str, Any]]:
    """The transaction items of ``write``: the Puts in order, then the watermark Update."""
    if len(write.writes) > GROUP_LIMIT:
        raise ValueError(f"at most {GROUP_LIMIT} deliveries per group write")
    items: list[dict[str, Any]] = [
        {
            "Put": {
                "TableName": table,
                "Item": delivery_item(w.record, w.outcome, w.watermark),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        for w in write.writes
    ]
    advances = write.advances
    if advances is not None:
        if write.expected_watermark is None:
            condition, values = "attribute_not_exists(#wm)", {}
        else:
            condition = "#wm = :expected"
            values = {":expected": {"N": str(write.expected_watermark)}}
        items.append({"Update": watermark_update(table, advances, condition, values)})
    return items


def group_token(write: GroupWrite, items: list[dict[str, Any]]) -> str:
    """The 36-character request token of one group write (see the module docstring)."""
    content = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()
    attempts = ",".join(w.record.attempt_token for w in write.writes)
    return hashlib.sha256(f"group:{attempts}:{content}".encode()).hexdigest()[:36]


def write_group(client: DynamoDBClient, table: str, write: GroupWrite) -> str | None:
    """Send the group write; ``None`` when it committed, else why not (see the module
    docstring)."""
    items = group_items(table, write)
    if not items:
        return None
    try:
        client.transact_write_items(
            TransactItems=items,  # type: ignore[arg-type]
            ClientRequestToken=group_token(write, items),
        )
    except ClientError as exc:
        code = error_code(exc)
        if code != "TransactionCanceledException":
            return code or str(classify(exc))
        reasons = exc.response.get("CancellationReasons")
        codes = [str((r or {}).get("Code") or "None") for r in reasons or []]
        return f"cancelled: reasons {codes}"
    except BotoCoreError as exc:
        return type(exc).__name__
    return None
