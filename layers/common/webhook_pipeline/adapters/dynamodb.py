"""DynamoDB adapter of :class:`webhook_pipeline.process.ports.DeliveryStore` (single table).

Item types (see docs/data-model.md):

* delivery record: ``pk = "DELIVERY#<source>#<delivery_id>"``, ``sk = "DELIVERY"``; written once
  with ``attribute_not_exists(pk)``; expires by TTL (``expires_at``, epoch seconds).
* resource item: ``pk = "RESOURCE#<source>#<resource_key>"``, ``sk = "RESOURCE"``; holds the
  sequence watermark; never expires.
* reprocess mark: ``pk = "REPROCESS#<source>#<delivery_id>"``, ``sk = "GENERATION#<n>"``
  (:mod:`.dynamodb_reprocess`).
* failure note: ``pk = "FAILURE#<sqs message id>"``, ``sk = "FAILURE"``; why a message failed
  in a way retries do not fix (malformed, rejected request, failing hook); the DLQ keeps the
  message id, so ``dlq peek`` shows the reason; expires after 14 days (the DLQ's retention).

A delivery with a resource key is one ``TransactWriteItems``: [0] Put delivery record
(``attribute_not_exists(pk)``), [1] Update resource item (``attribute_not_exists(#wm) OR #wm <=
:seq``). Only older sequences are stale: a different delivery with a sequence equal to the
watermark is applied (ordering values with coarse resolution, such as Stripe's ``created`` in
seconds, tie for distinct events; neither is dropped, and the watermark never moves back).
Cancellation reasons are read by index: [0] failed -> duplicate, [1] failed -> stale;
``TransactionConflict``/throttling/missing reasons/5xx -> retry (a conflict alone is first
tried again in place, :data:`CONFLICT_ATTEMPTS` in all);
``ValidationError`` -> :class:`StoreBugError`. A stale delivery is then recorded with a second
conditional Put (``outcome = stale``); if that Put finds a record, the delivery is a duplicate.
A delivery without a resource key is one conditional Put.

Several deliveries of one resource in one batch can instead be one transaction
(:meth:`DynamoDBDeliveryStore.record_group`, :mod:`.dynamodb_group`); whenever that one does not
commit, the processor comes back here, one delivery at a time.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from webhook_pipeline.adapters.dynamodb_effects import commit_effects
from webhook_pipeline.adapters.dynamodb_errors import classify, error_code
from webhook_pipeline.adapters.dynamodb_group import GROUP_LIMIT, read_watermark, write_group
from webhook_pipeline.adapters.dynamodb_items import (
    FAILURE_NOTE_TTL,
    WATERMARK,
    delivery_item,
    delivery_key,
    failure_key,
    resource_key,
    watermark_update,
)
from webhook_pipeline.adapters.dynamodb_reprocess import ReprocessMarks
from webhook_pipeline.errors import StoreBugError, TransientError
from webhook_pipeline.process.coalesce import GroupWrite
from webhook_pipeline.process.model import (
    DeliveryRecord,
    FailureNote,
    HookState,
    Outcome,
    StoreResult,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef, UpdateTypeDef

#: Attempts of one transaction cancelled by ``TransactionConflict`` alone, and the backoff base:
#: attempt n (from 0) waits a uniform random time up to ``CONFLICT_BACKOFF_SECONDS * 2**n``
#: (full jitter; at most 0.35 s in all with 4 attempts), well inside the processor's timeout.
CONFLICT_ATTEMPTS = 4
CONFLICT_BACKOFF_SECONDS = 0.05


class DynamoDBDeliveryStore(ReprocessMarks):
    """Delivery records, resource watermarks and reprocess marks (:class:`ReprocessMarks`) in
    one DynamoDB table.

    Parameters
    ----------
    client : botocore DynamoDB client
        Created once per container (explicit timeouts, ``standard`` retries); thread-safe.
    table_name : str
        ``TABLE_NAME``; keys ``pk`` (S) and ``sk`` (S), TTL attribute ``expires_at``.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self._client = client
        self._table = table_name
        self._sleep = sleep
        self._jitter = jitter

    #: Deliveries per :meth:`record_group` (a transaction holds 100 items, one is the watermark).
    group_limit = GROUP_LIMIT

    # -- writes ---------------------------------------------------------------------------------

    def record(self, delivery: DeliveryRecord) -> StoreResult:
        """Record ``delivery`` at most once; move its resource watermark strictly forward.

        Returns
        -------
        StoreResult
            ``APPLIED`` (1 request), ``DUPLICATE`` (1 request) or ``STALE`` (2 requests).

        Raises
        ------
        TransientError
            Throttling, ``TransactionConflict``, missing cancellation reasons, timeouts, 5xx.
        StoreBugError
            ``ValidationException`` or any other request the service rejects as invalid.
        """
        if delivery.resource_key is None or delivery.sequence is None:
            return self._put_delivery(delivery, Outcome.APPLIED)
        return self._transact(delivery)

    def read_watermark(self, source: str, resource_key: str) -> int | None:
        """The stored watermark of a resource (strongly consistent read), or ``None``.

        Raises
        ------
        TransientError, StoreBugError
        """
        return read_watermark(self._client, self._table, source, resource_key)

    def record_group(self, write: GroupWrite) -> str | None:
        """One transaction for the deliveries of ``write`` (:mod:`.dynamodb_group`): ``None``
        when it committed, otherwise why not. Never raises for the service's answer."""
        return write_group(self._client, self._table, write)

    def note_body_mismatch(self, source: str, delivery_id: str, digest: str) -> None:
        """``ADD duplicate_body_mismatches 1`` and keep the last differing digest and when.

        Raises
        ------
        TransientError, StoreBugError
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key=delivery_key(source, delivery_id),
                UpdateExpression=(
                    "ADD #n :one SET last_mismatch_sha256 = :h, last_mismatch_at = :at"
                ),
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#n": "duplicate_body_mismatches"},
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":h": {"S": digest},
                    ":at": {"S": datetime.now(UTC).isoformat()},
                },
            )
        except ClientError as exc:
            raise classify(exc) from exc
        except BotoCoreError as exc:
            raise TransientError(f"DynamoDB UpdateItem failed: {type(exc).__name__}") from exc

    def mark_hook_done(
        self, source: str, delivery_id: str, effects: Sequence[Mapping[str, Any]] = ()
    ) -> bool:
        """Set ``hook_state = done`` on a recorded delivery; with ``effects`` (the hook's own
        DynamoDB writes) in one transaction, on the condition that the hook is still pending.

        Returns
        -------
        bool
            ``False`` when ``effects`` were given and the hook was already done (another run
            committed first): nothing was written. Without effects always ``True`` (setting
            ``done`` twice is harmless).

        Raises
        ------
        TransientError
            Throttling, timeouts, a ``TransactionConflict``, missing cancellation reasons.
        HookError
            One of ``effects``' own conditions failed.
        StoreBugError
            The delivery is not recorded, or the request is invalid.
        """
        if effects:
            return commit_effects(self._client, self._table, source, delivery_id, effects)
        try:
            self._client.update_item(
                TableName=self._table,
                Key=delivery_key(source, delivery_id),
                UpdateExpression="SET #hs = :done",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#hs": "hook_state"},
                ExpressionAttributeValues={":done": {"S": HookState.DONE.value}},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise StoreBugError(
                    f"hook done for a delivery that is not recorded: {source}/{delivery_id}"
                ) from exc
            raise classify(exc) from exc
        except BotoCoreError as exc:
            raise TransientError(f"DynamoDB UpdateItem failed: {type(exc).__name__}") from exc
        return True

    def _transaction_items(self, delivery: DeliveryRecord) -> list[TransactWriteItemTypeDef]:
        """The delivery Put ([0]) and the resource watermark Update ([1]) of one transaction."""
        condition = "attribute_not_exists(#wm) OR #wm <= :seq"
        return [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": delivery_item(delivery, Outcome.APPLIED),
                    "ConditionExpression": "attribute_not_exists(pk)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {"Update": cast("UpdateTypeDef", watermark_update(self._table, delivery, condition))},
        ]

    def _transact(self, delivery: DeliveryRecord) -> StoreResult:
        """One transaction; a cancellation by ``TransactionConflict`` alone (another transaction
        was writing the same resource item: a hot resource) is tried again here, after a
        jittered backoff, up to :data:`CONFLICT_ATTEMPTS` times in all, rather than waiting a
        visibility timeout for SQS to redeliver it. Each attempt carries its own request token;
        the conditions keep any number of attempts at most one record."""
        items = self._transaction_items(delivery)
        for attempt in range(CONFLICT_ATTEMPTS):
            token = delivery.attempt_token if attempt == 0 else _retry_token(delivery, attempt)
            try:
                self._client.transact_write_items(TransactItems=items, ClientRequestToken=token)
            except ClientError as exc:
                if error_code(exc) != "TransactionCanceledException":
                    raise classify(exc) from exc
                if _conflict_only(exc) and attempt + 1 < CONFLICT_ATTEMPTS:
                    self._sleep(self._jitter(0, CONFLICT_BACKOFF_SECONDS * 2**attempt))
                    continue
                return self._cancelled(delivery, exc)
            except BotoCoreError as exc:
                raise TransientError(
                    f"DynamoDB TransactWriteItems failed: {type(exc).__name__}"
                ) from exc
            break
        return StoreResult(
            Outcome.APPLIED, hook_state=HookState.PENDING if delivery.hook_pending else None
        )

    def _cancelled(self, delivery: DeliveryRecord, exc: ClientError) -> StoreResult:
        """Read ``CancellationReasons`` by index: [0] delivery Put, [1] resource Update."""
        reasons = exc.response.get("CancellationReasons")
        if not isinstance(reasons, list) or len(reasons) < 2:
            raise TransientError("transaction cancelled without cancellation reasons") from exc
        codes = [str((r or {}).get("Code") or "None") for r in reasons[:2]]
        if codes[0] == "ConditionalCheckFailed":
            return _duplicate(reasons[0].get("Item"))
        if codes[1] == "ConditionalCheckFailed":
            old = reasons[1].get("Item")
            watermark = _number(old.get(WATERMARK) if isinstance(old, dict) else None)
            return self._put_delivery(delivery, Outcome.STALE, watermark)
        if "ValidationError" in codes:
            raise StoreBugError(f"transaction rejected as invalid: reasons {codes}") from exc
        # Conflicts, throttling and unknown reasons alike: a later attempt may succeed.
        raise TransientError(f"transaction cancelled: reasons {codes}") from exc

    def _put_delivery(
        self, delivery: DeliveryRecord, outcome: Outcome, watermark: int | None = None
    ) -> StoreResult:
        try:
            self._client.put_item(
                TableName=self._table,
                Item=delivery_item(delivery, outcome, watermark),
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return _duplicate(exc.response.get("Item"))
            raise classify(exc) from exc
        except BotoCoreError as exc:
            raise TransientError(f"DynamoDB PutItem failed: {type(exc).__name__}") from exc
        hook_state = (
            HookState.PENDING if outcome is Outcome.APPLIED and delivery.hook_pending else None
        )
        return StoreResult(outcome, hook_state=hook_state, watermark=watermark)

    def record_failure(self, note: FailureNote) -> None:
        """Write (or overwrite) the failure note of ``note.message_id``; expires after 14 days.

        Raises
        ------
        TransientError
            Throttling, timeouts, 5xx.
        StoreBugError
            The request was rejected as invalid.
        """
        item: dict[str, Any] = {
            **failure_key(note.message_id),
            "type": {"S": "failure"},
            "outcome": {"S": note.outcome.value},
            "reason": {"S": note.reason},
            "receive_count": {"N": str(note.receive_count)},
            "failed_at": {"S": note.failed_at.isoformat()},
            "expires_at": {"N": str(int((note.failed_at + FAILURE_NOTE_TTL).timestamp()))},
        }
        if note.source is not None and note.delivery_id is not None:
            item |= {"source": {"S": note.source}, "delivery_id": {"S": note.delivery_id}}
        try:
            self._client.put_item(TableName=self._table, Item=item)
        except ClientError as exc:
            raise classify(exc) from exc
        except BotoCoreError as exc:
            raise TransientError(f"DynamoDB PutItem failed: {type(exc).__name__}") from exc

    # -- reads (operators, tests) -------------------------------------------------------------

    def get_failure(self, message_id: str) -> dict[str, Any] | None:
        """The failure note of an SQS message id, or ``None``."""
        return self._get(failure_key(message_id))

    def get_delivery(self, source: str, delivery_id: str) -> dict[str, Any] | None:
        """The delivery record as plain Python values, or ``None`` (strongly consistent)."""
        return self._get(delivery_key(source, delivery_id))

    def get_resource(self, source: str, key: str) -> dict[str, Any] | None:
        """The resource item as plain Python values, or ``None`` (strongly consistent)."""
        return self._get(resource_key(source, key))

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        response = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        item = response.get("Item")
        return _plain(item) if item else None


def _duplicate(item: Any) -> StoreResult:
    item = item if isinstance(item, dict) else {}
    stored = str((item.get("outcome") or {}).get("S"))
    hook = str((item.get("hook_state") or {}).get("S"))
    digest = (item.get("content_sha256") or item.get("body_sha256") or {}).get("S")
    return StoreResult(
        Outcome.DUPLICATE,
        hook_state=HookState(hook) if hook in HookState._value2member_map_ else None,
        stored_outcome=Outcome(stored) if stored in Outcome._value2member_map_ else None,
        stored_digest=str(digest) if digest else None,
    )


def _number(attr: Any) -> int | None:
    if isinstance(attr, dict) and "N" in attr:
        return int(attr["N"])
    return None


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, attr in item.items():
        ((kind, value),) = attr.items()
        out[name] = int(value) if kind == "N" else value
    return out


def _conflict_only(exc: ClientError) -> bool:
    """Whether a cancelled transaction failed on ``TransactionConflict`` and on nothing else."""
    reasons = exc.response.get("CancellationReasons")
    if not isinstance(reasons, list):
        return False
    codes = {str((r or {}).get("Code") or "None") for r in reasons}
    return "TransactionConflict" in codes and codes <= {"TransactionConflict", "None"}


def _retry_token(delivery: DeliveryRecord, attempt: int) -> str:
    """The request token of in-place attempt ``attempt`` (36 characters, like the first)."""
    return hashlib.sha256(f"{delivery.attempt_token}:{attempt}".encode()).hexdigest()[:36]
