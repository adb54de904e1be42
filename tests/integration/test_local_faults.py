"""The local stack's fault switches (``webhook_pipeline_ops.local.faults``), each in the process
that obeys it: a real moto server process answering with throttling errors, real function worker
processes exiting at a crash point, the ledger hook failing while its switch is on.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from webhook_pipeline.hooks import Effects, HookEvent
from webhook_pipeline.settings import AwsClientSettings
from webhook_pipeline_ops.commands.replay import lambda_config
from webhook_pipeline_ops.local.faults import (
    CRASH_EXIT_STATUS,
    FAULTS_DIR_VARIABLE,
    FaultSwitches,
    InjectedHookFailure,
)
from webhook_pipeline_ops.local.moto_server import MotoProcess
from webhook_pipeline_ops.local.resources import FunctionSpec
from webhook_pipeline_ops.local.runtime import FunctionError, LocalFunction

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@pytest.fixture
def moto(tmp_path: Path) -> Iterator[tuple[str, FaultSwitches]]:
    switches = FaultSwitches(tmp_path / "faults")
    server = MotoProcess(port=0, faults_dir=switches.directory)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", switches
    finally:
        server.stop()


def _client(service: str, endpoint: str) -> Any:
    make: Any = boto3.client
    return make(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
        **CREDENTIALS,
    )


def _transact(ddb: Any, n: int) -> dict[str, Any]:
    return ddb.transact_write_items(  # type: ignore[no-any-return]
        TransactItems=[
            {"Put": {"TableName": "t", "Item": {"pk": {"S": f"k{n}-{i}"}}}} for i in range(2)
        ]
    )


def test_the_throttle_switch_answers_as_dynamodb_and_sqs_do_then_lets_requests_through(
    moto: tuple[str, FaultSwitches],
) -> None:
    endpoint, switches = moto
    ddb, sqs = _client("dynamodb", endpoint), _client("sqs", endpoint)
    ddb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    queue_url = sqs.create_queue(QueueName="q")["QueueUrl"]
    switches.arm("throttle", {"rate": 1.0, "until": time.time() + 120, "seed": 3})
    codes: Counter[str] = Counter()
    for n in range(30):
        with pytest.raises(ClientError) as caught:
            _transact(ddb, n)
        err = caught.value.response
        codes[err["Error"]["Code"]] += 1
        if err["Error"]["Code"] == "TransactionCanceledException":
            reasons = [r["Code"] for r in err["CancellationReasons"]]
            assert reasons == ["TransactionConflict", "None"]  # one reason per item, as DynamoDB
    assert set(codes) == {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "TransactionCanceledException",
    }
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=queue_url, MessageBody="x")
    assert caught.value.response["Error"]["Code"] == "RequestThrottled"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # Other operations are never throttled; nothing throttled reached moto.
    assert ddb.scan(TableName="t")["Items"] == []
    assert (
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"][
            "ApproximateNumberOfMessages"
        ]
        == "0"
    )
    records = switches.records("throttled")
    assert len(records) == 31
    assert Counter(r["op"] for r in records) == {"TransactWriteItems": 30, "SendMessage": 1}

    switches.disarm("throttle")
    _transact(ddb, 99)
    sqs.send_message(QueueUrl=queue_url, MessageBody="x")
    assert len(ddb.scan(TableName="t")["Items"]) == 2
    assert len(switches.records("throttled")) == 31


def test_the_throttle_switch_keeps_its_rate_and_ends_at_its_deadline(
    moto: tuple[str, FaultSwitches],
) -> None:
    endpoint, switches = moto
    ddb = _client("dynamodb", endpoint)
    switches.arm("throttle", {"rate": 0.5, "until": time.time() + 120, "seed": 1})
    throttled = 0
    for n in range(200):
        try:
            _transact(ddb, n)
        except ClientError as exc:
            # The table does not exist: what reached moto is a ResourceNotFoundException.
            throttled += exc.response["Error"]["Code"] != "ResourceNotFoundException"
    assert 70 <= throttled <= 130  # a share of 0.5 of 200, seeded
    switches.arm("throttle", {"rate": 1.0, "until": time.time() - 1, "seed": 1})
    with pytest.raises(ClientError) as caught:
        _transact(ddb, 0)
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"


HANDLER = """
import os
from pathlib import Path

import boto3
from botocore.config import Config


def handler(event, context):
    if event.get("write"):
        Path(event["write"]).write_text(str(os.getpid()))
        return {"pid": os.getpid()}
    ddb = boto3.client(
        "dynamodb", endpoint_url="http://127.0.0.1:9", region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=1),
    )
    item = {"Put": {"TableName": "t", "Item": {"pk": {"S": "a"}}}}
    ddb.transact_write_items(TransactItems=[item])
"""


@pytest.fixture
def processor(tmp_path: Path) -> Iterator[tuple[LocalFunction, FaultSwitches]]:
    code = tmp_path / "code"
    code.mkdir()
    (code / "app.py").write_text(HANDLER)
    switches = FaultSwitches(tmp_path / "faults")
    spec = FunctionSpec(
        "ProcessorFunction", "stack-processor", code, "app.handler", 10, 128, {}, [], [], []
    )
    fn = LocalFunction(
        spec, {FAULTS_DIR_VARIABLE: str(switches.directory)}, "us-east-1", concurrency=1
    )
    try:
        yield fn, switches
    finally:
        fn.stop()


def test_crash_before_write_ends_the_worker_before_its_transaction_is_sent(
    processor: tuple[LocalFunction, FaultSwitches],
) -> None:
    fn, switches = processor
    fn.load()
    (pid,) = fn.pids
    # Without the switch the transaction is sent (and fails: nothing listens on port 9).
    with pytest.raises(FunctionError) as caught:
        fn.invoke({})
    assert caught.value.error_type == "EndpointConnectionError"
    # A switch for another function is left for that function's workers.
    switches.arm("crash-before-write", {"function": "IngestFunction"})
    with pytest.raises(FunctionError) as caught:
        fn.invoke({})
    assert caught.value.error_type == "EndpointConnectionError"
    assert switches.read("crash-before-write") == {"function": "IngestFunction"}

    switches.arm("crash-before-write", {"function": "ProcessorFunction"})
    with pytest.raises(FunctionError) as caught:
        fn.invoke({})
    assert caught.value.error_type == "Runtime.ExitError"
    assert switches.takers("crash-before-write") == [pid]
    assert switches.read("crash-before-write") is None  # one-shot
    # The execution environment was replaced; the next invocation runs normally.
    assert fn.pids != [pid]
    assert fn.invoke({"write": str(switches.directory / "w")})["pid"] == fn.pids[0]


def test_crash_after_write_ends_the_worker_after_its_handler_returned(
    processor: tuple[LocalFunction, FaultSwitches], tmp_path: Path
) -> None:
    fn, switches = processor
    fn.load()
    (pid,) = fn.pids
    switches.arm("crash-after-write", {"function": "ProcessorFunction"})
    written = tmp_path / "written"
    with pytest.raises(FunctionError) as caught:
        fn.invoke({"write": str(written)})
    assert caught.value.error_type == "Runtime.ExitError"
    assert written.read_text() == str(pid)  # the handler's write happened; its answer is lost
    assert switches.takers("crash-after-write") == [pid]
    assert fn.invoke({"write": str(written)})["pid"] != pid
    assert CRASH_EXIT_STATUS == 137


def test_the_ledger_hook_fails_while_its_switch_is_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Imported here, not at collection: importing the ledger registers its hook for every
    # source, and the registry the conftest fixture restores after each test is the one it saw
    # when the test began.
    from webhook_pipeline_ops import ledger

    switches = FaultSwitches(tmp_path / "faults")
    monkeypatch.setattr(ledger, "_SWITCHES", switches)
    monkeypatch.setenv("TABLE_NAME", "deliveries")
    event = HookEvent(
        source="stripe",
        delivery_id="evt_1",
        event_type="invoice.paid",
        resource_key=None,
        sequence=None,
        received_at=datetime(2026, 12, 1, tzinfo=UTC),
    )
    assert isinstance(ledger.append_entry(event), Effects)
    switches.arm("hook-failing", {"until": time.time() + 60})
    with pytest.raises(InjectedHookFailure):
        ledger.append_entry(event)
    assert switches.records("hook-failures") == [
        {"source": "stripe", "delivery_id": "evt_1", "pid": os.getpid()}
    ]
    switches.arm("hook-failing", {"until": time.time() - 1})  # the window is over
    assert isinstance(ledger.append_entry(event), Effects)
    assert len(switches.records("hook-failures")) == 1


@pytest.mark.parametrize("attempts", [1, 3])
def test_aws_max_attempts_is_the_number_of_requests_a_throttled_call_makes(
    moto: tuple[str, FaultSwitches], attempts: int
) -> None:
    """``AWS_MAX_ATTEMPTS`` counts every attempt, the first included: the time budget of
    ``worst_call_seconds`` (ingest's 1 attempt) holds only then."""
    endpoint, switches = moto
    config = AwsClientSettings(aws_max_attempts=attempts).botocore_config()
    make: Any = boto3.client
    sqs = make("sqs", endpoint_url=endpoint, region_name="us-east-1", config=config, **CREDENTIALS)
    switches.arm("throttle", {"rate": 1.0, "until": time.time() + 120, "seed": 1})
    with pytest.raises(ClientError):
        sqs.send_message(QueueUrl=f"{endpoint}/123456789012/q", MessageBody="x")
    assert len(switches.records("throttled")) == attempts


def test_the_replay_command_never_retries_a_lambda_invocation() -> None:
    """A retried replay invocation could replay twice as much: one request, whatever the error."""
    seen: list[str] = []

    class Throttling(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.path)
            body = b'{"message": "Rate exceeded"}'
            self.send_response(429)
            self.send_header("x-amzn-ErrorType", "TooManyRequestsException")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Throttling)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        make: Any = boto3.client
        client = make(
            "lambda",
            endpoint_url=f"http://127.0.0.1:{server.server_port}",
            region_name="us-east-1",
            config=lambda_config(),
            **CREDENTIALS,
        )
        with pytest.raises(ClientError) as caught:
            client.invoke(FunctionName="replay", Payload=b"{}")
        assert caught.value.response["Error"]["Code"] == "TooManyRequestsException"
    finally:
        server.shutdown()
        server.server_close()
    assert len(seen) == 1
