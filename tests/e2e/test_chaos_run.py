"""``webhook-pipeline chaos`` end to end: a short run with faults proves lost = 0, and the same
run with a simulated loss (the test-only negative control) reports it and exits 1.

Each run starts its own local stack (a subprocess on free ports, its own redis-server that the
chaos command owns and restarts) and stops it by PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


def chaos(
    tmp_path: Path, *argv: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / "chaos.json"
    script = Path(sys.executable).parent / "webhook-pipeline"
    command = (
        [str(script)] if script.exists() else [sys.executable, "-m", "webhook_pipeline_ops.cli"]
    )
    run_env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AWS_ENDPOINT_URL")}
    run_env |= env or {}
    result = subprocess.run(
        [*command, "chaos", "--state-dir", str(tmp_path / "stack"), "--out", str(out), *argv],
        cwd=ROOT,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = json.loads(out.read_text()) if out.exists() else {}
    return result.returncode, report, result.stdout + result.stderr


def test_a_short_chaos_run_loses_nothing(tmp_path: Path) -> None:
    kinds = ["redis-kill", "redis-flush", "moto-stop", "poison", "replay"]
    code, report, output = chaos(
        tmp_path, "--count", "200", "--seed", "11", "--faults", ",".join(kinds), "--rate", "30"
    )
    assert code == 0, output[-4000:]
    rec = report["reconciliation"]
    assert rec["lost"] == 0 and rec["out_of_order_applied"] == 0
    assert rec["watermark_mismatches"] == 0 and rec["recorded_after_4xx"] == 0
    assert rec["acknowledged"] > 0 and rec["recorded"] >= rec["acknowledged"] - rec["in_dlq"]
    assert report["sender"]["copies"] == 200
    assert sorted(f["kind"] for f in report["faults"]) == sorted(kinds)  # each once
    by_kind = {f["kind"]: f for f in report["faults"]}
    for kind in ("redis-kill", "redis-flush", "poison", "replay"):
        assert by_kind[kind]["injected"], by_kind[kind]
    # moto-stop is injected whenever the stack runs the moto server in its own process; when it
    # does not, the report says so instead of pretending.
    if report["stack"]["moto_pid_recorded"]:
        assert by_kind["moto-stop"]["injected"], by_kind["moto-stop"]
    else:
        assert not by_kind["moto-stop"]["injected"]
        assert "moto-stop" in report["not_injected"]
    # The poison reached the DLQ, was replayed after the fix and is now recorded.
    assert report["poison"] == {"sent": 3, "not_recorded_nor_in_dlq": []}
    assert report["replayed"] >= 3
    assert report["settle_seconds"] is not None
    # The archive leg: every accepted delivery archived exactly, and a reprocess job killed and
    # resumed ran each due hook once more.
    archive = report["archive"]
    assert (archive["archive_missing"], archive["archive_unexpected"]) == (0, 0)
    assert archive["archive_corrupt"] == 0 and archive["deliveries"] >= rec["acknowledged"]
    again = archive["reprocess"]
    assert again["status"] == "complete" and again["due"] > 0 and again["entries"] == again["due"]
    assert again["runs"] >= 2 and again["kills"]


def test_the_faults_made_through_the_stacks_switches_are_injected_and_absorbed(
    tmp_path: Path,
) -> None:
    kinds = [
        "aws-throttle",
        "processor-crash-before-write",
        "processor-crash-after-write",
        "hook-failing",
    ]
    code, report, output = chaos(
        tmp_path, "--count", "300", "--seed", "5", "--faults", ",".join(kinds), "--rate", "30"
    )
    assert code == 0, output[-4000:]
    by_kind = {f["kind"]: f for f in report["faults"]}
    assert sorted(by_kind) == sorted(kinds)
    for kind in kinds:
        assert by_kind[kind]["injected"], by_kind[kind]
    assert "TransactWriteItems" in by_kind["aws-throttle"]["detail"]
    assert "exited at crash-before-write" in by_kind["processor-crash-before-write"]["detail"]
    assert "exited at crash-after-write" in by_kind["processor-crash-after-write"]["detail"]
    assert "the hook failed" in by_kind["hook-failing"]["detail"]
    assert report["not_injected"] == {}
    rec = report["reconciliation"]
    assert rec["lost"] == 0 and rec["double_applied"] == 0 and rec["applied_without_ledger"] == 0
    assert rec["out_of_order_applied"] == 0 and rec["watermark_mismatches"] == 0
    assert rec["hooks_pending"] == 0


def test_the_negative_control_makes_the_proof_fail(tmp_path: Path) -> None:
    code, report, output = chaos(
        tmp_path,
        "--count",
        "60",
        "--seed",
        "12",
        "--faults",
        "none",
        env={"WEBHOOK_PIPELINE_CHAOS_NEGATIVE_CONTROL": "delete-record"},
    )
    assert code == 1, output[-4000:]
    deleted = report["negative_control"]["deleted"]
    assert deleted
    assert report["reconciliation"]["lost"] == 1
    assert report["reconciliation"]["examples"]["lost"] == [deleted]
    assert "the proof FAILED: lost" in output


def test_the_archive_negative_control_makes_the_proof_fail(tmp_path: Path) -> None:
    code, report, output = chaos(
        tmp_path,
        "--count",
        "60",
        "--seed",
        "12",
        "--faults",
        "none",
        "--reprocess-deliveries",
        "20",
        env={"WEBHOOK_PIPELINE_CHAOS_NEGATIVE_CONTROL": "delete-archive-record"},
    )
    assert code == 1, output[-4000:]
    deleted = report["negative_control"]["deleted"]
    assert deleted
    assert report["reconciliation"]["lost"] == 0
    assert report["archive"]["archive_missing"] == 1
    assert report["archive"]["examples"]["archive_missing"] == [deleted]
    assert report["archive"]["archive_unexpected"] == 0
    assert "the proof FAILED: archive_missing" in output
