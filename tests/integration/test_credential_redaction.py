"""A credential a provider puts in the body, the URL or a header is never stored in a record,
logged, or shown by the console.

For each provider whose credential travels where the pipeline keeps or prints things, a valid
delivery carrying a marker credential goes through the real ingest handler (bodies forced into
the S3 claim check, which the console shows) and the real processor; then the marker must be in
no item of the deliveries table, no log line, and no console page (the delivery, the list and the
DLQ, where the same delivery is dead-lettered with an inline body). The claim-check object and
the queued envelope keep the exact signed bytes (what hooks receive and replays move): that is
asserted too, so the test tells redaction at display from a body altered on its way.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
import requests
from webhook_pipeline_ops.aws import Aws
from webhook_pipeline_ops.cli import build_parser
from webhook_pipeline_ops.console.app import create_app
from webhook_pipeline_ops.console.backend import Backend, Target
from webhook_pipeline_ops.console.server import ConsoleServer, bind
from webhook_pipeline_ops.simulator.deliveries import (
    SampleDelivery,
    example_sources,
    http_api_event,
    request_event,
    signed_delivery,
)

from tests.integration.ingest_harness import SECRETS_PREFIX, IngestHarness
from tests.integration.pipeline_harness import Pipeline, build_pipeline

pytestmark = pytest.mark.integration

#: The credential every case sends: in no store but the queue and the claim check, in no log.
MARKER = "MarkerCredential0123456789abcdefXYZ"
TOKEN = "test-token-0123456789"
AWS_SDK_LOGGERS = ("botocore", "boto3", "moto", "urllib3", "s3transfer")
SOURCES = example_sources()


def with_field(body: bytes, **fields: Any) -> bytes:
    return json.dumps({**json.loads(body), **fields}, separators=(",", ":")).encode()


def sample_body(source: str, delivery_id: str) -> bytes:
    return signed_delivery(SOURCES[source], delivery_id=delivery_id).body


@dataclass(frozen=True)
class Case:
    """One provider: the secret stored for its source and the delivery carrying the marker."""

    source: str
    secret: str | None  # None: keep the development secret
    send: Callable[[], SampleDelivery]
    in_body: bool  # the marker is in the signed body (the console shows it redacted)


CASES = {
    # google_key: the credential is the body field itself
    "google-ads": Case("google-ads", MARKER, lambda: signed_delivery(
        SOURCES["google-ads"], secret=MARKER, delivery_id="TeSter-cred-1"), True),
    # clientState in every notification of the batch
    "microsoft-graph": Case("microsoft-graph", MARKER, lambda: signed_delivery(
        SOURCES["microsoft-graph"], secret=MARKER), True),
    # the legacy verification token in every Events API body (signed with the signing secret)
    "slack": Case("slack", None, lambda: signed_delivery(
        SOURCES["slack"],
        body=with_field(sample_body("slack", "Ev0CRED1"), token=MARKER),
    ), True),
    # the interaction token (follow-ups for 15 minutes)
    "discord": Case("discord", None, lambda: signed_delivery(
        SOURCES["discord"],
        body=with_field(sample_body("discord", "1200000000000000777"), token=MARKER),
    ), True),
    # the URL token of Mollie's classic webhooks
    "mollie": Case("mollie", MARKER, lambda: signed_delivery(
        SOURCES["mollie"], secret=MARKER), False),
    # a header credential: X-Gitlab-Token is the secret itself
    "gitlab": Case("gitlab", MARKER, lambda: signed_delivery(
        SOURCES["gitlab"], secret=MARKER), False),
}  # fmt: skip


@pytest.fixture
def all_logs(
    caplog: pytest.LogCaptureFixture, log_lines: list[dict[str, Any]]
) -> Iterator[Callable[[], str]]:
    caplog.set_level(logging.DEBUG)

    def text() -> str:
        # the AWS SDK's own DEBUG lines echo every request, the test's own put_secret_value
        # included: the pipeline's and the tools' lines are what is checked
        ours = [r for r in caplog.records if not r.name.startswith(AWS_SDK_LOGGERS)]
        return "\n".join(r.getMessage() + repr(r.__dict__) for r in ours) + json.dumps(log_lines)

    yield text


def console_pages(pipeline: Pipeline, dlq_url: str, paths: list[str]) -> list[str]:
    """The console over real HTTP against the pipeline's table, bucket and queues."""
    args = build_parser().parse_args(
        [
            "console",
            "--queue-url",
            pipeline.ingest.queue_url,
            "--dlq-url",
            dlq_url,
            "--table",
            pipeline.table,
            "--payload-bucket",
            pipeline.ingest.bucket,
        ]
    )
    backend = Backend(Aws(args), Target(local=False, label="stk", stack="stk", region="us-east-1"))
    sock = bind("127.0.0.1", 0)
    host = f"127.0.0.1:{sock.getsockname()[1]}"
    server = ConsoleServer(create_app(backend, allowed_hosts=[host], token=TOKEN), sock)
    server.start()
    try:
        pages = []
        for path in paths:
            response = requests.get(f"http://{host}{path}", timeout=30)
            assert response.status_code == 200, (path, response.text[:300])
            pages.append(response.text)
        return pages
    finally:
        server.stop()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_credential_is_in_no_record_log_or_console_page(
    name: str,
    make_ingest: Callable[..., IngestHarness],
    monkeypatch: pytest.MonkeyPatch,
    all_logs: Callable[[], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = CASES[name]
    # Given the source's secret is the marker (where the credential is the secret)
    if case.secret is not None:
        boto3.client("secretsmanager").put_secret_value(
            SecretId=f"{SECRETS_PREFIX}{case.source}", SecretString=case.secret
        )
    # (with Powertools told to log every event: the handlers hold credentials in theirs)
    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")
    ingest = make_ingest(SOURCES_CATALOGUE="true", INLINE_BODY_MAX_BYTES="0")
    pipeline = build_pipeline(ingest, monkeypatch)
    sent = case.send()
    assert MARKER in sent.body.decode() + sent.query_string + json.dumps(sent.headers)
    # When the delivery is accepted and processed
    response = ingest.invoke(http_api_event(sent))
    assert response["statusCode"] in (200, 202), response
    queued = ingest.messages()
    assert queued
    assert pipeline.process(queued) == []
    # Then the exact signed bytes are kept where hooks and replays read them
    if case.in_body:
        pointers = [json.loads(m["Body"])["body_ref"] for m in queued]
        kept = b"".join(
            ingest.s3.get_object(Bucket=p["bucket"], Key=p["key"])["Body"].read() for p in pointers
        )
        assert MARKER.encode() in kept
    # and the marker is in no record, no log line, no console page
    items = pipeline.scan()
    assert len([i for i in items if i["type"]["S"] == "delivery"]) == len(queued)
    assert MARKER not in json.dumps(items)
    ids = [json.loads(m["Body"])["delivery_id"] for m in queued]
    dlq_url = ingest.sqs.create_queue(QueueName="dlq")["QueueUrl"]
    inline = json.loads(queued[0]["Body"])
    raw = ingest.s3.get_object(Bucket=inline["body_ref"]["bucket"], Key=inline["body_ref"]["key"])[
        "Body"
    ].read()
    del inline["body_ref"]
    inline["body_b64"] = base64.b64encode(raw).decode()
    ingest.sqs.send_message(QueueUrl=dlq_url, MessageBody=json.dumps(inline))
    paths = ["/delivery?" + urlencode({"source": case.source, "id": did}) for did in ids] + [
        "/deliveries",
        "/dlq",
    ]
    pages = console_pages(pipeline, dlq_url, paths)
    for path, page in zip(paths, pages, strict=True):
        assert MARKER not in page, path
    if case.in_body:  # the body is shown, with the credential replaced
        assert "[redacted]" in pages[0]
        assert "[redacted]" in pages[-1]
    logs = all_logs()
    assert MARKER not in logs, logs[max(0, logs.find(MARKER) - 300) : logs.find(MARKER) + 100]
    assert MARKER not in capsys.readouterr().out


def test_meta_verify_token_of_the_challenge_is_in_no_log(
    make_ingest: Callable[..., IngestHarness],
    all_logs: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")
    secret = json.dumps({"current": "meta-app-secret-local", "verify_token": MARKER})
    boto3.client("secretsmanager").put_secret_value(
        SecretId=f"{SECRETS_PREFIX}meta", SecretString=secret
    )
    ingest = make_ingest(SOURCES_CATALOGUE="true")
    query = {"hub.mode": "subscribe", "hub.verify_token": MARKER, "hub.challenge": "1158201444"}
    for token, status in ((MARKER, 200), (MARKER + "x", 401)):
        event = request_event(
            "meta", "GET", b"", {}, {**query, "hub.verify_token": token},
            raw_query=urlencode({**query, "hub.verify_token": token}),
        )  # fmt: skip
        assert ingest.invoke(event)["statusCode"] == status
    assert MARKER not in all_logs()
