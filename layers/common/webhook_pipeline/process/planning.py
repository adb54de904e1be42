"""The processor's batch planning: envelopes parsed, grouped by resource, ordered by sequence within
a group (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence

from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import MalformedEnvelopeError
from webhook_pipeline.process.model import Message, Outcome, RecordResult


def group_key(envelope: Envelope) -> tuple[str, str, str]:
    """Records with the same key are applied one after the other, in sequence order."""
    if envelope.resource_key is not None:
        return (envelope.source, "resource", envelope.resource_key)
    return (envelope.source, "delivery", envelope.delivery_id)


def plan(
    messages: Sequence[Message],
) -> tuple[list[RecordResult], list[list[tuple[Message, Envelope]]]]:
    """Parse every message and order the valid ones.

    Returns
    -------
    malformed : list[RecordResult]
        One ``MALFORMED`` result per message whose body is not a valid envelope.
    groups : list[list[tuple[Message, Envelope]]]
        Groups in first-arrival order; within a group, ascending sequence (stable for ties and
        for records without a sequence).
    """
    malformed: list[RecordResult] = []
    groups: dict[tuple[str, str, str], list[tuple[Message, Envelope]]] = {}
    for message in messages:
        try:
            envelope = Envelope.from_json(message.body)
        except MalformedEnvelopeError as exc:
            malformed.append(
                RecordResult(message.message_id, Outcome.MALFORMED, reason=str(exc), error=exc)
            )
            continue
        groups.setdefault(group_key(envelope), []).append((message, envelope))
    ordered = [
        sorted(members, key=lambda pair: pair[1].sequence if pair[1].sequence is not None else 0)
        for members in groups.values()
    ]
    return malformed, ordered


def segments(group: list[tuple[Message, Envelope]]) -> list[list[tuple[Message, Envelope]]]:
    """Split an ordered group into the runs a coalesced write may take: consecutive first-run
    deliveries together, each reprocess envelope (``reprocess`` set) alone, order kept.

    A reprocess writes no record and moves no watermark, so it never joins a group write; it
    still runs at its place in the group's sequence order.
    """
    runs: list[list[tuple[Message, Envelope]]] = []
    for pair in group:
        if pair[1].reprocess is None and runs and runs[-1][-1][1].reprocess is None:
            runs[-1].append(pair)
        else:
            runs.append([pair])
    return runs
