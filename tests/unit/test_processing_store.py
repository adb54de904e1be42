"""DynamoDB store: cancellation reasons read by index, error classes (a fake client, no sockets).

C10: one transaction, Put delivery ``evt_1`` with ``attribute_not_exists(pk)`` + Update resource
``cus_1`` with ``attribute_not_exists(#wm) OR #wm <= :seq`` (equal sequences apply, see
docs/data-model.md); stored seq 7, incoming 5 ->
``CancellationReasons: [{"Code":"None"},{"Code":"ConditionalCheckFailed"}]`` -> stale.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.errors import StoreBugError, TransientError
from webhook_pipeline.process.model import DeliveryRecord, HookState, Outcome

pytestmark = pytest.mark.unit

AT = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)


def record(
    delivery_id: str = "evt_1",
    resource: str | None = "cus_1",
    seq: int | None = 5,
    hook_pending: bool = False,
) -> DeliveryRecord:
    return DeliveryRecord(
        source="stripe",
        delivery_id=delivery_id,
        event_type="customer.updated",
        resource_key=resource,
        sequence=seq if resource else None,
        received_at=AT,
        recorded_at=AT,
        expires_at=1_800_000_000,
        body_size=2,
        body_sha256="0" * 64,
        hook_pending=hook_pending,
        message_id="m1",
        attempt_token="t" * 36,
    )


def client_error(code: str, op: str, status: int = 400, **extra: Any) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": "..."},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(response, op)  # type: ignore[arg-type]


class FakeClient:
    """Records requests; answers each operation from a queue of results or errors."""

    def __init__(self, **answers: list[Any]) -> None:
        self.answers = answers
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def _answer(self, op: str, kwargs: dict[str, Any]) -> Any:
        self.requests.append((op, kwargs))
        queue = self.answers.get(op) or [{}]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def transact_write_items(self, **kw: Any) -> Any:
        return self._answer("transact_write_items", kw)

    def put_item(self, **kw: Any) -> Any:
        return self._answer("put_item", kw)

    def update_item(self, **kw: Any) -> Any:
        return self._answer("update_item", kw)


def cancelled(reasons: list[dict[str, Any]] | None) -> ClientError:
    extra = {} if reasons is None else {"CancellationReasons": reasons}
    return client_error("TransactionCanceledException", "TransactWriteItems", **extra)


def test_new_delivery_with_resource_is_one_transaction_with_the_documented_conditions() -> None:
    client = FakeClient()
    result = DynamoDBDeliveryStore(client, "deliveries").record(record(hook_pending=True))
    assert result.outcome is Outcome.APPLIED
    assert result.hook_state is HookState.PENDING
    ((op, request),) = client.requests
    assert op == "transact_write_items"
    put, update = (
        item["Put"] if "Put" in item else item["Update"] for item in request["TransactItems"]
    )
    assert put["Item"]["pk"] == {"S": "DELIVERY#stripe#evt_1"}
    assert put["Item"]["hook_state"] == {"S": "pending"}
    assert put["Item"]["expires_at"] == {"N": "1800000000"}
    assert put["ConditionExpression"] == "attribute_not_exists(pk)"
    assert update["Key"]["pk"] == {"S": "RESOURCE#stripe#cus_1"}
    assert update["ConditionExpression"] == "attribute_not_exists(#wm) OR #wm <= :seq"
    assert update["ExpressionAttributeNames"]["#wm"] == "watermark"
    assert update["ExpressionAttributeValues"][":seq"] == {"N": "5"}
    assert request["ClientRequestToken"] == "t" * 36


def test_new_delivery_without_resource_is_one_conditional_put() -> None:
    client = FakeClient()
    result = DynamoDBDeliveryStore(client, "deliveries").record(record(resource=None))
    assert result.outcome is Outcome.APPLIED
    ((op, request),) = client.requests
    assert op == "put_item"
    assert request["ConditionExpression"] == "attribute_not_exists(pk)"
    assert "resource_key" not in request["Item"]


def test_c10_stored_seq_7_incoming_5_is_stale_and_recorded_as_stale() -> None:
    # Given the exact cancellation of case C10
    reasons = [
        {"Code": "None"},
        {"Code": "ConditionalCheckFailed", "Item": {"watermark": {"N": "7"}}},
    ]
    client = FakeClient(transact_write_items=[cancelled(reasons)])
    # When
    result = DynamoDBDeliveryStore(client, "deliveries").record(record(seq=5))
    # Then: stale (acknowledged), and the delivery record is written once with outcome stale
    assert (result.outcome, result.watermark) == (Outcome.STALE, 7)
    assert result.outcome.acknowledged
    assert [op for op, _ in client.requests] == ["transact_write_items", "put_item"]
    stale_put = client.requests[1][1]
    assert stale_put["Item"]["outcome"] == {"S": "stale"}
    assert stale_put["Item"]["watermark_at_receipt"] == {"N": "7"}
    assert "hook_state" not in stale_put["Item"]
    assert stale_put["ConditionExpression"] == "attribute_not_exists(pk)"


def test_c10_reasons_without_item_still_stale() -> None:
    reasons = [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}]
    client = FakeClient(transact_write_items=[cancelled(reasons)])
    result = DynamoDBDeliveryStore(client, "deliveries").record(record(seq=5))
    assert (result.outcome, result.watermark) == (Outcome.STALE, None)


def test_c10_reason_order_delivery_failed_is_duplicate_even_if_resource_failed_too() -> None:
    reasons = [
        {
            "Code": "ConditionalCheckFailed",
            "Item": {"outcome": {"S": "applied"}, "hook_state": {"S": "pending"}},
        },
        {"Code": "ConditionalCheckFailed"},
    ]
    client = FakeClient(transact_write_items=[cancelled(reasons)])
    result = DynamoDBDeliveryStore(client, "deliveries").record(record())
    assert (result.outcome, result.stored_outcome, result.hook_state) == (
        Outcome.DUPLICATE,
        Outcome.APPLIED,
        HookState.PENDING,
    )
    assert len(client.requests) == 1


def test_stale_whose_record_appears_meanwhile_is_duplicate() -> None:
    reasons = [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}]
    client = FakeClient(
        transact_write_items=[cancelled(reasons)],
        put_item=[
            client_error(
                "ConditionalCheckFailedException", "PutItem", Item={"outcome": {"S": "stale"}}
            )
        ],
    )
    result = DynamoDBDeliveryStore(client, "deliveries").record(record())
    assert (result.outcome, result.stored_outcome) == (Outcome.DUPLICATE, Outcome.STALE)


@pytest.mark.parametrize(
    "reasons",
    [
        None,
        [],
        [{"Code": "None"}],
        [{"Code": "TransactionConflict"}, {"Code": "None"}],
        [{"Code": "None"}, {"Code": "TransactionConflict"}],
        [{"Code": "ThrottlingError"}, {"Code": "None"}],
        [{"Code": "None"}, {"Code": "ProvisionedThroughputExceeded"}],
        [{"Code": "None"}, {"Code": "SomethingNew"}],
    ],
)
def test_conflict_throttling_and_missing_reasons_are_retry(reasons: Any) -> None:
    client = FakeClient(transact_write_items=[cancelled(reasons)])
    with pytest.raises(TransientError):
        DynamoDBDeliveryStore(client, "deliveries").record(record())


def test_a_conflict_alone_is_tried_again_in_place_with_its_own_token_and_a_jittered_backoff() -> (
    None
):
    from webhook_pipeline.adapters.dynamodb import CONFLICT_BACKOFF_SECONDS

    conflict = cancelled([{"Code": "None"}, {"Code": "TransactionConflict"}])
    client = FakeClient(transact_write_items=[conflict, conflict, {}])
    waits: list[float] = []
    bounds: list[tuple[float, float]] = []

    def jitter(low: float, high: float) -> float:
        bounds.append((low, high))
        return high / 2

    store = DynamoDBDeliveryStore(client, "deliveries", sleep=waits.append, jitter=jitter)
    assert store.record(record()).outcome is Outcome.APPLIED
    tokens = [kw["ClientRequestToken"] for op, kw in client.requests]
    assert len(tokens) == 3 and len(set(tokens)) == 3 and all(len(t) == 36 for t in tokens)
    assert tokens[0] == record().attempt_token
    assert bounds == [(0, CONFLICT_BACKOFF_SECONDS), (0, 2 * CONFLICT_BACKOFF_SECONDS)]
    assert waits == [CONFLICT_BACKOFF_SECONDS / 2, CONFLICT_BACKOFF_SECONDS]


def test_a_conflict_that_persists_is_a_retry_after_the_last_attempt() -> None:
    from webhook_pipeline.adapters.dynamodb import CONFLICT_ATTEMPTS

    client = FakeClient(
        transact_write_items=[cancelled([{"Code": "TransactionConflict"}, {"Code": "None"}])]
    )
    store = DynamoDBDeliveryStore(client, "deliveries", sleep=lambda _: None)
    with pytest.raises(TransientError):
        store.record(record())
    assert len(client.requests) == CONFLICT_ATTEMPTS


def test_a_conflict_beside_another_reason_is_not_tried_again_in_place() -> None:
    # the delivery is already recorded: a duplicate, whatever the resource item said
    duplicate = [{"Code": "ConditionalCheckFailed", "Item": {}}, {"Code": "TransactionConflict"}]
    client = FakeClient(transact_write_items=[cancelled(duplicate)])
    store = DynamoDBDeliveryStore(client, "deliveries", sleep=lambda _: None)
    assert store.record(record()).outcome is Outcome.DUPLICATE
    assert [op for op, _ in client.requests] == ["transact_write_items"]
    # throttled too: SQS redelivers it later
    throttled = [{"Code": "TransactionConflict"}, {"Code": "ThrottlingError"}]
    client = FakeClient(transact_write_items=[cancelled(throttled)])
    store = DynamoDBDeliveryStore(client, "deliveries", sleep=lambda _: None)
    with pytest.raises(TransientError):
        store.record(record())
    assert [op for op, _ in client.requests] == ["transact_write_items"]


def test_validation_error_reason_is_a_loud_bug() -> None:
    client = FakeClient(
        transact_write_items=[cancelled([{"Code": "ValidationError"}, {"Code": "None"}])]
    )
    with pytest.raises(StoreBugError):
        DynamoDBDeliveryStore(client, "deliveries").record(record())


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (client_error("ValidationException", "TransactWriteItems"), StoreBugError),
        (client_error("ResourceNotFoundException", "TransactWriteItems"), StoreBugError),
        (client_error("AccessDeniedException", "TransactWriteItems"), StoreBugError),
        (client_error("ThrottlingException", "TransactWriteItems"), TransientError),
        (
            client_error("ProvisionedThroughputExceededException", "TransactWriteItems"),
            TransientError,
        ),
        (client_error("TransactionInProgressException", "TransactWriteItems"), TransientError),
        (client_error("InternalServerError", "TransactWriteItems", status=500), TransientError),
        (client_error("SomethingElse", "TransactWriteItems", status=503), TransientError),
        (ReadTimeoutError(endpoint_url="https://dynamodb"), TransientError),
    ],
)
def test_request_errors_are_classified_by_code_and_status(
    error: Exception, expected: type[Exception]
) -> None:
    client = FakeClient(transact_write_items=[error])
    with pytest.raises(expected):
        DynamoDBDeliveryStore(client, "deliveries").record(record())


def test_put_path_errors_are_classified_too() -> None:
    throttled = FakeClient(put_item=[client_error("ThrottlingException", "PutItem")])
    invalid = FakeClient(put_item=[client_error("ValidationException", "PutItem")])
    with pytest.raises(TransientError):
        DynamoDBDeliveryStore(throttled, "t").record(record(resource=None))
    with pytest.raises(StoreBugError):
        DynamoDBDeliveryStore(invalid, "t").record(record(resource=None))


def test_mark_hook_done_sets_state() -> None:
    client = FakeClient()
    DynamoDBDeliveryStore(client, "deliveries").mark_hook_done("stripe", "evt_1")
    ((op, request),) = client.requests
    assert op == "update_item"
    assert request["Key"]["pk"] == {"S": "DELIVERY#stripe#evt_1"}
    assert request["ExpressionAttributeValues"][":done"] == {"S": "done"}
