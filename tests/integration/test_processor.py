"""ProcessorFunction in-process against moto: outcomes, ordering, partial batch responses (C08),
cancellation reasons (C10), concurrency, injected throttling, claim-check bodies, hooks."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import importlib.util
import io
import json
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto.dynamodb.models import DynamoDBBackend
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.adapters.s3 import S3PayloadStore
from webhook_pipeline.envelope import Envelope
from webhook_pipeline.errors import ConfigurationError, TransientError
from webhook_pipeline.hooks import HookRegistry, registry
from webhook_pipeline.observability import logger
from webhook_pipeline.process.model import DeliveryRecord, Message, Outcome
from webhook_pipeline.process.service import ProcessorService

from tests.helpers import create_deliveries_table, envelope_json

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "functions" / "processor" / "app.py"
TABLE = "webhook-pipeline-deliveries"
BUCKET = "webhook-pipeline-payloads"


@dataclass
class LambdaContext:
    function_name: str = "ProcessorFunction"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:ProcessorFunction"
    aws_request_id: str = "00000000-0000-4000-8000-000000000000"


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def atomic_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make moto's DynamoDB operations atomic with respect to each other, as the real service is.

    moto's in-process backend has no locking and restores a whole-table snapshot when a
    transaction is cancelled, so concurrent requests could interleave in ways DynamoDB never
    allows. The requests themselves still run concurrently up to the backend.
    """
    lock = threading.RLock()
    for name in ("transact_write_items", "put_item", "update_item", "get_item"):
        original = getattr(DynamoDBBackend, name)

        def locked(*args: Any, __original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            with lock:
                return __original(*args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, locked)


@pytest.fixture
def resources(aws: None, atomic_moto: None) -> None:
    """The DeliveriesTable (keys and TTL as in template.yaml) and the payload bucket."""
    ddb = boto3.client("dynamodb")
    create_deliveries_table(ddb, TABLE)
    boto3.client("s3").create_bucket(Bucket=BUCKET)


@pytest.fixture
def app(resources: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., ModuleType]]:
    """Import functions/processor/app.py freshly (a cold start) with the given environment."""
    loaded: list[ModuleType] = []
    registry.clear()

    def cold_start(**env: str) -> ModuleType:
        monkeypatch.setenv("TABLE_NAME", TABLE)
        monkeypatch.setenv("PAYLOAD_BUCKET", BUCKET)
        monkeypatch.setenv("DELIVERY_RETENTION_DAYS", "14")
        monkeypatch.setenv("MAX_WORKERS", "8")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        name = f"processor_app_{uuid.uuid4().hex}"
        spec = importlib.util.spec_from_file_location(name, APP)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        loaded.append(module)
        return module

    yield cold_start
    for module in loaded:
        if module.service.cache_info().currsize:
            module.service()._executor.shutdown(wait=True)
    registry.clear()


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """Every line the shared Powertools logger writes during the test (JSON, one per line)."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logger.registered_formatter)
    logger._logger.addHandler(handler)
    yield buffer
    logger._logger.removeHandler(handler)


@pytest.fixture
def processor(app: Callable[..., ModuleType]) -> ModuleType:
    return app()


@pytest.fixture
def store(resources: None) -> DynamoDBDeliveryStore:
    return DynamoDBDeliveryStore(boto3.client("dynamodb"), TABLE)


# -- helpers ------------------------------------------------------------------------------------


envelope = envelope_json


def sqs_record(body: str, message_id: str | None = None, receive_count: int = 1) -> dict[str, Any]:
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": "AQEBexample==",
        "body": body,
        "attributes": {"ApproximateReceiveCount": str(receive_count)},
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:MainQueue",
        "awsRegion": "us-east-1",
    }


def invoke(processor: ModuleType, *records: dict[str, Any]) -> dict[str, Any]:
    return processor.lambda_handler({"Records": list(records)}, LambdaContext())


def failed_ids(response: dict[str, Any]) -> list[str]:
    return [item["itemIdentifier"] for item in response["batchItemFailures"]]


def log_lines(text: str) -> list[dict[str, Any]]:
    lines = []
    for line in text.splitlines():
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict):
            lines.append(parsed)
    return lines


def metric_totals(text: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for line in log_lines(text):
        if "_aws" not in line:
            continue
        for definition in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            name = definition["Name"]
            value = line[name]
            totals[name] = totals.get(name, 0) + (sum(value) if isinstance(value, list) else value)
    return totals


def outcome_lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    """The per-record outcome log lines written since the last call (the buffer is emptied)."""
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return [line for line in log_lines(text) if "outcome" in line and "message" in line]


class InjectedError:
    """A ``before-call`` hook on a botocore client that answers some requests with an error
    instead of sending them (no retries by the SDK: the request never reached the service)."""

    def __init__(self, client: Any, operation: str, code: str, status: int, match: str) -> None:
        self.client, self.event = client, f"before-call.dynamodb.{operation}"
        self.code, self.status, self.match = code, status, match
        self.hits = 0

    def __call__(
        self, params: dict[str, Any], **_: Any
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        body = params.get("body", b"")
        text = body.decode() if isinstance(body, bytes) else str(body)
        if self.match not in text:
            return None
        self.hits += 1
        parsed = {
            "Error": {"Code": self.code, "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": self.status},
        }
        return AWSResponse("https://dynamodb", self.status, {}, None), parsed

    def __enter__(self) -> InjectedError:
        self.client.meta.events.register(self.event, self, unique_id="injected-error")
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.meta.events.unregister(self.event, unique_id="injected-error")


# -- C08: partial batch response shape ------------------------------------------------------------


def test_c08_all_succeeded_reports_an_empty_list(processor: ModuleType, event: Callable) -> None:
    response = invoke(processor, *event("sqs-new-delivery")["Records"])
    assert response == {"batchItemFailures": []}


def test_c08_only_exact_failed_message_ids_in_camel_case(
    processor: ModuleType, event: Callable
) -> None:
    # Given a batch of a non-envelope, a body whose hash does not match, and a valid delivery
    records = event("sqs-malformed")["Records"]
    # When
    response = invoke(processor, *records)
    # Then exactly the two poison messages are reported, with the documented keys
    assert response == {
        "batchItemFailures": [
            {"itemIdentifier": records[0]["messageId"]},
            {"itemIdentifier": records[1]["messageId"]},
        ]
    }
    assert all(set(item) == {"itemIdentifier"} for item in response["batchItemFailures"])
    assert all(item["itemIdentifier"] for item in response["batchItemFailures"])
    json.dumps(response)  # serializable as Lambda returns it


def test_c08_a_batch_where_every_record_fails_still_answers_the_partial_shape(
    processor: ModuleType,
) -> None:
    records = [sqs_record("not json", "m-1"), sqs_record('{"source": "stripe"}', "m-2")]
    assert invoke(processor, *records) == {
        "batchItemFailures": [{"itemIdentifier": "m-1"}, {"itemIdentifier": "m-2"}]
    }


def test_c08_empty_batch(processor: ModuleType) -> None:
    assert invoke(processor) == {"batchItemFailures": []}


# -- outcomes -------------------------------------------------------------------------------------


def test_new_delivery_is_applied_with_record_watermark_and_ttl(
    logs: io.StringIO,
    processor: ModuleType,
    store: DynamoDBDeliveryStore,
    event: Callable,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = int(time.time())
    assert failed_ids(invoke(processor, *event("sqs-new-delivery")["Records"])) == []
    delivery = store.get_delivery("stripe", "evt_1NewDelivery")
    resource = store.get_resource("stripe", "cus_NewDelivery")
    assert delivery is not None and resource is not None
    assert delivery["outcome"] == "applied"
    assert "hook_state" not in delivery
    assert before + 14 * 86400 <= delivery["expires_at"] <= int(time.time()) + 14 * 86400
    assert resource["watermark"] == 1768471100
    assert resource["last_delivery_id"] == "evt_1NewDelivery"
    assert resource["last_event_type"] == "customer.updated"
    out = capsys.readouterr().out
    assert metric_totals(out) == {"Applied": 1}
    (line,) = outcome_lines(logs)
    assert (line["outcome"], line["source"], line["delivery_id"]) == (
        "applied",
        "stripe",
        "evt_1NewDelivery",
    )


def test_same_delivery_twice_in_one_batch_is_applied_once(
    processor: ModuleType,
    store: DynamoDBDeliveryStore,
    event: Callable,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert failed_ids(invoke(processor, *event("sqs-duplicate")["Records"])) == []
    assert metric_totals(capsys.readouterr().out) == {"Applied": 1, "Duplicate": 1}
    assert store.get_delivery("stripe", "evt_1Duplicate")["outcome"] == "applied"


def test_same_delivery_across_batches_is_a_duplicate_the_second_time(
    processor: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    body = envelope("evt_across", resource=None)
    assert failed_ids(invoke(processor, sqs_record(body))) == []
    assert failed_ids(invoke(processor, sqs_record(body))) == []
    assert metric_totals(capsys.readouterr().out) == {"Applied": 1, "Duplicate": 1}


def test_a_copy_with_another_body_is_a_duplicate_counted_and_noted_on_the_record(
    processor: ModuleType,
    store: DynamoDBDeliveryStore,
    capsys: pytest.CaptureFixture[str],
    log_lines: list[dict[str, Any]],
) -> None:
    # Case C13 behind a bypassed gate (Redis down): the processor notices it too.
    first = envelope("evt_twice", resource=None, body=b'{"id":"evt_twice","v":1}')
    other = envelope("evt_twice", resource=None, body=b'{"id":"evt_twice","v":2}')
    assert failed_ids(invoke(processor, sqs_record(first))) == []
    assert failed_ids(invoke(processor, sqs_record(first))) == []  # same body: not a mismatch
    assert "duplicate_body_mismatches" not in store.get_delivery("stripe", "evt_twice")
    assert failed_ids(invoke(processor, sqs_record(other))) == []
    totals = metric_totals(capsys.readouterr().out)
    assert totals == {"Applied": 1, "Duplicate": 2, "DuplicateBodyMismatch": 1}
    record = store.get_delivery("stripe", "evt_twice")
    assert record["outcome"] == "applied" and record["duplicate_body_mismatches"] == 1
    other_sha = hashlib.sha256(b'{"id":"evt_twice","v":2}').hexdigest()
    assert record["last_mismatch_sha256"] == other_sha
    assert record["content_sha256"] == hashlib.sha256(b'{"id":"evt_twice","v":1}').hexdigest()
    warning = next(x for x in log_lines if "different body" in x["message"])
    assert warning["received_sha256"] == other_sha
    assert '"v":2' not in " ".join(str(v) for line in log_lines for v in line.values())


def test_the_content_digest_of_the_envelope_is_what_duplicates_are_compared_with(
    processor: ModuleType, store: DynamoDBDeliveryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # A provider with volatile fields sends a content digest that ignores them: two copies
    # whose raw bytes differ but whose content digests agree are not a mismatch.
    digest = "ab" * 32
    first = envelope("evt_vol", resource=None, body=b'{"a":1}', content_sha256=digest)
    retry = envelope("evt_vol", resource=None, body=b'{"a":1,"attempt":2}', content_sha256=digest)
    assert failed_ids(invoke(processor, sqs_record(first), sqs_record(retry))) == []
    assert metric_totals(capsys.readouterr().out) == {"Applied": 1, "Duplicate": 1}
    assert store.get_delivery("stripe", "evt_vol")["content_sha256"] == digest


def test_sequence_3_2_4_is_applied_stale_applied_with_final_watermark_4(
    logs: io.StringIO,
    processor: ModuleType,
    store: DynamoDBDeliveryStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcomes = []
    for seq in (3, 2, 4):
        response = invoke(processor, sqs_record(envelope(f"evt_seq{seq}", "cus_seq", seq)))
        assert failed_ids(response) == []  # stale is acknowledged, never retried
        outcomes.append(outcome_lines(logs)[0]["outcome"])
    assert outcomes == ["applied", "stale", "applied"]
    assert store.get_resource("stripe", "cus_seq")["watermark"] == 4
    stale = store.get_delivery("stripe", "evt_seq2")
    assert stale["outcome"] == "stale" and stale["watermark_at_receipt"] == 3


def test_c10_stored_seq_7_incoming_5_is_stale_and_acknowledged(
    logs: io.StringIO,
    processor: ModuleType,
    store: DynamoDBDeliveryStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    invoke(processor, sqs_record(envelope("evt_0", "cus_1", 7)))
    outcome_lines(logs)
    response = invoke(processor, sqs_record(envelope("evt_1", "cus_1", 5)))
    assert response == {"batchItemFailures": []}
    (line,) = outcome_lines(logs)
    assert line["outcome"] == "stale" and "7" in line["reason"]
    assert store.get_resource("stripe", "cus_1")["watermark"] == 7
    assert store.get_delivery("stripe", "evt_1")["outcome"] == "stale"
    # and redelivering the stale one is a duplicate (recorded once)
    response = invoke(processor, sqs_record(envelope("evt_1", "cus_1", 5)))
    assert response == {"batchItemFailures": []}
    assert outcome_lines(logs)[0]["outcome"] == "duplicate"


def delivery_record(delivery_id: str, resource: str | None, seq: int | None) -> DeliveryRecord:
    at = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)
    return DeliveryRecord(
        source="stripe",
        delivery_id=delivery_id,
        event_type="customer.updated",
        resource_key=resource,
        sequence=seq,
        received_at=at,
        recorded_at=at,
        expires_at=1_800_000_000,
        body_size=2,
        body_sha256="0" * 64,
        hook_pending=False,
        message_id=f"m-{delivery_id}",
        attempt_token=uuid.uuid4().hex[:36],
    )


def test_c10_reasons_from_the_service_are_read_by_index(store: DynamoDBDeliveryStore) -> None:
    # Given stored seq 7 for cus_1
    assert store.record(delivery_record("evt_0", "cus_1", 7)).outcome is Outcome.APPLIED
    # When evt_1 arrives with seq 5: reasons [None, ConditionalCheckFailed] -> stale
    stale = store.record(delivery_record("evt_1", "cus_1", 5))
    # And evt_0 arrives again with seq 9: [ConditionalCheckFailed, None] -> duplicate
    duplicate = store.record(delivery_record("evt_0", "cus_1", 9))
    # And evt_0 again with seq 5: both failed -> duplicate wins (index 0 first)
    both = store.record(delivery_record("evt_0", "cus_1", 5))
    assert (stale.outcome, stale.watermark) == (Outcome.STALE, 7)
    assert (duplicate.outcome, duplicate.stored_outcome) == (Outcome.DUPLICATE, Outcome.APPLIED)
    assert both.outcome is Outcome.DUPLICATE
    assert store.get_resource("stripe", "cus_1")["watermark"] == 7


def test_equal_sequence_of_another_delivery_is_applied(store: DynamoDBDeliveryStore) -> None:
    store.record(delivery_record("evt_a", "cus_eq", 5))
    assert store.record(delivery_record("evt_b", "cus_eq", 5)).outcome is Outcome.APPLIED
    assert store.record(delivery_record("evt_c", "cus_eq", 4)).outcome is Outcome.STALE
    resource = store.get_resource("stripe", "cus_eq")
    assert (resource["watermark"], resource["last_delivery_id"]) == (5, "evt_b")


def test_out_of_order_pair_in_one_batch_is_applied_in_sequence_order(
    processor: ModuleType,
    store: DynamoDBDeliveryStore,
    event: Callable,
    capsys: pytest.CaptureFixture[str],
) -> None:
    records = event("sqs-out-of-order")["Records"]
    assert invoke(processor, *records) == {"batchItemFailures": []}
    assert metric_totals(capsys.readouterr().out) == {"Applied": 2}
    resource = store.get_resource("stripe", "cus_OutOfOrder")
    assert resource["watermark"] == 1768471003
    assert resource["last_delivery_id"] == "evt_1OrderThree"


def test_two_sources_sharing_a_resource_key_keep_their_own_order_in_one_batch(
    processor: ModuleType, store: DynamoDBDeliveryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ordering is per (source, resource): a GitHub resource named like a Stripe customer is
    # another resource, in its own group and with its own watermark, in the same batch
    records = [
        sqs_record(envelope_json("evt_s2", "cus_1", 20)),
        sqs_record(envelope_json("gh_1", "cus_1", 5, source="github")),
        sqs_record(envelope_json("evt_s1", "cus_1", 10)),
        sqs_record(envelope_json("gh_2", "cus_1", 7, source="github")),
    ]
    assert invoke(processor, *records) == {"batchItemFailures": []}
    assert metric_totals(capsys.readouterr().out) == {"Applied": 4}
    stripe, github = store.get_resource("stripe", "cus_1"), store.get_resource("github", "cus_1")
    assert (stripe["watermark"], stripe["last_delivery_id"]) == (20, "evt_s2")
    assert (github["watermark"], github["last_delivery_id"]) == (7, "gh_2")


def test_concurrent_copies_of_one_delivery_apply_exactly_once(resources: None) -> None:
    # Given two workers holding the same delivery (two SQS messages), released together
    client = boto3.client("dynamodb")
    for attempt in range(10):
        service = ProcessorService(
            DynamoDBDeliveryStore(client, TABLE),
            S3PayloadStore(boto3.client("s3"), BUCKET),
            HookRegistry(),
        )
        body = envelope(f"evt_race{attempt}", "cus_race", 100 + attempt)
        barrier = threading.Barrier(2)
        results: list[Outcome] = []

        def worker(
            mid: str,
            body: str = body,
            barrier: threading.Barrier = barrier,
            service: ProcessorService = service,
            results: list[Outcome] = results,
        ) -> None:
            barrier.wait()
            results.append(service.process_batch([Message(mid, body)])[mid].outcome)

        threads = [threading.Thread(target=worker, args=(f"m{i}",)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # Then exactly one is applied and the other is a duplicate
        assert sorted(results) == sorted([Outcome.APPLIED, Outcome.DUPLICATE]), attempt


def test_concurrent_batches_of_one_resource_never_move_the_watermark_back(
    processor: ModuleType, store: DynamoDBDeliveryStore
) -> None:
    sequences = list(range(1, 41))
    batches = [
        [sqs_record(envelope(f"evt_w{s}", "cus_w", s)) for s in sequences[i::4]] for i in range(4)
    ]
    threads = [threading.Thread(target=invoke, args=(processor, *batch)) for batch in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get_resource("stripe", "cus_w")["watermark"] == 40
    records = {s: store.get_delivery("stripe", f"evt_w{s}") for s in sequences}
    assert {r["outcome"] for r in records.values()} <= {"applied", "stale"}
    # Whatever the interleaving: the newest is applied, and each stale one was stale against a
    # watermark really newer than itself (never a watermark moved back, never a false stale)
    assert records[40]["outcome"] == "applied"
    stale = {
        s: int(r["watermark_at_receipt"]) for s, r in records.items() if r["outcome"] == "stale"
    }
    assert all(mark > s for s, mark in stale.items()), stale


# -- retry and bug ----------------------------------------------------------------------------


def test_throttling_on_one_record_reports_only_that_message(
    processor: ModuleType, store: DynamoDBDeliveryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a batch of five deliveries for five resources
    records = [sqs_record(envelope(f"evt_t{i}", f"cus_t{i}", 1), f"msg-{i}") for i in range(5)]
    # When DynamoDB throttles the transaction of evt_t2 only
    with InjectedError(
        processor.dynamodb_client(),
        "TransactWriteItems",
        "ThrottlingException",
        400,
        "DELIVERY#stripe#evt_t2",
    ) as injected:
        response = invoke(processor, *records)
    # Then only its messageId is reported; the others are recorded
    assert injected.hits == 1
    assert response == {"batchItemFailures": [{"itemIdentifier": "msg-2"}]}
    assert store.get_delivery("stripe", "evt_t2") is None
    assert all(store.get_delivery("stripe", f"evt_t{i}") for i in (0, 1, 3, 4))
    assert metric_totals(capsys.readouterr().out) == {"Applied": 4, "Retry": 1}
    # And its redelivery, after the throttling is gone, is applied
    assert invoke(processor, sqs_record(records[2]["body"], "msg-2", 2)) == {
        "batchItemFailures": []
    }
    assert store.get_delivery("stripe", "evt_t2")["outcome"] == "applied"


@pytest.mark.parametrize(
    ("code", "status"),
    [("TransactionConflictException", 400), ("InternalServerError", 500)],
)
def test_conflict_and_5xx_are_retry(
    processor: ModuleType, code: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    record = sqs_record(envelope("evt_c", "cus_c", 1), "msg-c")
    with InjectedError(processor.dynamodb_client(), "TransactWriteItems", code, status, "evt_c"):
        assert failed_ids(invoke(processor, record)) == ["msg-c"]
    assert metric_totals(capsys.readouterr().out) == {"Retry": 1}


def test_validation_exception_is_a_loud_bug(
    logs: io.StringIO, processor: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    record = sqs_record(envelope("evt_v", None), "msg-v")
    with InjectedError(processor.dynamodb_client(), "PutItem", "ValidationException", 400, "evt_v"):
        assert failed_ids(invoke(processor, record)) == ["msg-v"]
    out = capsys.readouterr().out
    assert metric_totals(out) == {"ProcessorBug": 1}
    (line,) = outcome_lines(logs)
    assert line["level"] == "ERROR" and "ValidationException" in line["reason"]
    assert "exception" in line


# -- malformed and claim checks -------------------------------------------------------------------


def test_malformed_envelope_is_reported_and_logged_with_reason(
    logs: io.StringIO, processor: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    record = sqs_record('{"source":"stripe","delivery_id":"evt_x"}', "msg-bad")
    assert failed_ids(invoke(processor, record)) == ["msg-bad"]
    out = capsys.readouterr().out
    (line,) = outcome_lines(logs)
    assert (line["level"], line["outcome"], line["message_id"]) == ("ERROR", "malformed", "msg-bad")
    assert "not a valid envelope" in line["reason"]
    assert metric_totals(out) == {"Malformed": 1}


def _claim_check(raw: bytes, key: str, delivery_id: str) -> str:
    pointer = S3PayloadStore(boto3.client("s3"), BUCKET).put(key, raw)
    data = json.loads(envelope(delivery_id, "cus_big", 1))
    data.pop("body_b64")
    data.update(
        body_ref=pointer.model_dump(),
        body_size=len(raw),
        body_sha256=hashlib.sha256(raw).hexdigest(),
    )
    return Envelope.model_validate(data).to_json()


def test_claim_check_body_is_fetched_and_integrity_checked(
    app: Callable[..., ModuleType],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    store: DynamoDBDeliveryStore,
) -> None:
    # Given a hook that captures the body, and a 300 kB body stored in S3
    seen: list[bytes] = []
    registry.register("stripe", None, lambda e: seen.append(e.body))
    processor = app()
    raw = json.dumps({"id": "evt_big", "pad": "x" * 300_000}).encode()
    body = _claim_check(raw, "bodies/stripe/evt_big", "evt_big")
    # When
    assert invoke(processor, sqs_record(body)) == {"batchItemFailures": []}
    # Then the hook got exactly the stored bytes
    assert seen == [raw]
    assert store.get_delivery("stripe", "evt_big")["body_size"] == len(raw)


def test_claim_check_body_changed_or_missing_is_poison(
    logs: io.StringIO, processor: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = b'{"id":"evt_big2"}' + b" " * 1000
    body = _claim_check(raw, "bodies/stripe/evt_big2", "evt_big2")
    boto3.client("s3").put_object(Bucket=BUCKET, Key="bodies/stripe/evt_big2", Body=raw[:-1])
    missing = json.loads(body)
    missing["body_ref"]["key"] = "bodies/stripe/nothing-here"
    missing["delivery_id"] = "evt_big3"
    response = invoke(
        processor, sqs_record(body, "msg-changed"), sqs_record(json.dumps(missing), "msg-missing")
    )
    assert sorted(failed_ids(response)) == ["msg-changed", "msg-missing"]
    reasons = {line["message_id"]: line["reason"] for line in outcome_lines(logs)}
    assert "size mismatch" in reasons["msg-changed"]
    assert "missing" in reasons["msg-missing"]


def test_claim_check_pointer_outside_our_bucket_or_the_sources_prefix_is_malformed(
    logs: io.StringIO, processor: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a body stored under another source's prefix and the same bytes in another bucket
    raw = b'{"id":"evt_p"}' + b" " * 1000
    other = "someone-elses-bucket"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=other)
    s3.put_object(Bucket=other, Key="bodies/stripe/evt_p", Body=raw)
    elsewhere = json.loads(_claim_check(raw, "bodies/github/evt_p", "evt_p"))
    in_other_bucket = dict(elsewhere, delivery_id="evt_p2")
    in_other_bucket["body_ref"] = {"bucket": other, "key": "bodies/stripe/evt_p"}
    outside = dict(elsewhere, delivery_id="evt_p3")
    outside["body_ref"] = {"bucket": BUCKET, "key": "bodies/stripe"}  # the prefix needs its "/"
    s3.put_object(Bucket=BUCKET, Key="bodies/stripe", Body=raw)
    # When each envelope (valid digests of the stored bytes) reaches the processor
    response = invoke(
        processor,
        sqs_record(json.dumps(elsewhere), "msg-prefix"),
        sqs_record(json.dumps(in_other_bucket), "msg-bucket"),
        sqs_record(json.dumps(outside), "msg-no-slash"),
    )
    # Then none is followed: each is malformed with the reason, nothing is recorded
    assert sorted(failed_ids(response)) == ["msg-bucket", "msg-no-slash", "msg-prefix"]
    lines = {line["message_id"]: line for line in outcome_lines(logs)}
    assert {m: line["outcome"] for m, line in lines.items()} == dict.fromkeys(lines, "malformed")
    assert "not under bodies/stripe/" in lines["msg-prefix"]["reason"]
    assert "not under bodies/stripe/" in lines["msg-no-slash"]["reason"]
    assert "another bucket" in lines["msg-bucket"]["reason"]
    assert metric_totals(capsys.readouterr().out) == {"Malformed": 3}


# -- hooks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raised", [SystemExit(3), GeneratorExit(), asyncio.CancelledError()], ids=type
)
def test_a_hook_raising_a_base_exception_fails_only_its_record(
    app: Callable[..., ModuleType], store: DynamoDBDeliveryStore, raised: BaseException
) -> None:
    # Given a hook that raises a BaseException for one resource's event, on the thread pool
    ran: list[str] = []

    def hook(event: Any) -> None:
        ran.append(event.delivery_id)
        if event.delivery_id == "evt_exit":
            raise raised

    registry.register("stripe", None, hook)
    processor = app()
    # When a batch holds it and two other resources' events
    response = invoke(
        processor,
        sqs_record(envelope("evt_ok1", "cus_ok1", 1), "msg-ok1"),
        sqs_record(envelope("evt_exit", "cus_exit", 1), "msg-exit"),
        sqs_record(envelope("evt_ok2", "cus_ok2", 1), "msg-ok2"),
    )
    # Then only its record is reported failed (a retry: its hook is still pending)
    assert failed_ids(response) == ["msg-exit"]
    assert sorted(ran) == ["evt_exit", "evt_ok1", "evt_ok2"]
    assert store.get_delivery("stripe", "evt_exit")["hook_state"] == "pending"
    assert store.get_delivery("stripe", "evt_ok1")["hook_state"] == "done"


def test_keyboard_interrupt_in_a_hook_stops_the_invocation(
    app: Callable[..., ModuleType], store: DynamoDBDeliveryStore
) -> None:
    def hook(event: Any) -> None:
        raise KeyboardInterrupt

    registry.register("stripe", None, hook)
    processor = app()
    with pytest.raises(KeyboardInterrupt):
        invoke(processor, sqs_record(envelope("evt_kbd", "cus_kbd", 1), "msg-kbd"))
    assert store.get_delivery("stripe", "evt_kbd")["hook_state"] == "pending"


HOOKS_SOURCE = """
from webhook_pipeline.hooks import hook

calls = []
fail_next = [True]


@hook("stripe", "customer.updated")
def customer_updated(event):
    calls.append(event.idempotency_key)
    if fail_next and fail_next.pop():
        raise RuntimeError("crm returned 503")
"""


def test_hook_failure_is_retried_without_reapplying_or_double_recording(
    app: Callable[..., ModuleType],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    store: DynamoDBDeliveryStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a hooks module named by HOOKS_MODULE whose hook fails once
    module_name = f"user_hooks_{uuid.uuid4().hex}"
    (tmp_path / f"{module_name}.py").write_text(HOOKS_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    processor = app(HOOKS_MODULE=module_name)
    hooks_module = sys.modules[module_name]
    body = envelope("evt_h", "cus_h", 10)
    # When the delivery is processed: the hook fails -> retry
    assert failed_ids(invoke(processor, sqs_record(body, "msg-h"))) == ["msg-h"]
    first = store.get_delivery("stripe", "evt_h")
    assert (first["outcome"], first["hook_state"]) == ("applied", "pending")
    # And a newer event for the resource is applied meanwhile
    assert failed_ids(invoke(processor, sqs_record(envelope("evt_h2", "cus_h", 11)))) == []
    # When the failed message is redelivered
    assert failed_ids(invoke(processor, sqs_record(body, "msg-h", 2))) == []
    # Then only the hook ran again; the watermark and the record were not touched again
    assert hooks_module.calls == ["stripe:evt_h", "stripe:evt_h2", "stripe:evt_h"]
    again = store.get_delivery("stripe", "evt_h")
    assert (again["outcome"], again["hook_state"]) == ("applied", "done")
    assert again["recorded_at"] == first["recorded_at"]
    assert store.get_resource("stripe", "cus_h")["watermark"] == 11
    totals = metric_totals(capsys.readouterr().out)
    # (the first attempt wrote the record, but its outcome is retry: the hook failed)
    assert totals == {"Applied": 1, "Retry": 1, "HookFailed": 1, "HookCompleted": 2, "Duplicate": 1}
    # And a further copy does not run the hook again
    assert failed_ids(invoke(processor, sqs_record(body, "msg-h", 3))) == []
    assert hooks_module.calls.count("stripe:evt_h") == 2


def test_unimportable_hooks_module_fails_the_cold_start(app: Callable[..., ModuleType]) -> None:
    with pytest.raises(ConfigurationError, match="HOOKS_MODULE"):
        app(HOOKS_MODULE="no_such_module_for_hooks")


def test_missing_table_name_fails_the_cold_start(
    app: Callable[..., ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the error names the environment variable an operator sets
    with pytest.raises(ConfigurationError, match="variable 'TABLE_NAME': String should have"):
        app(TABLE_NAME="")


def test_no_body_content_reaches_a_log_line_or_a_failure_note(
    logs: io.StringIO,
    processor: ModuleType,
    store: DynamoDBDeliveryStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given malformed envelopes that carry a recognisable marker in their body and fields
    marker = f"SECRET-MARKER-{uuid.uuid4().hex[:8]}"
    raw = json.dumps({"id": "evt_mk", "card": marker}).encode()
    good = json.loads(envelope("evt_mk", "cus_mk", 1, body=raw))
    bodies = {
        "msg-extra": dict(good, unexpected=marker),
        "msg-schema": dict(good, schema_version=2, headers={"x-note": marker}),
        "msg-sequence": dict(good, sequence=marker),
        "msg-digest": dict(good, body_sha256="0" * 64),
    }
    response = invoke(processor, *(sqs_record(json.dumps(b), m) for m, b in bodies.items()))
    assert sorted(failed_ids(response)) == sorted(bodies)
    # Then no log line, metric line nor failure note holds the marker (nor its base64)
    hidden = (marker, base64.b64encode(raw).decode()[8:40])
    written = logs.getvalue() + capsys.readouterr().out
    assert len(outcome_lines(logs)) == 4
    assert not [h for h in hidden if h in written]
    for message_id in bodies:
        note = store.get_failure(message_id)
        assert note is not None and note["reason"]
        assert not [h for h in hidden if h in json.dumps(note, default=str)]


def test_no_s3_client_until_an_envelope_carries_a_claim_check(
    processor: ModuleType, event: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the client factory of the processor, counting what it builds
    built: list[str] = []
    original = processor.s3_client

    def counting() -> Any:
        built.append("s3")
        return original()

    monkeypatch.setattr(processor, "s3_client", counting)
    processor.service.cache_clear()
    # When inline envelopes are processed, no S3 client is built
    assert invoke(processor, *event("sqs-new-delivery")["Records"]) == {"batchItemFailures": []}
    assert built == []
    # and the first claim-checked body builds it, once
    raw = json.dumps({"id": "evt_lazy", "pad": "x" * 200_000}).encode()
    for key in ("bodies/stripe/evt_lazy", "bodies/stripe/evt_lazy2"):
        body = _claim_check(raw, key, key.rsplit("/", 1)[1])
        assert invoke(processor, sqs_record(body)) == {"batchItemFailures": []}
    assert built == ["s3"]


# -- hook effects: committed with the done mark, exactly once in effect --------------------------


def _effect_hook(ran: list[str]) -> Callable[[Any], Any]:
    from webhook_pipeline.hooks import Effects

    def hook(event: Any) -> Any:
        ran.append(event.delivery_id)
        item = {"pk": {"S": f"EFFECT#{event.delivery_id}"}, "sk": {"S": uuid.uuid4().hex}}
        return Effects(({"Put": {"TableName": TABLE, "Item": item}},))

    return hook


def _effect_items(delivery_id: str) -> list[dict[str, Any]]:
    return boto3.client("dynamodb").query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"EFFECT#{delivery_id}"}},
        ConsistentRead=True,
    )["Items"]


def test_hook_effects_left_uncommitted_by_a_failed_run_are_committed_once_by_the_next(
    app: Callable[..., ModuleType], store: DynamoDBDeliveryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a hook whose effect is a DynamoDB write, and a first run whose commit never happens
    # (the process dies or DynamoDB times out between the hook and its done mark)
    ran: list[str] = []
    registry.register("stripe", None, _effect_hook(ran))
    processor = app()
    original = DynamoDBDeliveryStore.mark_hook_done
    failures = [TransientError("DynamoDB TransactWriteItems failed: ReadTimeoutError")]

    def flaky(self: Any, *args: Any, **kwargs: Any) -> bool:
        if failures:
            raise failures.pop()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(DynamoDBDeliveryStore, "mark_hook_done", flaky)
    body = envelope("evt_fx", "cus_fx", 1)
    assert failed_ids(invoke(processor, sqs_record(body, "msg-fx"))) == ["msg-fx"]
    assert _effect_items("evt_fx") == []
    # When it is redelivered, and then a further copy arrives
    assert failed_ids(invoke(processor, sqs_record(body, "msg-fx", 2))) == []
    assert failed_ids(invoke(processor, sqs_record(body, "msg-fx", 3))) == []
    # Then the hook ran twice and took effect once; the delivery is done
    assert ran == ["evt_fx", "evt_fx"]
    assert len(_effect_items("evt_fx")) == 1
    assert store.get_delivery("stripe", "evt_fx")["hook_state"] == "done"


def test_a_second_run_of_a_done_hook_commits_nothing(
    app: Callable[..., ModuleType], store: DynamoDBDeliveryStore
) -> None:
    from webhook_pipeline.errors import HookError

    ran: list[str] = []
    registry.register("stripe", None, _effect_hook(ran))
    processor = app()
    assert failed_ids(invoke(processor, sqs_record(envelope("evt_fy", "cus_fy", 1)))) == []
    assert len(_effect_items("evt_fy")) == 1
    # A run that started while the hook was pending and commits after the first (a concurrent
    # redelivery): its effects are discarded
    late = {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "EFFECT#evt_fy"}, "sk": {"S": "x"}}}}
    assert store.mark_hook_done("stripe", "evt_fy", [late]) is False
    assert len(_effect_items("evt_fy")) == 1
    # An effect whose own condition fails cancels the commit: the hook counts as failed
    record = json.loads(envelope("evt_fz", "cus_fz", 1))
    registry.clear()
    registry.register("stripe", None, lambda e: None)  # applied, hook pending then done
    assert failed_ids(invoke(processor, sqs_record(json.dumps(record)))) == []
    boto3.client("dynamodb").update_item(
        TableName=TABLE,
        Key={"pk": {"S": "DELIVERY#stripe#evt_fz"}, "sk": {"S": "DELIVERY"}},
        UpdateExpression="SET hook_state = :p",
        ExpressionAttributeValues={":p": {"S": "pending"}},
    )
    existing = _effect_items("evt_fy")[0]  # an item that exists: its condition fails
    guarded = {
        "TableName": TABLE,
        "Item": existing,
        "ConditionExpression": "attribute_not_exists(pk)",
    }
    with pytest.raises(HookError):
        store.mark_hook_done("stripe", "evt_fz", [{"Put": guarded}])
    assert store.get_delivery("stripe", "evt_fz")["hook_state"] == "pending"
