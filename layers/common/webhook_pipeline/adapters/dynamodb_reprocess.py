"""Reprocess marks: a delivery's hook run again once per replay generation, exactly once in effect.

The mark of generation ``n`` of a delivery is its own item (``pk = "REPROCESS#<source>#<delivery
id>"``, ``sk = "GENERATION#<n>"``; ``type = "reprocess"``, ``source``, ``delivery_id``,
``generation``, ``job``, ``marked_at``, ``expires_at`` = the delivery record's TTL). It is written
with ``attribute_not_exists(pk)`` in one transaction with the hook's own writes
(:class:`webhook_pipeline.hooks.Effects`), as the first run's done mark is: a run that dies before
the commit leaves nothing, and a second run of the same generation commits nothing (its effects
are discarded). The delivery record and the resource watermark are never written here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from webhook_pipeline.adapters.dynamodb_errors import classify, error_code
from webhook_pipeline.adapters.dynamodb_items import delivery_key, reprocess_key
from webhook_pipeline.errors import HookError, StoreBugError, TransientError
from webhook_pipeline.process.model import HookState, Outcome, ReprocessState

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class ReprocessMarks:
    """The reprocess side of :class:`webhook_pipeline.adapters.dynamodb.DynamoDBDeliveryStore`
    (a mixin: the store's client and table name)."""

    _client: DynamoDBClient
    _table: str

    def read_reprocess(self, source: str, delivery_id: str, generation: int) -> ReprocessState:
        """The delivery record and whether ``generation``'s mark exists (:func:`read_state`).

        Raises
        ------
        TransientError, StoreBugError
        """
        return read_state(self._client, self._table, source, delivery_id, generation)

    def mark_reprocessed(
        self,
        source: str,
        delivery_id: str,
        generation: int,
        *,
        job: str,
        expires_at: int | None,
        effects: Sequence[Mapping[str, Any]] = (),
    ) -> bool:
        """``generation``'s mark, only if absent, with ``effects`` (:func:`commit_mark`):
        ``False`` when the mark existed and nothing was written.

        Raises
        ------
        TransientError, HookError, StoreBugError
            As :func:`commit_mark`.
        """
        return commit_mark(
            self._client,
            self._table,
            source,
            delivery_id,
            generation,
            job=job,
            expires_at=expires_at,
            effects=effects,
        )


def read_state(
    client: DynamoDBClient, table: str, source: str, delivery_id: str, generation: int
) -> ReprocessState:
    """The delivery record (one consistent read) and, only for an applied record whose hook is
    not pending, whether ``generation``'s mark exists (a second read).

    Raises
    ------
    TransientError, StoreBugError
        Throttling, timeouts, 5xx; a request rejected as invalid.
    """
    record = _get(client, table, delivery_key(source, delivery_id))
    if record is None:
        return ReprocessState(None)
    outcome = _text(record, "outcome") or ""
    hook = _text(record, "hook_state") or ""
    expires = record.get("expires_at", {}).get("N")
    state = ReprocessState(
        stored_outcome=Outcome(outcome) if outcome in Outcome._value2member_map_ else None,
        hook_state=HookState(hook) if hook in HookState._value2member_map_ else None,
        stored_digest=_text(record, "content_sha256") or _text(record, "body_sha256"),
        expires_at=int(expires) if expires else None,
    )
    if state.stored_outcome is not Outcome.APPLIED or state.hook_state is HookState.PENDING:
        return state
    mark = _get(client, table, reprocess_key(source, delivery_id, generation))
    return ReprocessState(
        state.stored_outcome,
        state.hook_state,
        state.stored_digest,
        state.expires_at,
        mark is not None,
    )


def commit_mark(
    client: DynamoDBClient,
    table: str,
    source: str,
    delivery_id: str,
    generation: int,
    *,
    job: str,
    expires_at: int | None,
    effects: Sequence[Mapping[str, Any]],
) -> bool:
    """Write ``generation``'s mark ([0], only if absent; ``expires_at`` epoch seconds) and the
    hook's writes ([1:]) in one transaction. Returns ``False`` when the mark existed (nothing
    written), ``True`` when all committed.

    Raises
    ------
    TransientError
        Throttling, timeouts, a conflict, missing cancellation reasons.
    HookError
        One of ``effects``' own conditions failed.
    StoreBugError
        The request is invalid.
    """
    item: dict[str, Any] = {
        **reprocess_key(source, delivery_id, generation),
        "type": {"S": "reprocess"},
        "source": {"S": source},
        "delivery_id": {"S": delivery_id},
        "generation": {"N": str(generation)},
        "job": {"S": job},
        "marked_at": {"S": datetime.now(UTC).isoformat()},
    }
    if expires_at is not None:
        item["expires_at"] = {"N": str(expires_at)}
    put = {
        "Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
    }
    try:
        client.transact_write_items(
            TransactItems=[put, *(dict(e) for e in effects)]  # type: ignore[list-item]
        )
    except ClientError as exc:
        if error_code(exc) != "TransactionCanceledException":
            raise classify(exc) from exc
        return _cancelled(exc)
    except BotoCoreError as exc:
        raise TransientError(f"DynamoDB TransactWriteItems failed: {type(exc).__name__}") from exc
    return True


def _cancelled(exc: ClientError) -> bool:
    """Read a cancelled mark commit: [0] the mark, [1:] the hook's writes."""
    reasons = exc.response.get("CancellationReasons")
    if not isinstance(reasons, list) or not reasons:
        raise TransientError("reprocess mark cancelled without cancellation reasons") from exc
    codes = [str((r or {}).get("Code") or "None") for r in reasons]
    if codes[0] == "ConditionalCheckFailed":
        return False  # this generation's mark exists: another run committed first
    if "ValidationError" in codes:
        raise StoreBugError(f"reprocess mark rejected as invalid: reasons {codes}") from exc
    if "ConditionalCheckFailed" in codes[1:]:
        raise HookError(f"a hook effect's condition failed: reasons {codes}") from exc
    raise TransientError(f"reprocess mark cancelled: reasons {codes}") from exc


def _get(client: DynamoDBClient, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
    try:
        response = client.get_item(TableName=table, Key=key, ConsistentRead=True)
    except ClientError as exc:
        raise classify(exc) from exc
    except BotoCoreError as exc:
        raise TransientError(f"DynamoDB GetItem failed: {type(exc).__name__}") from exc
    item = response.get("Item")
    return dict(item) if item else None


def _text(item: Mapping[str, Any], name: str) -> str | None:
    value = (item.get(name) or {}).get("S")
    return str(value) if value is not None else None
