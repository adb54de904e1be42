"""Reading delivery records by the time they were received: the ``ByReceivedTime`` index.

The index (template.yaml ``DeliveriesTable``) has partition ``received_shard`` =
``"<UTC YYYY-MM-DD>#<0..7>"`` and sort key ``received_key`` =
``"<received_at ISO-8601 UTC>#<source>#<delivery id>"``, written by the processor's adapter
(:func:`webhook_pipeline.adapters.dynamodb.time_index_key`). It projects the attributes an
operator filters and lists by (source, delivery id, outcome, event type, resource key, sequence,
received and recorded times, body size, hook state, replay count).

:func:`iter_deliveries` walks a time window newest first: for each UTC day from the newest back
to the oldest it queries the day's 8 shards in descending key order (lazily, page by page) and
merges them by ``received_key``, so the first items arrive after one query per shard. Filters are
a ``FilterExpression``; DynamoDB applies it after reading a page, so a selective filter reads more
pages than it returns items, and the walk keeps paging until it has enough. Every item read is
charged (read request units ~ bytes read / 4 KB / 2, eventually consistent), matched or not.

:func:`list_deliveries` is one page of that walk with keyset pagination: the cursor is the last
``received_key`` returned, the next page starts strictly below it. Pages are stable while new
deliveries arrive (they are above the first page's keys).

Key order equals time order: ISO-8601 UTC strings of one format compare like the instants
(``isoformat`` drops the fraction only when it is zero, and ``+`` sorts before ``.``), and no
key equals a bare timestamp, so ``BETWEEN lo AND hi`` selects ``lo <= received_at < hi``.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer
from webhook_pipeline.adapters.dynamodb_items import (
    TIME_INDEX,
    TIME_INDEX_SHARDS,
    TIME_KEY,
    TIME_SHARD,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: Upper bound of one page.
MAX_PAGE = 500
#: Outcomes a delivery record can hold (duplicates are not recorded: they are counted).
RECORD_OUTCOMES = ("applied", "stale")


_DESERIALIZER = TypeDeserializer()


class InvalidCursorError(ValueError):
    """A pagination cursor that this module did not produce."""


@dataclass(frozen=True)
class DeliveryFilters:
    """Which delivery records to list. Every given criterion must match (AND); none = all.

    Attributes
    ----------
    source, event_type, outcome, resource_key : str | None
        Exact values.
    delivery_id : str | None
        A prefix of the delivery id (a whole id matches itself).
    """

    source: str | None = None
    event_type: str | None = None
    outcome: str | None = None
    resource_key: str | None = None
    delivery_id: str | None = None

    def expression(self) -> tuple[str | None, dict[str, str], dict[str, Any]]:
        """``(FilterExpression or None, ExpressionAttributeNames, ExpressionAttributeValues)``."""
        parts: list[str] = []
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        for attr in ("source", "event_type", "outcome", "resource_key"):
            value = getattr(self, attr)
            if value:
                names[f"#f_{attr}"] = attr
                values[f":f_{attr}"] = {"S": value}
                parts.append(f"#f_{attr} = :f_{attr}")
        if self.delivery_id:
            names["#f_delivery_id"] = "delivery_id"
            values[":f_delivery_id"] = {"S": self.delivery_id}
            parts.append("begins_with(#f_delivery_id, :f_delivery_id)")
        return (" AND ".join(parts) or None), names, values

    def active(self) -> dict[str, str]:
        """The given criteria, by name."""
        return {
            name: value
            for name in ("source", "event_type", "outcome", "resource_key", "delivery_id")
            if (value := getattr(self, name))
        }


@dataclass
class ReadStats:
    """What a walk cost: ``Query`` requests and items read from the index (``ScannedCount``,
    matched or not: what DynamoDB charges)."""

    queries: int = 0
    scanned: int = 0
    #: Records read from the table itself (``BatchGetItem``), for attributes the index does not
    #: project.
    base_reads: int = 0


@dataclass
class DeliveryPage:
    """One page of delivery records, newest first.

    Attributes
    ----------
    items : list[dict]
        The records' projected attributes as plain values (numbers as ``int``), including
        ``received_key``.
    next_cursor : str | None
        Pass as ``cursor`` for the next (older) page; ``None`` on the last page.
    stats : ReadStats
        What the page cost.
    """

    items: list[dict[str, Any]]
    next_cursor: str | None
    stats: ReadStats = field(default_factory=ReadStats)


def time_bound(moment: datetime) -> str:
    """A ``received_key`` bound for ``moment`` (the same format the processor writes)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def encode_cursor(received_key: str) -> str:
    """The opaque, URL-safe cursor of a ``received_key``."""
    return base64.urlsafe_b64encode(received_key.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The ``received_key`` of a cursor.

    Raises
    ------
    InvalidCursorError
        Not a cursor of :func:`encode_cursor`.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise InvalidCursorError("invalid cursor") from exc
    if raw.count("#") < 2:
        raise InvalidCursorError("invalid cursor")
    try:
        datetime.fromisoformat(raw.split("#", 1)[0])
    except ValueError as exc:
        raise InvalidCursorError("invalid cursor") from exc
    return raw


def iter_deliveries(
    client: DynamoDBClient,
    table: str,
    *,
    newest: datetime,
    oldest: datetime,
    filters: DeliveryFilters | None = None,
    below_key: str | None = None,
    page_size: int = 100,
    stats: ReadStats | None = None,
) -> Iterator[dict[str, Any]]:
    """Delivery records received in ``[oldest, newest)``, newest first, lazily.

    Parameters
    ----------
    client : botocore DynamoDB client
    table : str
        The deliveries table.
    newest, oldest : datetime
        The window (a naive datetime is UTC); ``newest`` is exclusive, ``oldest`` inclusive.
    filters : DeliveryFilters | None
        Criteria applied as a ``FilterExpression``.
    below_key : str | None
        Only records whose ``received_key`` is strictly below this one (keyset pagination).
    page_size : int
        ``Limit`` of each ``Query`` (items read per request, before the filter), 1..1000.
    stats : ReadStats | None
        Updated with the requests made and the items read.

    Yields
    ------
    dict
        Plain values of the projected attributes, ``received_key`` descending.

    Raises
    ------
    botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError
        From DynamoDB (no index, throttling after retries, no connection).
    """
    lo = time_bound(oldest)
    hi = time_bound(newest)
    if below_key is not None and below_key < hi:
        hi = below_key
    if hi < lo:
        return
    request = _query(table, lo, hi, filters, page_size)
    walk = _Walk(client, request, below_key, stats if stats is not None else ReadStats())
    # The day of the newest key that can match (``hi`` itself is excluded), back to ``oldest``'s.
    day = (datetime.fromisoformat(hi.split("#", 1)[0]) - timedelta(microseconds=1)).date()
    last = datetime.fromisoformat(lo).date()
    while day >= last:
        yield from walk.day_items(day)
        day -= timedelta(days=1)


def _query(
    table: str, lo: str, hi: str, filters: DeliveryFilters | None, page_size: int
) -> dict[str, Any]:
    """The ``Query`` of one shard's keys in ``[lo, hi]``, newest first, without its ``:shard``."""
    expression, names, values = (filters or DeliveryFilters()).expression()
    return {
        "TableName": table,
        "IndexName": TIME_INDEX,
        "KeyConditionExpression": "#shard = :shard AND #key BETWEEN :lo AND :hi",
        "ExpressionAttributeNames": {"#shard": TIME_SHARD, "#key": TIME_KEY, **names},
        "ExpressionAttributeValues": {":lo": {"S": lo}, ":hi": {"S": hi}, **values},
        "ScanIndexForward": False,
        "Limit": max(1, min(1000, page_size)),
        **({"FilterExpression": expression} if expression else {}),
    }


@dataclass
class _Walk:
    """One walk of the index: ``request`` is the ``Query`` of every shard but its ``:shard``."""

    client: DynamoDBClient
    request: dict[str, Any]
    below_key: str | None
    stats: ReadStats

    def shard(self, day: date, number: int) -> Iterator[dict[str, Any]]:
        """The shard's items, ``received_key`` descending, page by page."""
        request = dict(self.request)
        values = request["ExpressionAttributeValues"]
        request["ExpressionAttributeValues"] = {
            ":shard": {"S": f"{day.isoformat()}#{number}"},
            **values,
        }
        while True:
            response = self.client.query(**request)
            self.stats.queries += 1
            self.stats.scanned += int(response.get("ScannedCount", 0))
            yield from response.get("Items", [])
            start = response.get("LastEvaluatedKey")
            if not start:
                return
            request["ExclusiveStartKey"] = start

    def day_items(self, day: date) -> Iterator[dict[str, Any]]:
        """The day's 8 shards merged by ``received_key``, as plain values."""
        merged = heapq.merge(
            *(self.shard(day, n) for n in range(TIME_INDEX_SHARDS)),
            key=lambda item: item[TIME_KEY]["S"],
            reverse=True,
        )
        for item in merged:
            if item[TIME_KEY]["S"] != self.below_key:  # BETWEEN includes the cursor's own key
                yield plain(item)


def list_deliveries(
    client: DynamoDBClient,
    table: str,
    *,
    newest: datetime,
    oldest: datetime,
    limit: int = 50,
    cursor: str | None = None,
    filters: DeliveryFilters | None = None,
) -> DeliveryPage:
    """One page of delivery records received in ``[oldest, newest)``, newest first.

    Parameters
    ----------
    client : botocore DynamoDB client
    table : str
        The deliveries table.
    newest, oldest : datetime
        The window (a naive datetime is UTC).
    limit : int
        Records per page (1..:data:`MAX_PAGE`).
    cursor : str | None
        ``next_cursor`` of the previous page; ``None`` for the newest page.
    filters : DeliveryFilters | None
        Criteria; pages are filled across as many index pages as it takes.

    Returns
    -------
    DeliveryPage
        Up to ``limit`` records, the cursor of the next page and what it cost. Without filters a
        page reads about ``2 * limit`` index items in one query per shard (each shard is asked for
        a fair share with room to spare); with filters the reads grow with how few items match.

    Raises
    ------
    InvalidCursorError
        ``cursor`` is not one of this function's.
    ValueError
        ``limit`` out of range.
    botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError
        From DynamoDB.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be within 1..{MAX_PAGE}, got {limit}")
    stats = ReadStats()
    share = -(-2 * (limit + 1) // TIME_INDEX_SHARDS)  # ceil; more per shard with filters:
    page_size = share if filters is None or not filters.active() else max(4 * share, 100)
    walk = iter_deliveries(
        client,
        table,
        newest=newest,
        oldest=oldest,
        filters=filters,
        below_key=decode_cursor(cursor) if cursor else None,
        page_size=max(2, page_size),
        stats=stats,
    )
    items = list(itertools.islice(walk, limit + 1))
    next_cursor = encode_cursor(items[limit - 1][TIME_KEY]) if len(items) > limit else None
    return DeliveryPage(items=items[:limit], next_cursor=next_cursor, stats=stats)


def plain(item: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB JSON item as plain values (``N`` as ``int`` when integral)."""
    out: dict[str, Any] = {}
    for name, attr in item.items():
        value = _DESERIALIZER.deserialize(attr)
        if isinstance(value, Decimal):
            value = int(value) if value == value.to_integral_value() else float(value)
        out[name] = value
    return out


__all__ = [
    "RECORD_OUTCOMES",
    "DeliveryFilters",
    "DeliveryPage",
    "InvalidCursorError",
    "ReadStats",
    "decode_cursor",
    "encode_cursor",
    "iter_deliveries",
    "list_deliveries",
    "plain",
    "time_bound",
]
