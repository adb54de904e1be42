"""A hook's effects committed with its done mark: one transaction, exactly once in effect.

The transaction's first write sets the delivery record's ``hook_state`` from ``pending`` to
``done``; the others are the hook's own writes (:class:`webhook_pipeline.hooks.Effects`). A run
that dies before the commit leaves nothing (the redelivery runs the hook again), and a run that
finds the hook done already commits nothing: its effects are discarded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from webhook_pipeline.adapters.dynamodb_errors import classify, error_code
from webhook_pipeline.adapters.dynamodb_items import delivery_key
from webhook_pipeline.errors import HookError, StoreBugError, TransientError
from webhook_pipeline.process.model import HookState

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def commit_effects(
    client: DynamoDBClient,
    table: str,
    source: str,
    delivery_id: str,
    effects: Sequence[Mapping[str, Any]],
) -> bool:
    """The done mark ([0], only while the hook is pending) and the hook's writes ([1:])."""
    mark: dict[str, Any] = {
        "Update": {
            "TableName": table,
            "Key": delivery_key(source, delivery_id),
            "UpdateExpression": "SET #hs = :done",
            "ConditionExpression": "#hs = :pending",
            "ExpressionAttributeNames": {"#hs": "hook_state"},
            "ExpressionAttributeValues": {
                ":done": {"S": HookState.DONE.value},
                ":pending": {"S": HookState.PENDING.value},
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
    try:
        client.transact_write_items(
            TransactItems=[mark, *(dict(e) for e in effects)]  # type: ignore[list-item]
        )
    except ClientError as exc:
        if error_code(exc) != "TransactionCanceledException":
            raise classify(exc) from exc
        return _effects_cancelled(exc, source, delivery_id)
    except BotoCoreError as exc:
        raise TransientError(f"DynamoDB TransactWriteItems failed: {type(exc).__name__}") from exc
    return True


def _effects_cancelled(exc: ClientError, source: str, delivery_id: str) -> bool:
    """Read a cancelled effects commit: [0] the done mark, [1:] the hook's writes."""
    reasons = exc.response.get("CancellationReasons")
    if not isinstance(reasons, list) or not reasons:
        raise TransientError("effects commit cancelled without cancellation reasons") from exc
    codes = [str((r or {}).get("Code") or "None") for r in reasons]
    if codes[0] == "ConditionalCheckFailed":
        item = reasons[0].get("Item")
        if not isinstance(item, dict) or not item:
            raise StoreBugError(
                f"hook done for a delivery that is not recorded: {source}/{delivery_id}"
            ) from exc
        return False  # done already: another run committed its effects first
    if "ValidationError" in codes:
        raise StoreBugError(f"effects commit rejected as invalid: reasons {codes}") from exc
    if "ConditionalCheckFailed" in codes[1:]:
        raise HookError(f"a hook effect's condition failed: reasons {codes}") from exc
    raise TransientError(f"effects commit cancelled: reasons {codes}") from exc
