"""Coalescing on moto: one transaction for a resource's deliveries of one batch, the fallback to
one transaction per delivery on each kind of cancellation, and final table states equal to the
per-delivery path's for randomised batches."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.hooks import Effects, HookEvent, HookRegistry
from webhook_pipeline.process.coalesce import GroupWrite
from webhook_pipeline.process.model import Message, Outcome, RecordResult
from webhook_pipeline.process.service import ProcessorService

from tests.helpers import FakeContext, create_deliveries_table, envelope_json, load_function

pytestmark = pytest.mark.integration

TABLE = "webhook-pipeline-deliveries"
BUCKET = "webhook-pipeline-payloads"
NOW = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)


@pytest.fixture
def ddb(aws: None) -> Any:
    client = boto3.client("dynamodb")
    create_deliveries_table(client, TABLE)
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return client


class Calls:
    """The DynamoDB operations a client sends (``before-call``), by name, in order."""

    def __init__(self, client: Any) -> None:
        self.names: list[str] = []
        client.meta.events.register("before-call.dynamodb", self._seen)

    def _seen(self, model: Any, **_: Any) -> None:
        self.names.append(model.name)

    def count(self, name: str) -> int:
        return self.names.count(name)


def service(
    client: Any, *, coalesce: bool = True, hooks: HookRegistry | None = None, table: str = TABLE
) -> ProcessorService:
    return ProcessorService(
        store=DynamoDBDeliveryStore(client, table, sleep=lambda _: None),
        payloads=S3PayloadStore(boto3.client("s3"), BUCKET),
        hooks=hooks or HookRegistry(),
        retention=timedelta(days=7),
        clock=lambda: NOW,
        coalesce=coalesce,
    )


def msg(delivery_id: str, seq: int, resource: str = "cus_1", **kw: Any) -> Message:
    return Message(
        f"m-{delivery_id}-{uuid.uuid4().hex[:6]}", envelope_json(delivery_id, resource, seq, **kw)
    )


def outcomes(results: dict[str, RecordResult], messages: list[Message]) -> list[str]:
    return [results[m.message_id].outcome.value for m in messages]


def delivery(client: Any, delivery_id: str, table: str = TABLE) -> dict[str, Any]:
    key = {"pk": {"S": f"DELIVERY#stripe#{delivery_id}"}, "sk": {"S": "DELIVERY"}}
    item = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    return {k: next(iter(v.values())) for k, v in item.items()}


def watermark(client: Any, resource: str = "cus_1") -> int:
    key = {"pk": {"S": f"RESOURCE#stripe#{resource}"}, "sk": {"S": "RESOURCE"}}
    item = client.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]
    return int(item["watermark"]["N"])


def set_watermark(client: Any, value: int, resource: str = "cus_1") -> None:
    client.update_item(
        TableName=TABLE,
        Key={"pk": {"S": f"RESOURCE#stripe#{resource}"}, "sk": {"S": "RESOURCE"}},
        UpdateExpression="SET watermark = :v",
        ExpressionAttributeValues={":v": {"N": str(value)}},
    )


def first_transaction(client: Any, action: Callable[[dict[str, Any]], Any]) -> list[int]:
    """Run ``action(params)`` before the first ``TransactWriteItems`` the client sends (its
    answer, when not ``None``, replaces the service's); returns a list that counts the calls."""
    seen: list[int] = []

    def before(params: dict[str, Any], **_: Any) -> Any:
        seen.append(1)
        return action(params) if len(seen) == 1 else None

    client.meta.events.register("before-call.dynamodb.TransactWriteItems", before)
    return seen


# -- one transaction ----------------------------------------------------------------------------


def test_k_deliveries_of_one_resource_are_one_transaction(ddb: Any) -> None:
    # Given a stored watermark 3 and a batch of 6 deliveries of cus_1, out of order
    set_watermark(ddb, 3)
    calls = Calls(ddb)
    batch = [msg(f"evt_{i}_{s}", s) for i, s in enumerate((5, 2, 9, 3, 7, 9))]
    # When
    results = service(ddb).process_batch(batch)
    # Then one consistent read and one transaction wrote every record and the watermark
    assert calls.names == ["GetItem", "TransactWriteItems"]
    assert outcomes(results, batch) == [
        "applied",
        "stale",
        "applied",
        "applied",
        "applied",
        "applied",
    ]
    assert watermark(ddb) == 9
    assert delivery(ddb, "evt_1_2")["outcome"] == "stale"
    assert delivery(ddb, "evt_1_2")["watermark_at_receipt"] == "3"
    assert delivery(ddb, "evt_5_9")["outcome"] == "applied"  # an equal sequence applies
    assert results[batch[1].message_id].reason == "older than the resource watermark 3"


def test_each_resource_of_a_batch_is_its_own_transaction(ddb: Any) -> None:
    calls = Calls(ddb)
    batch = [msg(f"evt_{r}_{s}", s, resource=r) for r in ("cus_a", "cus_b") for s in (1, 2, 3)]
    batch.append(msg("evt_alone", 1, resource="cus_c"))
    results = service(ddb).process_batch(batch)
    assert set(outcomes(results, batch)) == {"applied"}
    # two groups of three coalesced (read + write each); the group of one is one transaction
    assert calls.count("GetItem") == 2 and calls.count("TransactWriteItems") == 3
    assert (watermark(ddb, "cus_a"), watermark(ddb, "cus_b"), watermark(ddb, "cus_c")) == (3, 3, 1)


def test_a_group_over_the_transaction_limit_is_written_in_chunks(ddb: Any) -> None:
    calls = Calls(ddb)
    batch = [msg(f"evt_{s:03d}", s) for s in range(1, 151)]
    results = service(ddb).process_batch(batch)
    assert set(outcomes(results, batch)) == {"applied"}
    assert calls.count("TransactWriteItems") == 2  # 99 + 51
    assert watermark(ddb) == 150


def test_the_handler_coalesces(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"TABLE_NAME": TABLE, "PAYLOAD_BUCKET": BUCKET, "DELIVERY_RETENTION_DAYS": "14"}
    app = load_function("processor", env, monkeypatch)
    calls = Calls(app.dynamodb_client())
    records = [
        {"messageId": f"m{s}", "body": envelope_json(f"evt_h{s}", "cus_h", s), "attributes": {}}
        for s in (3, 1, 2)
    ]
    response = app.lambda_handler({"Records": records}, FakeContext(function_name="Processor"))
    assert response == {"batchItemFailures": []}
    assert calls.count("TransactWriteItems") == 1
    assert watermark(ddb, "cus_h") == 3


# -- fallback on each kind of cancellation ------------------------------------------------------


def test_a_delivery_recorded_before_cancels_the_group_write_and_each_is_recorded_alone(
    ddb: Any,
) -> None:
    # Given evt_2 recorded by an earlier batch (watermark 2)
    earlier = msg("evt_2", 2)
    service(ddb).process_batch([earlier])
    calls = Calls(ddb)
    # When a batch brings it again with two new deliveries
    batch = [msg("evt_1", 1), msg("evt_2", 2), msg("evt_4", 4)]
    results = service(ddb).process_batch(batch)
    # Then the group write was cancelled ([1] failed) and the per-delivery path decided
    assert calls.names[:2] == ["GetItem", "TransactWriteItems"]
    assert calls.count("TransactWriteItems") == 1 + 3
    assert outcomes(results, batch) == ["stale", "duplicate", "applied"]
    assert delivery(ddb, "evt_2")["message_id"] == earlier.message_id  # not overwritten
    assert watermark(ddb) == 4


def test_a_watermark_moved_between_read_and_write_sends_the_group_down_the_per_delivery_path(
    ddb: Any,
) -> None:
    # Given watermark 1 when the group reads it, moved to 5 by another writer before it writes
    set_watermark(ddb, 1)
    other = boto3.client("dynamodb")
    seen = first_transaction(ddb, lambda _: set_watermark(other, 5))
    batch = [msg("evt_2", 2), msg("evt_4", 4), msg("evt_6", 6)]
    # When
    results = service(ddb).process_batch(batch)
    # Then 2 and 4 are stale against 5 (not applied against the 1 read), 6 is applied
    assert len(seen) == 1 + 3
    assert outcomes(results, batch) == ["stale", "stale", "applied"]
    assert delivery(ddb, "evt_2")["watermark_at_receipt"] == "5"
    assert watermark(ddb) == 6


def test_a_resource_created_between_read_and_write_cancels_the_group_write(ddb: Any) -> None:
    other = boto3.client("dynamodb")
    first_transaction(ddb, lambda _: set_watermark(other, 9))
    batch = [msg("evt_3", 3), msg("evt_9", 9)]
    results = service(ddb).process_batch(batch)
    assert outcomes(results, batch) == ["stale", "applied"]
    assert watermark(ddb) == 9


def test_a_transaction_conflict_sends_the_group_down_the_per_delivery_path(ddb: Any) -> None:
    def conflict(params: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        items = json.loads(params["body"])["TransactItems"]
        reasons = [{"Code": "None"}] * (len(items) - 1) + [{"Code": "TransactionConflict"}]
        parsed = {
            "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
            "CancellationReasons": reasons,
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return AWSResponse("https://dynamodb", 400, {}, None), parsed

    seen = first_transaction(ddb, conflict)
    batch = [msg("evt_1", 1), msg("evt_2", 2), msg("evt_3", 3)]
    results = service(ddb).process_batch(batch)
    assert len(seen) == 1 + 3  # the cancelled group write, then one per delivery
    assert outcomes(results, batch) == ["applied", "applied", "applied"]
    assert watermark(ddb) == 3


@pytest.mark.parametrize(
    "code", ["ThrottlingException", "ValidationException", "InternalServerError"]
)
def test_a_group_write_failing_otherwise_falls_back_too(ddb: Any, code: str) -> None:
    def failed(_: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        status = 500 if code == "InternalServerError" else 400
        parsed = {
            "Error": {"Code": code, "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        return AWSResponse("https://dynamodb", status, {}, None), parsed

    seen = first_transaction(ddb, failed)
    batch = [msg("evt_1", 1), msg("evt_2", 2)]
    results = service(ddb).process_batch(batch)
    assert outcomes(results, batch) == ["applied", "applied"]
    assert len(seen) == 1 + 2


def test_a_failed_watermark_read_sends_the_group_down_the_per_delivery_path(ddb: Any) -> None:
    reads: list[int] = []

    def throttled(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        reads.append(1)
        parsed = {
            "Error": {"Code": "ThrottlingException", "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return AWSResponse("https://dynamodb", 400, {}, None), parsed

    ddb.meta.events.register("before-call.dynamodb.GetItem", throttled)
    calls = Calls(ddb)
    batch = [msg("evt_1", 1), msg("evt_2", 2)]
    results = service(ddb).process_batch(batch)
    ddb.meta.events.unregister("before-call.dynamodb.GetItem", throttled)
    assert outcomes(results, batch) == ["applied", "applied"]
    assert len(reads) == 1  # the group's read, answered with throttling
    assert calls.names == ["TransactWriteItems", "TransactWriteItems"]  # then one per delivery
    assert watermark(ddb) == 2


# -- hooks, copies, claim checks ----------------------------------------------------------------


def test_hooks_run_after_the_write_once_per_applied_delivery_in_order_with_effects(
    ddb: Any,
) -> None:
    ran: list[str] = []

    def hook(event: HookEvent) -> Effects:
        ran.append(event.delivery_id)
        item = {"pk": {"S": f"EFFECT#{event.delivery_id}"}, "sk": {"S": "EFFECT"}}
        return Effects(({"Put": {"TableName": TABLE, "Item": item}},))

    hooks = HookRegistry()
    hooks.register("stripe", None, hook)
    set_watermark(ddb, 2)
    batch = [msg("evt_4", 4), msg("evt_1", 1), msg("evt_3", 3), msg("evt_3", 3)]
    batch[3] = Message("m-copy", batch[2].body)  # an SQS duplicate of evt_3
    results = service(ddb, hooks=hooks).process_batch(batch)
    assert outcomes(results, batch) == ["applied", "stale", "applied", "duplicate"]
    assert ran == ["evt_3", "evt_4"]  # the stale one and the copy run nothing
    assert [results[m.message_id].hook for m in batch] == ["ran", None, "ran", None]
    for delivery_id in ("evt_3", "evt_4"):
        assert delivery(ddb, delivery_id)["hook_state"] == "done"
        key = {"pk": {"S": f"EFFECT#{delivery_id}"}, "sk": {"S": "EFFECT"}}
        assert "Item" in ddb.get_item(TableName=TABLE, Key=key)


def test_a_failing_hook_fails_only_its_record_and_stays_pending(ddb: Any) -> None:
    def hook(event: HookEvent) -> None:
        if event.delivery_id == "evt_2":
            raise RuntimeError("downstream down")

    hooks = HookRegistry()
    hooks.register("stripe", None, hook)
    batch = [msg("evt_1", 1), msg("evt_2", 2), msg("evt_3", 3)]
    results = service(ddb, hooks=hooks).process_batch(batch)
    assert outcomes(results, batch) == ["applied", "retry", "applied"]
    assert delivery(ddb, "evt_2")["hook_state"] == "pending"
    # and its redelivery is a duplicate whose pending hook runs again
    again = Message(batch[1].message_id, batch[1].body, receive_count=2)
    hooks2 = HookRegistry()
    hooks2.register("stripe", None, lambda e: None)
    (result,) = service(ddb, hooks=hooks2).process_batch([again]).values()
    assert (result.outcome, result.hook) == (Outcome.DUPLICATE, "ran")


def test_a_missing_claim_check_body_fails_only_its_record(ddb: Any) -> None:
    raw = b'{"id":"evt_big"}'
    data = json.loads(envelope_json("evt_big", "cus_1", 2))
    data.pop("body_b64")
    data["body_ref"] = {"bucket": BUCKET, "key": "bodies/stripe/evt_big"}
    data.update(body_size=len(raw), body_sha256="0" * 64)
    missing = Message("m-big", Envelope.model_validate(data).to_json())
    calls = Calls(ddb)
    batch = [msg("evt_1", 1), missing, msg("evt_3", 3)]
    results = service(ddb).process_batch(batch)
    assert outcomes(results, batch) == ["applied", "malformed", "applied"]
    assert calls.count("TransactWriteItems") == 1


# -- the same final state as the per-delivery path ---------------------------------------------


def scan(client: Any, table: str) -> dict[str, dict[str, Any]]:
    items: dict[str, dict[str, Any]] = {}
    for page in client.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            item.pop("last_mismatch_at", None)  # wall-clock time of a note
            items[item["pk"]["S"] + "|" + item["sk"]["S"]] = item
    return items


def random_batches(rng: random.Random) -> list[list[Message]]:
    """Two batches over 1-3 resources: ties, copies within a batch, copies with another body,
    redeliveries of the first batch's deliveries in the second, and one event type with no
    hook, one whose hook fails, one whose hook returns effects."""
    resources = [f"cus_{i}" for i in range(rng.randint(1, 3))]
    kinds = ["customer.updated", "customer.deleted", "invoice.failed", "invoice.paid"]
    known: list[tuple[str, str, int, str]] = []
    batches = []
    for b in range(2):
        batch = []
        for i in range(rng.randint(2, 12)):
            if known and rng.random() < 0.25:
                did, res, seq, kind = rng.choice(known)
            else:
                did, res, seq = f"evt_{b}_{i}", rng.choice(resources), rng.randint(0, 6)
                kind = rng.choice(kinds)
                known.append((did, res, seq, kind))
            body = json.dumps({"id": did, "v": rng.random() < 0.2}).encode()
            batch.append(
                Message(f"m{b}_{i}", envelope_json(did, res, seq, body=body, event_type=kind))
            )
        rng.shuffle(batch)
        batches.append(batch)
    return batches


def hooks_for(table: str, ledger: list[str]) -> HookRegistry:
    hooks = HookRegistry()

    def record(event: HookEvent) -> None:
        ledger.append(event.delivery_id)

    def failing(event: HookEvent) -> None:
        ledger.append(event.delivery_id)
        raise RuntimeError("failing hook")

    def effects(event: HookEvent) -> Effects:
        ledger.append(event.delivery_id)
        item = {"pk": {"S": f"EFFECT#{event.delivery_id}"}, "sk": {"S": "EFFECT"}}
        return Effects(({"Put": {"TableName": table, "Item": item}},))

    hooks.register("stripe", "customer.updated", record)
    hooks.register("stripe", "invoice.failed", failing)
    hooks.register("stripe", "invoice.paid", effects)
    return hooks


def view(result: RecordResult) -> tuple[Any, ...]:
    return (result.outcome, result.hook, result.reason, result.body_mismatch)


class CountingStore(DynamoDBDeliveryStore):
    """The store, counting group writes that committed and that did not."""

    committed = 0
    not_committed = 0

    def record_group(self, write: GroupWrite) -> str | None:
        reason = super().record_group(write)
        if reason is None:
            CountingStore.committed += 1
        else:
            CountingStore.not_committed += 1
        return reason


def test_randomised_batches_end_in_the_per_delivery_paths_state(
    two_tables: Callable[[str], tuple[Any, str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CountingStore, "committed", 0)
    monkeypatch.setattr(CountingStore, "not_committed", 0)
    for seed in range(40):
        client, coalesced, per_delivery = two_tables(str(seed))
        batches = random_batches(random.Random(seed))
        ledgers: dict[str, list[str]] = {coalesced: [], per_delivery: []}
        views: dict[str, list[dict[str, Any]]] = {coalesced: [], per_delivery: []}
        for table, coalesce in ((coalesced, True), (per_delivery, False)):
            svc = ProcessorService(
                store=CountingStore(client, table, sleep=lambda _: None),
                payloads=S3PayloadStore(boto3.client("s3"), BUCKET),
                hooks=hooks_for(table, ledgers[table]),
                retention=timedelta(days=7),
                clock=lambda: NOW,
                coalesce=coalesce,
            )
            for batch in batches:
                results = svc.process_batch(batch)
                views[table].append({mid: view(r) for mid, r in results.items()})
        assert views[coalesced] == views[per_delivery], f"seed {seed}"
        assert ledgers[coalesced] == ledgers[per_delivery], f"seed {seed}"
        assert scan(client, coalesced) == scan(client, per_delivery), f"seed {seed}"
    # both of the coalesced service's ways were taken, many times each
    assert CountingStore.committed >= 20 and CountingStore.not_committed >= 5, (
        CountingStore.committed,
        CountingStore.not_committed,
    )
