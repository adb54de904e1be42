"""``webhook-pipeline replay --from-archive`` in-process against moto: usage errors before any
AWS call, an empty window, the dry run's count and the real run's report."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from webhook_pipeline_ops import aws as ops_aws
from webhook_pipeline_ops.cli import main

from tests.replay_archive_fixtures import (
    ARCHIVE_BUCKET,
    PAYLOAD_BUCKET,
    TABLE,
    ArchiveStack,
    make_stack,
    put_archive,
    put_delivery_record,
    record,
)

pytestmark = pytest.mark.integration

Run = Callable[..., tuple[int, str, str]]
WINDOW = ("--from", "2026-11-30T10:00:00Z", "--to", "2026-11-30T12:00:00Z")


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def stack(aws: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ArchiveStack:
    for name in ops_aws.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WEBHOOK_PIPELINE_LOCAL_DIR", str(tmp_path / "no-local-stack"))
    made = make_stack({n: boto3.client(n) for n in ("s3", "dynamodb", "sqs")})
    monkeypatch.setenv("WEBHOOK_PIPELINE_ARCHIVE_BUCKET", ARCHIVE_BUCKET)
    monkeypatch.setenv("WEBHOOK_PIPELINE_TABLE", TABLE)
    monkeypatch.setenv("WEBHOOK_PIPELINE_QUEUE_URL", made.queue_url)
    monkeypatch.setenv("WEBHOOK_PIPELINE_PAYLOAD_BUCKET", PAYLOAD_BUCKET)
    return made


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("--mode", "redeliver", "--from", "2026-11-30T12:00:00Z", "--to", "2026-11-30T10:00Z"),
            "end must be later than its start",
        ),
        (("--mode", "redeliver", *WINDOW, "--source", "no-such-source"), "unknown source"),
        (("--mode", "redeliver", *WINDOW, "--rate", "0"), "--rate must be more than 0"),
        (WINDOW, "needs --mode redeliver or --mode reprocess"),
        (("--mode", "redeliver", "--from", "2026-11-30T10:00:00Z"), "needs a window"),
        (("--mode", "reprocess", *WINDOW, "--outcome", "fine"), "unknown outcome"),
        (("--mode", "reprocess", *WINDOW, "--max-messages", "5"), "DLQ replay only"),
        (("--mode", "reprocess", *WINDOW, "--job", "a/b"), "job"),
        (("--mode", "reprocess", *WINDOW, "--where", "amount >> 7"), "at position 8"),
    ],
)
def test_usage_errors_exit_2_before_any_aws_call(
    cli: Run,
    stack: ArchiveStack,
    aws_calls: list[tuple[str, str]],
    argv: tuple[str, ...],
    message: str,
) -> None:
    code, _, err = cli("replay", "--from-archive", *argv)
    assert code == 2
    assert message in err
    assert aws_calls == []


def test_archive_options_without_from_archive_are_a_usage_error(
    cli: Run, stack: ArchiveStack, aws_calls: list[tuple[str, str]]
) -> None:
    code, _, err = cli("replay", "--mode", "redeliver", *WINDOW)
    assert code == 2
    assert "--mode, --from, --to: give --from-archive too" in err
    assert aws_calls == []


def test_an_empty_window_says_so(cli: Run, stack: ArchiveStack) -> None:
    put_archive(stack.s3, [record("early", -5)])
    code, out, _ = cli("replay", "--from-archive", "--mode", "redeliver", *WINDOW)
    assert code == 0
    assert "Nothing archived in the window 2026-11-30T10:00:00+00:00 .. " in out
    assert stack.drain() == []


def test_dry_run_prints_the_exact_count_and_a_sample(cli: Run, stack: ArchiveStack) -> None:
    put_archive(stack.s3, [record(f"evt_{i:02d}", i * 4) for i in range(25)])
    put_delivery_record(stack.dynamodb, "stripe", "evt_00", "applied")
    code, out, _ = cli("replay", "--from-archive", "--mode", "redeliver", *WINDOW, "--dry-run")
    assert code == 0
    assert "Would send 24 of 25 deliveries (redeliver):" in out
    assert "evt_01" in out and "evt_20" in out and "evt_21" not in out  # a sample of 20
    assert "skipped (already recorded 1)" in out
    assert stack.drain() == []


def test_real_run_reports_and_resumes_with_the_job(cli: Run, stack: ArchiveStack) -> None:
    put_archive(stack.s3, [record(f"evt_{i:02d}", i * 4) for i in range(12)])
    argv = ("replay", "--from-archive", "--mode", "redeliver", *WINDOW, "--job", "cli-1")
    code, out, _ = cli(*argv, "--json", "--rate", "1000")
    report = json.loads(out)
    assert code == 0
    assert (report["status"], report["total"], report["sent"], report["job"]) == (
        "complete",
        12,
        12,
        "cli-1",
    )
    assert len(stack.drain()) == 12
    code, out, _ = cli(*argv, "--source", "stripe")
    assert code == 2
    assert "job cli-1 was started with another request" in out + _


def test_via_function_invokes_again_with_the_job_while_incomplete(
    cli: Run, stack: ArchiveStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from webhook_pipeline_ops.commands import replay as replay_command

    payloads: list[dict[str, Any]] = []
    answers = iter(["incomplete", "incomplete", "complete"])

    def invoke(aws: Any, payload: dict[str, Any]) -> dict[str, Any]:
        payloads.append(json.loads(json.dumps(payload)))
        status = next(answers)
        sent = 10 * len(payloads)
        return {
            "job": "fn-1",
            "mode": "redeliver",
            "dry_run": False,
            "status": status,
            "generation": None,
            "total": 25,
            "examined": 10,
            "matched": 10,
            "sent": sent,
            "skipped": {},
            "failed": [],
            "corrupt_objects": [],
            "resumed_from": None,
            "cursor": min(25, sent),
            "elapsed_seconds": 1.0,
            "achieved_rate": 10.0,
        }

    monkeypatch.setattr(replay_command, "invoke_function", invoke)
    code, out, _ = cli(
        "replay", "--from-archive", "--mode", "redeliver", *WINDOW, "--via-function", "--json"
    )
    assert code == 0
    assert [p["from_archive"].get("job") for p in payloads] == [None, "fn-1", "fn-1"]
    assert {p["from_archive"]["mode"] for p in payloads} == {"redeliver"}
    assert json.loads(out)["status"] == "complete"


def test_where_selects_by_body_fields_all_of_them(cli: Run, stack: ArchiveStack) -> None:
    bodies = {
        "evt_eur_big": b'{"currency": "eur", "amount": 5000}',
        "evt_eur_small": b'{"currency": "eur", "amount": 10}',
        "evt_usd_big": b'{"currency": "usd", "amount": 5000}',
        "evt_text": b"currency=eur&amount=5000",
    }
    put_archive(stack.s3, [record(i, n, body=b) for n, (i, b) in enumerate(bodies.items())])
    code, out, _ = cli(
        "replay",
        "--from-archive",
        "--mode",
        "redeliver",
        *WINDOW,
        "--where",
        "currency = eur",
        "--where",
        "amount >= 1000",
        "--dry-run",
    )
    assert code == 0, out
    assert "Would send 1 of 1 deliveries (redeliver):" in out
    assert "evt_eur_big" in out and "evt_usd_big" not in out and "evt_eur_small" not in out
