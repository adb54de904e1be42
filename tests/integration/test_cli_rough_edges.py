"""The CLI's rough edges found on a fresh clone, each with the exact input that showed it:
help texts, options that do not apply, an unknown source, a closed pipe, no answer from
``send --url``, ``--local`` commands once the stack has stopped, the DLQ receive count, and the
CI/lint scripts' temporary files and telemetry."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer
from webhook_pipeline_ops import aws as ops_aws
from webhook_pipeline_ops.cli import build_parser, main

from tests.conftest import ROOT, free_port
from tests.helpers import create_deliveries_table, envelope_json

pytestmark = pytest.mark.integration

Run = Callable[..., tuple[int, str, str]]
REST_MARKUP = re.compile(r"``|:(func|class|mod|meth|data|attr|exc|obj|ref):`")
LOCAL_HINT = "is the local stack running"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
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


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once closed


def every_parser() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    def walk(name: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, Any]]:
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from walk(f"{name} {sub_name}", sub)

    yield from walk("webhook-pipeline", build_parser())


# ------------------------------------------------------------------------------ help texts


def test_no_help_text_shows_rest_markup() -> None:
    seen = []
    for name, parser in every_parser():
        text = parser.format_help()
        assert not REST_MARKUP.search(text), f"{name} --help:\n{text}"
        seen.append(name)
    assert "webhook-pipeline replay" in seen and "webhook-pipeline local run" in seen
    assert "webhook-pipeline console" in seen


def option_flags(command: list[str]) -> set[str]:
    parser = dict(every_parser())["webhook-pipeline " + " ".join(command)]
    text = parser.format_help()
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", text))


@pytest.mark.parametrize(
    ("command", "present", "absent"),
    [
        (
            ["deliveries", "get"],
            {"--table", "--local", "--stack", "--region"},
            {"--queue-url", "--dlq-url", "--function-name", "--json", "--payload-bucket"},
        ),
        (
            ["resources", "get"],
            {"--table"},
            {"--queue-url", "--dlq-url", "--function-name", "--json"},
        ),
        (["status"], {"--queue-url", "--dlq-url", "--json"}, {"--table", "--function-name"}),
        (["dlq", "peek"], {"--dlq-url", "--table", "--json"}, {"--queue-url", "--function-name"}),
        (["replay"], {"--queue-url", "--dlq-url", "--function-name"}, {"--table"}),
        (
            ["console"],
            {
                "--queue-url",
                "--dlq-url",
                "--table",
                "--payload-bucket",
                "--archive-bucket",
                "--port",
                "--host",
            },
            {"--function-name", "--json"},
        ),
    ],
)
def test_help_lists_only_the_options_that_apply(
    command: list[str], present: set[str], absent: set[str]
) -> None:
    flags = option_flags(command)
    assert present <= flags
    assert not (absent & flags), absent & flags


# ------------------------------------------------------------------------------ a moto server


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def local_dir(moto_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local stack's state folder whose outputs point at a real moto server."""
    clients = {
        name: boto3.client(
            name,
            endpoint_url=moto_endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        for name in ("sqs", "dynamodb")
    }
    suffix = tmp_path.name[-12:].replace("_", "-")
    table = f"deliveries-{suffix}"
    create_deliveries_table(clients["dynamodb"], table)
    clients["dynamodb"].put_item(
        TableName=table,
        Item={
            "pk": {"S": "DELIVERY#stripe#evt_1"},
            "sk": {"S": "DELIVERY"},
            "outcome": {"S": "applied"},
            "note": {"S": "x" * 20_000},
        },
    )
    main_url = clients["sqs"].create_queue(QueueName=f"main-{suffix}")["QueueUrl"]
    dlq_url = clients["sqs"].create_queue(QueueName=f"dlq-{suffix}")["QueueUrl"]
    folder = tmp_path / "state"
    folder.mkdir()
    (folder / "outputs.json").write_text(
        json.dumps(
            {
                "EndpointUrl": moto_endpoint,
                "Region": "us-east-1",
                "MainQueueUrl": main_url,
                "DeadLetterQueueUrl": dlq_url,
                "DeliveriesTableName": table,
                "ApiUrl": "http://127.0.0.1:1",
                "StackName": "cli-test",
            }
        )
    )
    monkeypatch.setenv("WEBHOOK_PIPELINE_LOCAL_DIR", str(folder))
    return folder


def test_deliveries_get_names_an_unknown_source(cli: Run, local_dir: Path) -> None:
    code, out, err = cli("deliveries", "get", "--local", "nosuch", "evt_x")
    assert code == 1
    assert out == ""
    assert "source 'nosuch' is unknown (sources: " in err
    assert "stripe" in err
    # a known source with no such delivery says only that
    code, _, err = cli("deliveries", "get", "--local", "stripe", "evt_x")
    assert code == 1
    assert "no delivery recorded" in err and "unknown" not in err
    # so does a provider the local stack serves beyond the sources file (its catalogue source)
    code, _, err = cli("deliveries", "get", "--local", "adyen", "evt_x")
    assert code == 1
    assert "no delivery recorded" in err and "unknown" not in err
    code, _, err = cli("resources", "get", "--local", "nosuch", "cus_1")
    assert "source 'nosuch' is unknown" in err
    # an id that starts with "-" (SendGrid's random ids can) is read as an option, unless it
    # comes after "--", as the help says
    code, _, err = cli("deliveries", "get", "--local", "stripe", "-8WCFAS9SBO9zumJplyQ8A")
    assert code == 2 and "DELIVERY_ID" in err
    code, _, err = cli("deliveries", "get", "--local", "--", "stripe", "-8WCFAS9SBO9zumJplyQ8A")
    assert code == 1
    assert "no delivery recorded" in err
    code, out, _ = cli("deliveries", "get", "--help")
    assert "goes after '--'" in " ".join(out.split())
    # --json is still accepted (the output is JSON anyway)
    code, out, _ = cli("deliveries", "get", "--local", "--json", "stripe", "evt_1")
    assert code == 0 and json.loads(out)["outcome"] == "applied"


def test_a_closed_pipe_is_no_traceback(local_dir: Path) -> None:
    # Given stdout is a pipe nobody reads any more (`... | head` after head exited)
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "WEBHOOK_PIPELINE_LOCAL_DIR": str(local_dir)}
    command = [sys.executable, "-m", "webhook_pipeline_ops.cli", "deliveries", "get", "--local"]
    try:
        done = subprocess.run(
            [*command, "stripe", "evt_1"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    # Then it stops quietly, as other command-line tools do
    assert done.returncode == 141
    assert b"Traceback" not in done.stderr
    assert b"BrokenPipeError" not in done.stderr
    # and through a real `| head -n 1`
    shell = subprocess.run(
        ["bash", "-o", "pipefail", "-c", " ".join([*command, "stripe", "evt_1"]) + " | head -n 1"],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert shell.stdout.decode().strip() == "{"
    assert b"Traceback" not in shell.stderr and b"BrokenPipe" not in shell.stderr


def test_dlq_peek_says_what_its_receive_count_includes(cli: Run, local_dir: Path) -> None:
    outputs = json.loads((local_dir / "outputs.json").read_text())
    sqs = boto3.client(
        "sqs",
        endpoint_url=outputs["EndpointUrl"],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    sqs.send_message(QueueUrl=outputs["DeadLetterQueueUrl"], MessageBody=envelope_json("evt_9"))
    code, out, _ = cli("dlq", "peek", "--local")
    assert code == 0
    assert "evt_9" in out
    assert "receive_count: every receive so far, on the main queue and in the DLQ" in out
    assert "this peek's included" in out


# ------------------------------------------------------------------------------ no answer


def test_send_to_a_port_where_nothing_listens_says_connection_refused(cli: Run) -> None:
    url = f"http://127.0.0.1:{dead_port()}"
    code, out, err = cli(
        "send", "--url", url, "--source", "stripe", "--count", "2", "--retries", "0",
        "--secret", "whsec_test",
    )  # fmt: skip
    assert code == 1
    assert re.search(r"no answer\s+2\s+\(connection refused: 2\)", out), out
    assert re.search(r"ack latency p50\s+-\s+\(no request got an answer\)", out), out
    assert "0.0 ms" not in out
    assert "connection refused" in err and LOCAL_HINT in err
    code, out, _ = cli(
        "send", "--url", url, "--source", "stripe", "--count", "1", "--retries", "0",
        "--secret", "whsec_test", "--json",
    )  # fmt: skip
    summary = json.loads(out)
    assert summary["no_answer_reasons"] == {"connection refused": 1}
    assert summary["latency_p50_ms"] is None


@pytest.fixture
def stopped_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The state folder a local stack leaves when it stops: outputs.json, nothing listening."""
    port = dead_port()
    endpoint = f"http://127.0.0.1:{port}"
    folder = tmp_path / "stopped"
    folder.mkdir()
    (folder / "outputs.json").write_text(
        json.dumps(
            {
                "EndpointUrl": endpoint,
                "Region": "us-east-1",
                "MainQueueUrl": f"{endpoint}/123456789012/main",
                "DeadLetterQueueUrl": f"{endpoint}/123456789012/dlq",
                "DeliveriesTableName": "deliveries",
                "PayloadBucketName": "payloads",
                "ApiUrl": f"http://127.0.0.1:{dead_port()}",
                "StackName": "stopped",
            }
        )
    )
    (folder / "secrets.json").write_text(
        json.dumps({"sources": {"stripe": {"secret": "whsec_x", "scheme": "stripe"}}})
    )
    monkeypatch.setenv("WEBHOOK_PIPELINE_LOCAL_DIR", str(folder))
    return folder


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--local"],
        ["dlq", "peek", "--local"],
        ["replay", "--local"],
        ["replay", "--local", "--dry-run", "--no-progress"],
        ["deliveries", "get", "--local", "stripe", "evt_1"],
        ["resources", "get", "--local", "stripe", "cus_1"],
        ["console", "--local", "--port", "0"],
        ["send", "--source", "stripe", "--count", "1", "--retries", "0"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_every_local_command_after_the_stack_stopped_gives_the_hint(
    cli: Run, stopped_stack: Path, argv: list[str]
) -> None:
    code, out, err = cli(*argv)
    assert code == 1
    assert LOCAL_HINT in err, err
    assert "Traceback" not in err
    assert "EndpointConnectionError" not in out + err
    assert "?" not in out  # never "DLQ depth now about ?"


# ------------------------------------------------------------------------------ CI and lint


def test_ci_and_lint_use_no_fixed_temporary_paths_and_no_sam_telemetry() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert not re.search(r"/tmp/\w", ci), "a fixed path under /tmp"
    assert "mktemp -d" in ci
    assert subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")], check=False).returncode == 0
    dry = subprocess.run(
        ["make", "-n", "lint", "validate"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    sam_lines = [line for line in dry.splitlines() if "sam validate" in line]
    assert len(sam_lines) == 2
    assert all("SAM_CLI_TELEMETRY=0" in line for line in sam_lines), sam_lines
