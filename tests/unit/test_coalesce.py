"""Coalescing: the outcomes one group write decides, its chunks, its transaction items and
request token, and its failures answered as reasons (no sockets)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from webhook_pipeline.adapters.dynamodb_group import (
    GROUP_LIMIT,
    group_items,
    group_token,
    read_watermark,
)
from webhook_pipeline.adapters.dynamodb_group import write_group as send_group
from webhook_pipeline.process.coalesce import GroupWrite, PlannedWrite, chunk_group, plan_group
from webhook_pipeline.process.model import DeliveryRecord, HookState, Outcome

pytestmark = pytest.mark.unit

AT = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)


def rec(
    delivery_id: str,
    seq: int | None,
    resource: str | None = "cus_1",
    hook_pending: bool = False,
    source: str = "stripe",
) -> DeliveryRecord:
    return DeliveryRecord(
        source=source,
        delivery_id=delivery_id,
        event_type="customer.updated",
        resource_key=resource,
        sequence=seq,
        received_at=AT,
        recorded_at=AT,
        expires_at=1_800_000_000,
        body_size=2,
        body_sha256="0" * 64,
        hook_pending=hook_pending,
        message_id=f"m-{delivery_id}",
        attempt_token=f"t-{delivery_id}".ljust(36, "0"),
    )


def outcomes(planned: list[PlannedWrite]) -> list[tuple[str, Outcome, int | None]]:
    return [(p.record.delivery_id, p.outcome, p.watermark) for p in planned]


# -- outcomes -----------------------------------------------------------------------------------


def test_ascending_group_is_stale_below_the_watermark_and_applied_from_it() -> None:
    # Given a stored watermark 5 and a group in the plan's order 3, 5, 5, 7
    group = [rec("a", 3), rec("b", 5), rec("c", 5), rec("d", 7)]
    # Then 3 is stale against 5; an equal sequence of another delivery applies (twice)
    assert outcomes(plan_group(group, 5)) == [
        ("a", Outcome.STALE, 5),
        ("b", Outcome.APPLIED, None),
        ("c", Outcome.APPLIED, None),
        ("d", Outcome.APPLIED, None),
    ]


def test_descending_group_applies_the_first_and_the_rest_are_stale_against_it() -> None:
    assert outcomes(plan_group([rec("a", 7), rec("b", 5), rec("c", 7)], None)) == [
        ("a", Outcome.APPLIED, None),
        ("b", Outcome.STALE, 7),
        ("c", Outcome.APPLIED, None),
    ]


def test_no_watermark_yet_applies_any_sequence() -> None:
    assert outcomes(plan_group([rec("a", 0), rec("b", -3)], None)) == [
        ("a", Outcome.APPLIED, None),
        ("b", Outcome.STALE, 0),
    ]


def test_copies_within_the_group_are_duplicates_and_leave_the_watermark_alone() -> None:
    # Given a copy of a (applied) and a copy of s (stale), the copy of a with a higher sequence
    group = [rec("s", 1), rec("s", 1), rec("a", 4), rec("a", 9), rec("b", 6)]
    planned = plan_group(group, 2)
    assert outcomes(planned) == [
        ("s", Outcome.STALE, 2),
        ("s", Outcome.DUPLICATE, None),
        ("a", Outcome.APPLIED, None),
        ("a", Outcome.DUPLICATE, None),
        ("b", Outcome.APPLIED, None),  # 6 >= 4: the copy's 9 never counted
    ]
    assert [p.index for p in planned] == [0, 1, 2, 3, 4]
    (write,) = chunk_group(planned, 2, 99)
    assert [w.record.delivery_id for w in write.writes] == ["s", "a", "b"]
    assert write.advances is not None and write.advances.delivery_id == "b"


def test_same_delivery_id_of_another_source_is_not_a_copy() -> None:
    planned = plan_group([rec("a", 1), rec("a", 2, source="github")], None)
    assert [p.outcome for p in planned] == [Outcome.APPLIED, Outcome.APPLIED]


def test_a_delivery_without_a_sequence_is_applied_without_moving_the_watermark() -> None:
    planned = plan_group([rec("a", 5), rec("n", None, resource=None), rec("b", 4)], 1)
    assert outcomes(planned) == [
        ("a", Outcome.APPLIED, None),
        ("n", Outcome.APPLIED, None),
        ("b", Outcome.STALE, 5),
    ]


def test_store_results_are_what_the_per_delivery_store_answers() -> None:
    applied, stale = plan_group([rec("a", 5, hook_pending=True), rec("b", 4, hook_pending=True)], 1)
    assert applied.store_result().hook_state is HookState.PENDING
    assert (stale.store_result().outcome, stale.store_result().watermark) == (Outcome.STALE, 5)
    assert stale.store_result().hook_state is None  # a stale delivery's hook never runs
    (plain,) = plan_group([rec("c", 9)], 1)
    assert plain.store_result().hook_state is None


def sequential(records: list[DeliveryRecord], watermark: int | None) -> list[Any]:
    """The per-delivery rules one record at a time (as :class:`DynamoDBDeliveryStore` decides
    with the transaction's conditions): the reference ``plan_group`` must agree with."""
    seen: set[tuple[str, str]] = set()
    out: list[Any] = []
    for r in records:
        if (r.source, r.delivery_id) in seen:
            out.append((r.delivery_id, Outcome.DUPLICATE, None))
            continue
        seen.add((r.source, r.delivery_id))
        assert r.sequence is not None
        if watermark is not None and not watermark <= r.sequence:  # "#wm <= :seq" failed
            out.append((r.delivery_id, Outcome.STALE, watermark))
        else:
            out.append((r.delivery_id, Outcome.APPLIED, None))
            watermark = r.sequence
    return out


@pytest.mark.parametrize("seed", range(200))
def test_randomised_groups_agree_with_one_write_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    ids = [f"e{i}" for i in range(rng.randint(2, 12))]
    records = [rec(rng.choice(ids), rng.randint(0, 8)) for _ in range(rng.randint(2, 15))]
    if rng.random() < 0.7:
        records.sort(key=lambda r: r.sequence or 0)  # the plan's order, most of the time
    watermark = rng.choice([None, 0, 3, 5, 9])
    assert outcomes(plan_group(records, watermark)) == sequential(records, watermark)


# -- chunks -------------------------------------------------------------------------------------


def test_chunks_chain_the_watermark_each_leaves() -> None:
    records = [rec(f"e{i:03d}", i) for i in range(1, 251)]
    chunks = chunk_group(plan_group(records, 0), 0, GROUP_LIMIT)
    assert [len(c.writes) for c in chunks] == [99, 99, 52]
    assert [c.expected_watermark for c in chunks] == [0, 99, 198]
    assert [c.advances.sequence for c in chunks if c.advances] == [99, 198, 250]


def test_a_stale_only_chunk_keeps_the_expected_watermark_and_has_no_update() -> None:
    records = [rec("a", 1), rec("b", 2), rec("c", 8)]
    first, second = chunk_group(plan_group(records, 5), 5, 2)
    assert (first.expected_watermark, first.advances) == (5, None)
    assert second.expected_watermark == 5 and second.advances is not None
    assert [list(i) for i in group_items("t", first)] == [["Put"], ["Put"]]


def test_chunk_group_refuses_a_mix_of_resources_and_a_zero_limit() -> None:
    with pytest.raises(ValueError, match="one resource"):
        chunk_group(plan_group([rec("a", 1), rec("b", 2, resource="cus_2")], None), None, 99)
    with pytest.raises(ValueError, match="limit"):
        chunk_group(plan_group([rec("a", 1)], None), None, 0)


# -- transaction items and token --------------------------------------------------------------


def single_write(records: list[DeliveryRecord], watermark: int | None) -> GroupWrite:
    (write,) = chunk_group(plan_group(records, watermark), watermark, GROUP_LIMIT)
    return write


def test_items_are_conditional_puts_then_one_update_on_the_watermark_read() -> None:
    write = single_write([rec("a", 3), rec("b", 6, hook_pending=True), rec("c", 8)], 4)
    items = group_items("deliveries", write)
    puts = [i["Put"] for i in items[:3]]
    assert [p["Item"]["outcome"]["S"] for p in puts] == ["stale", "applied", "applied"]
    assert all(p["ConditionExpression"] == "attribute_not_exists(pk)" for p in puts)
    assert puts[0]["Item"]["watermark_at_receipt"] == {"N": "4"}
    assert puts[1]["Item"]["hook_state"] == {"S": "pending"}
    update = items[3]["Update"]
    assert update["Key"]["pk"] == {"S": "RESOURCE#stripe#cus_1"}
    assert update["ConditionExpression"] == "#wm = :expected"
    assert update["ExpressionAttributeValues"][":expected"] == {"N": "4"}
    assert update["ExpressionAttributeValues"][":seq"] == {"N": "8"}
    assert update["ExpressionAttributeValues"][":did"] == {"S": "c"}


def test_without_a_watermark_the_update_requires_there_is_still_none() -> None:
    items = group_items("deliveries", single_write([rec("a", 3), rec("b", 6)], None))
    assert items[-1]["Update"]["ConditionExpression"] == "attribute_not_exists(#wm)"
    assert ":expected" not in items[-1]["Update"]["ExpressionAttributeValues"]


def test_more_than_the_limit_is_refused() -> None:
    write = GroupWrite(
        "stripe", "cus_1", None, tuple(plan_group([rec(f"e{i}", i) for i in range(100)], None))
    )
    with pytest.raises(ValueError, match="at most 99"):
        group_items("t", write)


def test_token_is_stable_for_one_content_and_differs_for_any_other() -> None:
    records = [rec("a", 3), rec("b", 6)]
    write = single_write(records, 1)
    token = group_token(write, group_items("t", write))
    assert len(token) == 36
    assert token == group_token(single_write(records, 1), group_items("t", write))
    # other watermark read, other recording time, other attempt (redelivery): other token
    moved = single_write(records, 2)
    later = single_write([replace(r, recorded_at=AT.replace(second=1)) for r in records], 1)
    again = single_write([replace(r, attempt_token="x" * 36) for r in records], 1)
    others = {group_token(w, group_items("t", w)) for w in (moved, later, again)}
    assert len(others) == 3 and token not in others
    assert token not in {r.attempt_token for r in records}


# -- failures are reasons, never raised --------------------------------------------------------


class Client:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.requests: list[dict[str, Any]] = []

    def transact_write_items(self, **kw: Any) -> dict[str, Any]:
        self.requests.append(kw)
        if self.error:
            raise self.error
        return {}


def error(code: str, status: int = 400, **extra: Any) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": "..."},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(response, "TransactWriteItems")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raised", "reason"),
    [
        (
            error(
                "TransactionCanceledException",
                CancellationReasons=[{"Code": "ConditionalCheckFailed"}, {"Code": "None"}],
            ),
            "cancelled: reasons ['ConditionalCheckFailed', 'None']",
        ),
        (
            error("TransactionCanceledException", CancellationReasons=[{"Code": "None"}] * 2),
            "cancelled: reasons ['None', 'None']",
        ),
        (error("TransactionCanceledException"), "cancelled: reasons []"),
        (error("ThrottlingException"), "ThrottlingException"),
        (error("ValidationException"), "ValidationException"),
        (error("", status=500), "DynamoDB TransactWriteItems failed: 500"),
        (ReadTimeoutError(endpoint_url="https://dynamodb"), "ReadTimeoutError"),
    ],
)
def test_a_write_that_does_not_commit_answers_why(raised: Exception, reason: str) -> None:
    client = Client(raised)
    assert send_group(client, "t", single_write([rec("a", 1), rec("b", 2)], None)) == reason  # type: ignore[arg-type]
    assert len(client.requests) == 1  # never tried again here


def test_a_committed_write_answers_none_with_its_token() -> None:
    client = Client()
    write = single_write([rec("a", 1), rec("b", 2)], None)
    assert send_group(client, "t", write) is None  # type: ignore[arg-type]
    (request,) = client.requests
    assert request["ClientRequestToken"] == group_token(write, request["TransactItems"])


class Reader:
    """A client answering ``GetItem`` with ``item``, keeping the requests."""

    def __init__(self, item: dict[str, Any] | None) -> None:
        self.item = item
        self.requests: list[dict[str, Any]] = []

    def get_item(self, **kw: Any) -> dict[str, Any]:
        self.requests.append(kw)
        return {"Item": self.item} if self.item is not None else {}


@pytest.mark.parametrize(
    ("item", "expected"),
    [({"watermark": {"N": "42"}}, 42), ({}, None), (None, None)],
)
def test_the_watermark_is_read_strongly_consistent(
    item: dict[str, Any] | None, expected: int | None
) -> None:
    # The outcomes are decided against this value: an eventually consistent read could be one
    # write behind and send the group down the per-delivery path for nothing.
    client = Reader(item)
    assert read_watermark(client, "t", "stripe", "cus_1") == expected  # type: ignore[arg-type]
    (request,) = client.requests
    assert request["ConsistentRead"] is True
    assert request["Key"] == {"pk": {"S": "RESOURCE#stripe#cus_1"}, "sk": {"S": "RESOURCE"}}
