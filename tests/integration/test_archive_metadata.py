"""What the archive keeps besides the bytes: the provider, which secret verified the request, the
signed headers with credentials redacted; bodies that are not UTF-8; envelopes written before
these fields existed; and a body the archiver cannot check, which fails alone."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from webhook_pipeline.redaction import REDACTED
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.helpers import envelope_json
from tests.integration.archive_harness import ArchivePipeline, build_archive_pipeline
from tests.integration.ingest_harness import SECRETS_PREFIX, IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()


@pytest.fixture
def arc(make_ingest: Callable[..., IngestHarness], monkeypatch: pytest.MonkeyPatch) -> Any:
    return build_archive_pipeline(make_ingest(SOURCES_CATALOGUE="true"), monkeypatch)


def send(arc: ArchivePipeline, source: str, **kwargs: Any) -> Any:
    sent = signed_delivery(SOURCES[source], **kwargs)
    response = arc.ingest.invoke(http_api_event(sent))
    assert response["statusCode"] == 202, response
    return sent


def only(arc: ArchivePipeline, source: str) -> Any:
    records = arc.search(sources=(source,)).records
    assert len(records) == 1, records
    return records[0]


def test_signed_headers_are_kept_and_a_token_header_is_redacted(arc: ArchivePipeline) -> None:
    # Standard Webhooks signs webhook-id and webhook-timestamp; Telegram's only "signed"
    # header is its secret token itself, and Telegram signs nothing
    webhooks = send(arc, "standard-webhooks", delivery_id="msg_1", resource="r", sequence=1)
    telegram = send(arc, "telegram", resource="7", sequence=7)
    token = SOURCES["telegram"].provider.dev_secret
    assert arc.pipeline.process() == []
    assert arc.archive() == []
    sw = only(arc, "standard-webhooks")
    headers = {k.lower(): v for k, v in webhooks.headers.items()}
    assert sw.signed_headers == {
        "webhook-id": headers["webhook-id"],
        "webhook-timestamp": headers["webhook-timestamp"],
    }
    assert (sw.provider, sw.verified_with) == ("standard-webhooks", "current")
    tg = only(arc, "telegram")
    assert tg.signed_headers == {"x-telegram-bot-api-secret-token": REDACTED}
    assert (tg.provider, tg.verified_with) == ("telegram", "unsigned")
    assert tg.body_bytes() == telegram.body
    # the token is nowhere in the archive, nor on the archive queue's way
    assert token.encode() not in arc.raw_objects()


def test_a_request_verified_with_the_previous_secret_says_so(arc: ArchivePipeline) -> None:
    previous = SOURCES["stripe"].provider.dev_secret
    boto3.client("secretsmanager").put_secret_value(
        SecretId=f"{SECRETS_PREFIX}stripe",
        SecretString=json.dumps({"current": previous + "rotated", "previous": previous}),
    )
    send(arc, "stripe", delivery_id="evt_prev", resource="cus_1", sequence=1)
    assert arc.pipeline.process() == []
    assert arc.archive() == []
    assert only(arc, "stripe").verified_with == "previous"


def queued(body: str, message_id: str) -> dict[str, Any]:
    """A main-queue message as ``receive_message`` returns it (never on the queue itself)."""
    return {"MessageId": message_id, "ReceiptHandle": f"rh-{message_id}", "Body": body}


def test_an_old_envelope_and_credential_headers_and_binary_bodies(arc: ArchivePipeline) -> None:
    # An envelope of before (no provider, verified_with, signed_headers) forwarding a credential
    # header; a binary body inline, and one not UTF-8 as a claim check
    binary = bytes(range(256))
    latin1 = "caf\u00e9 \u00fc".encode("latin-1")
    key = "bodies/stripe/abc/token-1"
    arc.s3.put_object(Bucket=arc.ingest.bucket, Key=key, Body=latin1)
    old = envelope_json(
        "evt_old", headers={"authorization": "Bearer s3cr3t-value", "user-agent": "Stripe/1.0"}
    )
    assert "provider" not in json.loads(old) and "signed_headers" in json.loads(old)
    ref = envelope_json(
        "evt_ref",
        resource="cus_2",
        body_b64=None,
        body_ref={"bucket": arc.ingest.bucket, "key": key},
        body_size=len(latin1),
        body_sha256=hashlib.sha256(latin1).hexdigest(),
    )
    messages = [
        queued(old, "m-old"),
        queued(envelope_json("evt_bin", resource="cus_3", body=binary), "m-bin"),
        queued(ref, "m-ref"),
    ]
    assert arc.pipeline.process(messages) == []
    assert arc.archive() == []
    found = {r.delivery_id: r for r in arc.search().records}
    assert (found["evt_old"].provider, found["evt_old"].verified_with) == (None, None)
    assert found["evt_old"].signed_headers == {}
    assert found["evt_old"].headers == {"authorization": REDACTED, "user-agent": "Stripe/1.0"}
    assert b"s3cr3t-value" not in arc.raw_objects()
    assert found["evt_bin"].body is None and found["evt_bin"].body_bytes() == binary
    assert base64.b64decode(found["evt_bin"].body_base64 or "") == binary
    assert found["evt_ref"].body is None and found["evt_ref"].body_bytes() == latin1
    assert {r.outcome for r in found.values()} == {"applied"}


@pytest.mark.parametrize("damage", ["deleted", "replaced"])
def test_a_claim_check_body_the_archiver_cannot_check_fails_alone(
    arc: ArchivePipeline, log_lines: list[dict[str, Any]], damage: str
) -> None:
    body = b'{"secret-looking": "BODY-CONTENT-42"}'
    key = "bodies/stripe/abc/token-2"
    arc.s3.put_object(Bucket=arc.ingest.bucket, Key=key, Body=body)
    ref = envelope_json(
        "evt_ref",
        resource="cus_2",
        body_b64=None,
        body_ref={"bucket": arc.ingest.bucket, "key": key},
        body_size=len(body),
        body_sha256=hashlib.sha256(body).hexdigest(),
    )
    messages = [queued(ref, "m-ref"), queued(envelope_json("evt_ok"), "m-ok")]
    assert arc.pipeline.process(messages) == []
    # The claim-check object is gone (or holds other bytes) by the time the archiver reads it
    if damage == "deleted":
        arc.s3.delete_object(Bucket=arc.ingest.bucket, Key=key)
    else:
        arc.s3.put_object(Bucket=arc.ingest.bucket, Key=key, Body=body.replace(b"42", b"43"))
    failed = arc.archive()
    assert arc.delivery_ids(failed) == ["evt_ref"]
    assert [r.delivery_id for r in arc.search().records] == ["evt_ok"]
    warned = [line for line in log_lines if line.get("message_id") == failed[0]]
    assert warned, log_lines
    assert "BODY-CONTENT" not in json.dumps(log_lines)
