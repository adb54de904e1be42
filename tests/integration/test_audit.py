"""``webhook-pipeline audit`` against the real handlers on moto: deliveries accepted by the
ingest function (read from its log lines), recorded by the processor (read from the time index),
one dead-lettered: every one accounted for; a record removed behind its back is a gap."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import boto3
import pytest
from webhook_pipeline_ops import cli
from webhook_pipeline_ops.simulator.deliveries import (
    example_sources,
    http_api_event,
    signed_delivery,
)

from tests.helpers import create_deliveries_table, load_function
from tests.integration.ingest_harness import IngestHarness

pytestmark = pytest.mark.integration

SOURCES = example_sources()
TABLE = "deliveries"


def drain_into_processor(ingest: IngestHarness, processor: Any) -> None:
    from tests.helpers import FakeContext

    messages = ingest.messages()
    records = [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": {"ApproximateReceiveCount": "1"},
            "messageAttributes": {},
            "eventSource": "aws:sqs",
        }
        for m in messages
    ]
    for start in range(0, len(records), 10):
        processor.lambda_handler({"Records": records[start : start + 10]}, FakeContext())
    for m in messages:
        ingest.sqs.delete_message(QueueUrl=ingest.queue_url, ReceiptHandle=m["ReceiptHandle"])


def audit(tmp_path: Path, log: Path, ingest: IngestHarness, dlq: str) -> tuple[int, dict]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(
            ["audit", "--log", str(log), "--since", "1h", "--settle", "0", "--json",
             "--table", TABLE, "--queue-url", ingest.queue_url, "--dlq-url", dlq]
        )  # fmt: skip
    return code, json.loads(out.getvalue())


def test_audit_accounts_for_every_accepted_delivery_and_lists_a_gap(
    make_ingest,
    monkeypatch: pytest.MonkeyPatch,
    log_lines: list[dict[str, Any]],
    tmp_path: Path,
) -> None:
    ingest = make_ingest()
    create_deliveries_table(boto3.client("dynamodb"), TABLE)
    dlq = boto3.client("sqs").create_queue(QueueName="dlq")["QueueUrl"]
    processor = load_function(
        "processor", {"TABLE_NAME": TABLE, "PAYLOAD_BUCKET": "payloads"}, monkeypatch
    )
    sent = [signed_delivery(SOURCES[name]) for name in ("stripe", "github", "shopify", "slack")]
    sent.append(signed_delivery(SOURCES["stripe"]))
    for d in sent:
        assert ingest.invoke(http_api_event(d))["statusCode"] == 202
    assert ingest.invoke(http_api_event(sent[0]))["statusCode"] == 200  # a duplicate
    drain_into_processor(ingest, processor)
    # One more accepted delivery ends in the DLQ instead of the table.
    dead = signed_delivery(SOURCES["github"])
    assert ingest.invoke(http_api_event(dead))["statusCode"] == 202
    [message] = ingest.messages()
    boto3.client("sqs").send_message(QueueUrl=dlq, MessageBody=message["Body"])
    ingest.sqs.delete_message(QueueUrl=ingest.queue_url, ReceiptHandle=message["ReceiptHandle"])
    log = tmp_path / "ingest.log"
    log.write_text("".join(json.dumps(x) + "\n" for x in log_lines))

    code, report = audit(tmp_path, log, ingest, dlq)
    assert code == 0 and report["ok"] is True, report
    assert report["sources"]["stripe"]["accepted"] == report["sources"]["stripe"]["recorded"] == 2
    assert report["sources"]["github"]["in_dlq"] == 1
    assert sum(s["accepted"] for s in report["sources"].values()) == len(sent) + 1

    # A record removed behind the pipeline's back is reported by its delivery id.
    lost = sent[2]
    boto3.client("dynamodb").delete_item(
        TableName=TABLE,
        Key={"pk": {"S": f"DELIVERY#shopify#{lost.delivery_id}"}, "sk": {"S": "DELIVERY"}},
    )
    code, report = audit(tmp_path, log, ingest, dlq)
    assert code == 1 and report["gaps"] == 1
    assert report["sources"]["shopify"]["gaps"] == [lost.delivery_id]
