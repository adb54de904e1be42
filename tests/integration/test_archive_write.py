"""The archive write path end to end: ingest -> processor -> archive queue -> archiver -> archive
bucket, every handler the real one, AWS in-process moto. What is checked is what the archive
promises: every envelope the processor handles is there once after deduplication with its exact
bytes and its outcome, at least once whatever fails, headers and credentials redacted."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import botocore.client
import pytest
from botocore.exceptions import ClientError
from webhook_pipeline.hooks import registry
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    payload,
    signed_delivery,
)

from tests.helpers import FakeContext
from tests.integration.archive_harness import ArchivePipeline, build_archive_pipeline, sqs_event
from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()


@pytest.fixture
def arc(make_ingest: Callable[..., IngestHarness], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Ingest with a 1,000-byte inline limit (a padded body is a claim check), the processor
    and the archiver."""
    ingest = make_ingest(SOURCES_CATALOGUE="true", INLINE_BODY_MAX_BYTES="1000")
    return build_archive_pipeline(ingest, monkeypatch)


def send(arc: ArchivePipeline, source: str, **kwargs: Any) -> bytes:
    """Send one signed delivery of ``source`` through ingest (202); return its exact body."""
    sent = signed_delivery(SOURCES[source], **kwargs)
    response = arc.ingest.invoke(http_api_event(sent))
    assert response["statusCode"] == 202, response
    return sent.body


def padded_stripe_body(delivery_id: str, resource: str, sequence: int) -> bytes:
    """A Stripe body over the 1,000-byte inline limit (a claim check), with non-ASCII text."""
    body, _ = payload(SOURCES["stripe"], delivery_id=delivery_id, resource=resource)
    document = json.loads(body)
    document["created"] = sequence
    document["padding"] = "\u00e9\u20ac\U0001f600" * 400
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def redeliver(arc: ArchivePipeline, messages: list[dict[str, Any]]) -> list[str]:
    """Hand ``messages`` to the processor again as their second receive; the failed ids."""
    event = sqs_event(messages, receive_count=2)
    response = arc.pipeline.processor.lambda_handler(event, FakeContext("ProcessorFunction"))
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def by_id(arc: ArchivePipeline, **flt: Any) -> dict[str, Any]:
    result = arc.search(**flt)
    assert result.problems == []
    ids = [r.delivery_id for r in result.records]
    assert len(ids) == len(set(ids)), ids
    return {r.delivery_id: r for r in result.records}


def test_every_outcome_reaches_the_archive_once_with_the_exact_bytes(arc: ArchivePipeline) -> None:
    # Given a newer event of cus_a, an inline and a claim-checked one of cus_b, and a GitHub
    # delivery whose hook fails
    def failing_hook(event: Any) -> None:
        raise RuntimeError("hook down")

    registry.register("github", None, failing_hook)
    bodies = {
        "evt_new": send(arc, "stripe", delivery_id="evt_new", resource="cus_a", sequence=20),
        "evt_big": send(
            arc,
            "stripe",
            delivery_id="evt_big",
            resource="cus_b",
            sequence=5,
            body=padded_stripe_body("evt_big", "cus_b", 5),
        ),
        "gh-1": send(arc, "github", delivery_id="gh-1"),
    }
    first = arc.ingest.messages()
    assert len(first) == 3
    assert [m for m in first if "body_ref" in json.loads(m["Body"])], "no claim check"
    assert sorted(arc.pipeline.process(first)) == sorted(
        m["MessageId"] for m in first if json.loads(m["Body"])["delivery_id"] == "gh-1"
    )
    # and an older event of cus_a afterwards (stale), and the first batch redelivered
    bodies["evt_old"] = send(arc, "stripe", delivery_id="evt_old", resource="cus_a", sequence=10)
    assert arc.pipeline.process() == []
    redeliver(arc, [m for m in first if json.loads(m["Body"])["delivery_id"] != "gh-1"])
    # When the archiver takes the archive queue
    assert arc.archive() == []
    # Then each delivery is there once, its bytes exact, its most final outcome kept
    found = by_id(arc)
    assert sorted(found) == sorted(bodies)
    for delivery_id, body in bodies.items():
        assert found[delivery_id].body_bytes() == body
        assert found[delivery_id].body_size == len(body)
    outcomes = {k: (r.outcome, r.reason) for k, r in found.items()}
    assert outcomes["evt_new"] == ("applied", None)
    assert outcomes["evt_big"] == ("applied", None)
    assert outcomes["evt_old"] == ("stale", "older than the resource watermark 20")
    assert outcomes["gh-1"][0] == "retry"
    assert "hook failed: RuntimeError: hook down" in (outcomes["gh-1"][1] or "")
    assert (found["evt_new"].provider, found["evt_new"].verified_with) == ("stripe", "current")
    # and every attempt is a line: the redelivered copies archived as duplicates
    lines = sorted((r.delivery_id, r.outcome, r.receive_count) for r in arc.lines())
    assert lines == [
        ("evt_big", "applied", 1),
        ("evt_big", "duplicate", 2),
        ("evt_new", "applied", 1),
        ("evt_new", "duplicate", 2),
        ("evt_old", "stale", 1),
        ("gh-1", "retry", 1),
    ]
    # and nothing is left on the archive queue
    assert arc.queued() == []


def test_a_message_that_is_not_an_envelope_is_not_archived(arc: ArchivePipeline) -> None:
    send(arc, "stripe", delivery_id="evt_ok", resource="cus_1", sequence=1)
    messages = arc.ingest.messages()
    poison = {**messages[0], "MessageId": "poison-1", "Body": '{"not": "an envelope"}'}
    assert arc.pipeline.process([*messages, poison]) == ["poison-1"]
    queued = arc.queued()
    assert [json.loads(m["Body"])["envelope"]["delivery_id"] for m in queued] == ["evt_ok"]


class RefusingSqs:
    """The real SQS client, but ``SendMessageBatch`` entries whose body holds ``refuse`` are
    answered as ``Failed`` (not sent), as SQS answers an entry it does not accept."""

    def __init__(self, real: Any, refuse: str) -> None:
        self.real, self.refuse = real, refuse

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        keep = [e for e in Entries if self.refuse not in e["MessageBody"]]
        response = self.real.send_message_batch(QueueUrl=QueueUrl, Entries=keep) if keep else {}
        failed = [
            {"Id": e["Id"], "Code": "InternalError", "SenderFault": False}
            for e in Entries
            if self.refuse in e["MessageBody"]
        ]
        return {"Successful": response.get("Successful", []), "Failed": failed}


def test_an_archive_message_sqs_refuses_fails_the_record_and_its_redelivery_archives_it(
    arc: ArchivePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in (1, 2, 3):
        send(arc, "stripe", delivery_id=f"evt_{n}", resource=f"cus_{n}", sequence=n)
    messages = arc.ingest.messages()
    refused = next(m for m in messages if '"evt_2"' in m["Body"])
    queue = arc.pipeline.processor.archive_queue()
    monkeypatch.setattr(queue, "client", RefusingSqs(queue.client, '"evt_2"'))
    # When evt_2's archive message is refused, it is reported failed although it was applied
    assert arc.pipeline.process(messages) == [refused["MessageId"]]
    recorded = {i["delivery_id"]["S"]: i for i in arc.pipeline.scan() if "delivery_id" in i}
    assert recorded["evt_2"]["outcome"]["S"] == "applied"
    assert arc.archive() == []
    assert sorted(by_id(arc)) == ["evt_1", "evt_3"]
    # And its redelivery (SQS accepting again) is a duplicate that reaches the archive
    monkeypatch.setattr(queue, "client", queue.client.real)
    assert redeliver(arc, [refused]) == []
    assert arc.archive() == []
    found = by_id(arc)
    assert sorted(found) == ["evt_1", "evt_2", "evt_3"]
    assert (found["evt_2"].outcome, found["evt_2"].reason) == (
        "duplicate",
        "already recorded as applied",
    )


def test_an_archive_send_that_raises_fails_every_record_of_the_batch(
    arc: ArchivePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in (1, 2):
        send(arc, "stripe", delivery_id=f"evt_{n}", resource=f"cus_{n}", sequence=n)
    messages = arc.ingest.messages()
    queue = arc.pipeline.processor.archive_queue()

    class Down:
        def send_message_batch(self, **_: Any) -> dict[str, Any]:
            raise ClientError({"Error": {"Code": "ServiceUnavailable"}}, "SendMessageBatch")

    monkeypatch.setattr(queue, "client", Down())
    failed = arc.pipeline.process(messages)
    assert sorted(failed) == sorted(m["MessageId"] for m in messages)
    assert {i["delivery_id"]["S"] for i in arc.pipeline.scan() if "delivery_id" in i} >= {
        "evt_1",
        "evt_2",
    }


@pytest.fixture
def put_refused_for(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], list[str]]:
    """``refuse(text)``: every ``PutObject`` whose key holds ``text`` fails (AccessDenied);
    returns the list of keys refused so far."""
    refused: list[str] = []
    original = botocore.client.BaseClient._make_api_call

    def refuse(text: str) -> list[str]:
        def call(self: Any, operation: str, params: dict[str, Any]) -> Any:
            if operation == "PutObject" and text in params.get("Key", ""):
                refused.append(params["Key"])
                raise ClientError({"Error": {"Code": "AccessDenied"}}, operation)
            return original(self, operation, params)

        monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", call)
        return refused

    return refuse


def test_a_put_that_fails_reports_only_its_groups_messages(
    arc: ArchivePipeline, put_refused_for: Callable[[str], list[str]]
) -> None:
    send(arc, "stripe", delivery_id="evt_1", resource="cus_1", sequence=1)
    send(arc, "stripe", delivery_id="evt_2", resource="cus_2", sequence=1)
    send(arc, "github", delivery_id="gh-1")
    send(arc, "github", delivery_id="gh-2")
    assert arc.pipeline.process() == []
    refused = put_refused_for("source=github/")
    # When the archiver's PUT of the GitHub object fails
    failed = arc.archive()
    # Then exactly the GitHub messages are reported, and the Stripe object is written
    assert sorted(arc.delivery_ids(failed)) == ["gh-1", "gh-2"]
    assert len(refused) == 1
    assert sorted(by_id(arc)) == ["evt_1", "evt_2"]
    # And once S3 accepts again, their retry writes them
    put_refused_for("no key holds this")
    assert arc.archive() == []
    assert sorted(by_id(arc)) == ["evt_1", "evt_2", "gh-1", "gh-2"]


def test_a_crash_between_the_put_and_the_delete_is_deduplicated_on_read(
    arc: ArchivePipeline,
) -> None:
    for n in (1, 2):
        send(arc, "stripe", delivery_id=f"evt_{n}", resource=f"cus_{n}", sequence=n)
    assert arc.pipeline.process() == []
    # The archiver writes the object and dies before the queue deletes the messages
    assert arc.archive(delete=False) == []
    assert arc.archive() == []
    # Two objects hold the same two records; a search returns each once
    assert len(arc.object_keys()) == 2
    assert sorted(r.delivery_id for r in arc.lines()) == ["evt_1", "evt_1", "evt_2", "evt_2"]
    assert sorted(by_id(arc)) == ["evt_1", "evt_2"]


def test_two_sources_with_one_delivery_id_stay_separate(arc: ArchivePipeline) -> None:
    stripe = send(arc, "stripe", delivery_id="shared-1", resource="cus_1", sequence=1)
    github = send(arc, "github", delivery_id="shared-1")
    assert arc.pipeline.process() == []
    assert arc.archive() == []
    records = arc.search().records
    assert sorted((r.source, r.delivery_id) for r in records) == [
        ("github", "shared-1"),
        ("stripe", "shared-1"),
    ]
    bodies = {r.source: r.body_bytes() for r in records}
    assert bodies == {"stripe": stripe, "github": github}
    assert {k.split("/")[1] for k in arc.object_keys()} == {"source=github", "source=stripe"}
    assert [r.source for r in arc.search(sources=("github",)).records] == ["github"]


def test_archive_messages_are_sent_after_the_records_are_written(
    arc: ArchivePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in (1, 2, 3):
        send(arc, "stripe", delivery_id=f"evt_{n}", resource=f"cus_{n}", sequence=n)
    queue = arc.pipeline.processor.archive_queue()
    real, seen = queue.client, []

    class Checking:
        def send_message_batch(self, **kwargs: Any) -> Any:
            recorded = {i["delivery_id"]["S"] for i in arc.pipeline.scan() if "delivery_id" in i}
            for entry in kwargs["Entries"]:
                delivery_id = json.loads(entry["MessageBody"])["envelope"]["delivery_id"]
                seen.append((delivery_id, delivery_id in recorded))
            return real.send_message_batch(**kwargs)

    monkeypatch.setattr(queue, "client", Checking())
    assert arc.pipeline.process() == []
    assert sorted(seen) == [("evt_1", True), ("evt_2", True), ("evt_3", True)]
