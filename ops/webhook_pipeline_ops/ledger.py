"""The ledger hook: one DynamoDB item per hook invocation, to measure "exactly once in effect".

A delivery record is keyed by ``DELIVERY#<source>#<delivery id>``, so counting records can never
show a second application: an overwrite still counts one. The ledger counts side effects instead.
Loaded as the processor's hooks module (``HOOKS_MODULE=webhook_pipeline_ops.ledger``; the local
stack does so when ``WEBHOOK_PIPELINE_LOCAL_HOOKS_MODULE`` names it), it registers one hook for
every source and every event type that appends, on each call, an item with a fresh unique key to
the deliveries table (``TABLE_NAME``)::

    pk = "LEDGER#<source>#<delivery id>"   sk = <uuid4 hex>
    type = "ledger", source, delivery_id, at (ISO 8601 UTC), expires_at (epoch seconds, 1 day)
    generation, idempotency_key   only on a reprocess's run (``event.replay_generation`` set):
                                  the generation (a number) and ``<source>:<id>:g<generation>``

Nothing is ever overwritten, and each item is the hook's :class:`~webhook_pipeline.hooks.Effects`,
committed with the hook's done mark in one transaction: ``len(entries(source, id))`` is the number
of times a run of the hook took effect for that delivery. 1 when the pipeline applied it exactly
once in effect; 2 or more when a duplicate, a redelivery or a replay applied it again (a run
that crashed before its commit, or lost the race to another run of the same delivery, commits
nothing: that is the guarantee this measures). 0 for an applied delivery means its hook never
took effect. A test and demonstration instrument: one more write per applied delivery.

In the local stack a chaos run can make this hook fail for a while (the ``hook-failing`` switch
of :mod:`webhook_pipeline_ops.local.faults`): until the switch's ``until`` it raises
:class:`~webhook_pipeline_ops.local.faults.InjectedHookFailure` before building its item, and
the processor retries the delivery with its hook still pending.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from webhook_pipeline.hooks import ANY_SOURCE, Effects, HookEvent, hook

from webhook_pipeline_ops.local.faults import FaultSwitches, InjectedHookFailure

LEDGER_TTL = timedelta(days=1)


def ledger_pk(source: str, delivery_id: str) -> str:
    """The partition key of the ledger entries of one delivery."""
    return f"LEDGER#{source}#{delivery_id}"


@hook(ANY_SOURCE)
def append_entry(event: HookEvent) -> Effects:
    """One ledger item for this run, returned as the hook's effect: the processor commits it in
    one transaction with the hook's done mark, so a run that crashed before the commit leaves no
    item and a second, concurrent run of the same delivery's hook leaves none either.

    Raises
    ------
    InjectedHookFailure
        The local stack's ``hook-failing`` switch is on (a chaos run's transient failure).
    """
    fail_if_switched(event)
    now = datetime.now(UTC)
    item: dict[str, Any] = {
        "pk": {"S": ledger_pk(event.source, event.delivery_id)},
        "sk": {"S": uuid.uuid4().hex},
        "type": {"S": "ledger"},
        "source": {"S": event.source},
        "delivery_id": {"S": event.delivery_id},
        "at": {"S": now.isoformat()},
        "expires_at": {"N": str(int((now + LEDGER_TTL).timestamp()))},
    }
    if event.replay_generation is not None:
        item["generation"] = {"N": str(event.replay_generation)}
        item["idempotency_key"] = {"S": event.idempotency_key}
    return Effects(
        (
            {
                "Put": {
                    "TableName": os.environ["TABLE_NAME"],
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
    )


_SWITCHES = FaultSwitches.from_environment()


def fail_if_switched(event: HookEvent) -> None:
    """Raise :class:`InjectedHookFailure` while the ``hook-failing`` switch is on (one line per
    failure in the switches' ``hook-failures.jsonl``); return otherwise."""
    if _SWITCHES is None:
        return
    doc = _SWITCHES.read("hook-failing")
    if doc is None or datetime.now(UTC).timestamp() >= float(doc.get("until", 0)):
        return
    failure = {"source": event.source, "delivery_id": event.delivery_id, "pid": os.getpid()}
    _SWITCHES.record("hook-failures", failure)
    raise InjectedHookFailure(f"injected hook failure (until {doc.get('until')})")


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
