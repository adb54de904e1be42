"""The web console over real HTTP (its uvicorn server on a free port) against in-process moto:
the safety checks (Host, same-origin, token, headers), the replay API, escaping and capping of
bodies, the deliveries/resource pages and the health data."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
import requests
from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
from webhook_pipeline.envelope import Envelope, sha256_hex
from webhook_pipeline.process.model import DeliveryRecord
from webhook_pipeline_ops.aws import Aws
from webhook_pipeline_ops.cli import build_parser
from webhook_pipeline_ops.console.app import create_app
from webhook_pipeline_ops.console.backend import Backend, Target
from webhook_pipeline_ops.console.bodies import MAX_SHOWN_BYTES, claim_check_prefix
from webhook_pipeline_ops.console.server import ConsoleServer, bind

from tests.helpers import create_deliveries_table

pytestmark = pytest.mark.integration

TOKEN = "test-token-0123456789"
STACK = "stk"


@dataclass
class Console:
    url: str
    host: str
    sqs: Any
    ddb: Any
    s3: Any
    main_url: str
    dlq_url: str
    table: str
    bucket: str

    def get(self, path: str, **headers: str) -> requests.Response:
        return requests.get(self.url + path, headers=headers, timeout=30)

    def post(self, path: str, body: Any, **headers: str) -> requests.Response:
        return requests.post(self.url + path, json=body, headers=headers, timeout=30)

    def replay(self, body: dict[str, Any]) -> requests.Response:
        return self.post("/api/replay", body, **{"Origin": self.url, "X-Console-Token": TOKEN})

    def wait_job(self, job_id: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.get(f"/api/replay/{job_id}").json()["job"]
            if job["state"] != "running":
                return job
            time.sleep(0.1)
        raise AssertionError("the replay did not finish")

    def count(self, url: str) -> int:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(
            attrs["ApproximateNumberOfMessagesNotVisible"]
        )

    def dead_letter(self, *bodies: str) -> None:
        """Into the DLQ through the redrive, as in production."""
        for body in bodies:
            self.sqs.send_message(QueueUrl=self.main_url, MessageBody=body)
        for _ in range(60):
            if self.count(self.main_url) == 0:
                return
            self.sqs.receive_message(
                QueueUrl=self.main_url, MaxNumberOfMessages=10, VisibilityTimeout=0
            )
        raise AssertionError("redrive did not happen")


def envelope(delivery_id: str, body: bytes | None = None, source: str = "stripe") -> str:
    raw = body if body is not None else json.dumps({"id": delivery_id}).encode()
    return Envelope(
        source=source,
        delivery_id=delivery_id,
        received_at=datetime(2026, 3, 1, 12, tzinfo=UTC),
        event_type="invoice.paid",
        body_b64=base64.b64encode(raw).decode(),
        body_size=len(raw),
        body_sha256=sha256_hex(raw),
    ).to_json()


def record(
    delivery_id: str,
    at: datetime,
    *,
    body: bytes = b"{}",
    resource: str | None = None,
    sequence: int | None = None,
    source: str = "stripe",
) -> DeliveryRecord:
    return DeliveryRecord(
        source=source,
        delivery_id=delivery_id,
        event_type="customer.updated",
        resource_key=resource,
        sequence=sequence,
        received_at=at,
        recorded_at=at + timedelta(milliseconds=30),
        expires_at=1_900_000_000,
        body_size=len(body),
        body_sha256=hashlib.sha256(body).hexdigest(),
        hook_pending=False,
        message_id=f"m-{delivery_id}",
        attempt_token=f"{delivery_id}".ljust(36, "0")[:36],
    )


@pytest.fixture
def console(aws: None) -> Iterator[Console]:
    sqs = boto3.client("sqs")
    dlq_url = sqs.create_queue(QueueName="stk-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    main_url = sqs.create_queue(
        QueueName="stk-main",
        Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"})
        },
    )["QueueUrl"]
    ddb = boto3.client("dynamodb")
    create_deliveries_table(ddb, "stk-deliveries")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="stk-payloads")
    args = build_parser().parse_args(
        [
            "console",
            "--queue-url",
            main_url,
            "--dlq-url",
            dlq_url,
            "--table",
            "stk-deliveries",
            "--payload-bucket",
            "stk-payloads",
        ]
    )
    backend = Backend(
        Aws(args), Target(local=False, label="stack stk", stack=STACK, region="us-east-1")
    )
    sock = bind("127.0.0.1", 0)
    host = f"127.0.0.1:{sock.getsockname()[1]}"
    server = ConsoleServer(create_app(backend, allowed_hosts=[host], token=TOKEN), sock)
    server.start()
    try:
        yield Console(
            f"http://{host}",
            host,
            sqs,
            ddb,
            s3,
            main_url,
            dlq_url,
            "stk-deliveries",
            "stk-payloads",
        )
    finally:
        server.stop()


def replay_threads() -> list[threading.Thread]:
    """The console's replay jobs running in this process (threads named ``replay-<job id>``)."""
    return [t for t in threading.enumerate() if t.name.startswith("replay-")]


def wait_until(predicate: Callable[[], Any], timeout: float = 30, what: str = "") -> None:
    """Poll ``predicate`` until truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# ------------------------------------------------------------------------------------- safety


def test_only_the_console_own_host_is_answered(console: Console) -> None:
    # Given a page whose name was re-pointed at 127.0.0.1 (DNS rebinding): its Host is foreign
    port = console.host.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", f"localhost:{port}", "127.0.0.1:1", ""):
        response = console.get("/deliveries", Host=host)
        assert response.status_code == 400, host
        assert "Host" in response.json()["error"]
    ok = console.get("/deliveries")
    assert ok.status_code == 200
    assert "script-src 'self'" in ok.headers["content-security-policy"]
    assert ok.headers["x-content-type-options"] == "nosniff"
    assert ok.headers["x-frame-options"] == "DENY"
    assert f'<meta name="console-token" content="{TOKEN}">' in ok.text


def test_cross_site_subresources_are_refused_but_links_work(console: Console) -> None:
    refused = console.get("/dlq", **{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"})
    assert refused.status_code == 403
    followed = console.get(
        "/deliveries", **{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
    )
    assert followed.status_code == 200


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "same-origin"),  # neither Origin nor Sec-Fetch-Site, no token
        ({"Origin": "SELF"}, "token"),
        ({"Origin": "SELF", "X-Console-Token": "guess"}, "token"),
        ({"Origin": "http://evil.example", "X-Console-Token": TOKEN}, "cross-origin"),
        ({"Origin": "SELF.evil.example", "X-Console-Token": TOKEN}, "cross-origin"),
        ({"Origin": "null", "X-Console-Token": TOKEN}, "cross-origin"),
        ({"X-Console-Token": TOKEN}, "same-origin"),
        ({"X-Console-Token": TOKEN, "Sec-Fetch-Site": "cross-site"}, "same-origin"),
        (
            {"Origin": "SELF", "X-Console-Token": TOKEN, "Sec-Fetch-Site": "same-site"},
            "cross-site",
        ),
    ],
)
def test_a_replay_needs_the_same_origin_and_the_token(
    console: Console, headers: dict[str, str], reason: str
) -> None:
    console.dead_letter(envelope("evt_1"))
    headers = {k: v.replace("SELF", console.url) for k, v in headers.items()}
    body = {"deliveries": [["stripe", "evt_1"]], "dry_run": False, "rate_per_second": None}
    response = console.post("/api/replay", body, **headers)
    assert response.status_code == 403
    assert reason in response.json()["error"]
    # A replay runs in a thread named replay-<job id>: had one started, it has finished here.
    wait_until(lambda: not replay_threads(), what="every replay thread to finish")
    assert console.count(console.dlq_url) == 1
    assert console.count(console.main_url) == 0


def test_only_post_changes_state(console: Console) -> None:
    response = requests.put(
        console.url + "/api/replay",
        json={},
        headers={"Origin": console.url, "X-Console-Token": TOKEN},
        timeout=10,
    )
    assert response.status_code == 405
    assert console.get("/api/replay").status_code == 405  # the route is POST only


# ------------------------------------------------------------------------------------- replay


def test_dry_run_then_replay_moves_only_the_selected_deliveries(console: Console) -> None:
    console.dead_letter(envelope("evt_1"), envelope("evt_2"), envelope("evt_3"), "{broken")
    picked = [["stripe", "evt_1"], ["stripe", "evt_3"], ["stripe", "evt_gone"]]

    # When dry-running the selection
    answer = console.replay({"deliveries": picked, "dry_run": True, "rate_per_second": 50})
    assert answer.status_code == 202
    job = console.wait_job(answer.json()["job"]["id"])
    # Then it lists what would move, what was skipped and why, and moves nothing
    assert job["state"] == "done"
    outcomes = {(r["delivery_id"], r["outcome"]) for r in job["results"]}
    assert ("evt_1", "would_replay") in outcomes and ("evt_3", "would_replay") in outcomes
    assert ("evt_2", "skipped") not in outcomes  # not selected: counted, not listed
    assert any(r["outcome"] == "malformed" for r in job["results"])
    assert job["not_found"] == [{"source": "stripe", "delivery_id": "evt_gone"}]
    assert (job["report"]["matched"], job["report"]["replayed"]) == (2, 0)
    assert (job["total"], job["done"]) == (3, 2)
    assert console.count(console.dlq_url) == 4
    assert console.count(console.main_url) == 0

    # When replaying it at a rate
    answer = console.replay({"deliveries": picked, "dry_run": False, "rate_per_second": 20})
    job = console.wait_job(answer.json()["job"]["id"])
    assert job["state"] == "done"
    assert (job["report"]["replayed"], job["report"]["failed"]) == (2, 0)
    moved = console.sqs.receive_message(QueueUrl=console.main_url, MaxNumberOfMessages=10)
    envelopes = [Envelope.from_json(m["Body"]) for m in moved["Messages"]]
    assert sorted(e.delivery_id for e in envelopes) == ["evt_1", "evt_3"]
    assert {e.gate for e in envelopes} == {"replayed"}
    assert console.count(console.dlq_url) == 2  # evt_2 and the broken one stay


def test_one_replay_at_a_time_and_bad_requests(console: Console) -> None:
    console.dead_letter(envelope("evt_1"), envelope("evt_2"), envelope("evt_3"))
    picked = [["stripe", "evt_1"], ["stripe", "evt_2"], ["stripe", "evt_3"]]
    first = console.replay({"deliveries": picked, "dry_run": False, "rate_per_second": 1})
    assert first.status_code == 202
    second = console.replay({"deliveries": picked, "dry_run": True, "rate_per_second": None})
    assert second.status_code == 409
    console.wait_job(first.json()["job"]["id"])
    for bad in (
        {"deliveries": [], "dry_run": True},
        {"deliveries": [["stripe"]], "dry_run": True},
        {"deliveries": [["stripe", "evt_1"]], "dry_run": "yes"},
        {"deliveries": [["stripe", "evt_1"]], "dry_run": True, "rate_per_second": -1},
        {"deliveries": [["stripe", "evt_1"]], "dry_run": True, "rate_per_second": "fast"},
        {"deliveries": [["stripe", "evt_1"]], "dry_run": True, "extra": 1},
        ["not", "an", "object"],
    ):
        answer = console.replay(bad)  # type: ignore[arg-type]
        assert answer.status_code == 400, bad
        assert answer.json()["error"]
    assert console.get("/api/replay/nope").status_code == 404


# ------------------------------------------------------------------------------------- bodies


def test_a_script_in_a_dlq_body_is_text(console: Console) -> None:
    hostile = b'{"note": "</pre><script>window.__pwned=1</script><img src=x onerror=alert(1)>"}'
    console.dead_letter(envelope("evt_x", body=hostile))
    page = console.get("/dlq")
    assert page.status_code == 200
    assert "<script>window.__pwned" not in page.text
    assert "<img src=x" not in page.text
    assert "&lt;/pre&gt;&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page.text
    assert page.text.count("<script") == 1  # the console's own script tag only


def test_a_claim_check_body_is_found_verified_capped_and_escaped(console: Console) -> None:
    store = DynamoDBDeliveryStore(console.ddb, console.table)
    at = datetime.now(UTC) - timedelta(minutes=5)
    big = b'{"x": "' + b"<script>alert(1)</script>" * 5000 + b'"}'  # 125 KB
    store.record(record("evt_big", at, body=big))
    prefix = claim_check_prefix("stripe", "evt_big")
    # another attempt's object with other bytes of the same size: not this delivery's body
    console.s3.put_object(Bucket=console.bucket, Key=prefix + "a-other", Body=b"x" * len(big))
    console.s3.put_object(Bucket=console.bucket, Key=prefix + "b-real", Body=big)
    page = console.get("/delivery?source=stripe&id=evt_big")
    assert page.status_code == 200
    assert f"s3://{console.bucket}/{prefix}b-real" in page.text
    assert f"showing the first {MAX_SHOWN_BYTES} characters" in page.text
    assert "<script>alert(1)" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert len(page.text) < len(big)  # capped: the whole body is not sent

    small = b'{"k": "<b>bold</b>", "n": [1, true, null]}'
    store.record(record("evt_small", at, body=small))
    console.s3.put_object(
        Bucket=console.bucket, Key=claim_check_prefix("stripe", "evt_small") + "t", Body=small
    )
    page = console.get("/delivery?source=stripe&id=evt_small")
    assert '<span class="j-str">&#34;&lt;b&gt;bold&lt;/b&gt;&#34;</span>' in page.text
    assert "<b>bold</b>" not in page.text

    store.record(record("evt_inline", at, body=b"{}"))
    page = console.get("/delivery?source=stripe&id=evt_inline")
    assert 'id="no-body"' in page.text


def test_a_body_with_an_escaped_lone_surrogate_is_shown_with_its_credential_redacted(
    console: Console,
) -> None:
    # a JSON string may hold an escaped lone surrogate: valid JSON, not encodable as UTF-8
    store = DynamoDBDeliveryStore(console.ddb, console.table)
    at = datetime.now(UTC) - timedelta(minutes=5)
    body = b'{"google_key":"gk-marker-value","lead_id":"L1","n":"x\\ud800"}'
    store.record(record("L1", at, body=body, source="google-ads"))
    console.s3.put_object(
        Bucket=console.bucket, Key=claim_check_prefix("google-ads", "L1") + "t", Body=body
    )
    page = console.get("/delivery?source=google-ads&id=L1")
    assert page.status_code == 200
    assert "could not be read" not in page.text
    assert "gk-marker-value" not in page.text
    assert "[redacted]" in page.text
    assert "&#34;L1&#34;" in page.text  # the JSON tree: the redacted body still parses
    assert "\\ud800" in page.text  # the lone surrogate shown as its escape


# ------------------------------------------------------------------------------------- pages


def test_deliveries_page_lists_newest_first_pages_and_filters(console: Console) -> None:
    store = DynamoDBDeliveryStore(console.ddb, console.table)
    now = datetime.now(UTC)
    for i in range(25):
        source = "github" if i % 5 == 0 else "stripe"
        at = now - timedelta(minutes=25 - i) + timedelta(seconds=30)
        store.record(record(f"d{i:02d}", at, source=source))

    def ids(html: str) -> list[str]:
        import re

        return re.findall(r'<tr data-delivery-id="([^"]+)"', html)

    first = console.get("/deliveries?limit=10")
    assert ids(first.text) == [f"d{i:02d}" for i in range(24, 14, -1)]
    import re

    older = re.search(r'id="older" href="([^"]+)"', first.text)
    assert older is not None
    second = console.get(older.group(1).replace("&amp;", "&"))
    assert ids(second.text) == [f"d{i:02d}" for i in range(14, 4, -1)]
    assert "« newest" in second.text

    github = console.get("/deliveries?source=github")
    assert ids(github.text) == ["d20", "d15", "d10", "d05", "d00"]
    rows = console.get("/deliveries?source=github&partial=rows")
    assert rows.text.lstrip().startswith("<tr") and "<html" not in rows.text
    assert ids(rows.text) == ids(github.text)
    narrow = console.get("/deliveries?window=15m")
    assert len(ids(narrow.text)) == 15

    assert console.get("/deliveries?outcome=lost").status_code == 400
    assert console.get("/deliveries?cursor=zzz").status_code == 400
    assert console.get("/deliveries?from=yesterday").status_code == 400
    missing = console.get("/delivery?source=nosuch&id=evt_x")
    assert missing.status_code == 404
    assert "source &#39;nosuch&#39; is unknown" in missing.text


def test_resource_page_shows_the_deliveries_in_sequence_order_stale_marked(
    console: Console,
) -> None:
    store = DynamoDBDeliveryStore(console.ddb, console.table)
    now = datetime.now(UTC) - timedelta(minutes=10)
    for n, sequence in enumerate((20, 10, 30, 25)):
        store.record(
            record(f"e{sequence}", now + timedelta(seconds=n), resource="cus_9", sequence=sequence)
        )
    page = console.get("/resource?source=stripe&key=cus_9")
    assert page.status_code == 200
    import re

    rows = re.findall(r'data-delivery-id="(e\d+)" data-outcome="(\w+)"', page.text)
    assert rows == [("e10", "stale"), ("e20", "applied"), ("e25", "stale"), ("e30", "applied")]
    assert '<dd id="watermark">30</dd>' in page.text
    # A stale row shows the watermark that made it stale (kept on its record, read by key: the
    # index does not hold it); received 20, 10, 30, 25: 10 found 20 and 25 found 30
    at_receipt = re.findall(r'<td class="num watermark-at-receipt">([^<]*)</td>', page.text)
    assert at_receipt == ["20", "-", "30", "-"]
    # and every column has its header
    history = page.text.split('<table class="list" id="history">', 1)[1].split("</table>", 1)[0]
    headers = re.findall(r"<th>([^<]*)</th>", history.split("</thead>", 1)[0])
    first_row = history.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert len(headers) == first_row.count("<td") == 7 and all(headers), headers


def test_an_aws_failure_is_a_page_not_a_traceback(console: Console) -> None:
    console.ddb.delete_table(TableName=console.table)
    page = console.get("/deliveries")
    assert page.status_code == 502
    assert "ResourceNotFoundException" in page.text
    assert "Traceback" not in page.text


# ------------------------------------------------------------------------------------- health


CONSOLE_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC"


def test_health_reads_the_stack_metrics_and_alarms(console: Console) -> None:
    cloudwatch = boto3.client("cloudwatch")
    now = datetime.now(UTC) - timedelta(minutes=2)
    service = [{"Name": "service", "Value": f"{STACK}-ingest"}]
    for name, value in (
        ("Accepted", 7),
        ("DuplicateDiscarded", 2),
        ("SignatureInvalid", 3),
        ("TimestampRejected", 1),
    ):
        cloudwatch.put_metric_data(
            Namespace="WebhookPipeline",
            MetricData=[
                {"MetricName": name, "Dimensions": service, "Value": value, "Timestamp": now}
            ],
        )
    cloudwatch.put_metric_alarm(
        AlarmName=f"{STACK}-DeadLetterQueueDepthAlarm-ABC",
        Namespace="AWS/SQS",
        MetricName="ApproximateNumberOfMessagesVisible",
        Statistic="Maximum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=0,
        ComparisonOperator="GreaterThanThreshold",
    )
    cloudwatch.put_metric_alarm(
        AlarmName="other-stack-Alarm",
        Namespace="AWS/SQS",
        MetricName="X",
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=0,
        ComparisonOperator="GreaterThanThreshold",
    )
    console.dead_letter(envelope("evt_1"))
    doc = console.get("/api/health").json()
    series = doc["series"]
    assert series["accepted"]["v"] == [7.0]
    assert series["duplicate"]["v"] == [2.0]
    assert series["rejected"]["v"] == [4.0]
    assert series["signature_invalid"]["hidden"] is True
    assert [a["name"] for a in doc["alarms"]] == ["DeadLetterQueueDepthAlarm-ABC"]
    assert re.fullmatch(CONSOLE_TIME, doc["alarms"][0]["since"]), doc["alarms"][0]["since"]
    queues = {q["queue"]: q for q in doc["queues"]}
    assert queues["dlq"]["depth"] == 1
    assert doc["errors"] == []
    # The local stack's alarms (moto: never evaluated) say so instead of "OK / Unchecked"
    args = build_parser().parse_args(
        ["console", "--queue-url", console.main_url, "--dlq-url", console.dlq_url,
         "--table", console.table]
    )  # fmt: skip
    local = Backend(Aws(args), Target(local=True, label="local", stack=STACK, region="us-east-1"))
    [alarm] = local.health()["alarms"]
    assert alarm["state"] == "NOT EVALUATED"
    assert alarm["reason"].startswith("not evaluated locally") and "moto" in alarm["reason"]


def test_every_page_shows_times_in_one_format(console: Console) -> None:
    store = DynamoDBDeliveryStore(console.ddb, console.table)
    store.record(record("evt_t", datetime.now(UTC) - timedelta(minutes=1), resource="cus_t",
                        sequence=1))  # fmt: skip
    stamp = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?: UTC|Z|[+-]\d\d:\d\d)?")
    for path in (
        "/delivery?source=stripe&id=evt_t",
        "/resource?source=stripe&key=cus_t",
        "/deliveries",
    ):
        found = [t.strip() for t in stamp.findall(console.get(path).text)]
        assert found and all(re.fullmatch(CONSOLE_TIME, t) for t in found), (path, found)


# ------------------------------------------------------------------------------------- command


def test_the_command_reads_a_stack_and_warns_loudly_beyond_loopback(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from webhook_pipeline_ops.cli import main
    from webhook_pipeline_ops.commands import console as command
    from webhook_pipeline_ops.console import server

    # Given a deployed stack's outputs (moto CloudFormation)
    sqs = boto3.client("sqs")
    main_url = sqs.create_queue(QueueName="prod-main")["QueueUrl"]
    dlq_url = sqs.create_queue(QueueName="prod-dlq")["QueueUrl"]
    create_deliveries_table(boto3.client("dynamodb"), "prod-deliveries")
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {
            "MainQueueUrl": {"Value": main_url},
            "DeadLetterQueueUrl": {"Value": dlq_url},
            "DeliveriesTableName": {"Value": "prod-deliveries"},
            "PayloadBucketName": {"Value": "prod-payloads"},
        },
    }
    boto3.client("cloudformation").create_stack(StackName="prod", TemplateBody=json.dumps(template))
    served: list[Any] = []
    monkeypatch.setattr(server.ConsoleServer, "run", lambda self: served.append(self))
    real_bind = server.bind
    monkeypatch.setattr(server, "bind", lambda host, port: real_bind("127.0.0.1", 0))

    # When it is started for the stack on loopback: no warning, the stack's resources
    args = build_parser().parse_args(["console", "--stack", "prod", "--region", "us-east-1"])
    backend = Backend(Aws(args), command.target_of(args, Aws(args)))
    assert (backend.table, backend.bucket, backend.target.stack) == (
        "prod-deliveries",
        "prod-payloads",
        "prod",
    )
    assert main(["console", "--stack", "prod", "--region", "us-east-1", "--port", "0"]) == 0
    out, err = capsys.readouterr()
    assert "stack prod (us-east-1)" in out and "WARNING" not in err

    # When told to listen beyond loopback: it warns, loudly, on stderr
    assert main(["console", "--stack", "prod", "--host", "192.0.2.10", "--port", "0"]) == 0
    _, err = capsys.readouterr()
    assert err.startswith("WARNING: the console listens on 192.0.2.10")
    assert "YOUR AWS credentials" in err
    assert len(served) == 2

    # And all interfaces need the Host name browsers will use
    assert main(["console", "--stack", "prod", "--host", "0.0.0.0"]) == 2
    _, err = capsys.readouterr()
    assert "needs --allowed-host" in err
