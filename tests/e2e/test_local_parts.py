"""The local stack's parts: the HTTP gateway over real HTTP, provisioning from template.yaml,
the SQS poller's settlement of a batch.

The gateway is exercised with a recording function in place of the ingest handler, so the
API Gateway 2.0 event it builds can be asserted field by field; provisioning and the poller run
against in-process moto.
"""

from __future__ import annotations

import base64
import http.client
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from webhook_pipeline_ops.local.http_gateway import Gateway, Route
from webhook_pipeline_ops.local.poller import SqsPoller
from webhook_pipeline_ops.local.provision import provision
from webhook_pipeline_ops.local.resources import (
    FunctionSpec,
    HttpRoute,
    QueueInfo,
    SqsEventSource,
)

from tests.conftest import REGION, ROOT

pytestmark = pytest.mark.e2e


class RecordingFunction:
    """Stands in for a LocalFunction: records events, answers with a scripted result."""

    def __init__(self, result: Any = None, error: Exception | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.result = result
        self.error = error
        self.spec = FunctionSpec("Fake", "fake", Path("."), "app.h", 3, 128, {}, [], [], [])

    def invoke(self, event: dict[str, Any], deadline: float | None = None) -> Any:
        self.events.append(event)
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def gateway() -> Any:
    fn = RecordingFunction(
        {
            "statusCode": 202,
            "headers": {"content-type": "application/json", "x-extra": "1"},
            "body": '{"status":"accepted"}',
        }
    )
    gw = Gateway(
        "127.0.0.1",
        0,
        [Route(HttpRoute("POST", "/webhooks/{source}"), fn)],  # type: ignore[arg-type]
        {},
    )
    gw.start()
    yield gw, fn
    gw.stop()


def _request(
    port: int, method: str, target: str, body: bytes, headers: list[tuple[str, str]]
) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest(method, target, skip_accept_encoding=True)
    for name, value in headers:
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    conn.send(body)
    return conn.getresponse()


def test_binary_body_is_base64_and_headers_are_folded(gateway: Any) -> None:
    gw, fn = gateway
    body = b"\xff\x00\xfe raw bytes"
    response = _request(
        gw.port,
        "POST",
        "/webhooks/stripe?a=1&a=2&b=x",
        body,
        [
            ("Content-Type", "application/octet-stream"),
            ("Stripe-Signature", "t=1,v1=aa"),
            ("stripe-signature", "t=1,v1=bb"),
            ("Cookie", "c1=1; c2=2"),
            ("User-Agent", "Stripe/1.0"),
        ],
    )
    assert response.status == 202
    assert response.getheader("x-extra") == "1"
    assert json.loads(response.read()) == {"status": "accepted"}
    event = fn.events[0]
    assert event["version"] == "2.0" and event["routeKey"] == "POST /webhooks/{source}"
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == body
    assert event["headers"]["stripe-signature"] == "t=1,v1=aa,t=1,v1=bb"
    assert "cookie" not in event["headers"] and event["cookies"] == ["c1=1", "c2=2"]
    assert event["pathParameters"] == {"source": "stripe"}
    assert event["rawPath"] == "/webhooks/stripe" and event["rawQueryString"] == "a=1&a=2&b=x"
    assert event["queryStringParameters"] == {"a": "1,2", "b": "x"}
    http_ctx = event["requestContext"]["http"]
    assert http_ctx["method"] == "POST" and http_ctx["path"] == "/webhooks/stripe"
    assert http_ctx["sourceIp"] == "127.0.0.1" and http_ctx["userAgent"] == "Stripe/1.0"


def test_json_body_is_passed_as_exact_text(gateway: Any) -> None:
    gw, fn = gateway
    body = '{"b": 1,  "a": "é"}'.encode()
    assert (
        _request(
            gw.port, "POST", "/webhooks/github", body, [("Content-Type", "application/json")]
        ).status
        == 202
    )
    event = fn.events[0]
    assert event["isBase64Encoded"] is False and event["body"].encode() == body
    assert "queryStringParameters" not in event


def test_unmatched_method_or_path_is_404_and_health_answers(gateway: Any) -> None:
    gw, fn = gateway
    assert _request(gw.port, "GET", "/webhooks/stripe", b"", []).status == 404
    assert _request(gw.port, "POST", "/other", b"{}", []).status == 404
    health = _request(gw.port, "GET", "/health", b"", [])
    assert health.status == 200 and json.loads(health.read()) == {"status": "ok"}
    assert fn.events == []


def test_handler_exception_is_a_500() -> None:
    fn = RecordingFunction(error=RuntimeError("boom"))
    gw = Gateway("127.0.0.1", 0, [Route(HttpRoute("POST", "/webhooks/{source}"), fn)], {})  # type: ignore[arg-type]
    gw.start()
    try:
        response = _request(gw.port, "POST", "/webhooks/x", b"{}", [])
        assert response.status == 500
        assert json.loads(response.read()) == {"message": "Internal Server Error"}
    finally:
        gw.stop()


class _Clients:
    def __getattr__(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION)


def test_resources_are_provisioned_from_the_template(aws: None) -> None:
    # Given the repository's template, when it is provisioned into moto
    stack = provision(
        ROOT / "template.yaml",
        clients=_Clients(),
        region=REGION,
        parameter_overrides={"MaxReceiveCount": "3"},
    )
    # Then the queues carry the template's attributes and the redrive policy to the DLQ
    main, dlq = stack.queues["MainQueue"], stack.queues["DeadLetterQueue"]
    assert main.visibility_timeout == 390 and main.max_receive_count == 3
    redrive = json.loads(main.attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq.arn
    assert main.attributes["MessageRetentionPeriod"] == "345600"
    assert dlq.attributes["MessageRetentionPeriod"] == "1209600"
    # And the table has its keys and TTL, the bucket exists, the alarms are there
    ddb = boto3.client("dynamodb", region_name=REGION)
    table = ddb.describe_table(TableName=stack.tables["DeliveriesTable"])["Table"]
    assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {
        "pk": "HASH",
        "sk": "RANGE",
    }
    ttl = ddb.describe_time_to_live(TableName=stack.tables["DeliveriesTable"])
    assert ttl["TimeToLiveDescription"]["AttributeName"] == "expires_at"
    boto3.client("s3", region_name=REGION).head_bucket(Bucket=stack.buckets["PayloadBucket"])
    alarms = boto3.client("cloudwatch", region_name=REGION).describe_alarms()
    names = {a["AlarmName"] for a in alarms["MetricAlarms"] + alarms["CompositeAlarms"]}
    assert len(names) == len(stack.alarms) >= 5
    # And the functions' environment resolves to the local resources; Redis is left to the stack
    ingest, processor = stack.functions["IngestFunction"], stack.functions["ProcessorFunction"]
    assert ingest.environment["QUEUE_URL"] == main.url
    assert ingest.environment["PAYLOAD_BUCKET"] == stack.buckets["PayloadBucket"]
    assert ingest.environment["SECRETS_PREFIX"].endswith("/")
    assert "REDIS_URL" in ingest.unresolved_environment
    assert "AWS_ENDPOINT_URL" not in ingest.environment  # !Ref AWS::NoValue
    assert processor.environment["TABLE_NAME"] == stack.tables["DeliveriesTable"]
    (event,) = processor.sqs_events
    assert event.queue_arn == main.arn and event.report_batch_item_failures
    assert (event.batch_size, event.maximum_batching_window_seconds) == (10, 1)
    assert {(r.method, r.path) for r in ingest.http_routes} >= {("POST", "/webhooks/{source}")}
    assert "RedisCache" in stack.skipped and "Vpc" in stack.skipped


def test_poller_deletes_successes_and_leaves_reported_failures(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    for i in range(3):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=f"m{i}",
            MessageAttributes={"k": {"DataType": "String", "StringValue": "v"}},
        )

    class FailM1(RecordingFunction):
        def invoke(self, event: dict[str, Any], deadline: float | None = None) -> Any:
            self.events.append(event)
            return {
                "batchItemFailures": [
                    {"itemIdentifier": r["messageId"]}
                    for r in event["Records"]
                    if r["body"] == "m1"
                ]
            }

    fn = FailM1()
    poller = SqsPoller(
        sqs,
        QueueInfo("Q", "q", url, arn, {}),
        SqsEventSource(arn, batch_size=10, report_batch_item_failures=True),
        fn,
        REGION,
        poll_wait_seconds=0,
    )  # type: ignore[arg-type]
    poller.process(poller.receive_batch())
    (event,) = fn.events
    record = event["Records"][0]
    assert record["eventSource"] == "aws:sqs" and record["eventSourceARN"] == arn
    assert record["awsRegion"] == REGION and record["md5OfBody"]
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert "SentTimestamp" in record["attributes"]
    assert record["messageAttributes"]["k"]["stringValue"] == "v"
    assert poller.stats["deleted"] == 2 and poller.stats["failed"] == 1
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "1"  # m1 waits for its timeout
    assert attrs["ApproximateNumberOfMessages"] == "0"


# ------------------------------------------------------------------------------------------------
# the gateway is a webhook endpoint and nothing else; framing it cannot trust is a 400


def _raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes; return everything the server sends until it closes (or ``timeout``)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return received
            if not chunk:
                return received
            received += chunk


def _status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1])


@pytest.mark.parametrize("length", ["-1", "abc", "1e3", " 5x"])
def test_an_invalid_content_length_is_a_400(gateway: Any, length: str) -> None:
    gw, fn = gateway
    head = f"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
    raw = _raw(gw.port, head.encode() + b"{}")
    assert _status(raw) == 400
    assert fn.events == []


@pytest.mark.parametrize("size", [b"zz", b"-1", b"", b"0x5", b"123456789"])
def test_a_malformed_chunk_size_is_a_400(gateway: Any, size: bytes) -> None:
    gw, fn = gateway
    head = b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    raw = _raw(gw.port, head + size + b"\r\n{}\r\n0\r\n\r\n")
    assert _status(raw) == 400
    assert fn.events == []


def test_a_well_formed_chunked_body_is_passed_whole(gateway: Any) -> None:
    gw, fn = gateway
    head = b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    body = b'3\r\n{"a\r\n4;ext=1\r\n": 1\r\n1\r\n}\r\n0\r\n\r\n'
    raw = _raw(gw.port, head + b"Connection: close\r\n\r\n" + body)
    assert _status(raw) == 202
    assert fn.events[0]["body"] == '{"a": 1}'


def test_the_webhook_port_does_not_serve_the_lambda_invoke_api() -> None:
    fn = RecordingFunction({"ok": True})
    gw = Gateway(
        "127.0.0.1", 0, [Route(HttpRoute("POST", "/webhooks/{source}"), fn)],  # type: ignore[arg-type]
        {"ProcessorFunction": fn},  # type: ignore[dict-item]
    )  # fmt: skip
    gw.start()
    try:
        event = json.dumps({"Records": [{"messageId": "m", "body": "{}"}]}).encode()
        response = _request(
            gw.port, "POST", "/2015-03-31/functions/ProcessorFunction/invocations", event, []
        )
        assert response.status == 404
        assert fn.events == []
    finally:
        gw.stop()


def test_the_invoke_gateway_serves_invoke_and_no_webhook_route() -> None:
    fn = RecordingFunction({"replayed": 0})
    gw = Gateway(
        "127.0.0.1", 0, [Route(HttpRoute("POST", "/webhooks/{source}"), fn)],  # type: ignore[arg-type]
        {"ReplayFunction": fn}, serve_invoke=True,  # type: ignore[dict-item]
    )  # fmt: skip
    gw.start()
    try:
        response = _request(
            gw.port, "POST", "/2015-03-31/functions/ReplayFunction/invocations", b"{}", []
        )
        assert response.status == 200 and json.loads(response.read()) == {"replayed": 0}
        assert _request(gw.port, "POST", "/webhooks/stripe", b"{}", []).status == 404
        assert len(fn.events) == 1
    finally:
        gw.stop()


def test_slow_headers_and_idle_connections_are_closed(
    gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from webhook_pipeline_ops.local import http_gateway

    gw, fn = gateway
    monkeypatch.setattr(http_gateway, "HEADER_TIMEOUT_SECONDS", 0.5)
    monkeypatch.setattr(http_gateway, "IDLE_TIMEOUT_SECONDS", 0.5)
    started = time.monotonic()
    assert _raw(gw.port, b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\n", timeout=10) == b""
    assert _raw(gw.port, b"", timeout=10) == b""  # connected, never sent a byte
    assert time.monotonic() - started < 8  # closed by the gateway, not by our 10 s timeouts
    assert fn.events == []


# ------------------------------------------------------------------------------------------------
# deadlines for the whole request head and body; a client that leaves; canonical paths only


def _trickle(
    port: int, data: bytes, gap: float, give_up: float, prefix: bytes = b""
) -> tuple[float, bytes]:
    """Send ``prefix`` at once, then ``data`` one byte every ``gap`` seconds until the server
    closes (or ``give_up`` seconds pass); return the seconds the connection stayed open and
    what the server sent."""
    import socket
    import time

    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=give_up) as sock:
        sock.settimeout(gap)
        sock.sendall(prefix)
        received = b""
        for byte in data:
            if time.monotonic() - started > give_up:
                break
            try:
                sock.sendall(bytes([byte]))
                chunk = sock.recv(65536)  # waits ``gap``: the pace of the trickle
            except TimeoutError:
                continue
            except OSError:  # reset by the server
                return time.monotonic() - started, received
            if not chunk:
                return time.monotonic() - started, received
            received += chunk
        return time.monotonic() - started, received


def _short_deadline_gateway(fn: Any, **timeouts: float) -> Gateway:
    gw = Gateway(
        "127.0.0.1", 0, [Route(HttpRoute("POST", "/webhooks/{source}"), fn)], {},  # type: ignore[arg-type]
        **timeouts,
    )  # fmt: skip
    gw.start()
    return gw


def test_a_slow_loris_head_is_cut_at_the_header_deadline_not_per_read() -> None:
    # Given a header deadline of 1 s and a client sending one byte of its head every 0.2 s
    fn = RecordingFunction({"statusCode": 202})
    gw = _short_deadline_gateway(fn, header_timeout=1.0)
    head = b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 200
    try:
        held, _ = _trickle(gw.port, head, gap=0.2, give_up=8.0)
    finally:
        gw.stop()
    # Then the connection is closed about 1 s after its first byte, not kept while bytes trickle
    assert held < 4.0, f"the connection stayed open {held:.1f} s"
    assert fn.events == []


def test_a_trickled_body_is_a_408_at_the_body_deadline() -> None:
    fn = RecordingFunction({"statusCode": 202})
    gw = _short_deadline_gateway(fn, body_timeout=1.0)
    head = b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
    try:
        raw = _raw(gw.port, head, timeout=5)  # the head at once, then nothing of the body
        body = b"{" + b" " * 98 + b"}"
        held, answer = _trickle(gw.port, body, gap=0.2, give_up=8.0, prefix=head)
    finally:
        gw.stop()
    assert _status(raw) == 408
    assert _status(answer) == 408 and held < 4.0, f"held {held:.1f} s, answered {answer[:40]!r}"
    assert fn.events == []


def test_a_client_gone_before_its_answer_is_logged_with_the_status_it_was_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import socket
    import struct
    import threading

    # Given a function that answers 401 only once the client has closed its connection (RST)
    closed, logged = threading.Event(), threading.Event()
    seen: list[tuple[str, str, int]] = []

    class AfterClose(RecordingFunction):
        def invoke(self, event: dict[str, Any], deadline: float | None = None) -> Any:
            assert closed.wait(10)
            return {"statusCode": 401, "body": '{"status":"rejected"}'}

    def on_request(method: str, path: str, status: int, ms: float) -> None:
        seen.append((method, path, status))
        logged.set()

    gw = Gateway(
        "127.0.0.1", 0, [Route(HttpRoute("POST", "/webhooks/{source}"), AfterClose())], {},  # type: ignore[arg-type]
        on_request=on_request,
    )  # fmt: skip
    gw.start()
    caplog.set_level("INFO", logger="webhook_pipeline_ops.local.http_gateway")
    try:
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
        sock.sendall(b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        closed.set()
        assert logged.wait(10)
    finally:
        gw.stop()
    # Then the request is counted with the 401 it was answered, and the disconnect is logged
    assert seen == [("POST", "/webhooks/stripe", 401)]
    assert any(
        "answered 401" in r.getMessage() and "disconnected" in r.getMessage()
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize(
    "target",
    [
        "//webhooks/twilio",
        "/webhooks//twilio",
        "/webhooks/./twilio",
        "/./webhooks/twilio",
        "/x/../webhooks/twilio",
        "/webhooks/%2e%2e",
        "/webhooks/a%2Fb",
        "/webhooks/a%5cb",
        "/webhooks/twilio/",
    ],
)
def test_a_path_that_is_not_exactly_webhooks_source_is_a_404(gateway: Any, target: str) -> None:
    gw, fn = gateway
    assert _request(gw.port, "POST", target, b"{}", []).status == 404
    assert fn.events == []
    # and the canonical path still reaches the function, with the source as sent
    assert _request(gw.port, "POST", "/webhooks/twilio", b"{}", []).status == 202
    assert fn.events[0]["pathParameters"] == {"source": "twilio"}


def test_a_text_plain_answer_and_the_gateways_own_answers_are_nosniff() -> None:
    # Given a function answering a reflected token as text/plain (Microsoft Graph's handshake)
    fn = RecordingFunction(
        {"statusCode": 200, "headers": {"content-type": "text/plain"}, "body": "<b>tok</b>"}
    )
    gw = _short_deadline_gateway(fn)
    try:
        reflected = _request(gw.port, "POST", "/webhooks/graph?validationToken=x", b"", [])
        missing = _request(gw.port, "POST", "/nowhere", b"", [])
    finally:
        gw.stop()
    assert reflected.status == 200 and reflected.read() == b"<b>tok</b>"
    assert reflected.getheader("X-Content-Type-Options") == "nosniff"
    assert missing.status == 404 and missing.getheader("X-Content-Type-Options") == "nosniff"
