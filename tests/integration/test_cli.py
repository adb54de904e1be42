"""The operator CLI in-process (``main([...])``) against moto: stdout, stderr and exit codes."""

from __future__ import annotations

import base64
import io
import json
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from webhook_pipeline.envelope import Envelope, sha256_hex
from webhook_pipeline_ops import aws as ops_aws
from webhook_pipeline_ops.cli import main

from tests.helpers import create_deliveries_table

pytestmark = pytest.mark.integration

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run the CLI; return (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(autouse=True)
def no_resource_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ops_aws.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WEBHOOK_PIPELINE_LOCAL_DIR", str(tmp_path / "no-local-stack"))


def envelope(delivery_id: str, source: str = "stripe", event_type: str = "invoice.paid") -> str:
    body = json.dumps({"id": delivery_id}).encode()
    return Envelope(
        source=source,
        delivery_id=delivery_id,
        received_at=datetime(2024, 5, 1, 12, tzinfo=UTC),
        event_type=event_type,
        body_b64=base64.b64encode(body).decode(),
        body_size=len(body),
        body_sha256=sha256_hex(body),
    ).to_json()


class Stack:
    def __init__(self) -> None:
        self.sqs = boto3.client("sqs")
        self.dlq_url = self.sqs.create_queue(QueueName="pipeline-dlq")["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.main_url = self.sqs.create_queue(
            QueueName="pipeline-main",
            Attributes={
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "2"})
            },
        )["QueueUrl"]
        self.table = "pipeline-deliveries"
        create_deliveries_table(boto3.client("dynamodb"), self.table)

    @property
    def urls(self) -> list[str]:
        return ["--queue-url", self.main_url, "--dlq-url", self.dlq_url]

    def dead_letter(self, *bodies: str) -> None:
        """Put the bodies in the DLQ the way it really happens: through redrive."""
        for body in bodies:
            self.sqs.send_message(QueueUrl=self.main_url, MessageBody=body)
        for _ in range(50):
            if self.count(self.main_url, "ApproximateNumberOfMessages") == 0:
                return
            self.sqs.receive_message(
                QueueUrl=self.main_url, MaxNumberOfMessages=10, VisibilityTimeout=0
            )
        raise AssertionError("redrive did not happen")

    def count(self, url: str, attribute: str = "ApproximateNumberOfMessages") -> int:
        attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[attribute])
        return int(attrs["Attributes"][attribute])


@pytest.fixture
def stack(aws: None) -> Stack:
    return Stack()


# ------------------------------------------------------------------------- replay


def test_replay_dry_run_prints_what_would_move_and_moves_nothing(cli: Run, stack: Stack) -> None:
    stack.dead_letter(envelope("evt_1"), envelope("gh_1", source="github", event_type="push"))
    code, out, _ = cli("replay", *stack.urls, "--dry-run", "--source", "stripe")
    assert code == 0
    assert "Would replay 1 deliveries:" in out
    assert "evt_1" in out
    assert "gh_1" not in out
    assert "examined 2, matched 1, replayed 0, skipped 1" in out
    assert stack.count(stack.main_url) == 0
    assert stack.count(stack.dlq_url) == 2


def test_replay_json_with_resources_from_the_environment(
    cli: Run, stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBHOOK_PIPELINE_QUEUE_URL", stack.main_url)
    monkeypatch.setenv("WEBHOOK_PIPELINE_DLQ_URL", stack.dlq_url)
    stack.dead_letter(envelope("evt_1"), envelope("evt_2", event_type="invoice.created"))
    code, out, _ = cli(
        "replay", "--json", "--event-type", "invoice.paid", "--rate", "50", "--no-progress"
    )
    assert code == 0
    report = json.loads(out)
    assert (report["examined"], report["matched"], report["replayed"]) == (2, 1, 1)
    assert report["remaining"] == 1
    assert report["complete"] is True
    [moved] = stack.sqs.receive_message(QueueUrl=stack.main_url)["Messages"]
    assert Envelope.from_json(moved["Body"]).gate == "replayed"


def test_replay_json_dry_run_lists_every_match(cli: Run, stack: Stack) -> None:
    stack.dead_letter(*(envelope(f"evt_{i}") for i in range(3)))
    code, out, _ = cli("replay", *stack.urls, "--dry-run", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["dry_run"] is True
    assert sorted(i["delivery_id"] for i in report["would_replay"]) == ["evt_0", "evt_1", "evt_2"]


def test_replay_dry_run_over_more_than_a_hundred_matches_moves_nothing(
    cli: Run, stack: Stack
) -> None:
    count = 125  # more than the 100 a report lists and than the default --max-messages
    for start in range(0, count, 10):  # straight into the DLQ: redrive of 125 takes long
        entries = [
            {"Id": str(i), "MessageBody": envelope(f"evt_{i}")}
            for i in range(start, min(start + 10, count))
        ]
        stack.sqs.send_message_batch(QueueUrl=stack.dlq_url, Entries=entries)
    code, out, _ = cli("replay", *stack.urls, "--dry-run", "--max-messages", "500", "--json")
    assert code == 0
    report = json.loads(out)
    assert (report["matched"], report["replayed"]) == (count, 0)
    assert len(report["would_replay"]) == count
    assert stack.count(stack.main_url) == 0
    assert stack.count(stack.dlq_url) == count


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--received-after", "2024-05-02", "--received-before", "2024-05-01"],
            "received_after must be earlier than received_before",
        ),
        (["--max-messages", "-3"], "max_messages"),
        (["--rate", "-1"], "rate_per_second"),
        (["--received-after", "last tuesday"], "filter.received_after"),
    ],
)
def test_replay_bad_input_is_a_usage_error(
    cli: Run, stack: Stack, argv: list[str], message: str
) -> None:
    stack.dead_letter(envelope("evt_1"))
    code, out, err = cli("replay", *stack.urls, *argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert out == ""
    assert stack.count(stack.dlq_url) == 1


def test_replay_with_a_failed_send_exits_1_and_still_reports(cli: Run, stack: Stack) -> None:
    stack.dead_letter(envelope("evt_1"))
    stack.sqs.delete_queue(QueueUrl=stack.main_url)
    code, out, _ = cli("replay", *stack.urls, "--json")
    assert code == 1
    report = json.loads(out)
    assert (report["replayed"], report["failed"]) == (0, 1)
    assert stack.count(stack.dlq_url) == 1


def test_replay_via_function(cli: Run, stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    client = boto3.client("lambda")
    stubber = Stubber(client)
    report = {
        "examined": 4,
        "matched": 2,
        "replayed": 0,
        "skipped": 2,
        "failed": 0,
        "malformed": 0,
        "delete_failed": 0,
        "dry_run": True,
        "remaining": 4,
        "complete": True,
        "stopped": "drained",
        "would_replay": [],
    }
    raw = json.dumps(report).encode()
    stubber.add_response(
        "invoke",
        {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(raw), len(raw))},
        {
            "FunctionName": "replay-fn",
            "InvocationType": "RequestResponse",
            "Payload": json.dumps(
                {"max_messages": 100, "dry_run": True, "filter": {"source": "stripe"}}
            ).encode(),
        },
    )
    error = json.dumps(
        {"errorType": "InvalidReplayRequestError", "errorMessage": "invalid replay request: x"}
    ).encode()
    stubber.add_response(
        "invoke",
        {
            "StatusCode": 200,
            "FunctionError": "Unhandled",
            "Payload": StreamingBody(io.BytesIO(error), len(error)),
        },
    )
    stubber.activate()
    real_client = ops_aws.Aws.client
    monkeypatch.setattr(
        ops_aws.Aws,
        "client",
        lambda self, service, config=None: (
            client if service == "lambda" else real_client(self, service, config)
        ),
    )
    args = ["replay", "--via-function", "--function-name", "replay-fn", "--dry-run"]
    code, out, _ = cli(*args, "--source", "stripe", "--json")
    assert code == 0
    assert json.loads(out) == report
    code, _, err = cli(*args)
    assert code == 2
    assert "InvalidReplayRequestError: invalid replay request: x" in err
    stubber.assert_no_pending_responses()


def test_replay_via_function_needs_a_function_name(cli: Run, stack: Stack) -> None:
    code, _, err = cli("replay", "--via-function", "--dry-run")
    assert code == 1
    assert "no replay function name" in err


# ------------------------------------------------------------------------- dlq peek


def test_dlq_peek_shows_who_why_and_age_without_consuming(cli: Run, stack: Stack) -> None:
    stack.dead_letter(envelope("evt_1"), "{broken")
    code, out, _ = cli("dlq", "peek", "--dlq-url", stack.dlq_url)
    assert code == 0
    header = out.splitlines()[0]
    for column in ("SOURCE", "DELIVERY_ID", "RECEIVE_COUNT", "REASON", "AGE"):
        assert column in header
    assert "evt_1" in out
    assert "retries exhausted" in out
    assert "malformed" in out
    assert "invoice.paid" in out
    assert "{broken" not in out  # no bodies unless asked
    # not consumed: both visible again
    assert stack.count(stack.dlq_url) == 2
    assert stack.count(stack.dlq_url, "ApproximateNumberOfMessagesNotVisible") == 0


def test_dlq_peek_json_and_show_body(cli: Run, stack: Stack) -> None:
    stack.dead_letter(envelope("evt_1"))
    code, out, _ = cli("dlq", "peek", "--dlq-url", stack.dlq_url, "--json")
    assert code == 0
    [row] = json.loads(out)
    assert row["source"] == "stripe"
    assert row["delivery_id"] == "evt_1"
    assert row["receive_count"] >= 3
    assert "body" not in row
    code, out, _ = cli("dlq", "peek", "--dlq-url", stack.dlq_url, "--json", "--show-body")
    [row] = json.loads(out)
    assert json.loads(row["payload"]) == {"id": "evt_1"}
    assert Envelope.from_json(row["body"]).delivery_id == "evt_1"
    assert stack.count(stack.dlq_url) == 1


def test_dlq_peek_shows_no_body_content_of_malformed_envelopes(cli: Run, stack: Stack) -> None:
    from webhook_pipeline.adapters.dynamodb import DynamoDBDeliveryStore
    from webhook_pipeline.hooks import HookRegistry
    from webhook_pipeline.process.model import Message
    from webhook_pipeline.process.service import ProcessorService

    # Given malformed envelopes carrying a marker in fields and body, dead-lettered through
    # redrive, each with the failure note the processor writes for it
    marker = "BODY-MARKER-7f3a91"
    good = json.loads(envelope("evt_mk"))
    stack.dead_letter(
        json.dumps(dict(good, unexpected=marker)),
        json.dumps(dict(good, sequence=marker, resource_key="cus_1")),
        json.dumps(dict(good, body_b64=base64.b64encode(marker.encode()).decode())),
    )
    sqs = stack.sqs
    seen = sqs.receive_message(QueueUrl=stack.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0)[
        "Messages"
    ]
    store = DynamoDBDeliveryStore(boto3.client("dynamodb"), stack.table)
    service = ProcessorService(store, payloads=None, hooks=HookRegistry())  # type: ignore[arg-type]
    results = service.process_batch(
        [Message(message_id=m["MessageId"], body=m["Body"], receive_count=3) for m in seen]
    )
    assert len(results) == 3 and all(r.outcome.value == "malformed" for r in results.values())
    assert all(store.get_failure(m["MessageId"]) for m in seen)
    # When the DLQ is peeked, as a table and as JSON (without --show-body)
    table_args = ("--dlq-url", stack.dlq_url, "--table", stack.table)
    code, text, _ = cli("dlq", "peek", *table_args)
    assert code == 0 and text.count("malformed") >= 3
    code, doc, _ = cli("dlq", "peek", *table_args, "--json")
    assert code == 0 and len(json.loads(doc)) == 3
    # Then neither shows the marker nor its base64 form
    hidden = (marker, base64.b64encode(marker.encode()).decode()[:16])
    assert [h for h in hidden if h in text + doc] == []


def test_dlq_peek_of_an_empty_queue(cli: Run, stack: Stack) -> None:
    code, out, _ = cli("dlq", "peek", "--dlq-url", stack.dlq_url)
    assert code == 0
    assert "empty" in out


# ------------------------------------------------------------------------- status


def test_status_shows_depth_and_in_flight_of_both_queues(cli: Run, stack: Stack) -> None:
    stack.dead_letter(envelope("evt_1"))
    stack.sqs.send_message(QueueUrl=stack.main_url, MessageBody=envelope("evt_2"))
    stack.sqs.send_message(QueueUrl=stack.main_url, MessageBody=envelope("evt_3"))
    stack.sqs.receive_message(QueueUrl=stack.main_url, VisibilityTimeout=300)  # one in flight
    code, out, _ = cli("status", *stack.urls, "--json")
    assert code == 0
    status = json.loads(out)
    assert (status["main"]["depth"], status["main"]["in_flight"]) == (1, 1)
    assert (status["dlq"]["depth"], status["dlq"]["in_flight"]) == (1, 0)
    assert status["main"]["oldest_age_seconds"] is None  # moto has no SQS metrics
    code, out, _ = cli("status", *stack.urls)
    assert code == 0
    assert "pipeline-main" in out
    assert "dlq peek" in out  # the DLQ is not empty: a hint


def test_status_from_stack_outputs(cli: Run, stack: Stack) -> None:
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {
            "MainQueueUrl": {"Value": stack.main_url},
            "DeadLetterQueueUrl": {"Value": stack.dlq_url},
            "DeliveriesTableName": {"Value": stack.table},
        },
    }
    boto3.client("cloudformation").create_stack(
        StackName="pipeline", TemplateBody=json.dumps(template)
    )
    code, out, _ = cli("status", "--stack", "pipeline", "--json")
    assert code == 0
    assert json.loads(out)["dlq"]["name"] == "pipeline-dlq"
    code, _, err = cli("status", "--stack", "nope")
    assert code == 1
    assert "nope" in err
    assert "Traceback" not in err


def test_status_from_the_local_stack_outputs_file(
    cli: Run, stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "outputs.json").write_text(
        json.dumps({"MainQueueUrl": stack.main_url, "DeadLetterQueueUrl": stack.dlq_url})
    )
    monkeypatch.setenv("WEBHOOK_PIPELINE_LOCAL_DIR", str(tmp_path))
    code, out, _ = cli("status", "--local", "--json")
    assert code == 0
    assert set(json.loads(out)) == {"main", "dlq"}


def test_local_without_a_running_local_stack(cli: Run, stack: Stack) -> None:
    code, _, err = cli("status", "--local")
    assert code == 1
    assert "start the local stack first" in err


# ------------------------------------------------------------------------- records


def test_deliveries_and_resources_get(cli: Run, stack: Stack) -> None:
    from webhook_pipeline.adapters.dynamodb_items import delivery_key, resource_key

    ddb = boto3.client("dynamodb")
    ddb.put_item(
        TableName=stack.table,
        Item={
            **delivery_key("stripe", "evt_1"),
            "outcome": {"S": "applied"},
            "sequence": {"N": "100"},
        },
    )
    ddb.put_item(
        TableName=stack.table, Item={**resource_key("stripe", "in_1"), "watermark": {"N": "100"}}
    )
    code, out, _ = cli("deliveries", "get", "stripe", "evt_1", "--table", stack.table)
    assert code == 0
    item = json.loads(out)
    assert (item["outcome"], item["sequence"]) == ("applied", 100)
    code, out, _ = cli("resources", "get", "stripe", "in_1", "--table", stack.table)
    assert code == 0
    assert json.loads(out)["watermark"] == 100
    code, _, err = cli("deliveries", "get", "stripe", "evt_404", "--table", stack.table)
    assert code == 1
    assert "no delivery recorded" in err


def test_records_need_a_table(cli: Run, stack: Stack) -> None:
    code, _, err = cli("deliveries", "get", "stripe", "evt_1")
    assert code == 1
    assert "no deliveries table name" in err
    assert "WEBHOOK_PIPELINE_TABLE" in err


# ------------------------------------------------------------------------- errors


def test_missing_queue_url_is_a_clear_error(cli: Run, stack: Stack) -> None:
    code, out, err = cli("replay", "--dlq-url", stack.dlq_url)
    assert code == 1
    assert out == ""
    assert err.strip() == (
        "webhook-pipeline: error: no main queue URL: give it with --queue-url, --stack, --local "
        "or WEBHOOK_PIPELINE_QUEUE_URL"
    )


def test_connection_refused_is_a_clear_error(cli: Run) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    url = f"http://127.0.0.1:{port}"
    code, _, err = cli("status", "--endpoint-url", url, "--queue-url", f"{url}/123/main")
    assert code == 1
    assert "Traceback" not in err
    assert "cannot connect" in err


def test_usage_errors_exit_2(cli: Run) -> None:
    assert cli("no-such-command")[0] == 2
    assert cli("deliveries", "get", "only-source")[0] == 2
    assert cli("replay", "--max-messages", "many")[0] == 2
    assert cli("dlq")[0] == 2
    for rate in ("0", "1.5", "-0.1"):  # checked before any stack starts
        code, _, err = cli("chaos", "--throttle-rate", rate, "--count", "1")
        assert code == 2 and "--throttle-rate" in err
    code, _, err = cli("chaos", "--faults", "disk-full")
    assert code == 2 and "unknown fault kind" in err


def test_help_exits_0(cli: Run) -> None:
    code, out, _ = cli("--help")
    assert code == 0
    for command in ("replay", "dlq", "status", "deliveries", "resources"):
        assert command in out
