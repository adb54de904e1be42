"""Coalescing: the deliveries of one resource in one batch written in one conditional write.

The per-delivery path (:meth:`DeliveryStore.record`, one transaction per delivery) decides each
delivery's outcome against the stored watermark at the moment of its own write. When a batch
holds k > 1 deliveries of one resource, the processor can instead read the watermark once,
decide every outcome here, exactly as k writes in the group's order would have, and write them
all at once (:meth:`DeliveryStore.record_group`): every delivery record on
``attribute_not_exists(pk)``, the watermark on still being the value read. Anything that makes
that write fail sends the group back to the per-delivery path, so correctness never rests on
this module: it only saves requests (and conflicts on a hot resource item) when it is right.

The rules are the per-delivery path's (``docs/data-model.md``):

* a delivery without a sequence is applied and leaves the watermark alone;
* a delivery whose sequence is at or above the watermark (an equal sequence of another delivery
  applies too) is applied and moves the watermark to its sequence;
* an older one is stale, recorded with the watermark it is older than (``watermark_at_receipt``);
* a second copy of a delivery already in the group is a duplicate: it is not part of the
  write; the per-delivery path records it afterwards (it finds the first copy's record).

This module knows nothing of DynamoDB beyond the size limit it is handed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from webhook_pipeline.process.model import DeliveryRecord, HookState, Outcome, StoreResult


@dataclass(frozen=True)
class PlannedWrite:
    """One delivery's decided outcome within its group.

    Attributes
    ----------
    index : int
        Position of the delivery in the sequence given to :func:`plan_group`.
    record : DeliveryRecord
        What is written.
    outcome : Outcome
        ``APPLIED``, ``STALE`` or ``DUPLICATE`` (a copy of an earlier delivery of the group:
        not written by the group write).
    watermark : int | None
        For ``STALE``: the watermark the delivery is older than.
    """

    index: int
    record: DeliveryRecord
    outcome: Outcome
    watermark: int | None = None

    def store_result(self) -> StoreResult:
        """What :meth:`DeliveryStore.record` returns for this outcome once written."""
        hook = self.outcome is Outcome.APPLIED and self.record.hook_pending
        return StoreResult(
            self.outcome,
            hook_state=HookState.PENDING if hook else None,
            watermark=self.watermark if self.outcome is Outcome.STALE else None,
        )


@dataclass(frozen=True)
class GroupWrite:
    """One all-or-nothing write of deliveries of one resource.

    Attributes
    ----------
    source, resource_key : str
        The resource.
    expected_watermark : int | None
        The watermark the outcomes were decided against: the write holds only while the stored
        watermark is still this value (``None``: the resource has no watermark yet).
    writes : tuple[PlannedWrite, ...]
        ``APPLIED`` and ``STALE`` deliveries, in order (no duplicates).
    """

    source: str
    resource_key: str
    expected_watermark: int | None
    writes: tuple[PlannedWrite, ...]

    @property
    def advances(self) -> DeliveryRecord | None:
        """The applied delivery whose sequence the watermark moves to (the last applied with a
        sequence), or ``None`` when the write leaves the watermark as it is."""
        applied = [
            w.record
            for w in self.writes
            if w.outcome is Outcome.APPLIED and w.record.sequence is not None
        ]
        return applied[-1] if applied else None


def plan_group(records: Sequence[DeliveryRecord], watermark: int | None) -> list[PlannedWrite]:
    """Decide each delivery's outcome as one write per delivery, in this order, would.

    Parameters
    ----------
    records : Sequence[DeliveryRecord]
        Deliveries of one (source, resource key), in the order they are applied (the batch's
        plan: ascending sequence, ties in arrival order).
    watermark : int | None
        The resource's stored watermark, read consistently (``None``: none yet).

    Returns
    -------
    list[PlannedWrite]
        One per record, same order.
    """
    planned: list[PlannedWrite] = []
    seen: set[tuple[str, str]] = set()
    current = watermark
    for index, record in enumerate(records):
        identity = (record.source, record.delivery_id)
        if identity in seen:
            planned.append(PlannedWrite(index, record, Outcome.DUPLICATE))
            continue
        seen.add(identity)
        if record.resource_key is None or record.sequence is None:
            planned.append(PlannedWrite(index, record, Outcome.APPLIED))
        elif current is None or record.sequence >= current:
            planned.append(PlannedWrite(index, record, Outcome.APPLIED))
            current = record.sequence
        else:
            planned.append(PlannedWrite(index, record, Outcome.STALE, watermark=current))
    return planned


def chunk_group(
    planned: Sequence[PlannedWrite], watermark: int | None, limit: int
) -> list[GroupWrite]:
    """Split the written deliveries of a group into writes of at most ``limit`` deliveries.

    Each chunk expects the watermark the previous one leaves (the first: ``watermark``), so the
    chunks commit in order; when one fails, the ones after it are not attempted.

    Raises
    ------
    ValueError
        ``limit`` < 1, or the records are not of one (source, resource key).
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    written = [p for p in planned if p.outcome is not Outcome.DUPLICATE]
    resources = {(p.record.source, p.record.resource_key) for p in planned}
    if len(resources) != 1:
        raise ValueError(f"one resource per group, got {len(resources)}")
    ((source, key),) = resources
    if key is None:
        raise ValueError("a group write needs a resource key")
    chunks: list[GroupWrite] = []
    expected = watermark
    for start in range(0, len(written), limit):
        chunk = GroupWrite(source, key, expected, tuple(written[start : start + limit]))
        advances = chunk.advances
        if advances is not None:
            expected = advances.sequence
        chunks.append(chunk)
    return chunks
