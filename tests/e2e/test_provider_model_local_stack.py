"""The provider-model attacks (cases C11, C12, C13) over real HTTP against the local stack, with
the effects read from DynamoDB: one delivery id, ``stale`` and not ``applied``, the body mismatch
noted on the record; and every provider's handshakes answered over HTTP without the gate or the
queue (Redis ``INFO commandstats`` unchanged)."""

from __future__ import annotations

import hashlib
import json
import time
import uuid

import pytest
import redis
import requests
from webhook_pipeline.source_secrets import parse_secret
from webhook_pipeline.webhook_request import WebhookRequest
from webhook_pipeline_ops.simulator.deliveries import example_sources, signed_delivery

from tests.e2e.conftest import LocalStack, wait_for
from tests.e2e.test_local_stack import delivery_items, recorded

pytestmark = pytest.mark.e2e

SOURCES = example_sources()


def post(stack: LocalStack, source: str, body: bytes, headers: dict[str, str]) -> requests.Response:
    return requests.post(stack.url(source), data=body, headers=headers, timeout=10)


def test_c11_svix_delivery_with_a_foreign_webhook_id_is_one_delivery(
    local_stack: LocalStack,
) -> None:
    msg_id = f"msg_{uuid.uuid4().hex[:20]}"
    d = signed_delivery(
        SOURCES["standard-webhooks"],
        delivery_id=msg_id,
        secret=local_stack.secrets["standard-webhooks"],
    )
    svix = {k.replace("webhook-", "svix-"): v for k, v in d.headers.items()}
    assert post(local_stack, "standard-webhooks", d.body, svix).status_code == 202
    forged = svix | {"webhook-id": f"anything-new-{msg_id}"}
    for _ in range(3):
        answer = post(local_stack, "standard-webhooks", d.body, forged)
        assert (answer.status_code, answer.json()["reason"]) == (401, "signature_mismatch")
    assert post(local_stack, "standard-webhooks", d.body, svix).json()["status"] == "duplicate"
    assert recorded(local_stack, "standard-webhooks", msg_id)["outcome"] == "applied"
    # Everything the stack was sent has been processed (nothing left in the main queue, visible
    # or in flight): a second record, if the pipeline made one, would be in the table by now.
    wait_for(local_stack.main_queue_drained, 30, what="the main queue to drain")
    assert len(delivery_items(local_stack, msg_id)) == 1


def test_c12_old_shopify_body_resent_as_a_form_is_stale(local_stack: LocalStack) -> None:
    shopify, secret = SOURCES["shopify"], local_stack.secrets["shopify"]
    order, now = uuid.uuid4().hex[:10], int(time.time())
    old = signed_delivery(shopify, secret=secret, resource=order, sequence=now - 60)
    new = signed_delivery(shopify, secret=secret, resource=order, sequence=now)
    assert post(local_stack, "shopify", new.body, new.headers).status_code == 202
    assert recorded(local_stack, "shopify", new.delivery_id)["outcome"] == "applied"
    # The captured older body, a fresh id, a form Content-Type.
    fresh_id = str(uuid.uuid4())
    replay = signed_delivery(
        shopify,
        secret=secret,
        delivery_id=fresh_id,
        body=old.body,
        extra_headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert post(local_stack, "shopify", replay.body, replay.headers).status_code == 202
    assert recorded(local_stack, "shopify", fresh_id)["outcome"] == "stale"
    resource = local_stack.resource("shopify", f"gid://shopify/Order/{order}")
    assert resource is not None and resource["last_delivery_id"] == new.delivery_id


def test_c13_one_id_two_bodies_is_noted_on_the_record(local_stack: LocalStack) -> None:
    # Behind the gate's back (its done claim flushed, as a Redis restart would), a second copy
    # with another body reaches the processor: recorded once, the mismatch noted.
    import redis

    stripe, secret = SOURCES["stripe"], local_stack.secrets["stripe"]
    event_id = f"evt_{uuid.uuid4().hex[:20]}"
    first = signed_delivery(stripe, secret=secret, delivery_id=event_id, resource="cus_m")
    assert post(local_stack, "stripe", first.body, first.headers).status_code == 202
    assert recorded(local_stack, "stripe", event_id)["outcome"] == "applied"
    redis.Redis.from_url(local_stack.ready["redis_url"]).flushall()
    other_body = first.body.replace(b'"customer.updated"', b'"customer.deleted"')
    second = signed_delivery(stripe, secret=secret, delivery_id=event_id, body=other_body)
    assert post(local_stack, "stripe", second.body, second.headers).status_code == 202

    def noted() -> dict | None:
        item = local_stack.delivery("stripe", event_id)
        return item if item and item.get("duplicate_body_mismatches") else None

    item = wait_for(noted, timeout=30, what="the body mismatch to be noted")
    assert item["last_mismatch_sha256"] == hashlib.sha256(other_body).hexdigest()
    assert item["content_sha256"] == hashlib.sha256(first.body).hexdigest()
    assert len(delivery_items(local_stack, event_id)) == 1


def _stored_secret(stack: LocalStack, name: str) -> str:
    """The Secrets Manager value the stack stored for ``name`` (its verification form)."""
    doc = json.loads((stack.state_dir / "secrets.json").read_text())
    secret_id = doc["sources"][name]["secret_id"]
    return str(stack.client("secretsmanager").get_secret_value(SecretId=secret_id)["SecretString"])


def _commands(client: redis.Redis) -> dict[str, int]:
    """Redis commands run so far by name (the INFO reads of this test left out)."""
    stats = client.info("commandstats")
    return {k: v["calls"] for k, v in stats.items() if k not in ("cmdstat_info",)}


HANDSHAKES = sorted(name for name, s in SOURCES.items() if s.provider.handshakes)


@pytest.mark.parametrize("name", HANDSHAKES)
def test_every_handshake_is_answered_over_http_without_the_gate_or_the_queue(
    local_stack: LocalStack, name: str
) -> None:
    """Each provider's handshakes, sent over HTTP as the provider sends them, get exactly the
    answer the provider module computes for that request (status, content type and bytes), and
    run no Redis command and put nothing on the queue."""
    source = SOURCES[name]
    stored = parse_secret(_stored_secret(local_stack, name))
    gate = redis.Redis.from_url(local_stack.ready["redis_url"])
    sqs, queue = local_stack.client("sqs"), local_stack.outputs["MainQueueUrl"]
    for handshake in source.provider.handshakes:
        sample = handshake.sample(stored)
        headers, body = dict(sample.headers), sample.body
        url = local_stack.url(name)
        if handshake.signed:
            sent = source.provider.sign_request(
                body, local_stack.secrets[name], timestamp=int(time.time()),
                delivery_id="hs", url=url,
            )  # fmt: skip
            headers, body = headers | sent.headers, sent.body
        lowered = {k.lower(): v for k, v in headers.items()}
        expected = handshake.answer(
            WebhookRequest(sample.method, name, lowered, body, query=dict(sample.query)), stored
        )
        before = _commands(gate)
        answer = requests.request(
            sample.method, url, params=dict(sample.query), data=body, headers=headers, timeout=10
        )
        assert answer.status_code == expected.status == 200, (handshake.name, answer.text)
        if expected.content_type == "application/json":
            assert answer.json() == expected.body, handshake.name
        else:
            assert answer.text == expected.text(), handshake.name
        assert answer.headers["content-type"].startswith(expected.content_type)
        assert _commands(gate) == before, handshake.name
        depth = sqs.get_queue_attributes(
            QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]["ApproximateNumberOfMessages"]
        assert depth == "0", handshake.name
