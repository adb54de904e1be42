"""`sam build` + `sam local invoke` of the real functions inside a Lambda runtime container.

Needs Docker, so it runs only with ``RUN_DOCKER_TESTS=1`` (``make test-docker``; ``.ci/run`` sets it
when Docker can be started). Otherwise every test here is skipped with the reason (shown by
``pytest -ra``). With ``RUN_DOCKER_TESTS=1`` and no working Docker, it runs
``../shared/tools/lambda-image.sh`` (starts dockerd, builds ``local/lambda-python:3.13``) first;
when Docker or the image still cannot be prepared every test here FAILS (asked for, not run:
never a green skip).

What it starts, and stops again by PID: a ``redis-server`` and a ``moto_server`` both listening
on 0.0.0.0 (free ports), so the function container reaches them as ``host.docker.internal``
(``--add-host host.docker.internal:host-gateway``). It creates the queues, table, bucket and
the GitHub development secret there, writes an env-vars file derived from
``env/local-invoke.json`` with those ports, builds for x86_64 and invokes:

- IngestFunction with ``events/ingest-github.json`` (signed with the development secret; GitHub
  signs no timestamp, so the committed event stays valid) -> 202, the same event again -> 200
  (duplicate at the gate: the container really talks to Redis), and
  ``events/ingest-bad-signature.json`` -> 401, with exactly one message on the queue;
- ProcessorFunction with ``events/sqs-new-delivery.json`` -> ``{"batchItemFailures": []}`` and
  ``events/sqs-malformed.json`` -> exactly its two poison ``messageId`` values;
- ArchiverFunction with ``events/archiver-batch.json`` -> ``{"batchItemFailures": []}`` and
  exactly one object per (source, hour) in the archive bucket, holding each delivery's identity,
  outcome and exact body bytes (the non-UTF-8 one too);
- ReplayFunction with ``events/replay-from-archive-dry-run.json`` (after the archiver, and with
  delivery records put for three of the four archived deliveries) -> a complete dry-run report
  counting exactly the two ``applied`` ones.

And the documented path: ``webhook-pipeline local run --for-containers`` (free gateway port, its
own redis-server, stopped by its PID) as the backend, with its ``sam-env.json`` as ``--env-vars``:
ingest 202 then 200, processor ``{"batchItemFailures": []}``, replay a complete dry-run report.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import redis

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
IMAGE = "local/lambda-python:3.13"
LAMBDA_IMAGE_SCRIPT = ROOT.parent / "shared" / "tools" / "lambda-image.sh"
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
PREFIX = "webhook-pipeline/local/"
NAMES = {
    "main": "webhook-pipeline-local-main",
    "dlq": "webhook-pipeline-local-dlq",
    "table": "webhook-pipeline-local-deliveries",
    "bucket": "webhook-pipeline-local-payloads",
    "archive_queue": "webhook-pipeline-local-archive",
    "archive_bucket": "webhook-pipeline-local-archive",
}
CONTAINER_HOST = "host.docker.internal"


# ------------------------------------------------------------------------------ Docker or skip


def _docker_works() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


def _image_present() -> bool:
    probe = subprocess.run(
        ["docker", "image", "inspect", IMAGE],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return probe.returncode == 0


@pytest.fixture(scope="module")
def docker() -> None:
    """Docker and the offline Lambda image. Without ``RUN_DOCKER_TESTS=1``: a skip that says why;
    with it, a failure when Docker or the image cannot be prepared (asked for, not run)."""
    if os.environ.get("RUN_DOCKER_TESTS") != "1":
        pytest.skip(
            "sam local invoke tests need Docker: set RUN_DOCKER_TESTS=1 (make test-docker) "
            "to run them; .ci/run does so when Docker can be started"
        )
    # Asked to run: from here every missing piece is a failure, never a green skip.
    if not (_docker_works() and _image_present()):
        if not LAMBDA_IMAGE_SCRIPT.is_file():
            pytest.fail(
                f"RUN_DOCKER_TESTS=1 but Docker is not usable and {LAMBDA_IMAGE_SCRIPT} is missing"
            )
        built = subprocess.run(
            ["bash", str(LAMBDA_IMAGE_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if built.returncode != 0 or not _docker_works():
            pytest.fail(
                f"RUN_DOCKER_TESTS=1 but Docker could not be started or {IMAGE} not built by "
                f"{LAMBDA_IMAGE_SCRIPT} (exit {built.returncode}): "
                f"{(built.stderr or built.stdout)[-600:]}"
            )
    if not _image_present():
        pytest.fail(f"RUN_DOCKER_TESTS=1 but {IMAGE} is not present after {LAMBDA_IMAGE_SCRIPT}")


# ------------------------------------------------------------------------------ host services


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def redis_port(docker: None) -> Iterator[int]:
    """A redis-server on 0.0.0.0 (reachable from the function container), stopped after."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (.ci/run installs it with apt-get)")
    port = _free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "0.0.0.0",
            "--protected-mode",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port, socket_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    pytest.fail(f"redis-server on port {port} did not answer")
                time.sleep(0.05)
        yield port
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def moto_port(docker: None) -> Iterator[int]:
    """A moto server on 0.0.0.0 (reachable from the function container), stopped after."""
    port = _free_port()
    binary = VENV_BIN / "moto_server"
    cmd = [str(binary)] if binary.exists() else [sys.executable, "-m", "moto.server"]
    process = subprocess.Popen(
        [*cmd, "-H", "0.0.0.0", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto_server on port {port} did not start")
                time.sleep(0.1)
        yield port
    finally:
        _stop(process)


def _client(service: str, port: int) -> Any:
    return boto3.client(service, region_name=REGION, endpoint_url=f"http://127.0.0.1:{port}")


def _template_table_schema() -> dict[str, Any]:
    from cfnlint.decode import cfn_yaml

    table = cfn_yaml.load(str(ROOT / "template.yaml"))["Resources"]["DeliveriesTable"]
    p = json.loads(json.dumps(table["Properties"]))
    return {
        "KeySchema": p["KeySchema"],
        "AttributeDefinitions": p["AttributeDefinitions"],
        "GlobalSecondaryIndexes": p["GlobalSecondaryIndexes"],
    }


@pytest.fixture(scope="module")
def aws_resources(moto_port: int) -> dict[str, str]:
    """The resources the functions use, created in the moto server; their container-side names."""
    from webhook_pipeline_ops.simulator.deliveries import DEV_SECRETS

    sqs = _client("sqs", moto_port)
    dlq_url = sqs.create_queue(QueueName=NAMES["dlq"])["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"})
    sqs.create_queue(
        QueueName=NAMES["main"], Attributes={"VisibilityTimeout": "390", "RedrivePolicy": redrive}
    )
    _client("dynamodb", moto_port).create_table(
        TableName=NAMES["table"], BillingMode="PAY_PER_REQUEST", **_template_table_schema()
    )
    sqs.create_queue(QueueName=NAMES["archive_queue"], Attributes={"VisibilityTimeout": "1020"})
    _client("s3", moto_port).create_bucket(Bucket=NAMES["bucket"])
    _client("s3", moto_port).create_bucket(Bucket=NAMES["archive_bucket"])
    _client("secretsmanager", moto_port).create_secret(
        Name=f"{PREFIX}github", SecretString=DEV_SECRETS["github"]
    )
    base = f"http://{CONTAINER_HOST}:{moto_port}"
    return {
        "endpoint": base,
        "main_url": f"{base}/{ACCOUNT}/{NAMES['main']}",
        "dlq_url": f"{base}/{ACCOUNT}/{NAMES['dlq']}",
        "archive_queue_url": f"{base}/{ACCOUNT}/{NAMES['archive_queue']}",
    }


@pytest.fixture(scope="module")
def env_vars_file(
    tmp_path_factory: pytest.TempPathFactory, aws_resources: dict[str, str], redis_port: int
) -> Path:
    """env/local-invoke.json with this run's ports, and the archive's variables as
    template.yaml declares them (ArchiverFunction's, the processor's archive queue, the replay
    function's archive bucket, table and payload bucket)."""
    doc = json.loads((ROOT / "env" / "local-invoke.json").read_text())
    doc.setdefault("ArchiverFunction", {})
    for variables in doc.values():
        variables["AWS_ENDPOINT_URL"] = aws_resources["endpoint"]
    doc["IngestFunction"].update(
        QUEUE_URL=aws_resources["main_url"],
        PAYLOAD_BUCKET=NAMES["bucket"],
        SECRETS_PREFIX=PREFIX,
        REDIS_URL=f"redis://{CONTAINER_HOST}:{redis_port}/0",
    )
    doc["ProcessorFunction"].update(
        TABLE_NAME=NAMES["table"],
        PAYLOAD_BUCKET=NAMES["bucket"],
        ARCHIVE_QUEUE_URL=aws_resources["archive_queue_url"],
    )
    doc["ArchiverFunction"].update(
        ARCHIVE_BUCKET=NAMES["archive_bucket"], PAYLOAD_BUCKET=NAMES["bucket"]
    )
    doc["ReplayFunction"].update(
        QUEUE_URL=aws_resources["main_url"],
        DLQ_URL=aws_resources["dlq_url"],
        ARCHIVE_BUCKET=NAMES["archive_bucket"],
        TABLE_NAME=NAMES["table"],
        PAYLOAD_BUCKET=NAMES["bucket"],
    )
    path = tmp_path_factory.mktemp("sam-env") / "env.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


# ------------------------------------------------------------------------------ sam


def _sam_env() -> dict[str, str]:
    return {
        **os.environ,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "SAM_CLI_TELEMETRY": "0",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }


def _sam() -> str:
    binary = VENV_BIN / "sam"
    return str(binary) if binary.exists() else "sam"


@pytest.fixture(scope="module")
def built_template(docker: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`sam build` for x86_64 into a private build dir (the repo's .aws-sam is left alone)."""
    out = tmp_path_factory.mktemp("sam-build")
    result = subprocess.run(
        [
            _sam(),
            "build",
            "--build-dir",
            str(out / "build"),
            "--cache-dir",
            str(out / "cache"),
            "--parameter-overrides",
            "Architecture=x86_64",
        ],
        cwd=ROOT,
        env=_sam_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"sam build failed:\n{result.stdout}\n{result.stderr}"
    return out / "build" / "template.yaml"


def sam_local_invoke(
    template: Path, function: str, event: Path, env_vars: Path | str, overrides: str
) -> dict[str, Any]:
    """``sam local invoke FUNCTION`` in the offline image; the function's JSON result."""
    result = subprocess.run(
        [
            _sam(), "local", "invoke", function,
            "--template", str(template),
            "--event", str(event),
            "--invoke-image", IMAGE, "--skip-pull-image",
            "--add-host", f"{CONTAINER_HOST}:host-gateway",
            "--env-vars", str(env_vars),
            "--parameter-overrides", overrides,
        ],
        cwd=ROOT,
        env=_sam_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    lines = [x for x in result.stdout.splitlines() if x.strip()]
    assert result.returncode == 0 and lines, (
        f"sam local invoke {function} failed:\n{result.stdout}\n{result.stderr}"
    )
    try:
        return dict(json.loads(lines[-1]))
    except ValueError:
        pytest.fail(f"{function} did not return JSON:\n{result.stdout}\n{result.stderr}")


@pytest.fixture(scope="module")
def invoke(built_template: Path, env_vars_file: Path, aws_resources: dict[str, str]) -> Any:
    overrides = f"Architecture=x86_64 LocalEndpointUrl={aws_resources['endpoint']}"

    def run(function: str, event: str) -> dict[str, Any]:
        return sam_local_invoke(
            built_template, function, ROOT / "events" / event, env_vars_file, overrides
        )

    return run


# ------------------------------------------------------------------------------ tests


def test_ingest_accepts_a_valid_delivery_then_answers_duplicate(
    invoke: Any, moto_port: int, aws_resources: dict[str, str]
) -> None:
    # Given the GitHub sample signed with the development secret
    # When it is invoked twice inside the Lambda container
    first = invoke("IngestFunction", "ingest-github.json")
    second = invoke("IngestFunction", "ingest-github.json")
    # Then 202 accepted, then 200 duplicate from the Redis gate
    assert first["statusCode"] == 202, first
    assert json.loads(first["body"])["status"] == "accepted"
    assert second["statusCode"] == 200, second
    assert json.loads(second["body"])["status"] == "duplicate"
    # And exactly one envelope reached the main queue
    sqs = _client("sqs", moto_port)
    url = sqs.get_queue_url(QueueName=NAMES["main"])["QueueUrl"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)
    bodies = [json.loads(m["Body"]) for m in got.get("Messages", [])]
    sent = json.loads((ROOT / "events" / "ingest-github.json").read_text())
    assert [(b["source"], b["delivery_id"]) for b in bodies] == [
        ("github", sent["headers"]["x-github-delivery"])
    ]


def test_ingest_rejects_a_bad_signature(invoke: Any) -> None:
    response = invoke("IngestFunction", "ingest-bad-signature.json")
    assert response["statusCode"] == 401, response


def test_processor_reports_an_empty_list_when_every_record_succeeds(
    invoke: Any, moto_port: int
) -> None:
    response = invoke("ProcessorFunction", "sqs-new-delivery.json")
    assert response == {"batchItemFailures": []}
    items = _client("dynamodb", moto_port).scan(TableName=NAMES["table"])["Items"]
    assert items, "the delivery was recorded"


def test_processor_reports_exactly_the_failed_message_ids(invoke: Any) -> None:
    records = json.loads((ROOT / "events" / "sqs-malformed.json").read_text())["Records"]
    response = invoke("ProcessorFunction", "sqs-malformed.json")
    assert response == {
        "batchItemFailures": [
            {"itemIdentifier": records[0]["messageId"]},
            {"itemIdentifier": records[1]["messageId"]},
        ]
    }


# ------------------------------------------------------------------------------ the archive


def _archive_objects(moto_port: int) -> dict[str, list[Any]]:
    """Every object of the archive bucket, decoded (no line may be a problem)."""
    from webhook_pipeline.archive.record import decode_object

    s3 = _client("s3", moto_port)
    listed = s3.list_objects_v2(Bucket=NAMES["archive_bucket"], Prefix="archive/")
    objects: dict[str, list[Any]] = {}
    for item in listed.get("Contents", []):
        data = s3.get_object(Bucket=NAMES["archive_bucket"], Key=item["Key"])["Body"].read()
        records, problems = decode_object(item["Key"], data)
        assert problems == [], problems
        objects[item["Key"]] = records
    return objects


@pytest.fixture(scope="module")
def archived(invoke: Any) -> dict[str, Any]:
    """ArchiverFunction invoked once with events/archiver-batch.json; its response."""
    return dict(invoke("ArchiverFunction", "archiver-batch.json"))


def test_archiver_writes_one_object_per_source_and_hour_with_the_exact_bytes(
    archived: dict[str, Any], moto_port: int
) -> None:
    from webhook_pipeline.archive.record import hour_of, partition_prefix
    from webhook_pipeline_ops.simulator.archive_events import SAMPLES

    # Given the batch of four archive messages (two sources, stripe across 10:00 UTC)
    # Then every message was archived
    assert archived == {"batchItemFailures": []}
    # And the bucket holds exactly one object per (source, hour), under its partition
    expected: dict[str, list[tuple[Any, ...]]] = {}
    for sample in SAMPLES:
        env = sample.envelope
        prefix = partition_prefix(env.source, hour_of(env.received_at))
        ident = (env.source, env.delivery_id, env.body_sha256)
        expected.setdefault(prefix, []).append((ident, sample.outcome.value, sample.body))
    objects = _archive_objects(moto_port)
    assert sorted(k.rsplit("/", 1)[0] + "/" for k in objects) == sorted(expected)
    assert len(objects) == 3
    # And each holds its deliveries' identities, outcomes and exact body bytes, in batch order
    for key, records in objects.items():
        got = [(r.identity, r.outcome, r.body_bytes()) for r in records]
        assert got == expected[key.rsplit("/", 1)[0] + "/"], key
    # The ISO-8859-1 body is kept as base64, the others as text
    inline = {r.source: r.body_base64 is not None for rs in objects.values() for r in rs}
    assert inline == {"stripe": False, "generic-hmac": True}


def test_replay_from_archive_dry_run_counts_exactly_the_applied_deliveries(
    archived: dict[str, Any], invoke: Any, moto_port: int
) -> None:
    from webhook_pipeline.adapters.dynamodb_items import delivery_item
    from webhook_pipeline.process.model import DeliveryRecord, Outcome
    from webhook_pipeline_ops.simulator.archive_events import ARCHIVED_AT, SAMPLES

    # Given the archive written by the archiver, and delivery records (the processor's items) for
    # three of its four deliveries: two applied stripe ones, the late stripe one stale,
    # generic-hmac none
    assert archived == {"batchItemFailures": []}
    recorded = {
        "evt_1ArchiveSample0959": Outcome.APPLIED,
        "evt_1ArchiveSample1000": Outcome.APPLIED,
        "evt_1ArchiveSampleLate": Outcome.STALE,
    }
    dynamodb = _client("dynamodb", moto_port)
    for sample in SAMPLES:
        env = sample.envelope
        if env.delivery_id not in recorded:
            continue
        record = DeliveryRecord(
            source=env.source,
            delivery_id=env.delivery_id,
            event_type=env.event_type,
            resource_key=env.resource_key,
            sequence=env.sequence,
            received_at=env.received_at,
            recorded_at=ARCHIVED_AT,
            expires_at=int(ARCHIVED_AT.timestamp()) + 30 * 86_400,
            body_size=env.body_size,
            body_sha256=env.body_sha256,
            hook_pending=False,
            message_id=f"m-{env.delivery_id}",
            attempt_token=env.delivery_id,
        )
        item = delivery_item(record, recorded[env.delivery_id])
        dynamodb.put_item(TableName=NAMES["table"], Item=item)
    queued_before = _main_queue_depth(moto_port)
    # When the reprocess dry run over the window runs in the container
    report = invoke("ReplayFunction", "replay-from-archive-dry-run.json")
    # Then it examined all four archived deliveries and would reprocess exactly the two applied
    assert report.get("status") == "complete", report
    assert (report["mode"], report["dry_run"]) == ("reprocess", True)
    assert (report["total"], report["examined"], report["matched"]) == (len(SAMPLES), 4, 2)
    assert report["sent"] == 0 and report["job"] is None
    assert report["skipped"] == {"not recorded": 1, "stale": 1}
    assert report["failed"] == [] and report["corrupt_objects"] == []
    assert [s["delivery_id"] for s in report["sample"]] == [
        "evt_1ArchiveSample0959",
        "evt_1ArchiveSample1000",
    ]
    # And nothing was sent to the main queue (a dry run)
    assert _main_queue_depth(moto_port) == queued_before


def _main_queue_depth(moto_port: int) -> int:
    """Messages on the main queue, visible or in flight."""
    sqs = _client("sqs", moto_port)
    url = sqs.get_queue_url(QueueName=NAMES["main"])["QueueUrl"]
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attrs[n]) for n in names)


# ------------------------------------------------------------------------------ the local stack


@pytest.fixture(scope="module")
def for_containers_stack(
    docker: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """``webhook-pipeline local run --for-containers`` on free ports; stopped by its PID."""
    state = tmp_path_factory.mktemp("for-containers")
    script = VENV_BIN / "webhook-pipeline"
    command = (
        [str(script)] if script.exists() else [sys.executable, "-m", "webhook_pipeline_ops.cli"]
    )
    command += ["local", "run", "--for-containers", "--port", "0", "--state-dir", str(state)]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AWS_ENDPOINT_URL")}
    with (state / "stack.log").open("wb") as log_file:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 90
        ready: dict[str, Any] | None = None
        while ready is None:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"local stack did not start:\n{(state / 'stack.log').read_text()}")
            try:
                ready = json.loads((state / "ready").read_text())
            except (OSError, ValueError):
                time.sleep(0.1)
        yield {**ready, "state_dir": state}
    finally:
        _stop(process)


def test_ingest_against_the_local_stack_as_backend(
    built_template: Path, for_containers_stack: dict[str, Any], tmp_path: Path
) -> None:
    # Given the local stack's sam-env.json and a GitHub event signed with its secret
    events = tmp_path / "events"
    subprocess.run(
        [str(VENV_BIN / "webhook-pipeline"), "events", "--now", "--out", str(events)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )

    def invoke(function: str, event: Path) -> dict[str, Any]:
        return sam_local_invoke(
            built_template, function, event, for_containers_stack["sam_env_file"],
            "Architecture=x86_64",
        )  # fmt: skip

    # When the ingest function runs twice in the container, then 202 and 200 duplicate
    assert invoke("IngestFunction", events / "ingest-github.json")["statusCode"] == 202
    assert invoke("IngestFunction", events / "ingest-github.json")["statusCode"] == 200
    # And Discord (15 s of its own) passes although signed several container starts ago:
    # --for-containers widens every tolerance to 300 s (LOCAL_MIN_TOLERANCE_SECONDS)
    assert invoke("IngestFunction", events / "ingest-discord.json")["statusCode"] == 200
    # And the processor and the replay function reach the stack's table and queues
    assert invoke("ProcessorFunction", ROOT / "events" / "sqs-new-delivery.json") == {
        "batchItemFailures": []
    }
    report = invoke("ReplayFunction", ROOT / "events" / "replay-dry-run.json")
    assert report["dry_run"] is True and report["complete"] is True, report
