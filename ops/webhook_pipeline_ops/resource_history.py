"""One resource's delivery records in sequence order (:func:`resource_history`), read through
the ``ByReceivedTime`` index (:mod:`.time_index`) with each record's watermark at receipt read
from the table itself (:func:`receipt_watermarks`)."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import TYPE_CHECKING, Any

from webhook_pipeline.adapters.dynamodb_items import TIME_KEY

from webhook_pipeline_ops.time_index import DeliveryFilters, ReadStats, iter_deliveries, plain

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def resource_history(
    client: DynamoDBClient,
    table: str,
    *,
    source: str,
    resource_key: str,
    newest: datetime,
    oldest: datetime,
    max_items: int = 1000,
    stats: ReadStats | None = None,
) -> tuple[list[dict[str, Any]], bool]:
    """The delivery records of one resource received in ``[oldest, newest)``, in sequence order
    (ties by receipt).

    The index has no resource key in its keys, so this walks the whole window with a filter on
    (source, resource key): it reads every record of the window (one ``Query`` per shard and day
    at least, then one per 1 MB or ``page_size`` items), which is cheap locally and on a quiet
    table, and grows with the table's traffic, not with the resource's history; see
    docs/operations.md for the figures and the index that would make it proportional.

    Returns
    -------
    tuple[list[dict], bool]
        The records (``sequence`` ascending) and whether ``max_items`` cut the list (then the
        newest ``max_items`` are kept).
    """
    walk = iter_deliveries(
        client,
        table,
        newest=newest,
        oldest=oldest,
        filters=DeliveryFilters(source=source, resource_key=resource_key),
        page_size=1000,
        stats=stats,
    )
    items = list(itertools.islice(walk, max_items + 1))
    truncated = len(items) > max_items
    items = items[:max_items]
    receipt_watermarks(client, table, items, stats)
    items.sort(key=lambda i: (i.get("sequence") is None, i.get("sequence") or 0, i[TIME_KEY]))
    return items, truncated


def receipt_watermarks(
    client: DynamoDBClient,
    table: str,
    items: list[dict[str, Any]],
    stats: ReadStats | None = None,
    attempts: int = 5,
) -> None:
    """Set each item's ``watermark_at_receipt`` (when its record has one) from the table itself.

    The ``ByReceivedTime`` index does not project it, and changing a deployed index's projection
    means replacing the index (CloudFormation cannot delete and re-create an index of the same
    name in one update): the records are read by key instead, with ``BatchGetItem`` (100 keys a
    request, eventually consistent, only ``pk``, ``sk`` and the watermark). Unprocessed keys
    are asked again, ``attempts`` times at most; records still unread keep no watermark.

    Raises
    ------
    botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError
        From DynamoDB.
    """
    by_key = {(i["pk"], i["sk"]): i for i in items if "pk" in i and "sk" in i}
    keys = [{"pk": {"S": pk}, "sk": {"S": sk}} for pk, sk in by_key]
    for start in range(0, len(keys), 100):
        request: Any = {
            table: {
                "Keys": keys[start : start + 100],
                "ProjectionExpression": "pk, sk, watermark_at_receipt",
            }
        }
        for _ in range(attempts):
            answer = client.batch_get_item(RequestItems=request)
            for raw in answer.get("Responses", {}).get(table, []):
                found = plain(raw)
                if stats is not None:
                    stats.base_reads += 1
                if "watermark_at_receipt" in found:
                    item = by_key[(found["pk"], found["sk"])]
                    item["watermark_at_receipt"] = found["watermark_at_receipt"]
            request = answer.get("UnprocessedKeys") or {}
            if not request:
                break


__all__ = ["receipt_watermarks", "resource_history"]
