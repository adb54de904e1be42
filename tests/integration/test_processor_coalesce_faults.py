"""Coalescing under faults on moto: a group write that committed but whose answer was lost, a
chunked group whose later chunk is cancelled, deliveries of no resource beside groups and
claim-check failures inside a group, compared with the per-delivery path (table state, hook ledger,
acknowledgements)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.process.model import Message, RecordResult
from webhook_pipeline.process.service import ProcessorService

from tests.helpers import envelope_json
from tests.integration.test_processor_coalesce import hooks_for

pytestmark = pytest.mark.integration

BUCKET = "webhook-pipeline-payloads"
NOW = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)


def build(client: Any, table: str, ledger: list[str], *, coalesce: bool) -> ProcessorService:
    """A service whose hooks append to ``ledger``: one plain, one failing, one with effects."""
    hooks = hooks_for(table, ledger)
    return ProcessorService(
        store=DynamoDBDeliveryStore(client, table, sleep=lambda _: None),
        payloads=S3PayloadStore(boto3.client("s3"), BUCKET),
        hooks=hooks,
        retention=timedelta(days=7),
        clock=lambda: NOW,
        coalesce=coalesce,
    )


def lose_answers(client: Any, table: str, lost: Callable[[list[Any]], bool]) -> list[int]:
    """After a group write on ``table`` commits, raise a read timeout in place of its answer
    when ``lost(items)`` (the SDK's retries exhausted); returns a list counting those."""
    seen: list[int] = []

    def after(params: dict[str, Any], **_: Any) -> None:
        items = params.get("TransactItems") or []
        names = {next(iter(i.values()))["TableName"] for i in items}
        puts = [
            i for i in items if "Put" in i and i["Put"]["Item"].get("type") == {"S": "delivery"}
        ]
        if names == {table} and len(puts) > 1 and lost(items):
            seen.append(1)
            raise ReadTimeoutError(endpoint_url="https://dynamodb")

    # ``params`` of provide-client-params are the API parameters; keep them for after-call.
    state: dict[str, Any] = {}

    def remember(params: dict[str, Any], **_: Any) -> None:
        state["params"] = params

    def answered(**kw: Any) -> None:
        after(state.pop("params", {}), **kw)

    client.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", remember)
    client.meta.events.register("after-call.dynamodb.TransactWriteItems", answered)
    return seen


def scan(client: Any, table: str) -> dict[str, dict[str, Any]]:
    items: dict[str, dict[str, Any]] = {}
    for page in client.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            item.pop("last_mismatch_at", None)
            items[item["pk"]["S"] + "|" + item["sk"]["S"]] = item
    return items


def acks(results: dict[str, RecordResult]) -> dict[str, bool]:
    return {mid: r.acknowledged for mid, r in results.items()}


def message(
    mid: str, did: str, res: str | None, seq: int | None, kind: str, body: bytes
) -> Message:
    return Message(mid, envelope_json(did, res, seq, body=body, event_type=kind))


def test_a_group_write_whose_answer_was_lost_runs_each_hook_once(
    two_tables: Callable[[str], tuple[Any, str, str]],
) -> None:
    # Given a group of four deliveries of one resource (one older than the stored watermark)
    client, coalesced, per_delivery = two_tables("lost")
    kinds = ["customer.updated", "invoice.paid", "customer.updated", "invoice.paid"]
    batch = [
        message(f"m{i}", f"evt_{i}", "cus_1", seq, kinds[i], f'{{"i":{i}}}'.encode())
        for i, seq in enumerate((4, 1, 3, 6))
    ]
    ledgers: dict[str, list[str]] = {coalesced: [], per_delivery: []}
    results: dict[str, dict[str, RecordResult]] = {}
    lost = lose_answers(client, coalesced, lambda _: True)
    for table, coalesce in ((coalesced, True), (per_delivery, False)):
        svc = build(client, table, ledgers[table], coalesce=coalesce)
        svc.process_batch([message("m0x", "evt_0", "cus_1", 2, "customer.updated", b"{}")])
        results[table] = svc.process_batch(batch)
    # When the group write committed and its answer was lost
    assert lost == [1]
    # Then every message is acknowledged, each applied delivery's hook ran exactly once, and
    # the table is the per-delivery path's
    assert acks(results[coalesced]) == acks(results[per_delivery])
    assert ledgers[coalesced] == ledgers[per_delivery]
    assert scan(client, coalesced) == scan(client, per_delivery)


def test_a_chunked_group_whose_second_chunk_is_cancelled_ends_as_the_per_delivery_path(
    two_tables: Callable[[str], tuple[Any, str, str]],
) -> None:
    # Given evt_120 recorded earlier under another resource, and 150 deliveries of cus_1
    client, coalesced, per_delivery = two_tables("chunks")
    ledgers: dict[str, list[str]] = {coalesced: [], per_delivery: []}
    views: dict[str, dict[str, Any]] = {}
    batch = [
        message(f"m{s}", f"evt_{s}", "cus_1", s, "invoice.paid", f'{{"s":{s}}}'.encode())
        for s in range(1, 151)
    ]
    for table, coalesce in ((coalesced, True), (per_delivery, False)):
        svc = build(client, table, ledgers[table], coalesce=coalesce)
        svc.process_batch([message("m-early", "evt_120", "cus_9", 1, "invoice.paid", b"{}")])
        results = svc.process_batch(batch)
        views[table] = {mid: (r.outcome, r.hook, r.reason) for mid, r in results.items()}
    # Then the first chunk's 99 and the rest one by one give what one write each gives
    assert views[coalesced] == views[per_delivery]
    assert ledgers[coalesced] == ledgers[per_delivery]
    assert scan(client, coalesced) == scan(client, per_delivery)


def random_batches(rng: random.Random) -> list[list[Message]]:
    """Three batches over 2 resources and none: ties, copies, redeliveries,
    claim-check bodies missing from the bucket (malformed), three hook kinds."""
    kinds = ["customer.updated", "customer.deleted", "invoice.failed", "invoice.paid"]
    known: list[tuple[str, str | None, int | None, str]] = []
    batches = []
    for b in range(3):
        batch = []
        for i in range(rng.randint(2, 10)):
            if known and rng.random() < 0.25:
                did, res, seq, kind = rng.choice(known)
            else:
                did, res, seq = f"evt_{b}_{i}", rng.choice(["cus_1", "cus_2"]), rng.randint(0, 5)
                if rng.random() < 0.2:  # a delivery of no resource (the envelope: both or none)
                    res, seq = None, None
                kind = rng.choice(kinds)
                known.append((did, res, seq, kind))
            body = json.dumps({"id": did}).encode()
            if rng.random() < 0.1:
                data = json.loads(envelope_json(did, res, seq, body=body, event_type=kind))
                data.pop("body_b64")
                data["body_ref"] = {"bucket": BUCKET, "key": f"bodies/stripe/{did}"}
                batch.append(Message(f"m{b}_{i}", Envelope.model_validate(data).to_json()))
            else:
                batch.append(message(f"m{b}_{i}", did, res, seq, kind, body))
        rng.shuffle(batch)
        batches.append(batch)
    return batches


def test_randomised_batches_with_lost_answers_keep_hooks_and_state(
    two_tables: Callable[[str], tuple[Any, str, str]],
) -> None:
    lost_total = 0
    for seed in range(30):
        client, coalesced, per_delivery = two_tables(str(seed))
        rng = random.Random(seed)
        batches = random_batches(rng)
        lost = lose_answers(client, coalesced, lambda _: rng.random() < 0.4)
        ledgers: dict[str, list[str]] = {coalesced: [], per_delivery: []}
        ack: dict[str, list[dict[str, bool]]] = {coalesced: [], per_delivery: []}
        for table, coalesce in ((coalesced, True), (per_delivery, False)):
            svc = build(client, table, ledgers[table], coalesce=coalesce)
            for batch in batches:
                ack[table].append(acks(svc.process_batch(batch)))
        lost_total += len(lost)
        assert ack[coalesced] == ack[per_delivery], f"seed {seed}"
        assert ledgers[coalesced] == ledgers[per_delivery], f"seed {seed}"
        assert scan(client, coalesced) == scan(client, per_delivery), f"seed {seed}"
    assert lost_total >= 5, lost_total  # the lost-answer path was taken


def test_a_cancelled_chunk_of_ties_stops_the_chunks_after_it(
    two_tables: Callable[[str], tuple[Any, str, str]],
) -> None:
    # Given 1..98, then 100 deliveries tied at 99 (one of them, evt_t50, recorded earlier
    # under another resource), then 100..105: chunks of 99 end at 99, 99 and 105
    client, coalesced, per_delivery = two_tables("ties")
    seqs = [(f"evt_{s}", s) for s in range(1, 99)]
    seqs += [(f"evt_t{i}", 99) for i in range(100)]
    seqs += [(f"evt_{s}", s) for s in range(100, 106)]
    batch = [
        message(f"m{i}", did, "cus_1", seq, "customer.updated", did.encode())
        for i, (did, seq) in enumerate(seqs)
    ]
    ledgers: dict[str, list[str]] = {coalesced: [], per_delivery: []}
    views: dict[str, dict[str, Any]] = {}
    for table, coalesce in ((coalesced, True), (per_delivery, False)):
        svc = build(client, table, ledgers[table], coalesce=coalesce)
        svc.process_batch([message("m-early", "evt_t50", "cus_9", 1, "customer.updated", b"x")])
        results = svc.process_batch(batch)
        views[table] = {mid: (r.outcome, r.hook, r.reason) for mid, r in results.items()}
    # Then the second chunk's cancellation sends it and the third down the per-delivery path:
    # the ties are applied (the third chunk did not commit 105 before them)
    assert views[coalesced] == views[per_delivery]
    assert ledgers[coalesced] == ledgers[per_delivery]
    assert scan(client, coalesced) == scan(client, per_delivery)
