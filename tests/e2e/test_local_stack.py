"""End to end: real HTTP against the local stack, signatures made by the providers' own SDKs.

Given the local stack running as a subprocess (``local_stack`` fixture), when webhooks signed
with stripe / standardwebhooks / slack_sdk are posted to http://127.0.0.1:PORT/webhooks/{source},
then the DynamoDB state read through the operator CLI shows every unique delivery recorded once,
duplicates answered 200, stale events not applied, and a poison message in the DLQ that is applied
once after it is fixed and replayed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
import stripe
from slack_sdk.signature import SignatureVerifier
from standardwebhooks import Webhook
from webhook_pipeline.envelope import Envelope

from tests.e2e.conftest import LocalStack, wait_for

pytestmark = pytest.mark.e2e

RECORD_TIMEOUT = 30.0


def _stripe_event(
    event_id: str, customer: str, created: int, kind: str = "customer.updated"
) -> str:
    return json.dumps(
        {
            "id": event_id,
            "object": "event",
            "type": kind,
            "created": created,
            "api_version": "2024-06-20",
            "livemode": False,
            "data": {"object": {"id": customer, "object": "customer", "email": "a@example.com"}},
        }
    )


def post_stripe(stack: LocalStack, body: str) -> requests.Response:
    header = stripe.WebhookSignature.generate_signature_header(
        body, stack.secrets["stripe"], timestamp=int(time.time())
    )
    return requests.post(
        stack.url("stripe"),
        data=body.encode(),
        timeout=10,
        headers={"Content-Type": "application/json; charset=utf-8", "Stripe-Signature": header},
    )


def post_standard(stack: LocalStack, msg_id: str, body: str) -> requests.Response:
    now = datetime.now(UTC)
    signature = Webhook(stack.secrets["standard-webhooks"]).sign(msg_id, now, body)
    return requests.post(
        stack.url("standard-webhooks"),
        data=body.encode(),
        timeout=10,
        headers={
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature,
        },
    )


def post_slack(stack: LocalStack, body: str, retry: int | None = None) -> requests.Response:
    timestamp = str(int(time.time()))
    signature = SignatureVerifier(stack.secrets["slack"]).generate_signature(
        timestamp=timestamp, body=body
    )
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": str(signature),
    }
    if retry is not None:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    return requests.post(stack.url("slack"), data=body.encode(), timeout=10, headers=headers)


def recorded(stack: LocalStack, source: str, delivery_id: str) -> dict[str, Any]:
    result: dict[str, Any] = wait_for(
        lambda: stack.delivery(source, delivery_id),
        timeout=RECORD_TIMEOUT,
        what=f"{source}/{delivery_id} to be recorded",
    )
    return result


def delivery_items(stack: LocalStack, marker: str) -> list[dict[str, Any]]:
    """Every delivery record whose delivery id contains ``marker`` (a full table scan)."""
    ddb = stack.client("dynamodb")
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": stack.outputs["DeliveriesTableName"]}
    while True:
        page = ddb.scan(**kwargs)
        items += [
            i
            for i in page["Items"]
            if i.get("type", {}).get("S") == "delivery"
            and marker in i.get("delivery_id", {}).get("S", "")
        ]
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_health_and_outputs_describe_the_running_stack(local_stack: LocalStack) -> None:
    # Given the stack is ready, when its files are read, then they point at live endpoints.
    assert requests.get(f"{local_stack.api_url}/health", timeout=5).json() == {"status": "ok"}
    for key in (
        "EndpointUrl",
        "ApiUrl",
        "MainQueueUrl",
        "DeadLetterQueueUrl",
        "DeliveriesTableName",
        "PayloadBucketName",
        "RedisUrl",
    ):
        assert local_stack.outputs[key], key
    assert local_stack.ready["redis_kind"] == "redis-server"
    assert local_stack.secrets["standard-webhooks"].startswith("whsec_")
    sqs = local_stack.client("sqs")
    attrs = sqs.get_queue_attributes(
        QueueUrl=local_stack.outputs["MainQueueUrl"], AttributeNames=["All"]
    )["Attributes"]
    assert attrs["VisibilityTimeout"] == "2"  # the --visibility-timeout override
    assert json.loads(attrs["RedrivePolicy"])["maxReceiveCount"] == 2  # --parameter override
    alarms = local_stack.client("cloudwatch").describe_alarms()["MetricAlarms"]
    assert len(alarms) >= 5


def test_unknown_route_and_bad_signature_are_rejected(local_stack: LocalStack) -> None:
    body = _stripe_event(f"evt_bad_{uuid.uuid4().hex[:12]}", "cus_x", int(time.time()))
    forged = stripe.WebhookSignature.generate_signature_header(
        body, "whsec_wrong", timestamp=int(time.time())
    )
    response = requests.post(
        local_stack.url("stripe"),
        data=body,
        timeout=10,
        headers={"Stripe-Signature": forged, "Content-Type": "application/json"},
    )
    assert response.status_code == 401
    assert requests.post(f"{local_stack.api_url}/nope", data=b"{}", timeout=10).status_code == 404
    assert (
        requests.post(local_stack.url("no-such-source"), data=b"{}", timeout=10).status_code == 404
    )


def test_stripe_deliveries_recorded_once_and_duplicates_answered_200(
    local_stack: LocalStack,
) -> None:
    # Given five Stripe events on five customers (official SDK signatures)
    marker = uuid.uuid4().hex[:10]
    now = int(time.time())
    events = [(f"evt_{marker}_{i}", f"cus_{marker}_{i}") for i in range(5)]
    bodies = {
        event_id: _stripe_event(event_id, cus, now - 10 + i)
        for i, (event_id, cus) in enumerate(events)
    }
    # When each is sent, then sent again (Stripe re-signs every attempt), twice for the first
    first = [post_stripe(local_stack, body) for body in bodies.values()]
    again = [post_stripe(local_stack, body) for body in bodies.values()]
    third = post_stripe(local_stack, bodies[events[0][0]])
    # Then new deliveries get 202 and every duplicate 200 "duplicate"
    assert [r.status_code for r in first] == [202] * 5
    assert [r.json()["status"] for r in first] == ["accepted"] * 5
    assert [r.status_code for r in again] == [200] * 5
    assert all(
        r.json() == {"status": "duplicate", "delivery_id": e}
        for r, (e, _) in zip(again, events, strict=True)
    )
    assert third.status_code == 200
    # And each delivery is recorded exactly once, applied, with its resource watermark
    for event_id, customer in events:
        item = recorded(local_stack, "stripe", event_id)
        assert item["outcome"] == "applied"
        assert local_stack.resource("stripe", customer)["watermark"] == item["sequence"]
    assert len(delivery_items(local_stack, marker)) == 5
    # And applied exactly once in effect: the hook ran once per delivery (the ledger)
    assert [local_stack.settled_ledger("stripe", e) for e, _ in events] == [1] * 5


def test_out_of_order_standard_webhooks_older_event_is_stale_not_applied(
    local_stack: LocalStack,
) -> None:
    # Given two events of one invoice, the newer one delivered and applied first
    marker = uuid.uuid4().hex[:10]
    invoice = f"inv_{marker}"
    newer_id, older_id = f"msg_{marker}_new", f"msg_{marker}_old"
    newer = json.dumps(
        {
            "type": "invoice.paid",
            "timestamp": "2026-03-01T10:00:05Z",
            "data": {"id": invoice, "amount": 2},
        }
    )
    older = json.dumps(
        {
            "type": "invoice.created",
            "timestamp": "2026-03-01T10:00:00Z",
            "data": {"id": invoice, "amount": 1},
        }
    )
    assert post_standard(local_stack, newer_id, newer).status_code == 202
    applied = recorded(local_stack, "standard-webhooks", newer_id)
    assert applied["outcome"] == "applied"
    # When the older event arrives afterwards (and is retried by the sender)
    assert post_standard(local_stack, older_id, older).status_code == 202
    assert post_standard(local_stack, older_id, older).status_code == 200
    # Then it is recorded as stale and the watermark stays on the newer event
    stale = recorded(local_stack, "standard-webhooks", older_id)
    assert stale["outcome"] == "stale"
    resource = local_stack.resource("standard-webhooks", invoice)
    assert resource["watermark"] == applied["sequence"] > stale["sequence"]
    assert resource["last_delivery_id"] == newer_id
    assert len(delivery_items(local_stack, marker)) == 2
    # The stale event's hook never ran; the applied one's ran once
    assert local_stack.settled_ledger("standard-webhooks", newer_id) == 1
    assert local_stack.ledger("standard-webhooks", older_id) == 0


def test_slack_retry_of_the_same_event_is_a_duplicate(local_stack: LocalStack) -> None:
    event_id = f"Ev{uuid.uuid4().hex[:10].upper()}"
    body = json.dumps(
        {
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "team_id": "T1",
            "event": {"type": "message", "text": "hello", "channel": "C1"},
        }
    )
    assert post_slack(local_stack, body).status_code == 202
    retry = post_slack(local_stack, body, retry=1)
    assert retry.status_code == 200 and retry.json()["status"] == "duplicate"
    assert recorded(local_stack, "slack", event_id)["outcome"] == "applied"
    assert len(delivery_items(local_stack, event_id)) == 1
    assert local_stack.settled_ledger("slack", event_id) == 1


def test_poison_message_reaches_the_dlq_and_is_applied_once_after_replay(
    local_stack: LocalStack,
) -> None:
    from webhook_pipeline_ops.local.demo import poison_envelope

    # Given a verified Stripe delivery whose claim-check body is missing from the bucket
    marker = uuid.uuid4().hex[:10]
    event_id, customer, created = f"evt_{marker}_poison", f"cus_{marker}", int(time.time())
    body = _stripe_event(event_id, customer, created, "customer.deleted").encode()
    message, key = poison_envelope(
        local_stack.outputs["PayloadBucketName"],
        body,
        source="stripe",
        delivery_id=event_id,
        resource=customer,
        sequence=created,
        event_type="customer.deleted",
    )
    sqs = local_stack.client("sqs")
    sqs.send_message(QueueUrl=local_stack.outputs["MainQueueUrl"], MessageBody=message)

    # When the processor fails it maxReceiveCount times, then it is in the DLQ, not recorded
    def in_dlq() -> list[dict[str, Any]]:
        code, out = local_stack.cli("dlq", "peek", "--local", "--json")
        assert code == 0, out
        doc = json.loads(out)
        messages = doc["messages"] if isinstance(doc, dict) else doc
        return [m for m in messages if event_id in json.dumps(m)]

    [dead] = wait_for(in_dlq, timeout=60, interval=0.5, what="the poison message in the DLQ")
    assert local_stack.delivery("stripe", event_id) is None
    # ... with the processor's reason, not only "retries exhausted" (invariant I5)
    assert dead["reason"].startswith("malformed: "), dead
    assert "claim-check" in dead["failure"]["reason"] or "body" in dead["failure"]["reason"]
    assert dead["failure"]["delivery_id"] == event_id

    # When the cause is fixed (body restored) and the DLQ replayed through the operator CLI
    local_stack.client("s3").put_object(
        Bucket=local_stack.outputs["PayloadBucketName"], Key=key, Body=body
    )
    code, out = local_stack.cli("replay", "--local", "--delivery-id", event_id, "--no-progress")
    assert code == 0, out

    # Then it is applied, once, and the DLQ no longer holds it
    item = recorded(local_stack, "stripe", event_id)
    assert item["outcome"] == "applied"
    assert local_stack.resource("stripe", customer)["last_delivery_id"] == event_id
    wait_for(lambda: not in_dlq(), timeout=30, what="the DLQ to drop the replayed message")

    # And the same envelope delivered again changes nothing (recorded at most once)
    sqs.send_message(QueueUrl=local_stack.outputs["MainQueueUrl"], MessageBody=message)

    def main_queue_empty() -> bool:
        attrs = sqs.get_queue_attributes(
            QueueUrl=local_stack.outputs["MainQueueUrl"],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return all(v == "0" for v in attrs.values())

    wait_for(main_queue_empty, timeout=30, what="the main queue to drain")
    again = local_stack.delivery("stripe", event_id)
    assert again is not None
    assert again["outcome"] == "applied" and again["recorded_at"] == item["recorded_at"]
    assert len(delivery_items(local_stack, marker)) == 1
    # ... and the hook ran once in all: not for the failed attempts, once after the replay,
    # not for the redelivered copy (the ledger counts runs, where records can only count keys)
    assert local_stack.ledger("stripe", event_id) == 1
    assert not in_dlq()


def test_same_envelope_queued_twice_runs_the_hook_once(local_stack: LocalStack) -> None:
    # Given a delivery accepted once, and its envelope sent to the main queue again (SQS's
    # at-least-once delivery, or a gate that failed open: the processor is the last line)
    marker = uuid.uuid4().hex[:10]
    event_id = f"evt_{marker}_twice"
    body = _stripe_event(event_id, f"cus_{marker}", int(time.time()))
    assert post_stripe(local_stack, body).status_code == 202
    first = recorded(local_stack, "stripe", event_id)
    assert local_stack.settled_ledger("stripe", event_id) == 1
    copy = Envelope(
        source="stripe",
        delivery_id=event_id,
        received_at=datetime.now(UTC),
        event_type="customer.updated",
        resource_key=f"cus_{marker}",
        sequence=first["sequence"],
        body_b64=base64.b64encode(body.encode()).decode(),
        body_size=len(body.encode()),
        body_sha256=hashlib.sha256(body.encode()).hexdigest(),
    )
    sqs = local_stack.client("sqs")
    for _ in range(2):
        sqs.send_message(QueueUrl=local_stack.outputs["MainQueueUrl"], MessageBody=copy.to_json())
    # Then the hook still ran exactly once (the side effects), and the record is the first one
    wait_for(local_stack.main_queue_drained, timeout=30, what="the main queue to drain")
    assert local_stack.ledger("stripe", event_id) == 1
    again = local_stack.delivery("stripe", event_id)
    assert again is not None and again["recorded_at"] == first["recorded_at"]


def test_simulator_mixed_traffic_every_unique_delivery_recorded_once(
    local_stack: LocalStack,
) -> None:
    import random

    from webhook_pipeline_ops.simulator.deliveries import example_sources
    from webhook_pipeline_ops.simulator.sender import plan, send_all

    # Given every example source (one per provider), duplicates and out-of-order pairs on two
    # resources each
    sources = example_sources()
    planned = plan(
        list(sources.values()),
        count=4,
        resources=2,
        duplicates=0.25,
        out_of_order=True,
        rng=random.Random(7),
    )
    # When the simulator sends them (sequentially: duplicates arrive after their originals)
    result = send_all(
        planned,
        base_url=local_stack.api_url,
        secrets=local_stack.secrets,
        rate=0,
        concurrency=1,
        timeout=10,
        retries=2,
    )
    summary = result.as_dict()
    # Then each unique delivery got 202, each duplicate 200, nothing else. Providers whose
    # acknowledgement is a fixed answer (Discord's deferred 200 {"type": 5}) get it for both; a
    # sender with no delivery identity at all (Mollie: the id is the request's) makes every
    # request its own delivery, its resends included.
    fixed = {
        name
        for name, source in sources.items()
        if source.provider.acknowledgement(202, {"status": "accepted"}).status != 202
    }
    per_request = [o for o in result.outcomes if o.planned.source.delivery_id.request]
    # (each request that was not answered as its kind expects, named, before the counts)
    unexpected = [
        (o.planned.source.name, o.planned.delivery_id, o.planned.duplicate, o.final.status,
         o.final.error, o.final.body[:160])
        for o in result.outcomes
        if o.final.status != (
            200 if o.planned.duplicate and not o.planned.source.delivery_id.request else 202
        ) and o.planned.source.name not in fixed
    ]  # fmt: skip
    assert unexpected == []
    assert {o.planned.source.name for o in per_request} == {
        name for name, s in sources.items() if s.delivery_id.request
    }
    uniques = {(p.source.name, p.delivery_id) for p in planned if not p.source.delivery_id.request}
    identified = len(sources) - len({o.planned.source.name for o in per_request})
    assert len(uniques) == 4 * identified
    fixed_sent = [p for p in planned if p.source.name in fixed]
    assert summary["accepted_202"] == len({u for u in uniques if u[0] not in fixed}) + len(
        per_request
    )
    assert summary["other_2xx"] == len(fixed_sent)
    assert summary["duplicates_sent"] == round(4 * len(sources) * 0.25)
    assert summary["duplicate_200"] == sum(
        1
        for p in planned
        if p.duplicate and not p.source.delivery_id.request and p.source.name not in fixed
    )
    assert summary["client_4xx"] == summary["server_5xx"] == summary["no_answer"] == 0
    # And every unique delivery is recorded once, as applied or stale (out of order), never lost
    outcomes = {key: recorded(local_stack, *key)["outcome"] for key in sorted(uniques)}
    for o in per_request:  # recorded under the request id its answer named
        name = o.planned.source.name
        outcomes[(name, json.loads(o.final.body)["delivery_id"])] = recorded(
            local_stack, name, json.loads(o.final.body)["delivery_id"]
        )["outcome"]
    assert len(outcomes) == len(uniques) + len(per_request)
    assert set(outcomes.values()) <= {"applied", "stale"}
    assert "applied" in outcomes.values()
